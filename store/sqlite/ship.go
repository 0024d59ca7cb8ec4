package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
)

const shipColumns = `id, task_id, status, mode, environment, expected_head_sha, submission_mode, pr_owner, pr_repo,
	pr_number, actor_id, actor_role, trace_id, queued_at, started_at, finished_at, merge_commit_sha, deployment,
	error, attempts, lease_until, lease_owner, wait`

// shipRow holds the scanned columns of a ship operation.
type shipRow struct {
	op                               lifecycle.ShipOperation
	status, mode, env, subMode, role string
	trace, mergeSHA                  sql.NullString
	deployment, shipErr, wait        []byte
	queued, lease                    int64
	started, finished                sql.NullInt64
}

func scanShip(row scanner) (lifecycle.ShipOperation, error) {
	r := new(shipRow)
	op := &r.op
	err := row.Scan(&op.OperationID, &op.TaskID, &r.status, &r.mode, &r.env, &op.ExpectedHeadSHA, &r.subMode,
		&op.PullRequest.Owner, &op.PullRequest.Repo, &op.PullRequest.Number, &op.Actor.ID, &r.role, &r.trace,
		&r.queued, &r.started, &r.finished, &r.mergeSHA, &r.deployment, &r.shipErr, &op.Attempts, &r.lease, &op.LeaseOwner, &r.wait)
	if err != nil {
		return *op, translate(err)
	}
	op.Status, op.Mode, op.TargetEnvironment = lifecycle.ShipStatus(r.status), lifecycle.ShipMode(r.mode), lifecycle.Environment(r.env)
	op.SubmissionMode, op.Actor.Role = lifecycle.SubmitMode(r.subMode), lifecycle.Role(r.role)
	op.TraceID, op.MergeCommitSHA = nullString(&r.trace), nullString(&r.mergeSHA)
	op.QueuedAt, op.LeaseUntil = fromMillis(r.queued), fromMillis(r.lease)
	if r.started.Valid {
		at := fromMillis(r.started.Int64)
		op.StartedAt = &at
	}
	if r.finished.Valid {
		at := fromMillis(r.finished.Int64)
		op.FinishedAt = &at
	}
	if len(r.deployment) > 0 {
		op.Deployment = new(lifecycle.Deployment)
		if err := json.Unmarshal(r.deployment, op.Deployment); err != nil {
			return *op, fmt.Errorf("sqlite: ship operation %s deployment: %w", op.OperationID, err)
		}
	}
	if len(r.shipErr) > 0 {
		op.Error = new(lifecycle.ShipError)
		if err := json.Unmarshal(r.shipErr, op.Error); err != nil {
			return *op, fmt.Errorf("sqlite: ship operation %s error: %w", op.OperationID, err)
		}
	}
	if len(r.wait) > 0 {
		op.Wait = new(lifecycle.ShipWait)
		if err := json.Unmarshal(r.wait, op.Wait); err != nil {
			return *op, fmt.Errorf("sqlite: ship operation %s wait: %w", op.OperationID, err)
		}
	}
	return *op, nil
}

// shipArgs returns the values of shipColumns.
func shipArgs(op *lifecycle.ShipOperation) ([]any, error) {
	var deployment, shipErr, wait any
	if op.Wait != nil {
		b, err := json.Marshal(op.Wait)
		if err != nil {
			return nil, err
		}
		wait = string(b)
	}
	if op.Deployment != nil {
		b, err := json.Marshal(op.Deployment)
		if err != nil {
			return nil, err
		}
		deployment = string(b)
	}
	if op.Error != nil {
		b, err := json.Marshal(op.Error)
		if err != nil {
			return nil, err
		}
		shipErr = string(b)
	}
	optionalMillis := func(t *lifecycle.Timestamp) any {
		if t == nil {
			return nil
		}
		return millis(t.Time)
	}
	return []any{op.OperationID, op.TaskID, string(op.Status), string(op.Mode), string(op.TargetEnvironment), op.ExpectedHeadSHA,
		string(op.SubmissionMode), op.PullRequest.Owner, op.PullRequest.Repo, op.PullRequest.Number, op.Actor.ID, string(op.Actor.Role),
		op.TraceID, millis(op.QueuedAt.Time), optionalMillis(op.StartedAt), optionalMillis(op.FinishedAt), op.MergeCommitSHA,
		deployment, shipErr, op.Attempts, millis(op.LeaseUntil.Time), op.LeaseOwner, wait}, nil
}

