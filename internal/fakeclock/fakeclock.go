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
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		have, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
