package fakeclock

import (
	"testing"
	"time"
)

func TestAfterFiresOnAdvance(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	c := New(start)
	ch := c.After(10 * time.Second)
	c.Advance(9 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired before its time")
	default:
	}
	c.Advance(time.Second)
	select {
	case got := <-ch:
		if want := start.Add(10 * time.Second); !got.Equal(want) {
			t.Fatalf("fired with %v, want %v", got, want)
		}
	default:
		t.Fatal("did not fire when due")
	}
	if c.Waiters() != 0 {
		t.Fatalf("Waiters() = %d after firing, want 0", c.Waiters())
	}
}

func TestWaitForWaiters(t *testing.T) {
	t.Parallel()
	c := New(time.Unix(0, 0))
	go c.After(time.Minute)
	if !c.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("waiter never registered")
	}
}

func TestWaitForWaiterAt(t *testing.T) {
	t.Parallel()
	start := time.Unix(0, 0)
	c := New(start)
	c.After(time.Second)
	if c.WaitForWaiterAt(start.Add(time.Minute), 10*time.Millisecond) {
		t.Fatal("reported a waiter at a minute with only one at a second")
	}
	go c.After(time.Minute)
	if !c.WaitForWaiterAt(start.Add(time.Minute), 5*time.Second) {
		t.Fatal("waiter at a minute never seen")
	}
	c.Advance(time.Minute)
	if c.PendingAt(start.Add(time.Minute)) {
		t.Fatal("a fired waiter is still pending")
	}
}
