package postgres

import "github.com/tasklifecycle/lifecycle"

// MarkStalledSQLForTest returns the statement of MarkStalled and its
// arguments, for the test that explains its plan.
func MarkStalledSQLForTest(p lifecycle.MarkStalledParams) (string, []any) { return markStalledSQL(p) }
