package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// ConsoleSession implements lifecycle.Store.
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

// CreateConsoleSession implements lifecycle.Tx.
func (x *txn) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	if _, ok := x.sessions.get(string(cs.Hash)); ok {
		return fmt.Errorf("memory: create console session of key %s: %w", cs.KeyID, lifecycle.ErrConflict)
	}
	cs = clone(cs)
	cs.Hash, cs.KeyHash = nonNil(cs.Hash), nonNil(cs.KeyHash)
	x.sessions.set(string(cs.Hash), cs)
	return nil
}

// DeleteConsoleSession implements lifecycle.Tx.
func (x *txn) DeleteConsoleSession(ctx context.Context, hash []byte) error {
	if _, ok := x.sessions.get(string(hash)); !ok {
		return fmt.Errorf("memory: delete console session: %w", lifecycle.ErrNotFound)
	}
	x.sessions.remove(string(hash))
	return nil
}

// DeleteConsoleSessionsBefore implements lifecycle.Store.
func (s *Store) DeleteConsoleSessionsBefore(ctx context.Context, before time.Time) (int64, error) {
	return s.prune(ctx, func(t *tables) int64 {
		return t.sessions.deleteWhere(func(cs lifecycle.ConsoleSession) bool { return cs.ExpiresAt.Before(before) })
	})
}
