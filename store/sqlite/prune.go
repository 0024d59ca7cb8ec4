package sqlite

import (
	"context"
	"errors"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Prune implements lifecycle.Store. Each kind is deleted in transactions
// of its own, in batches, so that writers are not held up for long.
func (s *Store) Prune(ctx context.Context, p lifecycle.PruneParams) (lifecycle.PruneResult, error) {
	if s.closed.Load() {
		return lifecycle.PruneResult{}, errClosed
	}
	var (
		r    lifecycle.PruneResult
		errs []error
	)
	run := func(n *int64, at time.Time, del func(context.Context, time.Time) (int64, error)) {
		if at.IsZero() {
			return
		}
		var err error
		*n, err = del(ctx, at)
		errs = append(errs, err)
	}
	run(&r.IdempotencyRecords, p.ExpiredBefore, s.deleteIdempotencyRecordsBefore)
	run(&r.ProviderDeliveries, p.Before, s.deleteProviderDeliveriesBefore)
	run(&r.Deliveries, p.Before, s.deleteDeliveriesBefore)
	run(&r.Events, p.Before, s.deleteEventsBefore)
	return r, errors.Join(errs...)
}
