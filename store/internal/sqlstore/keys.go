package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const keyColumns = "id, name, hash, scopes, actor_id, actor_role, created_at, revoked_at"

func scanKey(row Row) (lifecycle.APIKey, error) {
	var (
		k       lifecycle.APIKey
		scopes  []byte
		role    string
		created int64
		revoked sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &scopes, &k.Actor.ID, &role, &created, &revoked); err != nil {
		return k, err
	}
	if err := json.Unmarshal(scopes, &k.Scopes); err != nil {
		return k, fmt.Errorf("key %s scopes: %w", k.ID, err)
	}
	k.Actor.Role = lifecycle.Role(role)
	k.CreatedAt = FromMillis(created)
	if revoked.Valid {
		at := FromMillis(revoked.Int64)
		k.RevokedAt = &at
	}
	return k, nil
}

// APIKeyByHash implements lifecycle.Store.
func (s *Reads) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	if err := s.Open(); err != nil {
		return lifecycle.APIKey{}, err
	}
	k, err := scanKey(s.X.QueryRow(ctx, "SELECT "+keyColumns+" FROM api_keys WHERE hash = $1", hash))
	if err != nil {
		return k, s.F.errorf("API key by hash: %w", err)
	}
	return k, nil
}

// ListAPIKeys implements lifecycle.Store.
func (s *Reads) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	keys, err := QueryAll(ctx, s.X, scanKey, "SELECT "+keyColumns+" FROM api_keys ORDER BY pos")
	if err != nil {
		return nil, s.F.errorf("list API keys: %w", err)
	}
	return keys, nil
}

// CreateAPIKey implements lifecycle.Tx.
func (x *Tx) CreateAPIKey(ctx context.Context, k lifecycle.APIKey) error {
	scopes, err := json.Marshal(NonNil(k.Scopes))
	if err != nil {
		return x.F.errorf("encode key %s: %w", k.ID, err)
	}
	n, err := x.X.Exec(ctx, "INSERT INTO api_keys ("+keyColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
		k.ID, k.Name, k.Hash, string(scopes), k.Actor.ID, string(k.Actor.Role), Millis(k.CreatedAt.Time), OptionalMillis(k.RevokedAt))
	if err != nil {
		return x.F.errorf("create key %s: %w", k.ID, err)
	}
	if n == 0 {
		return x.F.errorf("create key %s: a key with this ID or hash exists: %w", k.ID, lifecycle.ErrConflict)
	}
	return nil
}

// RevokeAPIKey implements lifecycle.Tx.
func (x *Tx) RevokeAPIKey(ctx context.Context, id string, at time.Time) (lifecycle.APIKey, error) {
	k, err := scanKey(x.X.QueryRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1
		RETURNING `+keyColumns, id, Millis(at)))
	if err != nil {
		return k, x.F.errorf("revoke key %s: %w", id, err)
	}
	return k, nil
}
