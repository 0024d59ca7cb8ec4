// Package leasepool keeps one worker goroutine per item that a process
// holds a lease on. Items are leased from a shared store by a claim made
// every poll interval, or at once when woken; a worker starts for each
// item newly held and stops when its item is no longer held, when it was
// deleted, or when the leases could not be renewed before they end. On
// shutdown the pool stops every worker and gives the leases up. What is
// claimed, what a worker does and how leases are given up is the caller's.
package leasepool

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// Config says how a Pool claims its items and runs their workers.
type Config[T, W any] struct {
	// Clock times the claims and the leases.
	Clock Clock
	// Poll is how long the pool waits between claims unless woken.
	Poll time.Duration
	// Lease is how long the leases of a claim last from its start.
	Lease time.Duration
	// Claim renews the leases this process holds and takes up others, at
	// now, and returns the items held. An error leaves the workers running
	// unless the leases end within Poll; Claim logs it.
	Claim func(ctx context.Context, now time.Time) ([]T, error)
	// Key names an item.
	Key func(*T) string
	// Start makes the worker of an item newly held; its ctx ends when the
	// worker is stopped. It reports false when no worker can run for the
	// item: the next claim tries again.
	Start func(ctx context.Context, item *T) (W, bool)
	// Run runs a worker until its ctx ends or it stops on its own.
	Run func(W)
	// Held tells a running worker that a claim read its item again, as
	// item.
	Held func(w W, item *T)
	// Release gives up the leases of keys when the pool shuts down.
	Release func(keys []string)
}

// Pool keeps a worker running for each item it holds a lease on. It does
// nothing until Run.
type Pool[T, W any] struct {
	cfg   Config[T, W]
	wakeC chan struct{} // capacity 1: claim again now

	mu         sync.Mutex
	ctx        context.Context // nil until Run
	workers    map[string]*worker[W]
	held       []string       // the keys leased at the last claim
	leaseUntil time.Time      // when the leases of the last claim end
	claims     uint64         // the claims begun
	running    sync.WaitGroup // every worker goroutine
	// deleted holds the keys stopped by Stop, with the number of the claim
	// begun last when they were, until every claim that may have read
	// them before is over.
	deleted map[string]uint64
}

// worker is a running worker and how to stop it.
type worker[W any] struct {
	w      W
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Pool; it does nothing until Run.
func New[T, W any](cfg Config[T, W]) *Pool[T, W] {
	return &Pool[T, W]{
		cfg:     cfg,
		wakeC:   make(chan struct{}, 1),
		workers: make(map[string]*worker[W]),
		deleted: make(map[string]uint64),
	}
}

// Wake makes the pool claim again soon.
func (p *Pool[T, W]) Wake() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

// Run claims every Poll, or when woken, and keeps a worker running for
// each item held, until ctx is done. It then stops the workers, waits for
// them and gives the leases up.
func (p *Pool[T, W]) Run(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	for {
		p.claim(ctx)
		select {
		case <-ctx.Done():
			p.shutdown()
			return
		case <-p.wakeC:
		case <-p.cfg.Clock.After(p.cfg.Poll):
		}
	}
}

// claim claims, then starts a worker for every item newly held and stops
// those of items no longer held.
func (p *Pool[T, W]) claim(ctx context.Context) {
	p.mu.Lock()
	p.claims++
	n := p.claims
	p.mu.Unlock()
	defer p.forgetDeleted(n)
	now := p.cfg.Clock.Now()
	held, err := p.cfg.Claim(ctx, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if !now.Before(p.leaseUntil.Add(-p.cfg.Poll)) {
			// The leases could not be renewed and are about to end:
			// another process may take the items over, so stop working.
			// A stopped worker stays in workers until it has ended, so
			// that no claim starts a second one beside it.
			for _, w := range p.workers {
				w.cancel()
			}
		}
		return
	}
	keep := make(map[string]bool, len(held))
	p.leaseUntil = now.Add(p.cfg.Lease)
	p.held = p.held[:0]
	for i := range held {
		item := &held[i]
		key := p.cfg.Key(item)
		keep[key] = true
		p.held = append(p.held, key)
		if _, gone := p.deleted[key]; gone {
			continue
		}
		if w := p.workers[key]; w != nil {
			p.cfg.Held(w.w, item)
			continue
		}
		wctx, cancel := context.WithCancel(p.ctx)
		ww, ok := p.cfg.Start(wctx, item)
		if !ok {
			cancel()
			continue
		}
		w := &worker[W]{w: ww, cancel: cancel, done: make(chan struct{})}
		p.workers[key] = w
		p.running.Add(1)
		go func() {
			defer p.running.Done()
			defer close(w.done)
			defer p.ended(key, w)
			defer cancel()
			p.cfg.Run(ww)
		}()
	}
	for key, w := range p.workers {
		if !keep[key] {
			w.cancel() // forgotten by ended once it has ended
		}
	}
}

// Stop stops the worker of key, if there is one, and waits until it has
// stopped or ctx is done. A claim under way when Stop is called does not
// start it again: call Stop once the item is deleted.
func (p *Pool[T, W]) Stop(ctx context.Context, key string) {
	p.mu.Lock()
	w := p.workers[key]
	delete(p.workers, key)
	if p.ctx != nil && p.ctx.Err() == nil {
		// Before Run and after it, no claim is under way.
		p.deleted[key] = p.claims
	}
	p.mu.Unlock()
	if w == nil {
		return
	}
	w.cancel()
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// Counts returns how many workers run and how many stopped keys the pool
// remembers.
func (p *Pool[T, W]) Counts() (workers, deleted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers), len(p.deleted)
}

// Workers appends the workers running now to dst and returns it: those of
// the items held, and any stopped but not yet ended.
func (p *Pool[T, W]) Workers(dst []W) []W {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		dst = append(dst, w.w)
	}
	return dst
}

// forgetDeleted forgets the keys stopped before claim n began, as it
// ends: claims run one at a time, and n and those after it read the store
// after the deletions, so none of them can return those items.
func (p *Pool[T, W]) forgetDeleted(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, at := range p.deleted {
		if at < n {
			delete(p.deleted, key)
		}
	}
}

// ended forgets w once it has ended, stopped on its own or cancelled,
// unless another took its place, and has the pool claim again: a claim
// made while w was ending started no worker beside it.
func (p *Pool[T, W]) ended(key string, w *worker[W]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers[key] == w {
		delete(p.workers, key)
	}
	p.Wake()
}

// shutdown stops every worker, waits for them and gives their leases up
// so that another process may take them at once.
func (p *Pool[T, W]) shutdown() {
	p.mu.Lock()
	workers, held := p.workers, p.held
	p.workers, p.held = map[string]*worker[W]{}, nil
	p.mu.Unlock()
	for _, w := range workers {
		w.cancel()
	}
	p.running.Wait()
	p.cfg.Release(held)
}
