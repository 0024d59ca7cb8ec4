package memory

import (
	"context"
	"sync"

	"github.com/tasklifecycle/lifecycle"
)

// listener is one call of Listen: the changes committed since it last
// called its function, and a signal that there are some.
type listener struct {
	mu      sync.Mutex
	pending lifecycle.Change
	kick    chan struct{} // buffered, one
}

// announce tells every listener of the changes c, which a transaction has
// just committed. It never blocks.
func (s *Store) announce(c lifecycle.Change) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	for l := range s.listeners {
		l.mu.Lock()
		l.pending |= c
		l.mu.Unlock()
		select {
		case l.kick <- struct{}{}:
		default: // a signal is waiting already
		}
	}
}

// Listen implements lifecycle.Notifier. After a transaction that appended
// events, queued ship operations, or created, deleted or changed the
// status or revision of subscriptions commits, notify is called with
// those kinds of change, from Listen's goroutine; changes committed while
// it runs come together in the next call. Listen returns ctx's error when
// ctx is done, and an error matching lifecycle.ErrClosed when the Store
// is closed.
func (s *Store) Listen(ctx context.Context, notify func(lifecycle.Change)) error {
	l := &listener{kick: make(chan struct{}, 1)}
	s.lmu.Lock()
	select {
	case <-s.done:
		s.lmu.Unlock()
		return errClosed
	default:
	}
	s.listeners[l] = struct{}{}
	s.lmu.Unlock()
	defer func() {
		s.lmu.Lock()
		delete(s.listeners, l)
		s.lmu.Unlock()
	}()
	// What was committed before Listen began was not told.
	notify(lifecycle.ChangeAll)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errClosed
		case <-l.kick:
		}
		l.mu.Lock()
		c := l.pending
		l.pending = 0
		l.mu.Unlock()
		if c != 0 {
			notify(c)
		}
	}
}
