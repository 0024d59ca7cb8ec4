package gitlab_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// GitLab says on every answer how much is left of its rate limit: once
// nothing is, the adapter sends nothing until the window resets, and
// fails at once with a rate-limited TemporaryError carrying the wait.
func TestRateLimitSpentSendsNothing(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 15, 0, time.UTC))
	f := gitlabtest.NewServer(t, gitlabtest.Options{RateLimit: 4, Now: clock.Now})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = clock })
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")}) // project, approvals, list, create: 4
	sent := f.TotalCalls()
	_, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter != 45*time.Second {
		t.Fatalf("PullRequest with the limit spent: %v, want a rate-limited TemporaryError retrying after 45s", err)
	}
	if n := f.TotalCalls(); n != sent {
		t.Errorf("%d requests sent with the limit spent", n-sent)
	}
	clock.Advance(45 * time.Second)
	if got, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.HeadSHA != pr.HeadSHA {
		t.Errorf("PullRequest in the next window: %+v, %v", got, err)
	}
}

// A 429 that GitLab's own rate limit answers: rate-limited with GitLab's
// Retry-After, and nothing sent until it has passed.
func TestRateLimit429(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 50, 0, time.UTC))
	f := gitlabtest.NewServer(t, gitlabtest.Options{Now: clock.Now})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = clock })
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.Inject(gitlabtest.RouteGetMR, gitlabtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"10"}}, Body: "Retry later\n"})
	for i, want := range []time.Duration{10 * time.Second, 10 * time.Second} {
		_, err := a.PullRequest(t.Context(), pr.PullRequestRef)
		var te *lifecycle.TemporaryError
		if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter != want {
			t.Errorf("reading %d: %v, want rate limited for %s", i+1, err, want)
		}
	}
	if n := f.Calls(gitlabtest.RouteGetMR); n != 1 {
		t.Errorf("the merge request was read %d times within GitLab's wait, want once", n)
	}
	clock.Advance(10 * time.Second)
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Errorf("after the wait: %v", err)
	}
}

// A client of the caller's is used, its transport wrapped.
func TestHTTPClientIsUsed(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	rt := &countingTransport{next: http.DefaultTransport}
	hc := &http.Client{Transport: rt}
	a := newAdapter(t, f, func(c *gitlab.Config) { c.HTTPClient = hc })
	f.Push("lifecycle/eng-1")
	ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	if n := rt.n.Load(); n == 0 || int(n) != f.TotalCalls() {
		t.Errorf("%d requests through Config.HTTPClient, %d at GitLab", n, f.TotalCalls())
	}
	if hc.Transport != rt {
		t.Error("the caller's client was changed")
	}
}

type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}
