package lifecycle_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// from sends a request to the API as the client at addr, with the bearer
// key (none when ""), and header h.
func (e *env) from(addr, method, path, key string, h http.Header) *httptest.ResponseRecorder {
	e.T.Helper()
	req := httptest.NewRequestWithContext(e.T.Context(), method, path, nil)
	req.RemoteAddr = addr
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	e.Host.ServeHTTP(rec, req)
	return rec
}

// With the defaults, a client may send 20 bad API keys (malformed or
// unknown); its next unknown key is 429 with Retry-After, and is not looked
// up in the Store, but its valid keys are served and its revoked keys
// refused with 401, both without a read: the limiter only decides whether
// a key the Service does not know may cost one. Requests without a key,
// and revoked keys the Service knows, are not counted. Another client is
// not affected. The client earns one try every 3 seconds.
func TestFailedAuthenticationsAreLimited(t *testing.T) {
	t.Parallel()
	c, store := newKeyCountingEnv(t)
	const guesser, other = "203.0.113.9:40000", "198.51.100.7:5555"
	revoked := c.Key(lifecycle.ScopeTasksRead)
	keys, _ := c.Svc.APIKeys(t.Context())
	if _, err := c.Svc.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	for range 30 { // not counted
		if rec := c.from(guesser, "GET", "/api/tasks", "", nil); rec.Code != http.StatusUnauthorized {
			t.Fatalf("no key: %d", rec.Code)
		}
		if rec := c.from(guesser, "GET", "/api/tasks", revoked, nil); rec.Code != http.StatusUnauthorized {
			t.Fatalf("revoked key: %d", rec.Code)
		}
	}
	for i := range 20 {
		key := apitest.UnknownKey(i)
		if i%4 == 1 {
			key = "lsk_short"
		}
		if rec := c.from(guesser, "GET", "/api/tasks", key, nil); rec.Code != http.StatusUnauthorized {
			t.Fatalf("bad key %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	reads := store.byHash.Load()
	apitest.Limited(t, "the 21st bad key", c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(21), nil), 3)
	apitest.Limited(t, "a write from the guesser", c.from(guesser, "POST", "/api/tasks", apitest.UnknownKey(22), nil), 3)
	if rec := c.from(guesser, "GET", "/api/tasks", c.Admin, nil); rec.Code != http.StatusOK {
		t.Errorf("a valid key from the guesser: %d %s", rec.Code, rec.Body)
	}
	if rec := c.from(guesser, "GET", "/api/tasks", revoked, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("a revoked key from the guesser: %d %s", rec.Code, rec.Body)
	}
	if n := store.byHash.Load() - reads; n != 0 {
		t.Errorf("%d keys looked up for a limited client, want none", n)
	}
	if rec := c.from(other, "GET", "/api/tasks", c.Admin, nil); rec.Code != http.StatusOK {
		t.Errorf("another client's valid key: %d %s", rec.Code, rec.Body)
	}
	if rec := c.from(other, "GET", "/api/tasks", apitest.UnknownKey(23), nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("another client's bad key: %d %s", rec.Code, rec.Body)
	}

	c.Clock.Advance(3 * time.Second) // one more try
	if rec := c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(24), nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("the try earned after 3 s: %d %s", rec.Code, rec.Body)
	}
	apitest.Limited(t, "the try after it", c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(25), nil), 3)
	c.Clock.Advance(2 * time.Second)
	apitest.Limited(t, "2 s later", c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(26), nil), 1)
	c.Clock.Advance(time.Minute) // all forgiven
	if rec := c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(27), nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("an unknown key a minute later: %d %s", rec.Code, rec.Body)
	}
}

// The limiter can be turned off, and tuned; X-Forwarded-For is not read
// by default, and Config.ClientAddress says who the client is behind a
// proxy.
func TestAuthFailureLimiterConfig(t *testing.T) {
	t.Parallel()
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		c, _ := newKeyCountingEnv(t, func(cfg *lifecycle.Config) { cfg.AuthFailureLimit = -1 })
		for i := range 100 {
			if rec := c.from("203.0.113.9:1", "GET", "/api/tasks", apitest.UnknownKey(i), nil); rec.Code != http.StatusUnauthorized {
				t.Fatalf("bad key %d with the limiter off: %d", i, rec.Code)
			}
		}
	})
	t.Run("X-Forwarded-For is not trusted", func(t *testing.T) {
		t.Parallel()
		c, _ := newKeyCountingEnv(t, func(cfg *lifecycle.Config) { cfg.AuthFailureLimit = 2 })
		for i := range 2 {
			c.from("203.0.113.9:1", "GET", "/api/tasks", apitest.UnknownKey(i), http.Header{"X-Forwarded-For": {"192.0.2." + strconv.Itoa(i)}})
		}
		apitest.Limited(t, "a new X-Forwarded-For", c.from("203.0.113.9:1", "GET", "/api/tasks", apitest.UnknownKey(3), http.Header{"X-Forwarded-For": {"192.0.2.99"}}), 3)
	})
	t.Run("ClientAddress", func(t *testing.T) {
		t.Parallel()
		c, _ := newKeyCountingEnv(t, func(cfg *lifecycle.Config) {
			cfg.AuthFailureLimit = 2
			cfg.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Client") }
		})
		proxy := "10.0.0.1:3000"
		for i := range 2 {
			c.from(proxy, "GET", "/api/tasks", apitest.UnknownKey(i), http.Header{"X-Client": {"192.0.2.1"}})
		}
		apitest.Limited(t, "the guesser behind the proxy", c.from(proxy, "GET", "/api/tasks", apitest.UnknownKey(3), http.Header{"X-Client": {"192.0.2.1"}}), 3)
		if rec := c.from(proxy, "GET", "/api/tasks", c.Admin, http.Header{"X-Client": {"192.0.2.1"}}); rec.Code != http.StatusOK {
			t.Errorf("the guesser's valid key behind the proxy: %d %s", rec.Code, rec.Body)
		}
		if rec := c.from(proxy, "GET", "/api/tasks", apitest.UnknownKey(4), http.Header{"X-Client": {"198.51.100.2"}}); rec.Code != http.StatusUnauthorized {
			t.Errorf("another client behind the proxy: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		for _, cfg := range []lifecycle.Config{{AuthFailureInterval: -time.Second}, {AuthFailureClients: -1}, {AuthUnknownKeyReads: -1}} {
			cfg.Store, cfg.BaseURL = &keyStoreCounter{}, apitest.BaseURL
			if _, err := lifecycle.New(cfg); err == nil || !strings.Contains(err.Error(), "AuthFailure") || !strings.Contains(err.Error(), "AuthUnknownKeyReads") {
				t.Errorf("New(%+v) = %v, want an error naming the field", cfg, err)
			}
		}
	})
}
