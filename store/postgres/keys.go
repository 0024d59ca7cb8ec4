package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const keyColumns = "id, name, hash, scopes, actor_id, actor_role, created_at, revoked_at"

func scanKey(row scanner) (lifecycle.APIKey, error) {
	var (
		k       lifecycle.APIKey
		scopes  string
		role    string
		created int64
		revoked *int64
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &scopes, &k.Actor.ID, &role, &created, &revoked); err != nil {
		return k, err
	}
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return k, fmt.Errorf("key %s scopes: %w", k.ID, err)
	}
	k.Actor.Role = lifecycle.Role(role)
	k.CreatedAt = fromMillis(created)
	k.RevokedAt = optionalTimestamp(revoked)
	return k, nil
}

// APIKeyByHash implements lifecycle.Store.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	if s.closed.Load() {
		return lifecycle.APIKey{}, errClosed
	}
	k, err := scanKey(s.pool.QueryRow(ctx, "SELECT "+keyColumns+" FROM api_keys WHERE hash = $1", hash))
	if err != nil {
		return k, fmt.Errorf("postgres: API key by hash: %w", s.translate(err))
	}
	return k, nil
}

// ListAPIKeys implements lifecycle.Store.
func (s *Store) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	keys, err := queryAll(ctx, s.pool, scanKey, "SELECT "+keyColumns+" FROM api_keys ORDER BY pos")
	if err != nil {
		return nil, fmt.Errorf("postgres: list API keys: %w", s.translate(err))
	}
	return keys, nil
}

// CreateAPIKey implements lifecycle.Tx.
func (x *txn) CreateAPIKey(ctx context.Context, k lifecycle.APIKey) error {
	scopes, err := json.Marshal(nonNil(k.Scopes))
	if err != nil {
		return fmt.Errorf("postgres: encode key %s: %w", k.ID, err)
	}
	n, err := x.exec(ctx, "INSERT INTO api_keys ("+keyColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
		k.ID, k.Name, k.Hash, string(scopes), k.Actor.ID, string(k.Actor.Role), millis(k.CreatedAt.Time), optionalMillis(k.RevokedAt))
	if err != nil {
		return fmt.Errorf("postgres: create key %s: %w", k.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create key %s: a key with this ID or hash exists: %w", k.ID, lifecycle.ErrConflict)
	}
	return nil
}

// RevokeAPIKey implements lifecycle.Tx.
func (x *txn) RevokeAPIKey(ctx context.Context, id string, at time.Time) (lifecycle.APIKey, error) {
	k, err := scanKey(x.tx.QueryRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1
		RETURNING `+keyColumns, id, millis(at)))
	if err != nil {
		return k, fmt.Errorf("postgres: revoke key %s: %w", id, x.fail(err))
	}
	return k, nil
}
