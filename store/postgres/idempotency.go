package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const idemKeyWhere = "principal_id = $1 AND method = $2 AND route = $3 AND resource_id = $4 AND key = $5"

func idemKeyArgs(k lifecycle.IdempotencyScope) []any {
	return []any{k.PrincipalID, k.Method, k.Route, k.ResourceID, k.Key}
}

// IdempotencyRecord implements lifecycle.Tx. It reads the record for
// update.
func (x *txn) IdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
	r := lifecycle.IdempotencyRecord{IdempotencyScope: k}
	var created, expires, locked int64
	var status int32
	err := x.tx.QueryRow(ctx, `SELECT fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner
		FROM idempotency_records WHERE `+idemKeyWhere+" FOR UPDATE", idemKeyArgs(k)...).
		Scan(&r.Fingerprint, &r.Done, &status, &r.Body, &created, &expires, &locked, &r.Owner)
	if err != nil {
		return r, fmt.Errorf("postgres: idempotency record: %w", x.fail(err))
	}
	r.StatusCode = int(status)
	r.CreatedAt, r.ExpiresAt, r.LockedUntil = time.UnixMilli(created), time.UnixMilli(expires), time.UnixMilli(locked)
	return r, nil
}

// CreateIdempotencyRecord implements lifecycle.Tx. When another
// transaction is inserting the same key, it waits for that one to end.
func (x *txn) CreateIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	n, err := x.exec(ctx, `INSERT INTO idempotency_records (principal_id, method, route, resource_id, key,
		fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
		append(idemKeyArgs(r.IdempotencyScope), r.Fingerprint, r.Done, int32(r.StatusCode), r.Body,
			millis(r.CreatedAt), millis(r.ExpiresAt), millis(r.LockedUntil), r.Owner)...)
	if err != nil {
		return fmt.Errorf("postgres: create idempotency record: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create idempotency record: the key has one: %w", lifecycle.ErrConflict)
	}
	return nil
}

// UpdateIdempotencyRecord implements lifecycle.Tx.
func (x *txn) UpdateIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	n, err := x.exec(ctx, `UPDATE idempotency_records SET fingerprint = $6, done = $7, status_code = $8, body = $9,
		created_at = $10, expires_at = $11, locked_until = $12, owner = $13 WHERE `+idemKeyWhere,
		append(idemKeyArgs(r.IdempotencyScope), r.Fingerprint, r.Done, int32(r.StatusCode), r.Body,
			millis(r.CreatedAt), millis(r.ExpiresAt), millis(r.LockedUntil), r.Owner)...)
	if err != nil {
		return fmt.Errorf("postgres: update idempotency record: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: update idempotency record: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// DeleteIdempotencyRecord implements lifecycle.Tx.
func (x *txn) DeleteIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) error {
	if _, err := x.exec(ctx, "DELETE FROM idempotency_records WHERE "+idemKeyWhere, idemKeyArgs(k)...); err != nil {
		return fmt.Errorf("postgres: delete idempotency record: %w", err)
	}
	return nil
}

// DeleteIdempotencyRecordsBefore implements lifecycle.Store.
func (s *Store) DeleteIdempotencyRecordsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM idempotency_records WHERE (principal_id, method, route, resource_id, key) IN (
		SELECT principal_id, method, route, resource_id, key FROM idempotency_records WHERE expires_at < $1 LIMIT $2)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete expired idempotency records: %w", err)
	}
	return n, nil
}

// InstanceLease implements lifecycle.Tx. It reads the lease for update.
func (x *txn) InstanceLease(ctx context.Context, id string) (lifecycle.InstanceLease, error) {
	l := lifecycle.InstanceLease{ID: id}
	var until int64
	err := x.tx.QueryRow(ctx, "SELECT life, until FROM instance_leases WHERE id = $1 FOR UPDATE", id).Scan(&l.Life, &until)
	if err != nil {
		return l, fmt.Errorf("postgres: instance lease %s: %w", id, x.fail(err))
	}
	l.Until = time.UnixMilli(until)
	return l, nil
}

// PutInstanceLease implements lifecycle.Tx.
func (x *txn) PutInstanceLease(ctx context.Context, l lifecycle.InstanceLease) error {
	_, err := x.exec(ctx, `INSERT INTO instance_leases (id, life, until) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET life = excluded.life, until = excluded.until`, l.ID, l.Life, millis(l.Until))
	if err != nil {
		return fmt.Errorf("postgres: put instance lease %s: %w", l.ID, err)
	}
	return nil
}
