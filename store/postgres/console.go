package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

var _ lifecycle.ConsoleSessionStore = (*Store)(nil)

// ConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) ConsoleSession(ctx context.Context, hash []byte) (lifecycle.ConsoleSession, error) {
	if s.closed.Load() {
		return lifecycle.ConsoleSession{}, errClosed
	}
	var (
		cs               lifecycle.ConsoleSession
		created, expires int64
	)
	err := s.pool.QueryRow(ctx, "SELECT hash, key_id, key_hash, created_at, expires_at FROM console_sessions WHERE hash = $1", hash).
		Scan(&cs.Hash, &cs.KeyID, &cs.KeyHash, &created, &expires)
	if err != nil {
		return lifecycle.ConsoleSession{}, fmt.Errorf("postgres: console session: %w", s.translate(err))
	}
	cs.CreatedAt, cs.ExpiresAt = fromMillis(created), fromMillis(expires)
	return cs, nil
}

// CreateConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error { return tx.(*txn).createConsoleSession(ctx, cs) })
}

// createConsoleSession inserts cs in the transaction x.
func (x *txn) createConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	n, err := x.exec(ctx, `INSERT INTO console_sessions (hash, key_id, key_hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		nonNil(cs.Hash), cs.KeyID, nonNil(cs.KeyHash), millis(cs.CreatedAt.Time), millis(cs.ExpiresAt.Time))
	if err != nil {
		return fmt.Errorf("postgres: create console session of key %s: %w", cs.KeyID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create console session of key %s: one with this hash exists: %w", cs.KeyID, lifecycle.ErrConflict)
	}
	return nil
}

// DeleteConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) DeleteConsoleSession(ctx context.Context, hash []byte) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error { return tx.(*txn).deleteConsoleSession(ctx, hash) })
}

// deleteConsoleSession deletes a session in the transaction x.
func (x *txn) deleteConsoleSession(ctx context.Context, hash []byte) error {
	n, err := x.exec(ctx, "DELETE FROM console_sessions WHERE hash = $1", hash)
	if err != nil {
		return fmt.Errorf("postgres: delete console session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: delete console session: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// DeleteConsoleSessionsBefore implements lifecycle.ConsoleSessionStore.
func (s *Store) DeleteConsoleSessionsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM console_sessions WHERE hash IN (SELECT hash FROM console_sessions
		WHERE expires_at < $1 LIMIT $2)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete expired console sessions: %w", err)
	}
	return n, nil
}
