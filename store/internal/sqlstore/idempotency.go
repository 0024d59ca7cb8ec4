package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const idemKeyWhere = "principal_id = $1 AND method = $2 AND route = $3 AND resource_id = $4 AND key = $5"

func idemKeyArgs(k lifecycle.IdempotencyScope) []any {
	return []any{k.PrincipalID, k.Method, k.Route, k.ResourceID, k.Key}
}

// UpdateIdempotencyRecord implements lifecycle.Tx: it reads the record of
// k for update, calls fn with it (nil when none), and then inserts,
// replaces or deletes (fn returned nil) what fn returns; it stores
// nothing when fn fails. On PostgreSQL, when there is no record and fn
// returns one, the insert waits for any other transaction inserting the
// same key, and fails with ErrConflict when that one commits; on SQLite
// the transaction holds the write lock, so the record read is the one
// replaced.
func (x *Tx) UpdateIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope,
	fn func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error)) error {
	var cur *lifecycle.IdempotencyRecord
	switch r, err := x.idempotencyRecord(ctx, k); {
	case err == nil:
		cur = &r
	case !errors.Is(err, lifecycle.ErrNotFound):
		return err
	}
	next, err := fn(cur)
	switch {
	case err != nil:
		return err
	case next == nil && cur == nil:
		return nil
	case next == nil:
		return x.deleteIdempotencyRecord(ctx, k)
	}
	next.IdempotencyScope = k
	if cur == nil {
		return x.createIdempotencyRecord(ctx, *next)
	}
	return x.replaceIdempotencyRecord(ctx, *next)
}

// idempotencyRecord reads the record of a key for update.
func (x *Tx) idempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
	r := lifecycle.IdempotencyRecord{IdempotencyScope: k}
	var created, expires, locked int64
	err := x.X.QueryRow(ctx, `SELECT fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner
		FROM idempotency_records WHERE `+idemKeyWhere+x.F.ForUpdate, idemKeyArgs(k)...).
		Scan(&r.Fingerprint, &r.Done, &r.StatusCode, &r.Body, &created, &expires, &locked, &r.Owner)
	if err != nil {
		return r, x.F.errorf("idempotency record: %w", err)
	}
	r.CreatedAt, r.ExpiresAt, r.LockedUntil = time.UnixMilli(created), time.UnixMilli(expires), time.UnixMilli(locked)
	return r, nil
}

// createIdempotencyRecord inserts a record; ErrConflict when its key has
// one.
func (x *Tx) createIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	n, err := x.X.Exec(ctx, `INSERT INTO idempotency_records (principal_id, method, route, resource_id, key,
		fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
		append(idemKeyArgs(r.IdempotencyScope), r.Fingerprint, r.Done, r.StatusCode, r.Body,
			Millis(r.CreatedAt), Millis(r.ExpiresAt), Millis(r.LockedUntil), r.Owner)...)
	if err != nil {
		return x.F.errorf("create idempotency record: %w", err)
	}
	if n == 0 {
		return x.F.errorf("create idempotency record: the key has one: %w", lifecycle.ErrConflict)
	}
	return nil
}

// replaceIdempotencyRecord replaces the record of r's key.
func (x *Tx) replaceIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
	n, err := x.X.Exec(ctx, `UPDATE idempotency_records SET fingerprint = $6, done = $7, status_code = $8, body = $9,
		created_at = $10, expires_at = $11, locked_until = $12, owner = $13 WHERE `+idemKeyWhere,
		append(idemKeyArgs(r.IdempotencyScope), r.Fingerprint, r.Done, r.StatusCode, r.Body,
			Millis(r.CreatedAt), Millis(r.ExpiresAt), Millis(r.LockedUntil), r.Owner)...)
	if err != nil {
		return x.F.errorf("update idempotency record: %w", err)
	}
	if n == 0 {
		return x.F.errorf("update idempotency record: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// deleteIdempotencyRecord deletes the record of a key, if any.
func (x *Tx) deleteIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) error {
	if _, err := x.X.Exec(ctx, "DELETE FROM idempotency_records WHERE "+idemKeyWhere, idemKeyArgs(k)...); err != nil {
		return x.F.errorf("delete idempotency record: %w", err)
	}
	return nil
}

// RewriteInstanceLease runs lifecycle.InstanceLeaser.UpdateInstanceLease
// in the transaction: it reads the lease of p.ID for update, calls
// p.Update with it and stores what that returns. The store gives the
// transaction and makes updates of one ID run one at a time.
func (x *Tx) RewriteInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	var cur *lifecycle.InstanceLease
	switch l, err := x.instanceLease(ctx, p.ID); {
	case err == nil:
		cur = &l
	case !errors.Is(err, lifecycle.ErrNotFound):
		return err
	}
	next, err := p.Update(cur)
	if err != nil || next == nil {
		return err
	}
	next.ID = p.ID
	return x.putInstanceLease(ctx, *next)
}

// instanceLease reads the lease of an instance ID for update.
func (x *Tx) instanceLease(ctx context.Context, id string) (lifecycle.InstanceLease, error) {
	l := lifecycle.InstanceLease{ID: id}
	var until int64
	err := x.X.QueryRow(ctx, "SELECT life, until FROM instance_leases WHERE id = $1"+x.F.ForUpdate, id).Scan(&l.Life, &until)
	if err != nil {
		return l, x.F.errorf("instance lease %s: %w", id, err)
	}
	l.Until = time.UnixMilli(until)
	return l, nil
}

// putInstanceLease creates or replaces the lease of l.ID.
func (x *Tx) putInstanceLease(ctx context.Context, l lifecycle.InstanceLease) error {
	_, err := x.X.Exec(ctx, `INSERT INTO instance_leases (id, life, until) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET life = excluded.life, until = excluded.until`, l.ID, l.Life, Millis(l.Until))
	if err != nil {
		return x.F.errorf("put instance lease %s: %w", l.ID, err)
	}
	return nil
}
