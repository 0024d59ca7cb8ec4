package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// CIFailureColumns are the columns of a failure record, in the order
// ScanCIFailure reads them.
const CIFailureColumns = `task_id, head_sha, source, name, due, attempts, next_attempt_at, failure, updated_at`

// ScanCIFailure reads one row of CIFailureColumns.
func ScanCIFailure(row Row) (lifecycletype.CIFailureRecord, error) {
	var (
		r             lifecycletype.CIFailureRecord
		source        string
		failure       sql.NullString
		next, updated int64
	)
	if err := row.Scan(&r.TaskID, &r.HeadSHA, &source, &r.Name, &r.Due, &r.Attempts, &next, &failure, &updated); err != nil {
		return r, err
	}
	r.Source, r.NextAttemptAt, r.UpdatedAt = lifecycletype.CheckSource(source), FromMillis(next), FromMillis(updated)
	if failure.Valid {
		r.Failure = new(lifecycletype.CIFailure)
		if err := json.Unmarshal([]byte(failure.String), r.Failure); err != nil {
			return r, fmt.Errorf("failure of check %s of %s: %w", r.Name, r.TaskID, err)
		}
		if r.Failure.Annotations == nil {
			r.Failure.Annotations = []lifecycletype.CIAnnotation{}
		}
	}
	return r, nil
}

// CIFailures implements lifecycletype.CIFailureStore.
func (s *Reads) CIFailures(ctx context.Context, taskID, headSHA string) ([]lifecycletype.CIFailureRecord, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	return ciFailures(ctx, s.F, s.X, taskID, headSHA)
}

// CIFailures implements lifecycletype.CIFailureTx.
func (x *Tx) CIFailures(ctx context.Context, taskID, headSHA string) ([]lifecycletype.CIFailureRecord, error) {
	return ciFailures(ctx, x.F, x.X, taskID, headSHA)
}

// ciFailures returns the failure records of a task's commit, by source
// and name in byte order.
func ciFailures(ctx context.Context, f *Flavour, x Executor, taskID, headSHA string) ([]lifecycletype.CIFailureRecord, error) {
	rs, err := QueryAll(ctx, x, ScanCIFailure, `SELECT `+CIFailureColumns+` FROM ci_failures
		WHERE task_id = $1 AND head_sha = $2 ORDER BY source`+f.Collate+`, name`+f.Collate, taskID, headSHA)
	if err != nil {
		return nil, f.errorf("CI failures of %s at %s: %w", taskID, headSHA, err)
	}
	return rs, nil
}

// PutCIFailure implements lifecycletype.CIFailureTx: an upsert of the
// record of r's check.
func (x *Tx) PutCIFailure(ctx context.Context, r lifecycletype.CIFailureRecord) error {
	var failure sql.NullString
	if r.Failure != nil {
		f := *r.Failure
		f.Annotations = NonNil(f.Annotations)
		b, err := json.Marshal(f)
		if err != nil {
			return x.F.errorf("encode failure of check %s of %s: %w", r.Name, r.TaskID, err)
		}
		failure = sql.NullString{String: string(b), Valid: true}
	}
	_, err := x.X.Exec(ctx, `INSERT INTO ci_failures (`+CIFailureColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (task_id, head_sha, source, name) DO UPDATE SET due = excluded.due, attempts = excluded.attempts,
		next_attempt_at = excluded.next_attempt_at, failure = excluded.failure, updated_at = excluded.updated_at`,
		r.TaskID, r.HeadSHA, string(r.Source), r.Name, r.Due, r.Attempts, Millis(r.NextAttemptAt.Time), failure, Millis(r.UpdatedAt.Time))
	if err != nil {
		return x.F.errorf("put CI failure of check %s of %s: %w", r.Name, r.TaskID, err)
	}
	return nil
}
