package lifecycle

import (
	"context"
	"sync"
	"time"
)

// byteBudget bounds the bytes of request bodies being read and decoded at
// once, so that concurrent large bodies cannot grow memory without bound.
// A request that does not get its bytes within a short wait is refused
// with 429 and Retry-After, not queued for ever. Waiters are served in
// order of arrival.
type byteBudget struct {
	mu      sync.Mutex
	free    int64
	waiters []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newByteBudget(n int64) *byteBudget { return &byteBudget{free: n} }

// acquire takes n bytes, at most the whole budget, waiting at most wait
// (and while ctx lasts). It returns the function that gives them back; when
// they were not granted in time, ctx's error or a *RateLimitError that
// asks to retry in a second.
func (b *byteBudget) acquire(ctx context.Context, n int64, wait time.Duration) (release func(), err error) {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
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
		err = &RateLimitError{RetryAfterSeconds: 1,
			Message: "The server is reading too many large request bodies at once; retry in a second"}
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
func (b *byteBudget) releaser(n int64) func() {
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
func (b *byteBudget) grant() {
	for len(b.waiters) > 0 && b.free >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		close(w.ready)
	}
}
