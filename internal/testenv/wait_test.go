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

func TestReceive(t *testing.T) {
	t.Parallel()
	c := make(chan int, 1)
	c <- 7
	if got := Receive(t, time.Second, c, "a number"); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
	r := &recorder{TB: t}
	func() {
		defer func() { recover() }() // Receive panics once the recorder's Fatalf returns
		Receive(r, time.Millisecond, make(chan int), "nothing")
	}()
	if r.msg != "1ms nothing" {
		t.Errorf("Receive failed with %q, want the timeout and what it waited for", r.msg)
	}
}
