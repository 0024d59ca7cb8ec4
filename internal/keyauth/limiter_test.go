package keyauth

import (
	"net/http"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// newTestLimiter returns a limiter of limit failures, one earned back per
// interval, for max clients, on a fake clock, whose clients are named by
// their RemoteAddr.
func newTestLimiter(limit int, interval time.Duration, max int) (*Limiter, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	return NewLimiter(LimiterConfig{Clock: clock, Limit: limit, Interval: interval, Clients: max, UnknownKeyReads: 50,
		Address: func(r *http.Request) string { return r.RemoteAddr }}), clock
}

// from returns a request of the client at addr.
func from(addr string) *http.Request { return &http.Request{RemoteAddr: addr} }

// failFrom makes an attempt of the client at addr that fails, and reports
// whether it was admitted.
func failFrom(l *Limiter, addr string) bool {
	try, err := l.Admit(from(addr), false)
	if err != nil {
		return false
	}
	try.Fail()
	try.End()
	return true
}

// The bucket (package authlimit) as the Limiter answers it: limit failures
// at once, then one per interval; Retry-After rounds the wait up to whole
// seconds; a disabled limiter admits everything.
func TestLimiterBucket(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(3, 10*time.Second, 100)
	fail := func() {
		t.Helper()
		if !failFrom(l, "192.0.2.1:1") {
			t.Fatal("refused before its limit")
		}
	}
	retry := func() int {
		t.Helper()
		_, err := l.Admit(from("192.0.2.1:2"), false)
		if err == nil {
			return 0
		}
		return err.(*lifecycletype.RateLimitError).RetryAfterSeconds
	}
	for range 3 {
		fail()
	}
	if got := retry(); got != 10 {
		t.Fatalf("after 3 failures: retry after %d s, want 10", got)
	}
	clock.Advance(9500 * time.Millisecond)
	if got := retry(); got != 1 {
		t.Errorf("9.5 s later: retry after %d s, want 1", got)
	}
	clock.Advance(500 * time.Millisecond)
	fail() // the try earned
	if got := retry(); got != 10 {
		t.Errorf("after the earned try: retry after %d s, want 10", got)
	}
	clock.Advance(25 * time.Second) // two and a half tries earned
	fail()
	fail()
	if got := retry(); got != 5 {
		t.Errorf("after the two tries earned: retry after %d s, want 5", got)
	}
	var nilLimiter *Limiter // disabled
	try, err := nilLimiter.Admit(from("x"), false)
	if err != nil {
		t.Error(err)
	}
	try.Fail()
	try.End()
}
