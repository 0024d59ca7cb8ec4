package sqlstore

import (
	"context"

	"github.com/tasklifecycle/lifecycle"
)

// ConsoleSession implements lifecycle.ConsoleSessionStore.
func (s *Reads) ConsoleSession(ctx context.Context, hash []byte) (lifecycle.ConsoleSession, error) {
	if err := s.Open(); err != nil {
		return lifecycle.ConsoleSession{}, err
	}
	var (
		cs               lifecycle.ConsoleSession
		created, expires int64
	)
	err := s.X.QueryRow(ctx, "SELECT hash, key_id, key_hash, created_at, expires_at FROM console_sessions WHERE hash = $1", hash).
		Scan(&cs.Hash, &cs.KeyID, &cs.KeyHash, &created, &expires)
	if err != nil {
		return lifecycle.ConsoleSession{}, s.F.errorf("console session: %w", err)
	}
	cs.CreatedAt, cs.ExpiresAt = FromMillis(created), FromMillis(expires)
	return cs, nil
}

// InsertConsoleSession inserts cs in the transaction, for
// lifecycle.ConsoleSessionStore.
func (x *Tx) InsertConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	n, err := x.X.Exec(ctx, `INSERT INTO console_sessions (hash, key_id, key_hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		NonNil(cs.Hash), cs.KeyID, NonNil(cs.KeyHash), Millis(cs.CreatedAt.Time), Millis(cs.ExpiresAt.Time))
	if err != nil {
		return x.F.errorf("create console session of key %s: %w", cs.KeyID, err)
	}
	if n == 0 {
		return x.F.errorf("create console session of key %s: one with this hash exists: %w", cs.KeyID, lifecycle.ErrConflict)
	}
	return nil
}

// RemoveConsoleSession deletes a session in the transaction, for
// lifecycle.ConsoleSessionStore.
func (x *Tx) RemoveConsoleSession(ctx context.Context, hash []byte) error {
	n, err := x.X.Exec(ctx, "DELETE FROM console_sessions WHERE hash = $1", hash)
	if err != nil {
		return x.F.errorf("delete console session: %w", err)
	}
	if n == 0 {
		return x.F.errorf("delete console session: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// ReplaceSubscriptionSecret replaces the sealed secret of a subscription
// in the transaction, for lifecycle.SecretResealer.
func (x *Tx) ReplaceSubscriptionSecret(ctx context.Context, id string, sealed []byte) error {
	n, err := x.X.Exec(ctx, "UPDATE webhook_subscriptions SET secret = $1 WHERE id = $2", NonNil(sealed), id)
	if err != nil {
		return x.F.errorf("update the secret of subscription %s: %w", id, err)
	}
	if n == 0 {
		return x.F.errorf("update the secret of subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	return nil
}
