// Package claimrun runs work claimed from a store shared by several
// processes: a Runner claims as many items as it has free slots, works
// each in a goroutine of its own and claims again when one ends, when
// woken, or every poll interval; Hold keeps the lease of an item renewed
// while its work runs and stops the work when the lease is lost. What is
// claimed, how a lease is renewed and what the work does is the caller's.
package claimrun

import (
	"context"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/backoff"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Config says how a Runner claims and works its items.
type Config[T any] struct {
	// Clock times the polls.
	Clock Clock
	// Slots is how many items are worked at once.
	Slots int
	// Poll is how long the runner waits between claims unless woken or
	// an item's work ends.
	Poll time.Duration
	// Claim claims up to limit items. resume is true until a claim has
	// succeeded, so that the first one may also take back what this owner
	// held before a restart. Claim logs its errors; the runner claims
	// again after the next wait.
	Claim func(ctx context.Context, limit int, resume bool) ([]T, error)
	// Work works one claimed item until it is done or ctx ends.
	Work func(ctx context.Context, item T)
	// Go runs f in a goroutine that the runner's owner waits for when it
	// stops.
	Go func(f func())
}

// Runner claims items and works them, at most Slots at once.
type Runner[T any] struct {
	cfg  Config[T]
	wake chan struct{} // capacity 1: claim now
}

// New returns a Runner; it does nothing until Run.
func New[T any](cfg Config[T]) *Runner[T] {
	return &Runner[T]{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake tells the runner that items may be waiting to be claimed.
func (r *Runner[T]) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run claims and works items until ctx ends. The works under way when ctx
// ends see it end; Run does not wait for them.
func (r *Runner[T]) Run(ctx context.Context) {
	slots := make(chan struct{}, r.cfg.Slots)
	resume := true
	for {
		// A work that ends with ctx wakes the runner, and select picks
		// among ready cases at random: without this, Run could claim
		// again after ctx has ended.
		if ctx.Err() != nil {
			return
		}
		if free := cap(slots) - len(slots); free > 0 {
			items, err := r.cfg.Claim(ctx, free, resume)
			if err == nil {
				resume = false
			}
			for _, item := range items {
				slots <- struct{}{}
				r.cfg.Go(func() {
					defer func() {
						<-slots
						r.Wake()
					}()
					r.cfg.Work(ctx, item)
				})
			}
			if len(items) == free {
				continue // there may be more
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-r.cfg.Clock.After(r.cfg.Poll):
		}
	}
}

// Hold runs work with a context that ends when ctx ends or the lease of
// what it works is lost, and meanwhile calls renew every interval on
// clock. renew renews the lease and reports false when another holds it
// (it logs its other failures: the lease is renewed again at the next
// interval). Hold returns once work has returned and renewals have
// stopped, and reports whether the lease was lost.
func Hold(ctx context.Context, clock Clock, every time.Duration, renew func(ctx context.Context) bool, work func(ctx context.Context)) (lost bool) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		lost = !Renew(wctx, clock, every, renew)
		cancel()
	}()
	work(wctx)
	cancel()
	<-renewed
	return lost
}

// Renew calls renew every interval on clock until ctx ends, and reports
// true then; or until renew reports false, and reports false.
func Renew(ctx context.Context, clock Clock, every time.Duration, renew func(ctx context.Context) bool) bool {
	for {
		if !backoff.Pause(ctx, clock, every) {
			return true
		}
		if !renew(ctx) {
			return false
		}
	}
}
