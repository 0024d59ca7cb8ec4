package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it returns true, failing t (t.Fatalf) when it has
// not within timeout. what says what the test waits for, as in "the
// operation to succeed"; the failure reads "waited 5s for the operation to
// succeed". cond runs on the calling goroutine: it may call t's methods.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !WaitUntil(timeout, cond) {
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// WaitUntil polls cond until it returns true or timeout passes, and reports
// whether it did. It polls at once, then every millisecond, backing off to
// every 10 ms, so a quick condition is seen quickly and a slow one does
// not spin.
func WaitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	every := time.Millisecond
	tick := time.NewTimer(every)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
			every = min(2*every, 10*time.Millisecond)
			tick.Reset(every)
		}
	}
}

// Receive returns the next value of c, failing t (t.Fatalf) when none
// comes within timeout. what names the value, as in "the merge's
// outcome"; the failure reads "waited 5s for the merge's outcome".
func Receive[V any](t testing.TB, timeout time.Duration, c <-chan V, what string) V {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case v := <-c:
		return v
	case <-deadline.C:
		t.Fatalf("waited %s for %s", timeout, what)
		panic("unreachable") // Fatalf does not return
	}
}
