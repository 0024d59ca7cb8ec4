package sqlite

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimCIFailures implements lifecycletype.CIFailureTx. SQLite has one
// writer, so the select and the update of this transaction are atomic
// with respect to every other claim.
func (x *txn) ClaimCIFailures(ctx context.Context, p lifecycletype.ClaimCIFailuresParams) ([]lifecycletype.CIFailureRecord, error) {
	rs, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanCIFailure, "SELECT "+sqlstore.CIFailureColumns+` FROM ci_failures
		WHERE due = 1 AND next_attempt_at <= $1 ORDER BY next_attempt_at, task_id, head_sha, source, name LIMIT $2`, sqlstore.Millis(p.Now), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim CI failures: %w", err)
	}
	until := sqlstore.Millis(p.Until)
	for i := range rs {
		r := &rs[i]
		if _, err := x.X.Exec(ctx, `UPDATE ci_failures SET next_attempt_at = $1
			WHERE task_id = $2 AND head_sha = $3 AND source = $4 AND name = $5`, until, r.TaskID, r.HeadSHA, string(r.Source), r.Name); err != nil {
			return nil, fmt.Errorf("sqlite: claim CI failure of check %s of %s: %w", r.Name, r.TaskID, err)
		}
		r.NextAttemptAt = sqlstore.FromMillis(until)
	}
	return rs, nil
}
