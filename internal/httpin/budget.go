package httpin

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Budget is a number of bytes shared by its takers.
type Budget struct {
	mu      sync.Mutex
	free    int64
	waiters []*waiter // in arrival order
}

// waiter is a taker waiting for its bytes.
type waiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

// NewBudget returns a budget of n bytes.
func NewBudget(n int64) *Budget { return &Budget{free: n} }

// ErrBusy is returned by Acquire when the bytes were not granted in time.
var ErrBusy = errors.New("the byte budget is used up")

// Acquire takes n bytes, at most the whole budget, waiting at most wait
// (and while ctx lasts). It returns the function that gives them back, which
// may be called more than once; when they were not granted in time, ctx's
// error or ErrBusy.
func (b *Budget) Acquire(ctx context.Context, n int64, wait time.Duration) (release func(), err error) {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return b.releaser(n), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = ErrBusy
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted while we gave up: give it back
		b.free += n
		b.grant()
	default:
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grant() // the head of the queue may have changed
	}
	return nil, err
}

// releaser returns the function that gives n bytes back, once.
func (b *Budget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.free += n
			b.grant()
			b.mu.Unlock()
		})
	}
}

// grant hands free bytes to waiters in order; b.mu is held.
func (b *Budget) grant() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
