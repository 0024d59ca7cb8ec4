package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
)

const idemKeyWhere = "principal_id = $1 AND method = $2 AND route = $3 AND resource_id = $4 AND key = $5"

func idemKeyArgs(k lifecycle.IdempotencyScope) []any {
	return []any{k.PrincipalID, k.Method, k.Route, k.ResourceID, k.Key}
}

// UpdateIdempotencyRecord implements lifecycle.Tx. It reads the record
// for update; when there is none and fn returns one, the insert waits
// for any other transaction inserting the same key, and fails with
// ErrConflict when that one commits.
func (x *txn) UpdateIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope,
	fn func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error)) error {
	return lifecycle.IdempotencyRecordOps{
		Get: func(k lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
			return x.idempotencyRecord(ctx, k)
		},
		Create:  func(r lifecycle.IdempotencyRecord) error { return x.createIdempotencyRecord(ctx, r) },
		Replace: func(r lifecycle.IdempotencyRecord) error { return x.replaceIdempotencyRecord(ctx, r) },
		Delete:  func(k lifecycle.IdempotencyScope) error { return x.deleteIdempotencyRecord(ctx, k) },
	}.Update(k, fn)
}

// idempotencyRecord reads the record of a key for update.
func (x *txn) idempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
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

// createIdempotencyRecord inserts a record. When another transaction is
// inserting the same key, it waits for that one to end.
func (x *txn) createIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
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

// replaceIdempotencyRecord replaces the record of r's key.
func (x *txn) replaceIdempotencyRecord(ctx context.Context, r lifecycle.IdempotencyRecord) error {
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

// deleteIdempotencyRecord deletes the record of a key, if any.
func (x *txn) deleteIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope) error {
	if _, err := x.exec(ctx, "DELETE FROM idempotency_records WHERE "+idemKeyWhere, idemKeyArgs(k)...); err != nil {
		return fmt.Errorf("postgres: delete idempotency record: %w", err)
	}
	return nil
}

// deleteIdempotencyRecordsBefore deletes the records that expired before t.
func (s *Store) deleteIdempotencyRecordsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM idempotency_records WHERE (principal_id, method, route, resource_id, key) IN (
		SELECT principal_id, method, route, resource_id, key FROM idempotency_records WHERE expires_at < $1 LIMIT $2)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete expired idempotency records: %w", err)
	}
	return n, nil
}

// UpdateInstanceLease implements lifecycle.InstanceLeaser in one
// transaction, which holds a transaction-scoped advisory lock of the
// instance ID, so that updates of one lease run one at a time even before
// its row exists; with p.Relaxed it commits as UpdateRelaxed does.
func (s *Store) UpdateInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	opts := pgx.TxOptions{}
	if p.Relaxed {
		opts = relaxedTx
	}
	return s.update(ctx, opts, func(tx lifecycle.Tx) error {
		x := tx.(*txn)
		// FOR UPDATE locks no row that does not exist yet: without this
		// lock, two first updates at once would both read no lease.
		if _, err := x.exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('lifecycle.instance_lease:' || $1, 0))", p.ID); err != nil {
			return fmt.Errorf("postgres: lock instance lease %s: %w", p.ID, err)
		}
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
	})
}

// instanceLease reads the lease of an instance ID for update.
func (x *txn) instanceLease(ctx context.Context, id string) (lifecycle.InstanceLease, error) {
	l := lifecycle.InstanceLease{ID: id}
	var until int64
	err := x.tx.QueryRow(ctx, "SELECT life, until FROM instance_leases WHERE id = $1 FOR UPDATE", id).Scan(&l.Life, &until)
	if err != nil {
		return l, fmt.Errorf("postgres: instance lease %s: %w", id, x.fail(err))
	}
	l.Until = time.UnixMilli(until)
	return l, nil
}

// putInstanceLease creates or replaces the lease of l.ID.
func (x *txn) putInstanceLease(ctx context.Context, l lifecycle.InstanceLease) error {
	_, err := x.exec(ctx, `INSERT INTO instance_leases (id, life, until) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET life = excluded.life, until = excluded.until`, l.ID, l.Life, millis(l.Until))
	if err != nil {
		return fmt.Errorf("postgres: put instance lease %s: %w", l.ID, err)
	}
	return nil
}
