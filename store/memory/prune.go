package memory

import (
	"context"

	"github.com/tasklifecycle/lifecycle"
)

// Prune implements lifecycle.Store. It deletes every kind in one step,
// alone: in memory, even a large prune takes little time. It fails only
// when ctx is done or the Store is closed, and then deletes nothing.
func (s *Store) Prune(ctx context.Context, p lifecycle.PruneParams) (lifecycle.PruneResult, error) {
	var r lifecycle.PruneResult
	err := s.write(ctx, func(t *tables) error {
		if !p.ExpiredBefore.IsZero() {
			r.IdempotencyRecords = t.idempotency.deleteWhere(func(rec lifecycle.IdempotencyRecord) bool {
				return rec.ExpiresAt.Before(p.ExpiredBefore)
			})
		}
		if !p.Before.IsZero() {
			r.ProviderDeliveries = t.providerDeliveries.deleteWhere(func(d lifecycle.ProviderDelivery) bool {
				return d.ReceivedAt.Before(p.Before)
			})
			r.Deliveries = t.deliveries.deleteWhere(func(d lifecycle.Delivery) string { return d.ID }, func(d lifecycle.Delivery) bool {
				return d.Status != lifecycle.DeliveryPending && d.AttemptedAt.Before(p.Before)
			})
			r.Events = t.deleteEventsBefore(p.Before)
		}
		return nil
	})
	return r, err
}
