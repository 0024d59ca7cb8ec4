package memory_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/console"
)

// A Service on this Store serves the console: an operator signs in with
// an API key, the session is kept in the Store by its token's hash, and
// signing out deletes it.
func TestServesTheConsole(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	svc, err := lifecycle.New(lifecycle.Config{Store: s, BaseURL: "http://example.invalid/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(t.Context()) })
	con, err := console.New(svc, s, console.Config{})
	if err != nil {
		t.Fatalf("console.New on a memory Store: %v", err)
	}
	t.Cleanup(con.Close)
	_, key, err := svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "ops", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead},
		Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", con))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	call := func(method string, body []byte, csrf string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/console/session", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		return resp, out.Bytes()
	}

	raw, _ := json.Marshal(map[string]string{"key": key})
	resp, body := call(http.MethodPost, raw, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %s %s", resp.Status, body)
	}
	var token string
	for _, c := range resp.Cookies() {
		token = c.Value
	}
	if token == "" {
		t.Fatalf("sign in set no session cookie: %v", resp.Header["Set-Cookie"])
	}
	hash := sha256.Sum256([]byte(token))
	stored, err := s.ConsoleSession(t.Context(), hash[:])
	if err != nil {
		t.Fatalf("the session signed in, read from the Store: %v", err)
	}
	if !bytes.Equal(stored.KeyHash, lifecycle.HashAPIKey(key)) {
		t.Errorf("stored session's KeyHash = %x, want the hash of the key signed in with", stored.KeyHash)
	}
	var info struct {
		Data struct {
			KeyID     string `json:"keyId"`
			CSRFToken string `json:"csrfToken"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &info); err != nil || info.Data.KeyID != stored.KeyID || info.Data.CSRFToken == "" {
		t.Fatalf("sign in answered %s (%v); want the key %s and a CSRF token", body, err, stored.KeyID)
	}
	if resp, body := call(http.MethodGet, nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the session, signed in: %s %s", resp.Status, body)
	}

	if resp, body := call(http.MethodDelete, nil, info.Data.CSRFToken); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out: %s %s", resp.Status, body)
	}
	if _, err := s.ConsoleSession(t.Context(), hash[:]); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("the session signed out, read from the Store: error = %v, want ErrNotFound", err)
	}
	if resp, _ := call(http.MethodGet, nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session, signed out: %s, want 401", resp.Status)
	}
}
