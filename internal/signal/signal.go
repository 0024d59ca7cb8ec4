// Package signal provides Signal: a channel closed once, which also calls
// the functions registered on it, so that a waiter can be woken without a
// goroutine of its own blocked on the channel.
package signal

import "sync"

// Signal is closed once. Its zero value is not usable: call New.
type Signal struct {
	ch chan struct{}

	mu     sync.Mutex
	closed bool
	next   uint64
	fns    map[uint64]func()
}

// New returns an open Signal.
func New() *Signal { return &Signal{ch: make(chan struct{})} }

// C returns the channel closed by Close.
func (s *Signal) C() <-chan struct{} { return s.ch }

// Close closes the channel and calls every function registered, once
// each, on the calling goroutine after the channel is closed. Calls after
// the first do nothing.
func (s *Signal) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.ch)
	fns := s.fns
	s.fns = nil
	s.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// Notify registers f, to be called by Close, and returns the function
// that unregisters it. ok is false, and f is not registered, when the
// Signal is closed already: f is then never called.
func (s *Signal) Notify(f func()) (stop func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	if s.fns == nil {
		s.fns = make(map[uint64]func())
	}
	id := s.next
	s.next++
	s.fns[id] = f
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}, true
}
