package sqlite

import (
	"context"
	"fmt"
	"strings"

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

var _ lifecycle.StallMarker = (*Store)(nil)

// MarkStalled implements lifecycle.StallMarker: one statement marks the
// due tasks, found through the partial index tasks_stall_due, and returns
// them. SQLite has one writer, so a task is marked by one transaction
// only.
func (s *Store) MarkStalled(ctx context.Context, p lifecycle.MarkStalledParams, fn func(tx lifecycle.Tx, marked []lifecycle.Task) error) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		x := tx.(*txn)
		query, args := markStalledSQL(p)
		marked, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanTaskOnly, query, args...)
		if err != nil {
			return fmt.Errorf("sqlite: mark stalled tasks: %w", err)
		}
		return fn(tx, marked)
	})
}

// markStalledSQL returns the statement of MarkStalled and its arguments:
// the due tasks of each rule are a range of the index tasks_stall_due,
// read through a UNION ALL (SQLite would search one column of the index
// for an OR of the rules).
func markStalledSQL(p lifecycle.MarkStalledParams) (string, []any) {
	conds, args := sqlstore.StallRules(p, 3)
	if len(conds) == 0 {
		conds = []string{"FALSE"}
	}
	return `UPDATE tasks SET stalled_at = $1, updated_at = $1, version = version + 1, rev = rev + 1
		WHERE pos IN (SELECT pos FROM tasks WHERE ` + strings.Join(conds, " UNION ALL SELECT pos FROM tasks WHERE ") + ` LIMIT $2)
		RETURNING ` + sqlstore.TaskColumns, append([]any{sqlstore.Millis(p.Now), p.Limit}, args...)
}
