package postgres

import (
	"context"
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
	deployment, shipErr, wait        *string
	prNumber, queued, lease          int64
	started, finished                *int64
	attempts                         int32
}

func scanShip(row scanner) (lifecycle.ShipOperation, error) {
	r := new(shipRow)
	op := &r.op
	err := row.Scan(&op.OperationID, &op.TaskID, &r.status, &r.mode, &r.env, &op.ExpectedHeadSHA, &r.subMode,
		&op.PullRequest.Owner, &op.PullRequest.Repo, &r.prNumber, &op.Actor.ID, &r.role, &op.TraceID,
		&r.queued, &r.started, &r.finished, &op.MergeCommitSHA, &r.deployment, &r.shipErr, &r.attempts, &r.lease, &op.LeaseOwner, &r.wait)
	if err != nil {
		return *op, err
	}
	op.Status, op.Mode, op.TargetEnvironment = lifecycle.ShipStatus(r.status), lifecycle.ShipMode(r.mode), lifecycle.Environment(r.env)
	op.SubmissionMode, op.Actor.Role = lifecycle.SubmitMode(r.subMode), lifecycle.Role(r.role)
	op.PullRequest.Number, op.Attempts = int(r.prNumber), int(r.attempts)
	op.QueuedAt, op.LeaseUntil = fromMillis(r.queued), fromMillis(r.lease)
	op.StartedAt, op.FinishedAt = optionalTimestamp(r.started), optionalTimestamp(r.finished)
	if r.deployment != nil {
		op.Deployment = new(lifecycle.Deployment)
		if err := json.Unmarshal([]byte(*r.deployment), op.Deployment); err != nil {
			return *op, fmt.Errorf("ship operation %s deployment: %w", op.OperationID, err)
		}
	}
	if r.shipErr != nil {
		op.Error = new(lifecycle.ShipError)
		if err := json.Unmarshal([]byte(*r.shipErr), op.Error); err != nil {
			return *op, fmt.Errorf("ship operation %s error: %w", op.OperationID, err)
		}
	}
	if r.wait != nil {
		op.Wait = new(lifecycle.ShipWait)
		if err := json.Unmarshal([]byte(*r.wait), op.Wait); err != nil {
			return *op, fmt.Errorf("ship operation %s wait: %w", op.OperationID, err)
		}
	}
	return *op, nil
}

// shipArgs returns the values of shipColumns.
func shipArgs(op *lifecycle.ShipOperation) ([]any, error) {
	var deployment, shipErr, wait *string
	if op.Wait != nil {
		b, err := json.Marshal(op.Wait)
		if err != nil {
			return nil, err
		}
		s := string(b)
		wait = &s
	}
	if op.Deployment != nil {
		b, err := json.Marshal(op.Deployment)
		if err != nil {
			return nil, err
		}
		s := string(b)
		deployment = &s
	}
	if op.Error != nil {
		b, err := json.Marshal(op.Error)
		if err != nil {
			return nil, err
		}
		s := string(b)
		shipErr = &s
	}
	return []any{op.OperationID, op.TaskID, string(op.Status), string(op.Mode), string(op.TargetEnvironment), op.ExpectedHeadSHA,
		string(op.SubmissionMode), op.PullRequest.Owner, op.PullRequest.Repo, int64(op.PullRequest.Number), op.Actor.ID, string(op.Actor.Role),
		op.TraceID, millis(op.QueuedAt.Time), optionalMillis(op.StartedAt), optionalMillis(op.FinishedAt), op.MergeCommitSHA,
		deployment, shipErr, int32(op.Attempts), millis(op.LeaseUntil.Time), op.LeaseOwner, wait}, nil
}

// ShipOperation implements lifecycle.Store.
func (s *Store) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	if s.closed.Load() {
		return lifecycle.ShipOperation{}, errClosed
	}
	op, err := scanShip(s.pool.QueryRow(ctx, "SELECT "+shipColumns+" FROM ship_operations WHERE id = $1", id))
	if err != nil {
		return op, fmt.Errorf("postgres: ship operation %s: %w", id, s.translate(err))
	}
	return op, nil
}

