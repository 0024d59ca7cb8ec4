package sqlite

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// AppendEvent implements lifecycle.Tx.
func (x *txn) AppendEvent(ctx context.Context, e *lifecycle.Event) error {
	var project any
	if e.Project != "" {
		project = e.Project
	}
	// Exec and LastInsertId (seq is the rowid) cost a third of RETURNING,
	// which goes through the driver's slower query path.
	res, err := x.conn.ExecContext(x.ctx, `INSERT INTO events (id, type, task_id, project, task_version, occurred_at, trace_id, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, string(e.Type), e.TaskID, project, e.TaskVersion, sqlstore.Millis(e.OccurredAt.Time), e.TraceID, []byte(e.Data))
	if err == nil {
		e.Sequence, err = res.LastInsertId()
	}
	if err != nil {
		return fmt.Errorf("sqlite: append event %s: %w", e.ID, translate(err))
	}
	return nil
}

// Events implements lifecycle.Store. SQLite commits one writer at a time
// and assigns sequences in commit order, so a reader never skips an event.
func (s *Store) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	return s.EventsThrough(ctx, f, math.MaxInt64)
}

// EventBounds implements lifecycle.Store. Last is the AUTOINCREMENT
// counter, which survives the pruning of the newest events; PrunedThrough
// is kept by a trigger on the deletion of events.
func (s *Store) EventBounds(ctx context.Context) (lifecycle.EventBounds, error) {
	if s.closed.Load() {
		return lifecycle.EventBounds{}, errClosed
	}
	var b lifecycle.EventBounds
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
		(SELECT max_seq FROM event_pruned)`).Scan(&b.Last, &b.PrunedThrough)
	if err != nil {
		return lifecycle.EventBounds{}, fmt.Errorf("sqlite: event bounds: %w", translate(err))
	}
	return b, nil
}

// deleteEventsBefore deletes the events that occurred before t, in
// batches so that writers are not held up by a large prune; a trigger
// keeps the greatest sequence deleted (EventBounds.PrunedThrough).
func (s *Store) deleteEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.DeleteInBatches(ctx, "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE occurred_at < $1 ORDER BY seq LIMIT $2)", sqlstore.Millis(t))
	if err != nil {
		return n, fmt.Errorf("sqlite: delete events: %w", err)
	}
	return n, nil
}
