package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// ConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) ConsoleSession(ctx context.Context, hash []byte) (lifecycle.ConsoleSession, error) {
	var cs lifecycle.ConsoleSession
	err := s.read(func(t *tables) error {
		stored, ok := t.sessions[string(hash)]
		if !ok {
			return fmt.Errorf("memory: console session: %w", lifecycle.ErrNotFound)
		}
		cs = clone(stored)
		return nil
	})
	return cs, err
}

// CreateConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	cs = clone(cs)
	cs.Hash, cs.KeyHash = nonNil(cs.Hash), nonNil(cs.KeyHash)
	return s.write(ctx, func(t *tables) error {
		if _, ok := t.sessions[string(cs.Hash)]; ok {
			return fmt.Errorf("memory: create console session of key %s: %w", cs.KeyID, lifecycle.ErrConflict)
		}
		t.sessions[string(cs.Hash)] = cs
		return nil
	})
}

// DeleteConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) DeleteConsoleSession(ctx context.Context, hash []byte) error {
	return s.write(ctx, func(t *tables) error {
		if _, ok := t.sessions[string(hash)]; !ok {
			return fmt.Errorf("memory: delete console session: %w", lifecycle.ErrNotFound)
		}
		delete(t.sessions, string(hash))
		return nil
	})
}

// DeleteConsoleSessionsBefore implements
// lifecycle.ConsoleSessionStore: the sessions that expired before
// before.
func (s *Store) DeleteConsoleSessionsBefore(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(t *tables) error {
		n = t.sessions.deleteWhere(func(cs lifecycle.ConsoleSession) bool { return cs.ExpiresAt.Before(before) })
		return nil
	})
	return n, err
}
