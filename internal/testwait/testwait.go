// Package testwait lets a test wait for a condition instead of sleeping for
// a guess: it polls the condition until it holds or a deadline of real time
// passes, and then fails the test saying what it waited for.
package testwait

import (
	"testing"
	"time"
)

// For polls cond until it returns true, failing t (t.Fatalf) when it has
// not within timeout. what says what the test waits for, as in "the
// operation to succeed"; the failure reads "waited 5s for the operation to
// succeed". cond runs on the calling goroutine: it may call t's methods.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// Until polls cond until it returns true or timeout passes, and reports
// whether it did. It polls at once, then every millisecond, backing off to
// every 10 ms, so a quick condition is seen quickly and a slow one does
// not spin.
func Until(timeout time.Duration, cond func() bool) bool {
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
