package sqlite

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimReconciliations implements lifecycle.Tx. SQLite has one writer, so
// the select and the update of this transaction are atomic with respect
// to every other claim.
func (x *txn) ClaimReconciliations(ctx context.Context, p lifecycle.ClaimReconciliationsParams) ([]lifecycle.Task, error) {
	tasks, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanTaskOnly, "SELECT "+sqlstore.TaskColumns+` FROM tasks
		WHERE status IN ('in_review', 'in_progress') AND reconcile_at <= $1
		AND (status = 'in_review' OR reconcile_at > 0) ORDER BY reconcile_at LIMIT $2`, sqlstore.Millis(p.Now), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim reconciliations: %w", err)
	}
	until := sqlstore.Millis(p.Until)
	for i := range tasks {
		if _, err := x.X.Exec(ctx, "UPDATE tasks SET reconcile_at = $1, rev = rev + 1 WHERE id = $2", until, tasks[i].ID); err != nil {
			return nil, fmt.Errorf("sqlite: claim reconciliation of %s: %w", tasks[i].ID, err)
		}
		tasks[i].ReconcileAt = sqlstore.FromMillis(until)
	}
	return tasks, nil
}
