package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// The adapter's account of GitLab's rate limit, in an
// adapter/internal/hostbudget.Budget:
//
//   - rateResource is the rate limit GitLab reports on its answers
//     (RateLimit-Limit, RateLimit-Observed, RateLimit-Remaining,
//     RateLimit-Reset: the most restrictive of the throttles that apply to
//     the token);
//   - blockResource holds the wait of a 429 Too Many Requests, during
//     which no request is sent.
const (
	rateResource  = "api"
	blockResource = "blocked"
)

// defaultRateLimitWait is how long a 429 that says nothing of when to try
// again is taken to last: GitLab's throttles count by the minute on
// GitLab.com.
const defaultRateLimitWait = time.Minute

// limiter is client-go's RateLimiter for the adapter, asked before each
// request is sent: it lets the request go, or fails it with a
// *lifecycle.TemporaryError that is RateLimited, without sending it, when
// the budget says it must wait. It also takes the place of client-go's
// own limiter, which would pace requests on the wall clock.
type limiter struct{ a *Adapter }

// Wait implements gl.RateLimiter.
func (l limiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a, p := l.a, hostbudget.PriorityOf(ctx)
	if wait := a.budget.Wait(blockResource, p); wait > 0 {
		return &lifecycle.TemporaryError{RateLimited: true, RetryAfter: wait,
			Err: fmt.Errorf("GitLab answered 429 Too Many Requests; no request is sent before %s", a.clock.Now().Add(wait).UTC().Format(time.RFC3339))}
	}
	if wait := a.budget.Wait(rateResource, p); wait > 0 {
		st, _ := a.budget.State(rateResource)
		until := st.Reset.UTC().Format(time.RFC3339)
		if p == hostbudget.Deferrable {
			return &lifecycle.TemporaryError{RateLimited: true, RetryAfter: wait,
				Err: fmt.Errorf("the reconciler's share (%g%%) of GitLab's rate limit is spent: %d of %d requests left until %s are kept for merges, submissions and writes",
					a.cfg.SweepShare*100, st.Remaining, st.Limit, until)}
		}
		return &lifecycle.TemporaryError{RateLimited: true, RetryAfter: wait,
			Err: fmt.Errorf("GitLab's rate limit is spent: %d of %d requests left until %s", st.Remaining, st.Limit, until)}
	}
	a.budget.Spend(rateResource, 1)
	return nil
}

// observer is the adapter's HTTP transport: it passes each request on and
// records what GitLab's answer says of the rate limit.
type observer struct {
	next http.RoundTripper
	a    *Adapter
}

// RoundTrip implements http.RoundTripper.
func (o *observer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if err == nil {
		o.a.observe(resp)
	}
	return resp, err
}

// observe records the rate limit an answer reports, and the wait a 429
// asks for.
func (a *Adapter) observe(resp *http.Response) {
	h := resp.Header
	if st, ok := rateState(h); ok {
		a.budget.Observe(rateResource, st)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		wait := a.retryAfter(h)
		if wait <= 0 {
			wait = defaultRateLimitWait
		}
		a.budget.Observe(blockResource, hostbudget.State{Limit: 1, Remaining: 0, Reset: a.clock.Now().Add(wait)})
	}
}

// rateState reads GitLab's RateLimit-* headers. RateLimit-Limit is the
// limit per minute, whatever the throttle's period; RateLimit-Remaining
// is what is left in the period, of its own limit, which is therefore
// RateLimit-Observed plus RateLimit-Remaining while some is left.
func rateState(h http.Header) (hostbudget.State, bool) {
	num := func(name string) (int64, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64)
		return n, err == nil && n >= 0
	}
	limit, okL := num("RateLimit-Limit")
	remaining, okR := num("RateLimit-Remaining")
	reset, okT := num("RateLimit-Reset")
	if !okL || !okR || !okT || limit == 0 {
		return hostbudget.State{}, false
	}
	if observed, ok := num("RateLimit-Observed"); ok && remaining > 0 {
		limit = observed + remaining
	}
	return hostbudget.State{Limit: int(limit), Remaining: int(remaining), Reset: time.Unix(reset, 0)}, true
}

// httpClient returns the client the adapter sends its requests with: a
// copy of c (client-go's pooled client when nil) whose transport observes
// GitLab's rate limit, over the adapter's instrumented transport (a span,
// traceparent and metrics per request).
func (a *Adapter) httpClient(c *http.Client) *http.Client {
	var hc http.Client
	if c != nil {
		hc = *c
	}
	next := hc.Transport
	if next == nil {
		next = pooledTransport()
	}
	hc.Transport = &observer{next: a.tel.Transport(next), a: a}
	return &hc
}

// pooledTransport is a transport like client-go's default one: the
// standard library's, keeping an idle connection per processor.
func pooledTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = runtime.GOMAXPROCS(0) + 1
	return t
}
