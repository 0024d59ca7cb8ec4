// Package fakeclock provides a Clock whose time moves only when a test says
// so. It satisfies lifecycle.Clock.
package fakeclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a manually advanced clock. The zero value is not usable; call New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{} // closed and replaced whenever a waiter is added
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// New returns a Clock that reads t until advanced.
func New(t time.Time) *Clock {
	return &Clock{now: t, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once it has been
// advanced by at least d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock forward by d and fires every waiter that is due,
// earliest first.
func (c *Clock) Advance(d time.Duration) {
	c.Set(c.Now().Add(d))
}

// Set moves the clock to t (never backwards) and fires every waiter that is
// due, earliest first.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	sort.SliceStable(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// Waiters returns the number of After calls that have not fired yet.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// WaitForWaiters blocks until at least n After calls are pending or the
// timeout (real time) passes, and reports whether they are. Tests use it to
// know that a goroutine has gone to sleep before advancing the clock.
func (c *Clock) WaitForWaiters(n int, timeout time.Duration) bool {
	return c.waitFor(timeout, func() bool { return len(c.waiters) >= n })
}

// WaitForWaiterAt blocks until an After call that fires at exactly at is
// pending, or the timeout (real time) passes, and reports whether one is.
// A goroutine that sleeps d on the clock in a loop parks again at
// Now()+d once it has done its work: a test that advances the clock waits
// for that waiter to know the goroutine has decided what to do at the new
// time, before asserting what it did or did not do.
func (c *Clock) WaitForWaiterAt(at time.Time, timeout time.Duration) bool {
	return c.waitFor(timeout, func() bool { return c.pendingAt(at) })
}

// PendingAt reports whether an After call that fires at exactly at has
// not fired yet.
func (c *Clock) PendingAt(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendingAt(at)
}

func (c *Clock) pendingAt(at time.Time) bool {
	for _, w := range c.waiters {
		if w.at.Equal(at) {
			return true
		}
	}
	return false
}

// waitFor blocks until cond, evaluated under c.mu, holds or the timeout
// passes, and reports whether it holds. It wakes whenever a waiter is added.
func (c *Clock) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, changed := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}
