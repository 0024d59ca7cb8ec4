package postgres

import (
	"context"

	"github.com/tasklifecycle/lifecycle"
)

// Prune implements lifecycle.Store. Each kind is deleted in statements of
// its own, in batches, so that no lock is held for long.
func (s *Store) Prune(ctx context.Context, p lifecycle.PruneParams) (lifecycle.PruneResult, error) {
	if s.closed.Load() {
		return lifecycle.PruneResult{}, errClosed
	}
	return lifecycle.PruneDeleters{
		IdempotencyRecords: s.deleteIdempotencyRecordsBefore,
		ProviderDeliveries: s.deleteProviderDeliveriesBefore,
		Deliveries:         s.deleteDeliveriesBefore,
		Events:             s.deleteEventsBefore,
	}.Prune(ctx, p)
}
