package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// The sweep of stalled tasks and the listing of stalled tasks go through
// their partial indexes: SQLite's plan of each statement searches the
// index, and scans no table.
func TestStallStatementsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	mark, markArgs := markStalledSQL(lifecycle.MarkStalledParams{Now: now, Limit: 500, Rules: []lifecycle.StallRule{
		{Status: lifecycle.StatusInProgress, Before: now.Add(-time.Hour)},
		{Status: lifecycle.StatusInReview, Before: now.Add(-2 * time.Hour)},
	}})
	list := "SELECT " + sqlstore.TaskColumns + " FROM tasks WHERE pos > $1 AND stalled_at <> 0 ORDER BY pos LIMIT $2"
	for _, c := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"mark", mark, markArgs, "tasks_stall_due (status=? AND last_activity_at<?)"}, // a range per rule: due tasks only
		{"list", list, []any{0, 51}, "tasks_stalled (pos>?)"},
	} {
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+strings.ReplaceAll(c.query, "$", "?"), c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "\n")
		if !strings.Contains(joined, "INDEX "+c.index) {
			t.Errorf("%s: the plan does not use %s:\n%s", c.name, c.index, joined)
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN tasks") && !strings.Contains(step, "INDEX") {
				t.Errorf("%s: the plan scans the table:\n%s", c.name, joined)
			}
		}
		t.Logf("%s:\n%s", c.name, joined)
	}
}
