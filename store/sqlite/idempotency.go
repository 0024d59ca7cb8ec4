package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const idemKeyWhere = "principal_id = ? AND method = ? AND route = ? AND resource_id = ? AND key = ?"

func idemKeyArgs(k lifecycle.IdempotencyScope) []any {
	return []any{k.PrincipalID, k.Method, k.Route, k.ResourceID, k.Key}
}

// UpdateIdempotencyRecord implements lifecycle.Tx. The transaction holds
// SQLite's write lock, so the record read is the one replaced.
func (x *txn) UpdateIdempotencyRecord(ctx context.Context, k lifecycle.IdempotencyScope,
	fn func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error)) error {
	return lifecycle.IdempotencyRecordOps{
		Get:     x.idempotencyRecord,
		Create:  x.createIdempotencyRecord,
		Replace: x.replaceIdempotencyRecord,
		Delete:  x.deleteIdempotencyRecord,
	}.Update(k, fn)
}

// idempotencyRecord returns the record of an idempotency key.
func (x *txn) idempotencyRecord(k lifecycle.IdempotencyScope) (lifecycle.IdempotencyRecord, error) {
	r := lifecycle.IdempotencyRecord{IdempotencyScope: k}
	var created, expires, locked int64
	err := x.conn.QueryRowContext(x.ctx, `SELECT fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner
		FROM idempotency_records WHERE `+idemKeyWhere, idemKeyArgs(k)...).
		Scan(&r.Fingerprint, &r.Done, &r.StatusCode, &r.Body, &created, &expires, &locked, &r.Owner)
	if err != nil {
		return r, fmt.Errorf("sqlite: idempotency record: %w", translate(err))
	}
	r.CreatedAt, r.ExpiresAt, r.LockedUntil = time.UnixMilli(created), time.UnixMilli(expires), time.UnixMilli(locked)
	return r, nil
}

// createIdempotencyRecord inserts a record; ErrConflict when its key has one.
func (x *txn) createIdempotencyRecord(r lifecycle.IdempotencyRecord) error {
	_, err := x.conn.ExecContext(x.ctx, `INSERT INTO idempotency_records (principal_id, method, route, resource_id, key,
		fingerprint, done, status_code, body, created_at, expires_at, locked_until, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append(idemKeyArgs(r.IdempotencyScope), r.Fingerprint, r.Done, r.StatusCode, r.Body,
			millis(r.CreatedAt), millis(r.ExpiresAt), millis(r.LockedUntil), r.Owner)...)
	if err != nil {
		return fmt.Errorf("sqlite: create idempotency record: %w", translate(err))
	}
	return nil
}

// replaceIdempotencyRecord replaces the record of r's key.
func (x *txn) replaceIdempotencyRecord(r lifecycle.IdempotencyRecord) error {
	res, err := x.conn.ExecContext(x.ctx, `UPDATE idempotency_records SET fingerprint = ?, done = ?, status_code = ?, body = ?,
		created_at = ?, expires_at = ?, locked_until = ?, owner = ? WHERE `+idemKeyWhere,
		append([]any{r.Fingerprint, r.Done, r.StatusCode, r.Body, millis(r.CreatedAt), millis(r.ExpiresAt), millis(r.LockedUntil), r.Owner},
			idemKeyArgs(r.IdempotencyScope)...)...)
	if err != nil {
		return fmt.Errorf("sqlite: update idempotency record: %w", translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update idempotency record: %w", lifecycle.ErrNotFound)
	}
	return nil
}

// deleteIdempotencyRecord deletes the record of a key, if any.
func (x *txn) deleteIdempotencyRecord(k lifecycle.IdempotencyScope) error {
	if _, err := x.conn.ExecContext(x.ctx, "DELETE FROM idempotency_records WHERE "+idemKeyWhere, idemKeyArgs(k)...); err != nil {
		return fmt.Errorf("sqlite: delete idempotency record: %w", translate(err))
	}
	return nil
}

// deleteIdempotencyRecordsBefore deletes the records that expired before t.
func (s *Store) deleteIdempotencyRecordsBefore(ctx context.Context, t time.Time) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var n int64
	err := s.write(ctx, false, func(x *txn) error {
		res, err := x.conn.ExecContext(x.ctx, "DELETE FROM idempotency_records WHERE expires_at < ?", millis(t))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete expired idempotency records: %w", translate(err))
	}
	return n, nil
}

// UpdateInstanceLease implements lifecycle.InstanceLeaser in one
// transaction of the writer, relaxed when p.Relaxed is set.
func (s *Store) UpdateInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	return s.write(ctx, p.Relaxed, func(x *txn) error {
		var cur *lifecycle.InstanceLease
		switch l, err := x.instanceLease(p.ID); {
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
		return x.putInstanceLease(*next)
	})
}

// instanceLease returns the lease of an instance ID.
func (x *txn) instanceLease(id string) (lifecycle.InstanceLease, error) {
	l := lifecycle.InstanceLease{ID: id}
	var until int64
	err := x.conn.QueryRowContext(x.ctx, "SELECT life, until FROM instance_leases WHERE id = ?", id).Scan(&l.Life, &until)
	if err != nil {
		return l, fmt.Errorf("sqlite: instance lease %s: %w", id, translate(err))
	}
	l.Until = time.UnixMilli(until)
	return l, nil
}

// putInstanceLease creates or replaces the lease of l.ID.
func (x *txn) putInstanceLease(l lifecycle.InstanceLease) error {
	_, err := x.conn.ExecContext(x.ctx, `INSERT INTO instance_leases (id, life, until) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET life = excluded.life, until = excluded.until`, l.ID, l.Life, millis(l.Until))
	if err != nil {
		return fmt.Errorf("sqlite: put instance lease %s: %w", l.ID, translate(err))
	}
	return nil
}
