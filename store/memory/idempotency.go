package memory

import (
	"context"

	"github.com/tasklifecycle/lifecycle"
)

// UpdateIdempotencyRecord implements lifecycle.Tx. fn is given a copy of
// the record, and what it returns is copied in. Transactions run one at
// a time, so a record committed by another is always seen: an insert
// never meets one and never fails with lifecycle.ErrConflict.
func (x *txn) UpdateIdempotencyRecord(ctx context.Context, scope lifecycle.IdempotencyScope,
	fn func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error)) error {
	var cur *lifecycle.IdempotencyRecord
	if r, ok := x.idempotency.get(scope); ok {
		r = clone(r)
		cur = &r
	}
	next, err := fn(cur)
	switch {
	case err != nil:
		return err
	case next == nil:
		x.idempotency.remove(scope)
	default:
		r := clone(*next)
		r.IdempotencyScope = scope
		x.idempotency.set(scope, r)
	}
	return nil
}

// UpdateInstanceLease implements lifecycle.InstanceLeaser. It runs alone,
// as a transaction does, so no other change of the lease comes between
// the reading and the writing; p.Update runs beside readers, which wait
// only for the lease it returns to be stored. p.Relaxed changes nothing:
// nothing here reaches a disk.
func (s *Store) UpdateInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return errClosed
	}
	// Holding wmu, this is the only writer: the tables can be read
	// without the read lock.
	var cur *lifecycle.InstanceLease
	if l, ok := s.t.leases[p.ID]; ok {
		cur = &l
	}
	next, err := p.Update(cur)
	if err != nil || next == nil {
		return err
	}
	l := *next
	l.ID = p.ID
	s.mu.Lock()
	s.t.leases[p.ID] = l
	s.mu.Unlock()
	return nil
}
