package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const keyColumns = "id, name, hash, scopes, actor_id, actor_role, created_at, revoked_at"

func scanKey(row scanner) (lifecycle.APIKey, error) {
	var (
		k       lifecycle.APIKey
		scopes  []byte
		role    string
		created int64
		revoked sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &scopes, &k.Actor.ID, &role, &created, &revoked); err != nil {
		return k, translate(err)
	}
	if err := json.Unmarshal(scopes, &k.Scopes); err != nil {
		return k, fmt.Errorf("sqlite: key %s scopes: %w", k.ID, err)
	}
	k.Actor.Role = lifecycle.Role(role)
	k.CreatedAt = fromMillis(created)
	if revoked.Valid {
		at := fromMillis(revoked.Int64)
		k.RevokedAt = &at
	}
	return k, nil
}

// APIKeyByHash implements lifecycle.Store.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	if s.closed.Load() {
		return lifecycle.APIKey{}, errClosed
	}
	k, err := scanKey(s.r.QueryRowContext(ctx, "SELECT "+keyColumns+" FROM api_keys WHERE hash = ?", hash))
	if err != nil {
		return k, fmt.Errorf("sqlite: API key by hash: %w", err)
	}
	return k, nil
}

// ListAPIKeys implements lifecycle.Store.
func (s *Store) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	keys, err := queryAll(ctx, s.r, scanKey, "SELECT "+keyColumns+" FROM api_keys ORDER BY pos")
	if err != nil {
		return nil, fmt.Errorf("sqlite: list API keys: %w", err)
	}
	return keys, nil
}

// CreateAPIKey implements lifecycle.Tx.
func (x *txn) CreateAPIKey(ctx context.Context, k lifecycle.APIKey) error {
	scopes, err := json.Marshal(nonNil(k.Scopes))
	if err != nil {
		return fmt.Errorf("sqlite: encode key %s: %w", k.ID, err)
	}
	var revoked any
	if k.RevokedAt != nil {
		revoked = millis(k.RevokedAt.Time)
	}
	_, err = x.conn.ExecContext(x.ctx, "INSERT INTO api_keys ("+keyColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		k.ID, k.Name, k.Hash, string(scopes), k.Actor.ID, string(k.Actor.Role), millis(k.CreatedAt.Time), revoked)
	if err != nil {
		return fmt.Errorf("sqlite: create key %s: %w", k.ID, translate(err))
	}
	return nil
}

// RevokeAPIKey implements lifecycle.Tx.
func (x *txn) RevokeAPIKey(ctx context.Context, id string, at time.Time) (lifecycle.APIKey, error) {
	if _, err := x.conn.ExecContext(x.ctx, "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", millis(at), id); err != nil {
		return lifecycle.APIKey{}, fmt.Errorf("sqlite: revoke key %s: %w", id, translate(err))
	}
	k, err := scanKey(x.conn.QueryRowContext(x.ctx, "SELECT "+keyColumns+" FROM api_keys WHERE id = ?", id))
	if err != nil {
		return k, fmt.Errorf("sqlite: revoke key %s: %w", id, err)
	}
	return k, nil
}
