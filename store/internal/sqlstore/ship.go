package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
)

// ShipColumns are the columns of a ship operation, in the order ScanShip
// reads them.
const ShipColumns = `id, task_id, status, mode, environment, expected_head_sha, submission_mode, pr_owner, pr_repo,
	pr_number, actor_id, actor_role, trace_id, queued_at, started_at, finished_at, merge_commit_sha, deployment,
	error, attempts, lease_until, lease_owner, wait`

// shipRow holds the scanned columns of a ship operation.
type shipRow struct {
	op                               lifecycle.ShipOperation
	status, mode, env, subMode, role string
	trace, mergeSHA                  sql.NullString
	deployment, shipErr, wait        []byte
	prNumber, attempts               int64
	queued, lease                    int64
	started, finished                sql.NullInt64
}

// ScanShip reads one row of ShipColumns.
func ScanShip(row Row) (lifecycle.ShipOperation, error) {
	r := new(shipRow)
	op := &r.op
	err := row.Scan(&op.OperationID, &op.TaskID, &r.status, &r.mode, &r.env, &op.ExpectedHeadSHA, &r.subMode,
		&op.PullRequest.Owner, &op.PullRequest.Repo, &r.prNumber, &op.Actor.ID, &r.role, &r.trace,
		&r.queued, &r.started, &r.finished, &r.mergeSHA, &r.deployment, &r.shipErr, &r.attempts, &r.lease, &op.LeaseOwner, &r.wait)
	if err != nil {
		return *op, err
	}
	op.Status, op.Mode, op.TargetEnvironment = lifecycle.ShipStatus(r.status), lifecycle.ShipMode(r.mode), lifecycle.Environment(r.env)
	op.SubmissionMode, op.Actor.Role = lifecycle.SubmitMode(r.subMode), lifecycle.Role(r.role)
	op.PullRequest.Number, op.Attempts = int(r.prNumber), int(r.attempts)
	op.TraceID, op.MergeCommitSHA = NullString(&r.trace), NullString(&r.mergeSHA)
	op.QueuedAt, op.LeaseUntil = FromMillis(r.queued), FromMillis(r.lease)
	if r.started.Valid {
		at := FromMillis(r.started.Int64)
		op.StartedAt = &at
	}
	if r.finished.Valid {
		at := FromMillis(r.finished.Int64)
		op.FinishedAt = &at
	}
	if len(r.deployment) > 0 {
		op.Deployment = new(lifecycle.Deployment)
		if err := json.Unmarshal(r.deployment, op.Deployment); err != nil {
			return *op, fmt.Errorf("ship operation %s deployment: %w", op.OperationID, err)
		}
	}
	if len(r.shipErr) > 0 {
		op.Error = new(lifecycle.ShipError)
		if err := json.Unmarshal(r.shipErr, op.Error); err != nil {
			return *op, fmt.Errorf("ship operation %s error: %w", op.OperationID, err)
		}
	}
	if len(r.wait) > 0 {
		op.Wait = new(lifecycle.ShipWait)
		if err := json.Unmarshal(r.wait, op.Wait); err != nil {
			return *op, fmt.Errorf("ship operation %s wait: %w", op.OperationID, err)
		}
	}
	return *op, nil
}

// jsonOrNil returns v in JSON as a string, or nil (NULL) when v is nil.
func jsonOrNil[T any](v *T) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// shipArgs returns the values of ShipColumns.
func shipArgs(op *lifecycle.ShipOperation) ([]any, error) {
	wait, err := jsonOrNil(op.Wait)
	if err != nil {
		return nil, err
	}
	deployment, err := jsonOrNil(op.Deployment)
	if err != nil {
		return nil, err
	}
	shipErr, err := jsonOrNil(op.Error)
	if err != nil {
		return nil, err
	}
	return []any{op.OperationID, op.TaskID, string(op.Status), string(op.Mode), string(op.TargetEnvironment), op.ExpectedHeadSHA,
		string(op.SubmissionMode), op.PullRequest.Owner, op.PullRequest.Repo, int64(op.PullRequest.Number), op.Actor.ID, string(op.Actor.Role),
		op.TraceID, Millis(op.QueuedAt.Time), OptionalMillis(op.StartedAt), OptionalMillis(op.FinishedAt), op.MergeCommitSHA,
		deployment, shipErr, int64(op.Attempts), Millis(op.LeaseUntil.Time), op.LeaseOwner, wait}, nil
}

