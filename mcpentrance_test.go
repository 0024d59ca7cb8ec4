package lifecycle_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// A HoldStream takes one of its principal's places among event streams,
// which GET /task-events/stream shares, and gives it back on Release
// (once, however often called); a Hold of a key ends at once when the key
// is revoked through the Service, and a hold of another key does not.
func TestHoldsOfAHostsProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.MaxStreamsPerKey = 2 })
	e.Start()
	key := e.KeyAs(lifecycle.Actor{ID: "agent", Role: lifecycle.RoleAgent}, lifecycle.ScopeEventsRead)
	r := httptest.NewRequest("GET", "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	p, err := e.Svc.Authenticate(r)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.Svc.HoldStream(r, &p)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Svc.HoldStream(r, &p)
	if err != nil {
		t.Fatal(err)
	}
	var rl *lifecycle.RateLimitError
	if _, err := e.Svc.HoldStream(r, &p); !errors.As(err, &rl) || rl.RetryAfterSeconds <= 0 {
		t.Fatalf("a third stream = %v, want a *RateLimitError", err)
	}
	srv := e.serve()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the API's stream past two holds = %d, want 429", resp.StatusCode)
	}
	second.Release()
	second.Release()
	third, err := e.Svc.HoldStream(r, &p)
	if err != nil {
		t.Fatalf("a stream after a release = %v", err)
	}
	if _, err := e.Svc.HoldStream(r, &p); !errors.As(err, &rl) {
		t.Fatalf("a second Release gave back two places: %v", err)
	}
	session := e.Svc.HoldCredential(r, &p) // not counted
	admin := httptest.NewRequest("GET", "/mcp", nil)
	admin.Header.Set("Authorization", "Bearer "+e.Admin)
	ap, err := e.Svc.Authenticate(admin)
	if err != nil {
		t.Fatal(err)
	}
	other := e.Svc.HoldCredential(admin, &ap)
	defer other.Release()
	if _, err := e.Svc.RevokeAPIKey(t.Context(), e.keyID("agent")); err != nil {
		t.Fatal(err)
	}
	for i, h := range []*lifecycle.Hold{first, third, session} {
		select {
		case <-h.Ended():
		case <-time.After(10 * time.Second):
			t.Fatalf("hold %d of the revoked key did not end", i)
		}
		h.Release()
	}
	select {
	case <-other.Ended():
		t.Fatal("another key's hold ended")
	default:
	}
}
