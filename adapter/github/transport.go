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
)

// hostTransport turns the answers GitHub asks to be retried (rate limits,
// server errors) into *lifecycle.TemporaryError with the wait GitHub asked
// for, before go-github sees them. go-github v60 recognises a primary rate
// limit only on 403 and a secondary one only by its documentation URL, and
// then refuses further requests by the wall clock; handling both here
// covers 429 too, keeps the Adapter's Clock in charge of waits, and leaves
// retrying to the caller (the ship runner's retry budget).
type hostTransport struct {
	base  http.RoundTripper
	clock interface{ Now() time.Time }
}

// secondaryWait is the wait GitHub documents for a secondary rate limit
// answered without Retry-After: "at least one minute".
const secondaryWait = time.Minute

// RoundTrip implements http.RoundTripper.
func (t *hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch code := resp.StatusCode; {
	case code == http.StatusForbidden || code == http.StatusTooManyRequests:
		if wait, msg, limited := t.rateLimit(resp); limited {
			return nil, &lifecycle.TemporaryError{Err: &hostError{Status: code, Method: req.Method, Path: req.URL.Path, Message: msg}, RetryAfter: wait}
		}
	case code >= 500:
		msg := drainMessage(resp)
		return nil, &lifecycle.TemporaryError{Err: &hostError{Status: code, Method: req.Method, Path: req.URL.Path, Message: msg}, RetryAfter: retryAfterHeader(resp)}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		// The answer that used the limit up. go-github would remember it
		// and refuse every request until the reset, by the wall clock,
		// with an error of its own; it does not for an answer "from a
		// cache". The next request then gets GitHub's 403 or 429, which
		// becomes a TemporaryError above, with GitHub's wait.
		resp.Header.Set("X-From-Cache", "1")
	}
	return resp, nil
}

// rateLimit reports whether a 403 or 429 answer is a rate limit, and how
// long to wait. The body of an answer that is not is left readable.
func (t *hostTransport) rateLimit(resp *http.Response) (time.Duration, string, bool) {
	if ra := retryAfterHeader(resp); ra > 0 {
		return ra, drainMessage(resp), true // secondary limit
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		wait := secondaryWait
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			wait = max(time.Unix(reset, 0).Sub(t.clock.Now()), time.Second)
		}
		return wait, drainMessage(resp), true // primary limit
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

func messageOf(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	return ""
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
		err = &lifecycle.TemporaryError{Err: err, RetryAfter: max(time.Until(primary.Rate.Reset.Time), time.Second)}
	case errors.As(err, &secondary):
		err = &lifecycle.TemporaryError{Err: err, RetryAfter: max(secondary.GetRetryAfter(), time.Second)}
	}
	return fmt.Errorf("github: %s: %w", what, err)
}
