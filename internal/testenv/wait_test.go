package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitUntilSeesAConditionThatComesTrue(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	if !WaitUntil(5*time.Second, func() bool { return n.Add(1) >= 5 }) {
		t.Fatal("WaitUntil gave up on a condition that held on the fifth poll")
	}
}

func TestWaitUntilGivesUpAtItsDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if WaitUntil(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("WaitUntil reported a condition that never held")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("gave up after %s, before its deadline", d)
	}
}

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = format
	if len(args) == 2 {
		r.msg = args[0].(time.Duration).String() + " " + args[1].(string)
	}
}

func TestWaitForSaysWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	WaitFor(r, time.Millisecond, "the moon", func() bool { return false })
	if r.msg != "1ms the moon" {
		t.Fatalf("For failed with %q, want the timeout and what it waited for", r.msg)
	}
}
