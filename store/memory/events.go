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

// Events implements lifecycle.Store. An unknown f.ID gives no event.
func (s *Store) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	var evs []lifecycle.Event
	err := s.read(func(t *tables) error {
		if f.ID != "" {
			// One event at most: found by its ID, not by a scan.
			e, ok := t.events.get(f.ID)
			if ok && e.Sequence > f.After && eventMatches(&e, &f) {
				evs = append(evs, clone(e))
			}
			return nil
		}
		for _, e := range t.events.after(f.After) {
			if len(evs) == limit {
				break
			}
			if eventMatches(&e, &f) {
				evs = append(evs, clone(e))
			}
		}
		return nil
	})
	return evs, err
}

// eventMatches reports whether e passes the types and task of the
// filter f.
func eventMatches(e *lifecycle.Event, f *lifecycle.EventFilter) bool {
	return (len(f.Types) == 0 || slices.Contains(f.Types, e.Type)) && (f.TaskID == "" || e.TaskID == f.TaskID)
}

// EventBounds implements lifecycle.Store: Last is the last position of
// the events table, which pruning leaves as it is.
func (s *Store) EventBounds(ctx context.Context) (lifecycle.EventBounds, error) {
	var b lifecycle.EventBounds
	err := s.read(func(t *tables) error {
		b = lifecycle.EventBounds{Last: t.events.last, PrunedThrough: t.prunedThrough}
		return nil
	})
	return b, err
}

// deleteEventsBefore deletes the events that occurred before before, and
// keeps the greatest sequence deleted. It returns how many it deleted.
func (t *tables) deleteEventsBefore(before time.Time) int64 {
	return t.events.deleteWhere(func(e lifecycle.Event) string { return e.ID }, func(e lifecycle.Event) bool {
		if e.OccurredAt.Before(before) {
			t.prunedThrough = max(t.prunedThrough, e.Sequence)
			return true
		}
		return false
	})
}
