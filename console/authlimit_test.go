package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// countingStore counts the Store's reads of API keys and console
// sessions, and can be taken down: every call it wraps then fails with
// errStoreDown, which it classifies as unavailable, as a database that
// restarts does.
type countingStore struct {
	*sqlite.Store
	keyReads, sessionReads atomic.Int64
	down                   atomic.Bool
}

// errStoreDown is what a countingStore returns while it is down.
var errStoreDown = errors.New("test store: the database does not answer")

// Unavailable implements lifecycle.FailureClassifier.
func (s *countingStore) Unavailable(err error) bool {
	return errors.Is(err, errStoreDown) || s.Store.Unavailable(err)
}

func (s *countingStore) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	s.keyReads.Add(1)
	if s.down.Load() {
		return lifecycle.APIKey{}, errStoreDown
	}
	return s.Store.APIKeyByHash(ctx, hash)
}

func (s *countingStore) ConsoleSession(ctx context.Context, hash []byte) (lifecycle.ConsoleSession, error) {
	s.sessionReads.Add(1)
	if s.down.Load() {
		return lifecycle.ConsoleSession{}, errStoreDown
	}
	return s.Store.ConsoleSession(ctx, hash)
}

func (s *countingStore) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.CreateConsoleSession(ctx, cs)
}

// newCountingEnv is an env whose Store is a countingStore, mounted with
// the console.
func newCountingEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*consoleEnv, *countingStore) {
	t.Helper()
	var counting *countingStore
	wrap := func(c *lifecycle.Config) {
		counting = &countingStore{Store: c.Store.(*sqlite.Store)}
		c.Store = counting
	}
	return newConsoleEnv(t, newEnv(t, append([]func(*lifecycle.Config){wrap}, mutate...)...)), counting
}

// from sends a request to the host as the client at addr, with the bearer
// key (none when ""), and header h.
func (c *consoleEnv) from(addr, method, path, key string, h http.Header) *httptest.ResponseRecorder {
	c.T.Helper()
	req := httptest.NewRequestWithContext(c.T.Context(), method, path, nil)
	req.RemoteAddr = addr
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, vs := range h {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	c.console.ServeHTTP(rec, req)
	return rec
}

// signInFrom signs in to the console with key as the client at addr.
func (c *consoleEnv) signInFrom(addr, key string) *httptest.ResponseRecorder {
	c.T.Helper()
	req := httptest.NewRequestWithContext(c.T.Context(), "POST", "/console/session", strings.NewReader(`{"key":"`+key+`"}`))
	req.RemoteAddr = addr
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	c.console.ServeHTTP(rec, req)
	return rec
}

// Failed console sign-ins and unknown session cookies count as failures of
// their client: past the limit, sign-in with an unknown key and requests
// with a cookie are 429 with Retry-After, and neither a key nor a session
// is read from the Store; a sign-in with a valid key succeeds, as the
// same key does on the API: a valid key is never refused for its
// client's failures.
func TestFailedConsoleSignInsAreLimited(t *testing.T) {
	t.Parallel()
	c, store := newCountingEnv(t, func(cfg *lifecycle.Config) { cfg.AuthFailureLimit, cfg.AuthFailureInterval = 5, 10*time.Second })
	const guesser, other = "203.0.113.9:40000", "[2001:db8:1:2::5]:443"
	forged := http.Header{"Cookie": {"lifecycle_console=forged-session-token"}}
	for i := range 3 {
		if rec := c.signInFrom(guesser, apitest.UnknownKey(i)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("sign-in with a bad key: %d %s", rec.Code, rec.Body)
		}
	}
	for range 2 {
		if rec := c.from(guesser, "GET", "/console/board", "", forged); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a forged cookie: %d %s", rec.Code, rec.Body)
		}
	}
	keyReads, sessionReads := store.keyReads.Load(), store.sessionReads.Load()
	apitest.Limited(t, "a sign-in with an unknown key", c.signInFrom(guesser, apitest.UnknownKey(8)), 10)
	apitest.Limited(t, "a forged cookie on the board", c.from(guesser, "GET", "/console/board", "", forged), 10)
	apitest.Limited(t, "a forged cookie on the console's API", c.from(guesser, "GET", "/console/api/tasks", "", forged), 10)
	apitest.Limited(t, "a bad key on the API", c.from(guesser, "GET", "/api/tasks", apitest.UnknownKey(9), nil), 10)
	if k, s := store.keyReads.Load()-keyReads, store.sessionReads.Load()-sessionReads; k != 0 || s != 0 {
		t.Errorf("%d keys and %d sessions read for a limited client, want none", k, s)
	}
	if rec := c.signInFrom(guesser, c.Admin); rec.Code != http.StatusOK {
		t.Errorf("the limited client signs in with a valid key: %d %s", rec.Code, rec.Body)
	}
	if rec := c.signInFrom(other, c.Admin); rec.Code != http.StatusOK {
		t.Errorf("another client signs in: %d %s", rec.Code, rec.Body)
	}
	// Another address of the guesser's IPv6 /64 is the same client.
	for range 5 {
		c.signInFrom("[2001:db8:1:2::5]:443", apitest.UnknownKey(1))
	}
	apitest.Limited(t, "another address of the same /64", c.signInFrom("[2001:db8:1:2:ffff::1]:80", apitest.UnknownKey(2)), 10)
}

// The console's own routes answer a Store outage as the API does: 503
// store_unavailable with Retry-After, not 500.
func TestConsoleAnswers503WhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	c, store := newCountingEnv(t, func(cfg *lifecycle.Config) { cfg.KeyCacheTTL = -1 })
	c.Start()
	ck, _ := c.signIn(c.Admin)
	store.down.Store(true)
	for _, call := range []consoleCall{
		{method: "POST", path: "/session", body: map[string]any{"key": c.Admin}},
		{method: "GET", path: "/board", session: ck},
		{method: "GET", path: "/api/tasks", session: ck},
	} {
		rec := c.do(call)
		if rec.Code != http.StatusServiceUnavailable || errorCode(decode(t, rec)) != "store_unavailable" || rec.Header().Get("Retry-After") != "2" {
			t.Errorf("%s %s with the store down = %d %s (Retry-After %q); want 503 store_unavailable, Retry-After 2",
				call.method, call.path, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
	}
	store.down.Store(false)
	c.call(consoleCall{method: "GET", path: "/board", session: ck}, http.StatusOK)
}
