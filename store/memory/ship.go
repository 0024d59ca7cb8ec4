package memory

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
)

// storedShip returns the copy of op the Store keeps: without
// AvailableActions, which the Service computes.
func storedShip(op lifecycle.ShipOperation) lifecycle.ShipOperation {
	op = clone(op)
	op.AvailableActions = nil
	return op
}

// ShipOperation implements lifecycle.Store.
func (s *Store) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	var op lifecycle.ShipOperation
	err := s.read(func(t *tables) error {
		var err error
		op, err = getShip(t.ships, id)
		return err
	})
	return op, err
}

// ShipOperation implements lifecycle.Tx. The transaction runs alone, so
// no other changes the operation before it ends.
func (x *txn) ShipOperation(ctx context.Context, id string) (lifecycle.ShipOperation, error) {
	return getShip(x.ships, id)
}

// getShip returns a copy of the ship operation with the given ID.
func getShip(ships records[lifecycle.ShipOperation], id string) (lifecycle.ShipOperation, error) {
	op, ok := ships.get(id)
	if !ok {
		return op, fmt.Errorf("memory: ship operation %s: %w", id, lifecycle.ErrNotFound)
	}
	return clone(op), nil
}

// ShipOperations implements lifecycle.Store. They come in the order they
// were queued.
func (s *Store) ShipOperations(ctx context.Context, taskID string) ([]lifecycle.ShipOperation, error) {
	var ops []lifecycle.ShipOperation
	err := s.read(func(t *tables) error {
		for _, op := range t.ships.all() {
			if op.TaskID == taskID {
				ops = append(ops, clone(op))
			}
		}
		return nil
	})
	return ops, err
}

// CreateShipOperation implements lifecycle.Tx. Every Listen is told at
// commit.
func (x *txn) CreateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	if _, ok := x.ships.insert(op.OperationID, storedShip(op)); !ok {
		return fmt.Errorf("memory: create ship operation %s: %w", op.OperationID, lifecycle.ErrConflict)
	}
	x.changes |= lifecycle.ChangeShips
	return nil
}

// UpdateShipOperation implements lifecycle.Tx. What an operation asks for
// (its task, mode, environment, head, pull request, actor, trace and
// queue time) never changes: those of the stored operation are kept.
func (x *txn) UpdateShipOperation(ctx context.Context, op lifecycle.ShipOperation) error {
	old, ok := x.ships.get(op.OperationID)
	if !ok {
		return fmt.Errorf("memory: update ship operation %s: %w", op.OperationID, lifecycle.ErrNotFound)
	}
	next := storedShip(op)
	next.TaskID, next.Mode, next.TargetEnvironment, next.ExpectedHeadSHA = old.TaskID, old.Mode, old.TargetEnvironment, old.ExpectedHeadSHA
	next.SubmissionMode, next.PullRequest, next.Actor = old.SubmissionMode, old.PullRequest, old.Actor
	next.TraceID, next.QueuedAt = old.TraceID, old.QueuedAt
	x.ships.replace(op.OperationID, next)
	return nil
}

// ClaimShipOperations implements lifecycle.Tx. The transaction runs
// alone, so the claim is atomic with respect to every other: each
// operation goes to one claimer.
func (x *txn) ClaimShipOperations(ctx context.Context, p lifecycle.ClaimShipOperationsParams) ([]lifecycle.ShipOperation, error) {
	var claimed []lifecycle.ShipOperation
	for _, op := range x.ships.all() {
		if len(claimed) >= p.Limit {
			break
		}
		queued := op.Status == lifecycle.ShipQueued
		running := op.Status == lifecycle.ShipRunning
		if !queued && !(running && (op.LeaseUntil.Before(p.Now) || p.Resume && op.LeaseOwner == p.Owner)) {
			continue
		}
		op.Status = lifecycle.ShipRunning
		op.Attempts++
		if op.StartedAt == nil {
			at := lifecycle.NewTimestamp(p.Now)
			op.StartedAt = &at
		}
		op.LeaseOwner, op.LeaseUntil = p.Owner, lifecycle.NewTimestamp(p.Until)
		x.ships.replace(op.OperationID, op)
		claimed = append(claimed, clone(op))
	}
	return claimed, nil
}

// CountShipQueue implements lifecycle.ShipQueueCounter.
func (s *Store) CountShipQueue(ctx context.Context) (lifecycle.ShipQueueCounts, error) {
	var c lifecycle.ShipQueueCounts
	err := s.read(func(t *tables) error {
		for _, op := range t.ships.all() {
			switch op.Status {
			case lifecycle.ShipQueued:
				c.Queued++
			case lifecycle.ShipRunning:
				c.Running++
			}
		}
		return nil
	})
	return c, err
}
