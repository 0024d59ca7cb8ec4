package sqlite

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimShipOperations implements lifecycle.Tx. SQLite has one writer, so
// the select and the update of this transaction are atomic with respect
// to every other claim.
func (x *txn) ClaimShipOperations(ctx context.Context, p lifecycle.ClaimShipOperationsParams) ([]lifecycle.ShipOperation, error) {
	now := sqlstore.Millis(p.Now)
	ops, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanShip, "SELECT "+sqlstore.ShipColumns+` FROM ship_operations
		WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_until < $1 OR ($2 AND lease_owner = $3))
		ORDER BY pos LIMIT $4`, now, p.Resume, p.Owner, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim ship operations: %w", err)
	}
	for i := range ops {
		op := &ops[i]
		op.Status = lifecycle.ShipRunning
		op.Attempts++
		if op.StartedAt == nil {
			at := sqlstore.FromMillis(now)
			op.StartedAt = &at
		}
		op.LeaseOwner, op.LeaseUntil = p.Owner, sqlstore.FromMillis(sqlstore.Millis(p.Until))
		if err := x.UpdateShipOperation(ctx, *op); err != nil {
			return nil, err
		}
	}
	return ops, nil
}
