package postgres

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimShipOperations implements lifecycle.Tx: one statement selects the
// runnable operations with FOR UPDATE SKIP LOCKED and updates them, so
// claims made at once take different operations and none waits for
// another.
func (x *txn) ClaimShipOperations(ctx context.Context, p lifecycle.ClaimShipOperationsParams) ([]lifecycle.ShipOperation, error) {
	ops, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanShip, `WITH runnable AS (
		SELECT pos FROM ship_operations
		WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_until < $1 OR ($2 AND lease_owner = $3))
		ORDER BY pos LIMIT $4 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE ship_operations o SET status = 'running', attempts = o.attempts + 1,
		started_at = COALESCE(o.started_at, $1), lease_owner = $3, lease_until = $5
		FROM runnable WHERE o.pos = runnable.pos RETURNING o.*)
	SELECT `+sqlstore.ShipColumns+` FROM claimed ORDER BY pos`,
		sqlstore.Millis(p.Now), p.Resume, p.Owner, p.Limit, sqlstore.Millis(p.Until))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim ship operations: %w", err)
	}
	return ops, nil
}
