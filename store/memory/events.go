package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// AppendEvent implements lifecycle.Tx. The event's sequence is its
// position in the events table: transactions run one at a time and
// readers see only what they committed, so sequences become visible in
// order and a reader never skips an event.
func (x *txn) AppendEvent(ctx context.Context, e *lifecycle.Event) error {
	seq, ok := x.events.insert(e.ID, lifecycle.Event{})
	if !ok {
		return fmt.Errorf("memory: append event %s: %w", e.ID, lifecycle.ErrConflict)
	}
	stored := clone(*e)
	stored.Sequence = seq
	x.events.replace(e.ID, stored)
	e.Sequence = seq
	x.changes |= lifecycle.ChangeEvents
	return nil
}

// Events implements lifecycle.Store.
func (s *Store) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	var evs []lifecycle.Event
	err := s.read(func(t *tables) error {
		for _, e := range t.events.after(f.After) {
			if len(evs) == limit {
				break
			}
			if (len(f.Types) == 0 || slices.Contains(f.Types, e.Type)) && (f.TaskID == "" || e.TaskID == f.TaskID) {
				evs = append(evs, clone(e))
			}
		}
		return nil
	})
	return evs, err
}

// Event implements lifecycle.Store.
func (s *Store) Event(ctx context.Context, id string) (lifecycle.Event, error) {
	var e lifecycle.Event
	err := s.read(func(t *tables) error {
		stored, ok := t.events.get(id)
		if !ok {
			return fmt.Errorf("memory: event %s: %w", id, lifecycle.ErrNotFound)
		}
		e = clone(stored)
		return nil
	})
	return e, err
}

// LastEventSequence implements lifecycle.Store: the last position of the
// events table, which pruning leaves as it is.
func (s *Store) LastEventSequence(ctx context.Context) (int64, error) {
	var seq int64
	err := s.read(func(t *tables) error {
		seq = t.events.last
		return nil
	})
	return seq, err
}

// EventsPrunedThrough implements lifecycle.Store.
func (s *Store) EventsPrunedThrough(ctx context.Context) (int64, error) {
	var seq int64
	err := s.read(func(t *tables) error {
		seq = t.prunedThrough
		return nil
	})
	return seq, err
}

// DeleteEventsBefore implements lifecycle.Store.
func (s *Store) DeleteEventsBefore(ctx context.Context, before time.Time) (int64, error) {
	return s.prune(ctx, func(t *tables) int64 {
		return t.events.deleteWhere(func(e lifecycle.Event) string { return e.ID }, func(e lifecycle.Event) bool {
			if e.OccurredAt.Before(before) {
				t.prunedThrough = max(t.prunedThrough, e.Sequence)
				return true
			}
			return false
		})
	})
}
