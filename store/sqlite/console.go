package sqlite

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
	err := s.r.QueryRowContext(ctx, "SELECT hash, key_id, key_hash, created_at, expires_at FROM console_sessions WHERE hash = ?", hash).
		Scan(&cs.Hash, &cs.KeyID, &cs.KeyHash, &created, &expires)
	if err != nil {
		return lifecycle.ConsoleSession{}, fmt.Errorf("sqlite: console session: %w", translate(err))
	}
	cs.CreatedAt, cs.ExpiresAt = fromMillis(created), fromMillis(expires)
	return cs, nil
}

// CreateConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	return s.write(ctx, false, func(x *txn) error { return x.createConsoleSession(ctx, cs) })
}

// createConsoleSession inserts cs in the transaction x.
func (x *txn) createConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	_, err := x.conn.ExecContext(x.ctx, `INSERT INTO console_sessions (hash, key_id, key_hash, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`, nonNil(cs.Hash), cs.KeyID, nonNil(cs.KeyHash), millis(cs.CreatedAt.Time), millis(cs.ExpiresAt.Time))
	if err != nil {
		return fmt.Errorf("sqlite: create console session of key %s: %w", cs.KeyID, translate(err))
	}
	return nil
}

// DeleteConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Store) DeleteConsoleSession(ctx context.Context, hash []byte) error {
	return s.write(ctx, false, func(x *txn) error { return x.deleteConsoleSession(ctx, hash) })
}

// deleteConsoleSession deletes a session in the transaction x.
func (x *txn) deleteConsoleSession(ctx context.Context, hash []byte) error {
	res, err := x.conn.ExecContext(x.ctx, "DELETE FROM console_sessions WHERE hash = ?", hash)
	if err != nil {
		return fmt.Errorf("sqlite: delete console session: %w", translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: delete console session: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// DeleteConsoleSessionsBefore implements lifecycle.ConsoleSessionStore. It deletes in
// batches so that writers are not held up by a large prune.
func (s *Store) DeleteConsoleSessionsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM console_sessions WHERE hash IN (SELECT hash FROM console_sessions
		WHERE expires_at < ? LIMIT ?)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("sqlite: delete expired console sessions: %w", err)
	}
	return n, nil
}
