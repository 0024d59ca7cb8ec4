package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// storedMergeQueue returns the copy of q the Store keeps: State copied,
// not shared with the caller, and the times in UTC to the millisecond, as
// the SQL Stores keep them.
func storedMergeQueue(q lifecycletype.MergeQueueRecord) lifecycletype.MergeQueueRecord {
	q = clone(q)
	q.LeaseUntil = lifecycletype.NewTimestamp(q.LeaseUntil.Time)
	q.UpdatedAt = lifecycletype.NewTimestamp(q.UpdatedAt.Time)
	return q
}

// MergeQueues implements lifecycletype.MergeQueueStore: every merge
// queue, in byte order of their IDs.
func (s *Store) MergeQueues(ctx context.Context) ([]lifecycletype.MergeQueueRecord, error) {
	var qs []lifecycletype.MergeQueueRecord
	err := s.read(func(t *tables) error {
		for _, q := range t.mergeQueues {
			qs = append(qs, clone(q))
		}
		return nil
	})
	slices.SortFunc(qs, func(a, b lifecycletype.MergeQueueRecord) int { return cmp.Compare(a.ID, b.ID) })
	return qs, err
}

// MergeQueue implements lifecycletype.MergeQueueStore.
func (s *Store) MergeQueue(ctx context.Context, id string) (lifecycletype.MergeQueueRecord, error) {
	var q lifecycletype.MergeQueueRecord
	err := s.read(func(t *tables) error {
		var err error
		q, err = getMergeQueue(t.mergeQueues, id)
		return err
	})
	return q, err
}

// MergeQueue implements lifecycletype.MergeQueueTx. The transaction runs
// alone, so no other changes the queue before it ends.
func (x *txn) MergeQueue(ctx context.Context, id string) (lifecycletype.MergeQueueRecord, error) {
	return getMergeQueue(x.mergeQueues, id)
}

// getMergeQueue returns a copy of the merge queue with the given ID.
func getMergeQueue(qs entries[string, lifecycletype.MergeQueueRecord], id string) (lifecycletype.MergeQueueRecord, error) {
	q, ok := qs.get(id)
	if !ok {
		return q, fmt.Errorf("memory: merge queue %s: %w", id, lifecycletype.ErrNotFound)
	}
	return clone(q), nil
}

// CreateMergeQueue implements lifecycletype.MergeQueueTx.
func (x *txn) CreateMergeQueue(ctx context.Context, q lifecycletype.MergeQueueRecord) error {
	if _, ok := x.mergeQueues.get(q.ID); ok {
		return fmt.Errorf("memory: create merge queue %s: one with this ID exists: %w", q.ID, lifecycletype.ErrConflict)
	}
	x.mergeQueues.set(q.ID, storedMergeQueue(q))
	return nil
}

// UpdateMergeQueue implements lifecycletype.MergeQueueTx: it replaces the
// queue with q.ID by q.
func (x *txn) UpdateMergeQueue(ctx context.Context, q lifecycletype.MergeQueueRecord) error {
	if _, ok := x.mergeQueues.get(q.ID); !ok {
		return fmt.Errorf("memory: update merge queue %s: %w", q.ID, lifecycletype.ErrNotFound)
	}
	x.mergeQueues.set(q.ID, storedMergeQueue(q))
	return nil
}
