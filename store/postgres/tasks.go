package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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

var _ lifecycle.StallMarker = (*Store)(nil)

// MarkStalled implements lifecycle.StallMarker: one statement selects the
// due tasks through the partial index tasks_stall_due, FOR UPDATE SKIP
// LOCKED, and marks them, so that processes marking at once mark
// different tasks; a task locked by a transaction of activity is left to
// it (and to the next sweep).
func (s *Store) MarkStalled(ctx context.Context, p lifecycle.MarkStalledParams, fn func(tx lifecycle.Tx, marked []lifecycle.Task) error) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		x := tx.(*txn)
		query, args := markStalledSQL(p)
		marked, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanTaskOnly, query, args...)
		if err != nil {
			return fmt.Errorf("postgres: mark stalled tasks: %w", err)
		}
		return fn(tx, marked)
	})
}

// markStalledSQL returns the statement of MarkStalled and its arguments.
// The due tasks of each rule are read oldest first, in the order of the
// index tasks_stall_due, and locked FOR UPDATE SKIP LOCKED, each rule in a
// CTE of its own: read in the index's order up to a limit, the range of
// the index is what PostgreSQL plans, however many tasks it takes for due
// (it takes a task's status and last activity for independent, and done
// tasks are old). It tests the rule again on a row that a transaction of
// activity changed meanwhile, which no longer passes.
func markStalledSQL(p lifecycle.MarkStalledParams) (string, []any) {
	conds, args := sqlstore.StallRules(p, 3)
	with := make([]string, 0, len(conds))
	union := []string{"SELECT 0::bigint AS pos WHERE FALSE"}
	for i, c := range conds {
		name := "due" + strconv.Itoa(i)
		with = append(with, name+" AS (SELECT pos FROM tasks WHERE "+c+" ORDER BY status, last_activity_at LIMIT $2 FOR UPDATE SKIP LOCKED)")
		union = append(union, "SELECT pos FROM "+name)
	}
	with = append(with, "due AS ("+strings.Join(union, " UNION ALL ")+" LIMIT $2)")
	return `WITH ` + strings.Join(with, ",\n") + `,
		marked AS (UPDATE tasks SET stalled_at = $1, updated_at = $1, version = tasks.version + 1, rev = tasks.rev + 1
			FROM due WHERE tasks.pos = due.pos RETURNING tasks.*)
		SELECT ` + sqlstore.TaskColumns + ` FROM marked ORDER BY pos`, append([]any{sqlstore.Millis(p.Now), p.Limit}, args...)
}