// ShipOperation implements lifecycle.Store.
func (s *Reads) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	if err := s.Open(); err != nil {
		return lifecycle.ShipOperation{}, err
	}
	op, err := ScanShip(s.X.QueryRow(ctx, "SELECT "+ShipColumns+" FROM ship_operations WHERE id = $1", id))
	if err != nil {
		return op, s.F.errorf("ship operation %s: %w", id, err)
	}
	return op, nil
}

// ShipOperation implements lifecycle.Tx: a read for update.
func (x *Tx) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	op, err := ScanShip(x.X.QueryRow(ctx, "SELECT "+ShipColumns+" FROM ship_operations WHERE id = $1"+x.F.ForUpdate, id))
	if err != nil {
		return op, x.F.errorf("ship operation %s: %w", id, err)
	}
	return op, nil
}

// ShipOperations implements lifecycle.Store. They come in the order they
// were queued.
func (s *Reads) ShipOperations(ctx context.Context, taskID string) ([]lifecycle.ShipOperation, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	ops, err := QueryAll(ctx, s.X, ScanShip, "SELECT "+ShipColumns+" FROM ship_operations WHERE task_id = $1 ORDER BY pos", taskID)
	if err != nil {
		return nil, s.F.errorf("ship operations of %s: %w", taskID, err)
	}
	return ops, nil
}

// CreateShipOperation implements lifecycle.Tx. It adds ChangeShips to the
// transaction's Changes.
func (x *Tx) CreateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return x.F.errorf("encode ship operation %s: %w", op.OperationID, err)
	}
	n, err := x.X.Exec(ctx, `INSERT INTO ship_operations (`+ShipColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
		ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return x.F.errorf("create ship operation %s: %w", op.OperationID, err)
	}
	if n == 0 {
		return x.F.errorf("create ship operation %s: one with this ID exists: %w", op.OperationID, lifecycle.ErrConflict)
	}
	x.Changes |= lifecycle.ChangeShips
	return nil
}

// UpdateShipOperation implements lifecycle.Tx.
func (x *Tx) UpdateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return x.F.errorf("encode ship operation %s: %w", op.OperationID, err)
	}
	n, err := x.X.Exec(ctx, `UPDATE ship_operations SET status = $2, started_at = $3, finished_at = $4,
		merge_commit_sha = $5, deployment = $6, error = $7, attempts = $8, lease_until = $9, lease_owner = $10, wait = $11 WHERE id = $1`,
		op.OperationID, args[2], args[14], args[15], args[16], args[17], args[18], args[19], args[20], args[21], args[22])
	if err != nil {
		return x.F.errorf("update ship operation %s: %w", op.OperationID, err)
	}
	if n == 0 {
		return x.F.errorf("update ship operation %s: %w", op.OperationID, lifecycle.ErrNotFound)
	}
	return nil
}

// CountShipQueue implements lifecycle.ShipQueueCounter, from the index of
// runnable operations.
func (s *Reads) CountShipQueue(ctx context.Context) (lifecycle.ShipQueueCounts, error) {
	var c lifecycle.ShipQueueCounts
	if err := s.Open(); err != nil {
		return c, err
	}
	row := s.X.QueryRow(ctx, `SELECT COUNT(*) FILTER (WHERE status = 'queued'), COUNT(*) FILTER (WHERE status = 'running')
		FROM ship_operations WHERE status IN ('queued', 'running')`)
	if err := row.Scan(&c.Queued, &c.Running); err != nil {
		return c, s.F.errorf("count ship operations: %w", err)
	}
	return c, nil
}
