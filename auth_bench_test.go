package lifecycle_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// The cost of authenticating a request with the Service's own keys
// (Service.Authenticate, as every API route does), on a SQLite store: a
// valid key the Service knows (no store read), an unknown key read from
// the store (the limiter off), and an unknown key refused by the limiter
// before any read. BENCHMARKS.md has the figures.
func BenchmarkAuthenticate(b *testing.B) {
	for _, bb := range []struct {
		name   string
		limit  int
		key    func(e *apitest.Env) string
		status string
	}{
		{"known valid key", 0, func(e *apitest.Env) string { return e.Admin }, "ok"},
		{"unknown key read", -1, func(*apitest.Env) string { return apitest.UnknownKey(1) }, "unauthorized"},
		{"unknown key refused", 1, func(*apitest.Env) string { return apitest.UnknownKey(1) }, "limited"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			e := apitest.New(b, apitest.Options{}, func(c *lifecycle.Config) { c.AuthFailureLimit = bb.limit })
			req := httptest.NewRequestWithContext(b.Context(), "GET", "/tasks", nil)
			req.RemoteAddr = "203.0.113.9:4000"
			req.Header.Set("Authorization", "Bearer "+bb.key(e))
			_, _ = e.Svc.Authenticate(req) // the keys are read; a limited client has failed once
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, err := e.Svc.Authenticate(req)
				if got := outcome(err); got != bb.status {
					b.Fatalf("%s: %v", got, err)
				}
			}
		})
	}
}

// outcome names what Authenticate answered.
func outcome(err error) string {
	var rl *lifecycle.RateLimitError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &rl):
		return "limited"
	default:
		return "unauthorized"
	}
}
