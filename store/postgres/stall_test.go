package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/postgres"
)

// The sweep of stalled tasks reads the due tasks through the partial index
// tasks_stall_due, and the listing of stalled tasks through tasks_stalled:
// PostgreSQL's plan of each statement, on a table of many tasks few of
// which are due or stalled, reads them through those indexes.
func TestStallStatementsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	// 20000 tasks: half done, most others in progress or in review and
	// active a minute ago, a few due, a few stalled: what a sweep meets.
	const n = 20000
	err := s.Update(ctx, func(tx lifecycle.Tx) error {
		for i := range n {
			st, last := lifecycle.StatusDone, now.Add(-48*time.Hour)
			var stalled *lifecycle.Stall
			switch {
			case i%100 == 1:
				st = lifecycle.StatusInProgress // due
			case i%100 == 2:
				st = lifecycle.StatusInProgress
				stalled = &lifecycle.Stall{Since: lifecycle.NewTimestamp(now.Add(-time.Hour)), LastActivityAt: lifecycle.NewTimestamp(last)}
			case i%100 < 25:
				st, last = lifecycle.StatusInProgress, now.Add(-time.Minute) // not due
			case i%100 < 50:
				st, last = lifecycle.StatusInReview, now.Add(-time.Minute) // not due
			}
			task := lifecycle.Task{ID: fmt.Sprintf("tsk_plan%05d", i), Identifier: fmt.Sprintf("PLAN-%d", i), Title: "t", Status: st,
				Priority: lifecycle.PriorityMedium, UpdatedAt: lifecycle.NewTimestamp(last), CreatedAt: lifecycle.NewTimestamp(last),
				LastActivityAt: lifecycle.NewTimestamp(last), Stalled: stalled, Version: 1, Labels: []string{}, AcceptanceCriteria: []string{},
				Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/1"}}
			if err := tx.CreateTask(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE tasks"); err != nil {
		t.Fatal(err)
	}
	mark, markArgs := postgres.MarkStalledSQLForTest(lifecycle.MarkStalledParams{Now: now, Limit: 500, Rules: []lifecycle.StallRule{
		{Status: lifecycle.StatusInProgress, Before: now.Add(-time.Hour)},
		{Status: lifecycle.StatusInReview, Before: now.Add(-2 * time.Hour)},
	}})
	list := "SELECT pos FROM tasks WHERE pos > $1 AND stalled_at <> 0 ORDER BY pos LIMIT $2"
	for _, c := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"mark", mark, markArgs, "tasks_stall_due"},
		{"list", list, []any{0, 51}, "tasks_stalled"},
	} {
		// EXPLAIN of the statement, with its arguments, in a transaction
		// rolled back: EXPLAIN does not run it.
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			explain := func(when string) (string, error) {
				rows, err := tx.Query(ctx, "EXPLAIN "+c.query, c.args...)
				if err != nil {
					return "", err
				}
				lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
				plan := strings.Join(lines, "\n")
				t.Logf("%s, %s:\n%s", c.name, when, plan)
				return plan, err
			}
			plan, err := explain("as planned")
			if err != nil || strings.Contains(plan, c.index) {
				return err
			}
			// On a table this small PostgreSQL's planner may prefer
			// another index of the active tasks and a sort (it takes a
			// task's status and last activity for independent, and
			// overestimates the due ones; BenchmarkMarkStalled, with
			// 100,000 tasks, is planned on tasks_stall_due): without
			// those, in this transaction, which is rolled back, the
			// statement is served by its own.
			if _, err := tx.Exec(ctx, "DROP INDEX tasks_reconcile, tasks_by_status"); err != nil {
				return err
			}
			if plan, err = explain("without the other indexes of active tasks"); err != nil {
				return err
			}
			if !strings.Contains(plan, c.index) {
				t.Errorf("%s: the plan does not use %s", c.name, c.index)
			}
			return errRollback
		})
		if err != nil && !errors.Is(err, errRollback) {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// errRollback rolls a transaction of the test back.
var errRollback = errors.New("rolled back")
