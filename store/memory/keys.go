package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// storedKey returns the copy of k the Store keeps, with an empty list for
// nil scopes.
func storedKey(k lifecycle.APIKey) lifecycle.APIKey {
	k = clone(k)
	k.Scopes = nonNil(k.Scopes)
	return k
}

// APIKeyByHash implements lifecycle.Store.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	var k lifecycle.APIKey
	err := s.read(func(t *tables) error {
		id, ok := t.keyHashes[string(hash)]
		if !ok {
			return fmt.Errorf("memory: API key by hash: %w", lifecycle.ErrNotFound)
		}
		stored, _ := t.keys.get(id)
		k = clone(stored)
		return nil
	})
	return k, err
}

// ListAPIKeys implements lifecycle.Store.
func (s *Store) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	var keys []lifecycle.APIKey
	err := s.read(func(t *tables) error {
		for _, k := range t.keys.all() {
			keys = append(keys, clone(k))
		}
		return nil
	})
	return keys, err
}

// CreateAPIKey implements lifecycle.Tx.
func (x *txn) CreateAPIKey(ctx context.Context, k lifecycle.APIKey) error {
	if _, ok := x.keyHashes.get(string(k.Hash)); ok {
		return fmt.Errorf("memory: create key %s: its hash: %w", k.ID, lifecycle.ErrConflict)
	}
	if _, ok := x.keys.insert(k.ID, storedKey(k)); !ok {
		return fmt.Errorf("memory: create key %s: %w", k.ID, lifecycle.ErrConflict)
	}
	x.keyHashes.set(string(k.Hash), k.ID)
	return nil
}

// RevokeAPIKey implements lifecycle.Tx.
func (x *txn) RevokeAPIKey(ctx context.Context, id string, at time.Time) (lifecycle.APIKey, error) {
	k, ok := x.keys.get(id)
	if !ok {
		return lifecycle.APIKey{}, fmt.Errorf("memory: revoke key %s: %w", id, lifecycle.ErrNotFound)
	}
	if k.RevokedAt == nil {
		revoked := lifecycle.NewTimestamp(at)
		k.RevokedAt = &revoked
		x.keys.replace(id, k)
	}
	return clone(k), nil
}