// ShipOperation implements lifecycle.Tx: SELECT ... FOR UPDATE.
func (x *txn) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	op, err := scanShip(x.tx.QueryRow(ctx, "SELECT "+shipColumns+" FROM ship_operations WHERE id = $1 FOR UPDATE", id))
	if err != nil {
		return op, fmt.Errorf("postgres: ship operation %s: %w", id, x.fail(err))
	}
	return op, nil
}

// ShipOperations implements lifecycle.Store. They come in the order they
// were queued.
func (s *Store) ShipOperations(ctx context.Context, taskID string) ([]lifecycle.ShipOperation, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ops, err := queryAll(ctx, s.pool, scanShip, "SELECT "+shipColumns+" FROM ship_operations WHERE task_id = $1 ORDER BY pos", taskID)
	if err != nil {
		return nil, fmt.Errorf("postgres: ship operations of %s: %w", taskID, s.translate(err))
	}
	return ops, nil
}

// CreateShipOperation implements lifecycle.Tx. It notifies the ship
// runners of every process after commit.
func (x *txn) CreateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return fmt.Errorf("postgres: encode ship operation %s: %w", op.OperationID, err)
	}
	n, err := x.exec(ctx, `INSERT INTO ship_operations (`+shipColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
		ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return fmt.Errorf("postgres: create ship operation %s: %w", op.OperationID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create ship operation %s: one with this ID exists: %w", op.OperationID, lifecycle.ErrConflict)
	}
	x.changes |= lifecycle.ChangeShips
	return nil
}

// UpdateShipOperation implements lifecycle.Tx.
func (x *txn) UpdateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	args, err := shipArgs(&op)
	if err != nil {
		return fmt.Errorf("postgres: encode ship operation %s: %w", op.OperationID, err)
	}
	n, err := x.exec(ctx, `UPDATE ship_operations SET status = $2, started_at = $3, finished_at = $4,
		merge_commit_sha = $5, deployment = $6, error = $7, attempts = $8, lease_until = $9, lease_owner = $10, wait = $11 WHERE id = $1`,
		op.OperationID, args[2], args[14], args[15], args[16], args[17], args[18], args[19], args[20], args[21], args[22])
	if err != nil {
		return fmt.Errorf("postgres: update ship operation %s: %w", op.OperationID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: update ship operation %s: %w", op.OperationID, lifecycle.ErrNotFound)
	}
	return nil
}

// ClaimShipOperations implements lifecycle.Tx: one statement selects the
// runnable operations with FOR UPDATE SKIP LOCKED and updates them, so
// claims made at once take different operations and none waits for
// another.
func (x *txn) ClaimShipOperations(ctx context.Context, p lifecycle.ClaimShipOperationsParams) ([]lifecycle.ShipOperation, error) {
	ops, err := queryAll(ctx, x.tx, scanShip, `WITH runnable AS (
		SELECT pos FROM ship_operations
		WHERE status IN ('queued', 'running') AND (status = 'queued' OR lease_until < $1 OR ($2 AND lease_owner = $3))
		ORDER BY pos LIMIT $4 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE ship_operations o SET status = 'running', attempts = o.attempts + 1,
		started_at = COALESCE(o.started_at, $1), lease_owner = $3, lease_until = $5
		FROM runnable WHERE o.pos = runnable.pos RETURNING o.*)
	SELECT `+shipColumns+` FROM claimed ORDER BY pos`,
		millis(p.Now), p.Resume, p.Owner, p.Limit, millis(p.Until))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim ship operations: %w", x.fail(err))
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
	row := s.pool.QueryRow(ctx, `SELECT COUNT(*) FILTER (WHERE status = 'queued'), COUNT(*) FILTER (WHERE status = 'running')
		FROM ship_operations WHERE status IN ('queued', 'running')`)
	if err := row.Scan(&c.Queued, &c.Running); err != nil {
		return c, fmt.Errorf("postgres: count ship operations: %w", s.translate(err))
	}
	return c, nil
}
