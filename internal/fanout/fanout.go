// Package fanout hands items that a store keeps in sequence order to many
// readers at once, each at its own pace, in memory bounded by a ring of the
// newest items.
//
// A Hub loads the items committed after the newest it holds (when woken,
// every poll interval, and again after a failure) into a ring. Readers hold
// no queue of their own: each keeps the sequence it has read through, scans
// the ring after it (Scan), and waits on a channel the Hub closes whenever
// the ring grows. A reader whose position has left the ring is told so and
// must read the store itself, or give up. Items are stored once and shared
// by every reader: make them once (encode them when loaded) and never write
// to them afterwards.
package fanout

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Acquire and Start once the Hub is closed.
var ErrClosed = errors.New("fanout: the hub is closed")

// ErrLimit is returned by Acquire when the key already holds
// Config.MaxPerKey readers.
var ErrLimit = errors.New("fanout: the key holds the most readers allowed")

// Config says what a Hub loads, from where, and how often.
type Config[T any] struct {
	// Size is how many of the newest items the ring holds; at least 1.
	Size int
	// Page is the most items one call of Load is asked for; at least 1.
	Page int
	// MaxPerKey is the most readers one key may hold at once (Acquire).
	MaxPerKey int
	// Poll is how often the Hub also loads without being woken, so that
	// items committed by other processes reach it; <= 0: never.
	Poll time.Duration
	// Retry is how long the Hub waits before loading again after Load
	// failed.
	Retry time.Duration
	// Window is the least time, by the wall clock, between two loads while
	// wake-ups come faster than that, so that one load takes the items of
	// the whole window and readers handle them at once; <= 0: none.
	Window time.Duration
	// After returns a channel that receives once d has elapsed, like a
	// clock's After: it times polls and retries.
	After func(d time.Duration) <-chan time.Time
	// Start returns the sequence of the newest item committed: the Hub
	// loads what comes after it. It is called once, by the first Acquire
	// or Start; its error is returned by them as it is.
	Start func(ctx context.Context) (int64, error)
	// Load returns the items with a sequence greater than after, in
	// sequence order, at most limit of them. ctx is cancelled by Close.
	Load func(ctx context.Context, after int64, limit int) ([]T, error)
	// Seq returns the sequence of an item Load returned.
	Seq func(*T) int64
	// Failed, if set, is told of each failed load, with the sequence the
	// Hub had loaded through. It is not told of failures caused by Close.
	Failed func(after int64, err error)
}

// Hub loads items into its ring and wakes the readers. Its methods are
// safe for concurrent use.
type Hub[T any] struct {
	cfg Config[T]

	ctx    context.Context // cancelled by Close; bounds Start and Load
	cancel context.CancelFunc
	wakeC  chan struct{} // capacity 1: a pending wake-up
	wg     sync.WaitGroup

	mu      sync.RWMutex
	ring    ring[T]
	tail    int64                   // every item with a sequence <= tail has been loaded
	changed chan struct{}           // closed and replaced whenever tail moves
	waiters map[*waiter[T]]struct{} // see OnChange
	started bool
	closed  bool
	perKey  map[string]int // readers held per key
}

// New returns a Hub of cfg. It loads nothing until the first Acquire or
// Start.
func New[T any](cfg Config[T]) *Hub[T] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub[T]{
		cfg:     cfg,
		ctx:     ctx,
		cancel:  cancel,
		wakeC:   make(chan struct{}, 1),
		ring:    newRing[T](cfg.Size),
		changed: make(chan struct{}),
		perKey:  make(map[string]int),
	}
}

// Context returns a context cancelled by Close: readers end with it.
func (h *Hub[T]) Context() context.Context { return h.ctx }

// Size returns how many items the ring holds at most.
func (h *Hub[T]) Size() int { return len(h.ring.items) }

// Wake tells the Hub that items may have been committed. It never blocks;
// wake-ups that come while one is pending are merged.
func (h *Hub[T]) Wake() {
	select {
	case h.wakeC <- struct{}{}:
	default:
	}
}

// Acquire registers a reader of key, starting the Hub if it is the first.
// It returns ErrLimit when key already holds Config.MaxPerKey readers,
// ErrClosed after Close, and the error of Config.Start if starting failed.
// Every successful Acquire must be followed by one Release.
func (h *Hub[T]) Acquire(ctx context.Context, key string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if h.perKey[key] >= h.cfg.MaxPerKey {
		return ErrLimit
	}
	if err := h.startLocked(ctx); err != nil {
		return err
	}
	h.perKey[key]++
	h.wg.Add(1)
	return nil
}

// Start starts the Hub if it has not started yet, for a reader that is
// not counted by Acquire. It returns ErrClosed after Close, and the error
// of Config.Start if starting failed.
func (h *Hub[T]) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	return h.startLocked(ctx)
}

// startLocked starts the Hub unless it has started. h.mu is held.
func (h *Hub[T]) startLocked(ctx context.Context) error {
	if h.started {
		return nil
	}
	// Loading starts at the newest committed item. Nothing reads the ring
	// before this returns, as the write lock is held.
	last, err := h.cfg.Start(ctx)
	if err != nil {
		return err
	}
	h.tail, h.ring.base = last, last
	h.started = true
	h.wg.Add(1)
	go h.run()
	return nil
}

// Release unregisters a reader registered by Acquire.
func (h *Hub[T]) Release(key string) {
	h.mu.Lock()
	if h.perKey[key]--; h.perKey[key] <= 0 {
		delete(h.perKey, key)
	}
	h.mu.Unlock()
	h.wg.Done()
}

