package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// The rate limits ("resources") of GitHub the Adapter keeps account of, as
// X-RateLimit-Resource names them.
const (
	resourceCore    = "core"
	resourceGraphQL = "graphql"
)

// hostTransport sits under the Adapter's authentication and does, for
// every request to GitHub:
//
//   - the rate-limit budget: a request goes only when the Budget says its
//     priority (carried in its context, see hostbudget.WithPriority) may spend from
//     its resource; otherwise it fails, unsent, with a *TemporaryError
//     that is RateLimited and says until when. Every answer's
//     X-RateLimit-* headers are recorded in the Budget.
//   - conditional requests: a GET whose URL was answered before with an
//     ETag is sent with If-None-Match, and GitHub's 304, which its rate
//     limit does not charge, is handed on as the 200 it stands for, with
//     the body kept from then.
//   - the answers GitHub asks to be retried (rate limits, server errors)
//     become *lifecycle.TemporaryError with the wait GitHub asked for,
//     before go-github sees them. go-github v60 recognises a primary rate
//     limit only on 403 and a secondary one only by its documentation URL,
//     and then refuses further requests by the wall clock; handling both
//     here covers 429 too, keeps the Adapter's Clock in charge of waits,
//     and leaves retrying to the caller (the ship runner's retry budget).
type hostTransport struct {
	base   http.RoundTripper
	clock  interface{ Now() time.Time }
	budget *hostbudget.Budget
	cache  *etagCache
	// graphqlPath is the path of the GraphQL endpoint: requests there
	// spend the graphql limit, all others the core one.
	graphqlPath string
}

// secondaryWait is the wait GitHub documents for a secondary rate limit
// answered without Retry-After: "at least one minute".
const secondaryWait = time.Minute

// resourceOf returns the rate limit req spends.
func (t *hostTransport) resourceOf(req *http.Request) string {
	if t.graphqlPath != "" && req.Method == http.MethodPost && req.URL.Path == t.graphqlPath {
		return resourceGraphQL
	}
	return resourceCore
}

