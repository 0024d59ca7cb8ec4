// Package backoff waits on a clock: Pause waits a while unless a context
// ends first, and Retry tries an operation again while it fails
// temporarily, waiting between tries a delay that doubles up to a cap (or
// what the failure asks for) within a budget of time, and waiting out,
// outside the budget, what a failure imposes (a rate limit until it
// resets). Which failures are temporary is the caller's to say.
package backoff

import (
	"context"
	"fmt"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Pause waits d on clock and reports whether ctx is still alive: false
// as soon as ctx ends.
func Pause(ctx context.Context, clock Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clock.After(d):
		return true
	}
}

// Policy says how Retry tries.
type Policy struct {
	// Clock times the waits and the budget.
	Clock Clock
	// Timeout bounds each try.
	Timeout time.Duration
	// Budget is how long after the first try began a retry may still
	// start.
	Budget time.Duration
	// First is the first wait; each next one is twice the last, up to
	// Max.
	First, Max time.Duration
}

// Verdict is what Retry makes of a failed try.
type Verdict struct {
	// Retry says the failure is temporary: the operation is tried again.
	Retry bool
	// After is the wait the failure asks for, or 0 for the policy's.
	After time.Duration
	// Hold, when positive, is a wait the failure imposes: waited out
	// however long, and added to the budget.
	Hold time.Duration
}

// Hooks are told what Retry does; any may be nil.
type Hooks struct {
	// Holding is told that Retry waits hold, until until, after err.
	Holding func(hold time.Duration, until time.Time, err error)
	// Held is told that such a wait is over.
	Held func()
	// Retrying is told that try number attempt failed with err and that
	// Retry waits wait before the next.
	Retrying func(attempt int, wait time.Duration, err error)
}

// GaveUpError is the error of an operation that still failed when the
// budget ran out.
type GaveUpError struct {
	// Tries is how many tries were made.
	Tries int
	// Err is the last one's error.
	Err error
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("gave up after %d tries: %v", e.Tries, e.Err)
}

// Unwrap returns the last try's error.
func (e *GaveUpError) Unwrap() error { return e.Err }

// Retry calls try, each call bounded by p.Timeout, until it succeeds,
// fails for good (judge says not to retry), ctx ends, or the budget runs
// out. It returns nil, try's error, ctx's error when ctx ended during a
// wait, or a *GaveUpError.
func Retry(ctx context.Context, p Policy, try func(ctx context.Context) error, judge func(err error) Verdict, h Hooks) error {
	deadline := p.Clock.Now().Add(p.Budget)
	wait := p.First
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, p.Timeout)
		err := try(tctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		v := judge(err)
		switch {
		case !v.Retry:
			return err
		case v.Hold > 0:
			until := p.Clock.Now().Add(v.Hold)
			held := p.Clock.After(v.Hold)
			if h.Holding != nil {
				h.Holding(v.Hold, until, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-held:
			}
			if h.Held != nil {
				h.Held()
			}
			deadline = deadline.Add(v.Hold)
			continue
		}
		next := wait
		if v.After > 0 {
			next = v.After
		}
		if p.Clock.Now().Add(next).After(deadline) {
			return &GaveUpError{Tries: attempt, Err: err}
		}
		if h.Retrying != nil {
			h.Retrying(attempt, next, err)
		}
		if !Pause(ctx, p.Clock, next) {
			return ctx.Err()
		}
		wait = min(2*wait, p.Max)
	}
}
