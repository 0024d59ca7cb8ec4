package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

const eventColumns = "seq, id, type, task_id, project, task_version, occurred_at, trace_id, data"

func scanEvent(row scanner) (lifecycle.Event, error) {
	var (
		e        lifecycle.Event
		typ      string
		project  sql.NullString
		trace    sql.NullString
		occurred int64
		data     []byte
	)
	if err := row.Scan(&e.Sequence, &e.ID, &typ, &e.TaskID, &project, &e.TaskVersion, &occurred, &trace, &data); err != nil {
		return e, translate(err)
	}
	e.Type = lifecycle.EventType(typ)
	e.Project = project.String
	e.OccurredAt = fromMillis(occurred)
	e.TraceID = nullString(&trace)
	e.Data = data
	return e, nil
}

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
		e.ID, string(e.Type), e.TaskID, project, e.TaskVersion, millis(e.OccurredAt.Time), e.TraceID, []byte(e.Data))
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
	if s.closed.Load() {
		return nil, errClosed
	}
	var b strings.Builder
	args := make([]any, 0, 4+len(f.Types))
	b.WriteString("SELECT " + eventColumns + " FROM events WHERE seq > ?")
	args = append(args, f.After)
	if len(f.Types) > 0 {
		b.WriteString(" AND type IN (?" + strings.Repeat(", ?", len(f.Types)-1) + ")")
		for _, t := range f.Types {
			args = append(args, string(t))
		}
	}
	if f.TaskID != "" {
		b.WriteString(" AND task_id = ?")
		args = append(args, f.TaskID)
	}
	if f.ID != "" {
		b.WriteString(" AND id = ?")
		args = append(args, f.ID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	b.WriteString(" ORDER BY seq LIMIT ?")
	args = append(args, limit)
	evs, err := queryAll(ctx, s.r, scanEvent, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	return evs, nil
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
	n, err := s.deleteInBatches(ctx, "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE occurred_at < ? ORDER BY seq LIMIT ?)", millis(t))
	if err != nil {
		return n, fmt.Errorf("sqlite: delete events: %w", err)
	}
	return n, nil
}

// deleteBatch is the most rows deleteInBatches deletes in one transaction.
const deleteBatch = 5000

// deleteInBatches runs query, a DELETE of at most as many rows as its
// last parameter says, in transactions of deleteBatch rows until one
// deletes fewer, so that other writers are not held up for long by a
// large prune. It returns how many rows it deleted.
func (s *Store) deleteInBatches(ctx context.Context, query string, args ...any) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	args = append(args, deleteBatch)
	var total int64
	for {
		var n int64
		err := s.write(ctx, false, func(x *txn) error {
			res, err := x.conn.ExecContext(x.ctx, query, args...)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			return nil
		})
		if err != nil {
			return total, translate(err)
		}
		total += n
		if n < deleteBatch {
			return total, nil
		}
	}
}