// RoundTrip implements http.RoundTripper.
func (t *hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resource := t.resourceOf(req)
	p := hostbudget.PriorityOf(req.Context())
	if wait := t.budget.Wait(resource, p); wait > 0 {
		what := "urgent"
		if p == hostbudget.Deferrable {
			what = "deferrable"
		}
		return nil, &lifecycle.TemporaryError{RateLimited: true, RetryAfter: wait,
			Err: fmt.Errorf("github: %s %s not sent: the %s rate limit left for %s requests is spent until its reset", req.Method, req.URL.Path, resource, what)}
	}
	var cached *cachedAnswer
	key := cacheKey(req)
	if key != "" {
		if cached = t.cache.get(key); cached != nil {
			req = req.Clone(req.Context())
			req.Header.Set("If-None-Match", cached.etag)
		}
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	t.observe(resource, resp)
	switch code := resp.StatusCode; {
	case code == http.StatusNotModified && cached != nil:
		resp.Body.Close()
		resp = cached.answer(req, resp)
	case code == http.StatusForbidden || code == http.StatusTooManyRequests:
		if wait, msg, limited := t.rateLimit(resp); limited {
			return nil, &lifecycle.TemporaryError{Err: &hostError{Status: code, Method: req.Method, Path: req.URL.Path, Message: msg}, RetryAfter: wait, RateLimited: true}
		}
	case code >= 500:
		msg := drainMessage(resp)
		return nil, &lifecycle.TemporaryError{Err: &hostError{Status: code, Method: req.Method, Path: req.URL.Path, Message: msg}, RetryAfter: retryAfterHeader(resp)}
	case code == http.StatusOK && key != "" && resp.Header.Get("ETag") != "":
		if err := t.cache.keep(key, resp); err != nil {
			return nil, fmt.Errorf("github: %s %s: read the answer: %w", req.Method, req.URL.Path, err)
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		// The answer that used the limit up (or a 304 sent when it was). go-github would remember it
		// and refuse every request until the reset, by the wall clock,
		// with an error of its own; it does not for an answer "from a
		// cache". The Budget, on the Adapter's Clock, refuses them
		// instead.
		resp.Header.Set("X-From-Cache", "1")
	}
	return resp, nil
}

// observe records what an answer says of its rate limit: the resource it
// names (X-RateLimit-Resource), or the one the request was sent to.
func (t *hostTransport) observe(resource string, resp *http.Response) {
	st, ok := rateHeaders(resp.Header)
	if !ok {
		return
	}
	if r := resp.Header.Get("X-RateLimit-Resource"); r != "" {
		resource = r
	}
	t.budget.Observe(resource, st)
}

// rateHeaders reads X-RateLimit-Limit, -Remaining and -Reset.
func rateHeaders(h http.Header) (hostbudget.State, bool) {
	limit, err1 := strconv.Atoi(h.Get("X-RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return hostbudget.State{}, false
	}
	return hostbudget.State{Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0)}, true
}

// rateLimit reports whether a 403 or 429 answer is a rate limit, and how
// long to wait. The body of an answer that is not is left readable.
func (t *hostTransport) rateLimit(resp *http.Response) (time.Duration, string, bool) {
	if ra := retryAfterHeader(resp); ra > 0 {
		return ra, drainMessage(resp), true // secondary limit
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		return t.untilReset(resp.Header), drainMessage(resp), true // primary limit
	}
	// A secondary limit without headers says so in its message.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	msg := messageOf(body)
	if resp.StatusCode == http.StatusTooManyRequests || strings.Contains(strings.ToLower(msg), "secondary rate limit") {
		return secondaryWait, msg, true
	}
	return 0, "", false
}

// untilReset returns the wait until the reset an answer names in
// X-RateLimit-Reset, at least a second, or secondaryWait without one.
func (t *hostTransport) untilReset(h http.Header) time.Duration {
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		return max(time.Unix(reset, 0).Sub(t.clock.Now()), time.Second)
	}
	return secondaryWait
}

// retryAfterHeader returns the wait of a Retry-After header in seconds, or 0.
func retryAfterHeader(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// drainMessage reads GitHub's message from an answer's body and closes it.
func drainMessage(resp *http.Response) string {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return messageOf(body)
}

// messageOf returns GitHub's message of an error answer: REST's
// "message", or the first of a GraphQL answer's "errors".
func messageOf(body []byte) string {
	var e struct {
		Message string `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if e.Message == "" && len(e.Errors) > 0 {
		return e.Errors[0].Message
	}
	return e.Message
}

// hostError is an answer of GitHub that asks to be retried.
type hostError struct {
	Status  int
	Method  string
	Path    string
	Message string
}

func (e *hostError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("github: %s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
	}
	return fmt.Sprintf("github: %s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
}

// statusOf returns the HTTP status of a go-github error, or 0.
func statusOf(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	var he *hostError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// ghMessage returns GitHub's message of a go-github error, with the
// messages of its error items.
func ghMessage(err error) string {
	var er *gh.ErrorResponse
	if !errors.As(err, &er) {
		return ""
	}
	msg := er.Message
	for _, e := range er.Errors {
		if e.Message != "" {
			msg += "; " + e.Message
		}
	}
	return msg
}

// wrap wraps a go-github error with what was being done, translating a
// 404 into lifecycle.ErrNotFound and go-github's own rate limit errors
// into a *lifecycle.TemporaryError with the wait they name.
func wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var (
		primary   *gh.RateLimitError
		secondary *gh.AbuseRateLimitError
	)
	switch {
	case statusOf(err) == http.StatusNotFound:
		return fmt.Errorf("github: %s: %w (%w)", what, lifecycle.ErrNotFound, err)
	case errors.As(err, &primary):
		err = &lifecycle.TemporaryError{Err: err, RetryAfter: max(time.Until(primary.Rate.Reset.Time), time.Second), RateLimited: true}
	case errors.As(err, &secondary):
		err = &lifecycle.TemporaryError{Err: err, RetryAfter: max(secondary.GetRetryAfter(), time.Second), RateLimited: true}
	}
	return fmt.Errorf("github: %s: %w", what, err)
}
