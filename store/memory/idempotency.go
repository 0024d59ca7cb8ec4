package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// IdempotencyRecord implements lifecycle.Tx.
func (x *txn) IdempotencyRecord(ctx context.Context, scope lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
	r, ok := x.idempotency.get(scope)
	if !ok {
		return lifecycle.IdempotencyRecord{IdempotencyScope: scope}, fmt.Errorf("memory: idempotency record: %w", lifecycle.ErrNotFound)
	}
	return clone(r), nil
}

// CreateIdempotencyRecord implements lifecycle.Tx. Transactions run one
// at a time, so a record committed by another is always seen.
func (x *txn) CreateIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	if _, ok := x.idempotency.get(r.IdempotencyScope); ok {
		return fmt.Errorf("memory: create idempotency record: %w", lifecycle.ErrConflict)
	}
	x.idempotency.set(r.IdempotencyScope, clone(r))
	return nil
}

// UpdateIdempotencyRecord implements lifecycle.Tx.
func (x *txn) UpdateIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	if _, ok := x.idempotency.get(r.IdempotencyScope); !ok {
		return fmt.Errorf("memory: update idempotency record: %w", lifecycle.ErrNotFound)
	}
	x.idempotency.set(r.IdempotencyScope, clone(r))
	return nil
}

// DeleteIdempotencyRecord implements lifecycle.Tx.
func (x *txn) DeleteIdempotencyRecord(ctx context.Context, scope lifecycle.IdempotencyScope) error {
	x.idempotency.remove(scope)
	return nil
}

// DeleteIdempotencyRecordsBefore implements lifecycle.Store.
func (s *Store) DeleteIdempotencyRecordsBefore(ctx context.Context, before time.Time) (int64, error) {
	return s.prune(ctx, func(t *tables) int64 {
		return t.idempotency.deleteWhere(func(r lifecycle.IdempotencyRecord) bool { return r.ExpiresAt.Before(before) })
	})
}

// InstanceLease implements lifecycle.Tx.
func (x *txn) InstanceLease(ctx context.Context, id string) (lifecycle.InstanceLease, error) {
	l, ok := x.leases.get(id)
	if !ok {
		return lifecycle.InstanceLease{ID: id}, fmt.Errorf("memory: instance lease %s: %w", id, lifecycle.ErrNotFound)
	}
	return l, nil
}

// PutInstanceLease implements lifecycle.Tx.
func (x *txn) PutInstanceLease(ctx context.Context, l lifecycle.InstanceLease) error {
	x.leases.set(l.ID, l)
	return nil
}
