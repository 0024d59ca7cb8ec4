package github

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// TestConnectionsReused: 16 concurrent callers (the ship runner's
// default concurrency) keep their connections to GitHub open between
// calls, instead of one TCP (and, at GitHub, TLS) handshake per call
// beyond net/http's default of 2 idle connections per host.
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// A dial raced by a connection freed meanwhile may add a few.
	if n := f.Connections(); n > 32 {
		t.Errorf("%d connections opened for 320 calls from 16 callers, want about one per caller", n)
	}
}

// TestRateLimitUsedUpByASuccess: GitHub answers the request that uses
// the primary rate limit up with 200 and X-RateLimit-Remaining 0. The
// Adapter's budget, on the Adapter's Clock (not go-github's wall clock),
// then refuses later requests without sending them, with a temporary
// error that is RateLimited until GitHub's reset; once the Clock passes
// the reset, calls go out again.
func TestRateLimitUsedUpByASuccess(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock})
	pr := open(t, f, a, 1)
	reset := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	f.SetRateLimit(1, reset)
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Fatalf("the call that uses the limit up: %v", err)
	}
	calls := f.Calls("")
	for _, call := range []func() error{
		func() error { _, err := a.PullRequest(t.Context(), pr.PullRequestRef); return err },
		func() error {
			_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			return err
		},
	} {
		err := call()
		var te *lifecycle.TemporaryError
		if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter < 29*time.Minute || te.RetryAfter > 31*time.Minute {
			t.Errorf("a call after the limit was used up: %v, want temporary and rate limited, about 30 minutes", err)
		}
	}
	if n := f.Calls("") - calls; n != 0 {
		t.Errorf("%d requests reached GitHub after the limit was used up; want none sent until the reset", n)
	}
	if rl, ok := a.RateLimit("core"); !ok || rl.Limit != 1 || rl.Remaining != 0 || !rl.Reset.Equal(reset) {
		t.Errorf("RateLimit(core) = %+v, %v; want GitHub's limit 1, 0 left, reset %s", rl, ok, reset)
	}
	f.SetRateLimit(0, time.Time{})
	clock.Advance(31 * time.Minute)
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Errorf("after the reset: %v", err)
	}
}

// TestAPIURLUsedAsGiven: the API served at the root of a host, as
// api.github.com serves it, is reached there: no "api/v3/" is added.
func TestAPIURLUsedAsGiven(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a, err := New(Config{Owner: githubtest.Owner, Repo: githubtest.Repo, Token: githubtest.Token, APIURL: f.RootAPIURL()})
	if err != nil {
		t.Fatal(err)
	}
	f.Push("lifecycle/eng-1")
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	if err != nil || !pr.Created {
		t.Fatalf("EnsurePullRequest on a root URL = %+v, %v", pr, err)
	}
	if a.client.BaseURL.String() != f.RootAPIURL() || apiBase(f.URL) != f.RootAPIURL() {
		t.Errorf("base URL %s, want %s", a.client.BaseURL, f.RootAPIURL())
	}
	b := f.adapter(t, Config{}) // the Enterprise form, URL/api/v3/
	if b.client.BaseURL.String() != f.APIURL() || b.client.UploadURL.String() != f.URL+"/api/uploads/" {
		t.Errorf("Enterprise URLs %s, %s", b.client.BaseURL, b.client.UploadURL)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNotModifiedWhenTheLimitIsUsedUp: a 304 answered while the rate
// limit is used up is handed on, as the kept 200 it stands for, marked
// "from a cache" as a live answer would be, so that go-github does not
// start refusing requests by the wall clock; the Budget refuses the next
// request instead, on the Adapter's Clock.
func TestNotModifiedWhenTheLimitIsUsedUp(t *testing.T) {
	t.Parallel()
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	answers := []*http.Response{
		{StatusCode: http.StatusOK, Header: http.Header{"Etag": {`"v1"`}, "X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {reset}}},
		{StatusCode: http.StatusNotModified, Header: http.Header{"Etag": {`"v1"`}, "X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset}}},
	}
	sent := 0
	tr := &hostTransport{
		clock: fakeclock.New(time.Now()), budget: hostbudget.New(0.5, time.Now), cache: newETagCache(),
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := answers[sent]
			sent++
			resp.Body, resp.Request = io.NopCloser(strings.NewReader(`{"number":1}`)), r
			return resp, nil
		}),
	}
	get := func() (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "https://api.github.com/repos/o/r/pulls/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return tr.RoundTrip(req)
	}
	if _, err := get(); err != nil {
		t.Fatal(err)
	}
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != `{"number":1}` || resp.Header.Get("X-From-Cache") == "" {
		t.Errorf("the 304 sent when the limit was used up = %d %s, X-From-Cache %q; want the kept 200 marked from a cache",
			resp.StatusCode, body, resp.Header.Get("X-From-Cache"))
	}
	var te *lifecycle.TemporaryError
	if _, err := get(); !errors.As(err, &te) || !te.RateLimited || sent != 2 {
		t.Errorf("the request after: %v, %d sent; want refused unsent, rate limited", err, sent)
	}
}
