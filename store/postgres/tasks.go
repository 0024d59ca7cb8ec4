package postgres

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimReconciliations implements lifecycle.Tx: one statement selects the
// due tasks with FOR UPDATE SKIP LOCKED and moves their ReconcileAt, so
// claims made at once take different tasks.
func (x *txn) ClaimReconciliations(ctx context.Context, p lifecycle.ClaimReconciliationsParams) ([]lifecycle.Task, error) {
	tasks, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanTaskOnly, `WITH due AS (
		SELECT pos, reconcile_at AS old FROM tasks WHERE status IN ('in_review', 'in_progress') AND reconcile_at <= $1
		AND (status = 'in_review' OR reconcile_at > 0)
		ORDER BY reconcile_at, pos LIMIT $2 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE tasks SET reconcile_at = $3, rev = tasks.rev + 1 FROM due WHERE tasks.pos = due.pos RETURNING tasks.*, due.old)
	SELECT `+sqlstore.TaskColumns+` FROM claimed ORDER BY old, pos`, sqlstore.Millis(p.Now), p.Limit, sqlstore.Millis(p.Until))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim reconciliations: %w", err)
	}
	return tasks, nil
}
