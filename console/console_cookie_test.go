package console_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/console"
)

// Over TLS the console's cookie is __Host-lifecycle_console: Secure,
// Path=/, no Domain, HttpOnly, SameSite=Strict; a browser's cookie jar then
// signs in, reads the board, opens the event stream through the console's
// API and signs out (the cookie cleared on Path=/). The plain
// lifecycle_console cookie, which any site of the domain could set, is not
// taken over TLS.
func TestConsoleCookieHasHostPrefixOverTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", e.Svc.Handler()))
	mux.Handle("/console/", http.StripPrefix("/console", e.newConsole()))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	client := srv.Client()
	client.Jar = jar
	do := func(method, path, csrf string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := do("POST", "/console/session", "", `{"key":"`+e.Admin+`"}`)
	var info struct {
		Data struct {
			CSRFToken string `json:"csrfToken"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	setCookie := resp.Header.Values("Set-Cookie")
	if resp.StatusCode != http.StatusOK || len(setCookie) != 1 {
		t.Fatalf("sign in over TLS: %d %v", resp.StatusCode, setCookie)
	}
	ck, err := http.ParseSetCookie(setCookie[0])
	if err != nil {
		t.Fatal(err)
	}
	if ck.Name != "__Host-lifecycle_console" || !ck.Secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the cookie over TLS is %q; want __Host-lifecycle_console, Secure, Path=/, no Domain, HttpOnly, SameSite=Strict", setCookie[0])
	}

	for _, path := range []string{"/console/session", "/console/board", "/console/api/tasks"} {
		if resp := do("GET", path, "", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the __Host- cookie: %d", path, resp.StatusCode)
		} else {
			resp.Body.Close()
		}
	}
	stream := do("GET", "/console/api/task-events/stream", "", "")
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("the event stream through the console: %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	stream.Body.Close()

	// The plain cookie with a live token is not taken over TLS.
	u, _ := url.Parse(srv.URL)
	token := jar.Cookies(u)[0].Value
	plain := &http.Client{Transport: client.Transport}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/console/session", nil)
	req.AddCookie(&http.Cookie{Name: "lifecycle_console", Value: token})
	if resp, err := plain.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the plain cookie over TLS: %v %v, want 401", resp.StatusCode, err)
	}

	resp = do("DELETE", "/console/session", info.Data.CSRFToken, "")
	cleared, _ := http.ParseSetCookie(resp.Header.Get("Set-Cookie"))
	if resp.StatusCode != http.StatusNoContent || cleared == nil || cleared.Name != "__Host-lifecycle_console" || cleared.Path != "/" || cleared.MaxAge >= 0 || !cleared.Secure {
		t.Errorf("sign out over TLS: %d %q, want the __Host- cookie cleared on Path=/", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	if len(jar.Cookies(u)) != 0 {
		t.Errorf("the jar keeps %v after sign-out", jar.Cookies(u))
	}
	if resp := do("GET", "/console/session", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET session after sign-out: %d", resp.StatusCode)
	}
}

// Over plain http the cookie stays lifecycle_console on the console's path;
// with Config.SecureCookie (TLS terminated by a proxy) it takes the
// TLS form.
func TestConsoleCookieForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		secure     bool
		wantName   string
		wantPath   string
		wantSecure bool
	}{
		{"plain http", false, "lifecycle_console", "/console/", false},
		{"SecureCookie", true, "__Host-lifecycle_console", "/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newConsoleEnv(t, newEnv(t), func(cfg *console.Config) { cfg.SecureCookie = tt.secure })
			rec := c.do(consoleCall{method: "POST", path: "/session", body: map[string]any{"key": c.Admin}})
			cs := rec.Result().Cookies()
			if rec.Code != http.StatusOK || len(cs) != 1 || cs[0].Name != tt.wantName || cs[0].Path != tt.wantPath || cs[0].Secure != tt.wantSecure {
				t.Fatalf("sign in: %d %v; want %s on %s, Secure %v", rec.Code, rec.Header().Values("Set-Cookie"), tt.wantName, tt.wantPath, tt.wantSecure)
			}
			c.call(consoleCall{method: "GET", path: "/board", session: cs[0]}, http.StatusOK)
		})
	}
}
