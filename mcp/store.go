package mcp

import (
	"context"
	"iter"
	"sync"
)

// notificationStore is the SDK's EventStore for the notifications of each
// session (its standalone stream, which a GET opens): it keeps the last
// few of each session, so that a notification sent while the session's
// GET is not connected yet, or is reconnecting, reaches it when it
// connects. Answers to calls are not kept: they go on the POST that asked,
// and a client retries a call it lost (its key makes that safe).
type notificationStore struct {
	keep int
	mu   sync.RWMutex                  // over kept; each session's under its own lock
	kept map[string]*keptNotifications // by session ID
}

// keptNotifications are the last notifications of one session. Sessions
// are notified side by side: each has its own lock.
type keptNotifications struct {
	mu    sync.Mutex
	first int // the stream index of data[0]
	data  [][]byte
}

// session returns the kept notifications of a session, made if need be.
func (s *notificationStore) session(sessionID string) *keptNotifications {
	s.mu.RLock()
	k := s.kept[sessionID]
	s.mu.RUnlock()
	if k != nil {
		return k
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k = s.kept[sessionID]; k == nil {
		k = &keptNotifications{}
		s.kept[sessionID] = k
	}
	return k
}

func newNotificationStore(keep int) *notificationStore {
	return &notificationStore{keep: keep, kept: map[string]*keptNotifications{}}
}

// Open implements mcp.EventStore.
func (s *notificationStore) Open(_ context.Context, sessionID, streamID string) error {
	if streamID != "" {
		return nil
	}
	s.session(sessionID)
	return nil
}

// Append implements mcp.EventStore, keeping the session's last
// notifications.
func (s *notificationStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	if streamID != "" {
		return nil
	}
	k := s.session(sessionID)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.data = append(k.data, data)
	if len(k.data) > s.keep {
		drop := len(k.data) - s.keep
		clear(k.data[:drop])
		k.data = k.data[drop:]
		k.first += drop
	}
	return nil
}

// After implements mcp.EventStore: the kept notifications after index,
// from the oldest kept when older ones are gone (a client catching up
// misses those rather than none reaching it).
func (s *notificationStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	var out [][]byte
	if streamID == "" {
		s.mu.RLock()
		k := s.kept[sessionID]
		s.mu.RUnlock()
		if k != nil {
			k.mu.Lock()
			start := max(index+1-k.first, 0)
			if start < len(k.data) {
				out = append(out, k.data[start:]...)
			}
			k.mu.Unlock()
		}
	}
	return func(yield func([]byte, error) bool) {
		for _, d := range out {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore.
func (s *notificationStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kept, sessionID)
	return nil
}
