package sqlstore

import (
	"context"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// MergeQueueColumns are the columns of a merge queue, in the order
// scanMergeQueue reads them.
const MergeQueueColumns = `id, mode, project, owner, repo, base, state, version, lease_owner, lease_until, updated_at`

// scanMergeQueue reads one row of MergeQueueColumns.
func scanMergeQueue(row Row) (lifecycletype.MergeQueueRecord, error) {
	var (
		q             lifecycletype.MergeQueueRecord
		mode          string
		until, update int64
	)
	err := row.Scan(&q.ID, &mode, &q.Project, &q.Owner, &q.Repo, &q.Base, &q.State, &q.Version, &q.LeaseOwner, &until, &update)
	if err != nil {
		return q, err
	}
	q.Mode = lifecycletype.SubmitMode(mode)
	q.LeaseUntil, q.UpdatedAt = FromMillis(until), FromMillis(update)
	return q, nil
}

// mergeQueueArgs returns the values of MergeQueueColumns. State is
// stored as it is; a nil State as an empty one, as the column is NOT
// NULL.
func mergeQueueArgs(q *lifecycletype.MergeQueueRecord) []any {
	return []any{q.ID, string(q.Mode), q.Project, q.Owner, q.Repo, q.Base, NonNil(q.State), q.Version,
		q.LeaseOwner, Millis(q.LeaseUntil.Time), Millis(q.UpdatedAt.Time)}
}

// MergeQueues implements lifecycletype.MergeQueueStore: every merge
// queue, in byte order of their IDs.
func (s *Reads) MergeQueues(ctx context.Context) ([]lifecycletype.MergeQueueRecord, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	qs, err := QueryAll(ctx, s.X, scanMergeQueue, "SELECT "+MergeQueueColumns+" FROM merge_queues ORDER BY id"+s.F.Collate)
	if err != nil {
		return nil, s.F.errorf("merge queues: %w", err)
	}
	return qs, nil
}

// MergeQueue implements lifecycletype.MergeQueueStore.
func (s *Reads) MergeQueue(ctx context.Context, id string) (lifecycletype.MergeQueueRecord, error) {
	if err := s.Open(); err != nil {
		return lifecycletype.MergeQueueRecord{}, err
	}
	q, err := scanMergeQueue(s.X.QueryRow(ctx, "SELECT "+MergeQueueColumns+" FROM merge_queues WHERE id = $1", id))
	if err != nil {
		return q, s.F.errorf("merge queue %s: %w", id, err)
	}
	return q, nil
}

// MergeQueue implements lifecycletype.MergeQueueTx: a read for update.
func (x *Tx) MergeQueue(ctx context.Context, id string) (lifecycletype.MergeQueueRecord, error) {
	q, err := scanMergeQueue(x.X.QueryRow(ctx, "SELECT "+MergeQueueColumns+" FROM merge_queues WHERE id = $1"+x.F.ForUpdate, id))
	if err != nil {
		return q, x.F.errorf("merge queue %s: %w", id, err)
	}
	return q, nil
}

// CreateMergeQueue implements lifecycletype.MergeQueueTx. On PostgreSQL
// the insert waits for any other transaction inserting the same ID, and
// fails with ErrConflict when that one commits; on SQLite the transaction
// holds the write lock.
func (x *Tx) CreateMergeQueue(ctx context.Context, q lifecycletype.MergeQueueRecord) error {
	n, err := x.X.Exec(ctx, `INSERT INTO merge_queues (`+MergeQueueColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING`, mergeQueueArgs(&q)...)
	if err != nil {
		return x.F.errorf("create merge queue %s: %w", q.ID, err)
	}
	if n == 0 {
		return x.F.errorf("create merge queue %s: one with this ID exists: %w", q.ID, lifecycletype.ErrConflict)
	}
	return nil
}

// UpdateMergeQueue implements lifecycletype.MergeQueueTx: it replaces
// every column of the queue with q.ID.
func (x *Tx) UpdateMergeQueue(ctx context.Context, q lifecycletype.MergeQueueRecord) error {
	n, err := x.X.Exec(ctx, `UPDATE merge_queues SET mode = $2, project = $3, owner = $4, repo = $5, base = $6,
		state = $7, version = $8, lease_owner = $9, lease_until = $10, updated_at = $11 WHERE id = $1`, mergeQueueArgs(&q)...)
	if err != nil {
		return x.F.errorf("update merge queue %s: %w", q.ID, err)
	}
	if n == 0 {
		return x.F.errorf("update merge queue %s: %w", q.ID, lifecycletype.ErrNotFound)
	}
	return nil
}