// ShipOperation implements lifecycle.Store.
func (s *Store) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	if s.closed.Load() {
		return lifecycle.ShipOperation{}, errClosed
	}
	return getShip(ctx, s.r, id)
}

// ShipOperation implements lifecycle.Tx.
func (x *txn) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	return getShip(x.ctx, x.conn, id)
}

func getShip(ctx context.Context, q queryer, id string) (lifecycle.ShipOperation, error) {
	op, err := scanShip(q.QueryRowContext(ctx, "SELECT "+shipColumns+" FROM ship_operations WHERE id = ?", id))
	if err != nil {
		return op, fmt.Errorf("sqlite: ship operation %s: %w", id, err)
	}
	return op, nil
}

// ShipOperations implements lifecycle.Store. They come in the order they
// were queued.
func (s *Store) ShipOperations(ctx context.Context, taskID string) ([]lifecycle.ShipOperation, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ops, err := queryAll(ctx, s.r, scanShip, "SELECT "+shipColumns+" FROM ship_operations WHERE task_id = ? ORDER BY pos", taskID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: ship operations of %s: %w", taskID, err)
	}
	return ops, nil
}

// CreateShipOperation implements lifecycle.Tx.
func (x *txn) CreateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return fmt.Errorf("sqlite: encode ship operation %s: %w", op.OperationID, err)
	}
	_, err = x.conn.ExecContext(x.ctx, "INSERT INTO ship_operations ("+shipColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	if err != nil {
		return fmt.Errorf("sqlite: create ship operation %s: %w", op.OperationID, translate(err))
	}
	return nil
}

// UpdateShipOperation implements lifecycle.Tx.
func (x *txn) UpdateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return fmt.Errorf("sqlite: encode ship operation %s: %w", op.OperationID, err)
	}
	res, err := x.conn.ExecContext(x.ctx, `UPDATE ship_operations SET status = ?, started_at = ?, finished_at = ?,
		merge_commit_sha = ?, deployment = ?, error = ?, attempts = ?, lease_until = ?, lease_owner = ?, wait = ? WHERE id = ?`,
		args[2], args[14], args[15], args[16], args[17], args[18], args[19], args[20], args[21], args[22], op.OperationID)
	if err != nil {
		return fmt.Errorf("sqlite: update ship operation %s: %w", op.OperationID, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update ship operation %s: %w", op.OperationID, lifecycle.ErrNotFound)
	}
	return nil
}

// ClaimShipOperations implements lifecycle.Tx. SQLite has one writer, so
// the select and the update of this transaction are atomic with respect
// to every other claim.
func (x *txn) ClaimShipOperations(ctx context.Context, p lifecycle.ClaimShipOperationsParams) ([]lifecycle.ShipOperation, error) {
	now := millis(p.Now)
	ops, err := queryAll(x.ctx, x.conn, scanShip, "SELECT "+shipColumns+` FROM ship_operations
		WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_until < ? OR (? AND lease_owner = ?))
		ORDER BY pos LIMIT ?`, now, p.Resume, p.Owner, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim ship operations: %w", err)
	}
	for i := range ops {
		op := &ops[i]
		op.Status = lifecycle.ShipRunning
		op.Attempts++
		if op.StartedAt == nil {
			at := fromMillis(now)
			op.StartedAt = &at
		}
		op.LeaseOwner, op.LeaseUntil = p.Owner, fromMillis(millis(p.Until))
		if err := x.UpdateShipOperation(ctx, *op); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// CountShipQueue implements lifecycle.ShipQueueCounter, from the index of
// runnable operations.
func (s *Store) CountShipQueue(ctx context.Context) (lifecycle.ShipQueueCounts, error) {
	var c lifecycle.ShipQueueCounts
	if s.closed.Load() {
		return c, errClosed
	}
	row := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FILTER (WHERE status = 'queued'), COUNT(*) FILTER (WHERE status = 'running')
		FROM ship_operations WHERE status IN ('queued', 'running')`)
	if err := row.Scan(&c.Queued, &c.Running); err != nil {
		return c, fmt.Errorf("sqlite: count ship operations: %w", err)
	}
	return c, nil
}
