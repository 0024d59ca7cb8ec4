// Package dueloop runs work at each multiple of an interval, counted from the
// zero time, so that every process sharing a store keeps the same beat and
// the work due at a beat is done together; or sooner when woken, and at
// least every poll interval. Work due is taken in chunks until none is
// left. What is due and what is done with it is the caller's.
package dueloop

import (
	"context"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Next returns the first multiple of iv after now, counted from the zero
// time; now itself when iv is not positive.
func Next(now time.Time, iv time.Duration) time.Time {
	if iv <= 0 {
		return now
	}
	return now.Truncate(iv).Add(iv)
}

// Beat runs work at each beat of an interval, when woken, and at least
// every poll interval.
type Beat struct {
	clock          Clock
	interval, poll time.Duration
	wake           chan struct{} // capacity 1: run now
}

// New returns a Beat of interval on clock that also runs every poll; it
// does nothing until Run.
func New(clock Clock, interval, poll time.Duration) *Beat {
	return &Beat{clock: clock, interval: interval, poll: poll, wake: make(chan struct{}, 1)}
}

// Wake makes the beat run its work now, or as soon as the run under way
// ends.
func (b *Beat) Wake() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run calls work at once, then at each beat, when woken and at least
// every poll, until ctx ends. A call that outlasts the interval delays
// the next one: it comes as soon as the call ends.
func (b *Beat) Run(ctx context.Context, work func(ctx context.Context)) {
	for {
		work(ctx)
		now := b.clock.Now()
		wait := min(Next(now, b.interval).Sub(now), b.poll)
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-b.clock.After(wait):
		}
	}
}

// Drain claims up to chunk items at a time and works them, until a claim
// returns fewer than chunk, fails, or ctx ends. It returns the claim's
// error.
func Drain[T any](ctx context.Context, chunk int, claim func(ctx context.Context, limit int) ([]T, error), work func(ctx context.Context, items []T)) error {
	for ctx.Err() == nil {
		items, err := claim(ctx, chunk)
		if err != nil {
			return err
		}
		work(ctx, items)
		if len(items) < chunk {
			return nil
		}
	}
	return nil
}
