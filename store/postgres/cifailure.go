package postgres

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// ClaimCIFailures implements lifecycletype.CIFailureTx: one statement
// selects the due records with FOR UPDATE SKIP LOCKED and moves their
// NextAttemptAt, so claims made at once take different records.
func (x *txn) ClaimCIFailures(ctx context.Context, p lifecycletype.ClaimCIFailuresParams) ([]lifecycletype.CIFailureRecord, error) {
	rs, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanCIFailure, `WITH due AS (
		SELECT task_id, head_sha, source, name, next_attempt_at AS old FROM ci_failures
		WHERE due AND next_attempt_at <= $1
		ORDER BY next_attempt_at, task_id COLLATE "C", head_sha COLLATE "C", source COLLATE "C", name COLLATE "C"
		LIMIT $2 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE ci_failures c SET next_attempt_at = $3 FROM due
		WHERE c.task_id = due.task_id AND c.head_sha = due.head_sha AND c.source = due.source AND c.name = due.name
		RETURNING c.*, due.old)
	SELECT `+sqlstore.CIFailureColumns+` FROM claimed
	ORDER BY old, task_id COLLATE "C", head_sha COLLATE "C", source COLLATE "C", name COLLATE "C"`,
		sqlstore.Millis(p.Now), p.Limit, sqlstore.Millis(p.Until))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim CI failures: %w", err)
	}
	return rs, nil
}