// Close stops the Hub and cancels its Context, which tells every reader
// to end. Call Wait to know when they have.
func (h *Hub[T]) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.cancel()
	waiters := h.waiters
	h.waiters = nil
	h.mu.Unlock()
	for w := range waiters {
		w.f()
	}
}

// Wait blocks until the Hub's goroutine has ended and every reader has
// been released. It is only meaningful after Close.
func (h *Hub[T]) Wait() { h.wg.Wait() }

// run loads new items into the ring whenever woken, polled or retrying,
// until Close.
func (h *Hub[T]) run() {
	defer h.wg.Done()
	var pollC, retryC <-chan time.Time
	if h.cfg.Poll > 0 {
		pollC = h.cfg.After(h.cfg.Poll)
	}
	var last time.Time // when the last load began, by the wall clock
	for {
		last = time.Now()
		if err := h.catchUp(); err != nil {
			if h.ctx.Err() != nil {
				return
			}
			if h.cfg.Failed != nil {
				h.cfg.Failed(h.Position(), err)
			}
			if retryC == nil {
				retryC = h.cfg.After(h.cfg.Retry)
			}
		}
		select {
		case <-h.ctx.Done():
			return
		case <-h.wakeC:
			// Woken again within the window: items are coming fast. Wait
			// for the window to pass so that the next load takes the
			// commits of the whole window, and every reader handles them
			// at once.
			if wait := h.cfg.Window - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-h.ctx.Done():
					t.Stop()
					return
				}
			}
		case <-pollC:
			pollC = h.cfg.After(h.cfg.Poll)
		case <-retryC:
			retryC = nil
		}
	}
}

// catchUp loads every item after tail into the ring.
func (h *Hub[T]) catchUp() error {
	for {
		items, err := h.cfg.Load(h.ctx, h.Position(), h.cfg.Page)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return nil
		}
		h.mu.Lock()
		for i := range items {
			h.ring.push(h.cfg.Seq(&items[i]), items[i])
		}
		h.tail = h.ring.seqs[h.ring.last()]
		close(h.changed)
		h.changed = make(chan struct{})
		woken := h.due()
		h.mu.Unlock()
		for _, f := range woken {
			f()
		}
		if len(items) < h.cfg.Page {
			return nil
		}
	}
}

// waiter is a reader waiting, with no goroutine, for items it keeps.
type waiter[T any] struct {
	pos  int64         // every item up to pos that keep keeps was read
	keep func(*T) bool // called with h.mu held
	f    func()
}

// OnChange registers f to be called, once, when the Hub holds items after
// pos that keep keeps, or when it is closed. Items that keep does not keep
// move the waiter's position on instead, so that it never falls behind
// the ring for items it would not have read. It returns the function that
// unregisters f and returns that position: pos, or later. ok is false, and
// f is not registered, when such items are there already, the ring no
// longer holds every item after pos, or the Hub is closed. f is called
// on the Hub's loading goroutine, or Close's, after the Hub's lock is let
// go of: it must return at once. keep is called with the lock held, as
// Scan's is.
func (h *Hub[T]) OnChange(pos int64, keep func(*T) bool, f func()) (stop func() int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &waiter[T]{pos: pos, keep: keep, f: f}
	if h.closed || !h.skip(w) {
		return nil, false
	}
	if h.waiters == nil {
		h.waiters = make(map[*waiter[T]]struct{})
	}
	h.waiters[w] = struct{}{}
	return func() int64 {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.waiters, w)
		return w.pos
	}, true
}

// skip moves w's position to the tail when the ring holds every item
// after it and keep keeps none of them, and reports whether it did; h.mu
// is held.
func (h *Hub[T]) skip(w *waiter[T]) bool {
	r := &h.ring
	if w.pos < r.base {
		return false
	}
	for i := r.search(w.pos); i < r.n; i++ {
		if w.keep(&r.items[r.index(i)]) {
			return false
		}
	}
	w.pos = max(w.pos, h.tail)
	return true
}

// due takes out of the waiters those that new items wake, and returns
// their functions; h.mu is held.
func (h *Hub[T]) due() []func() {
	var woken []func()
	for w := range h.waiters {
		if !h.skip(w) {
			delete(h.waiters, w)
			woken = append(woken, w.f)
		}
	}
	return woken
}

// Waiting returns how many functions OnChange registered wait to be called.
func (h *Hub[T]) Waiting() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.waiters)
}

// Base returns the sequence after which the ring holds every item loaded.
func (h *Hub[T]) Base() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.ring.base
}

// Position returns the sequence the Hub has loaded through.
func (h *Hub[T]) Position() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.tail
}

// Scan appends to dst what take makes of the items in h's ring after pos
// that keep keeps, at most limit of them. It returns them with the
// sequence read through (pass it as pos next time) and a channel that is
// closed when more items arrive. ok is false, and nothing is appended,
// when the ring no longer holds every item after pos: the reader is behind
// the ring. keep and take are called with the Hub's read lock held; they
// must not call h.
func Scan[T, U any](h *Hub[T], pos int64, dst []U, limit int, keep func(*T) bool, take func(*T) U) (out []U, next int64, changed <-chan struct{}, ok bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	r := &h.ring
	if pos < r.base {
		return dst, pos, nil, false
	}
	next = pos
	for i := r.search(pos); i < r.n; i++ {
		j := r.index(i)
		e := &r.items[j]
		if keep(e) {
			if len(dst) == limit {
				return dst, next, h.changed, true
			}
			dst = append(dst, take(e))
		}
		next = r.seqs[j]
	}
	return dst, max(next, h.tail), h.changed, true
}
