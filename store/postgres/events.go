package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
)

const eventColumns = "seq, id, type, task_id, project, task_version, occurred_at, trace_id, data"

func scanEvent(row scanner) (lifecycle.Event, error) {
	var (
		e        lifecycle.Event
		typ      string
		project  *string
		occurred int64
		data     []byte
	)
	if err := row.Scan(&e.Sequence, &e.ID, &typ, &e.TaskID, &project, &e.TaskVersion, &occurred, &e.TraceID, &data); err != nil {
		return e, err
	}
	e.Type = lifecycle.EventType(typ)
	if project != nil {
		e.Project = *project
	}
	e.OccurredAt = fromMillis(occurred)
	e.Data = data
	return e, nil
}

// appendEventSQL takes the next sequence from the counter, whose row stays
// locked until the transaction ends, inserts the event with it and sends
// the events notification, which is delivered at commit.
const appendEventSQL = `WITH c AS (UPDATE event_counter SET last_seq = last_seq + 1 RETURNING last_seq),
	n AS (SELECT pg_notify($9, ''))
INSERT INTO events (seq, id, type, task_id, project, task_version, occurred_at, trace_id, data)
SELECT c.last_seq, $1, $2, $3, $4, $5, $6, $7, $8 FROM c, n
ON CONFLICT DO NOTHING RETURNING seq`

// AppendEvent implements lifecycle.Tx. The transaction holds the event
// counter from now until it ends (see the package documentation).
func (x *txn) AppendEvent(ctx context.Context, e *lifecycle.Event) error {
	var project *string
	if e.Project != "" {
		project = &e.Project
	}
	var seq int64
	err := x.tx.QueryRow(ctx, appendEventSQL, e.ID, string(e.Type), e.TaskID, project, e.TaskVersion,
		millis(e.OccurredAt.Time), e.TraceID, []byte(e.Data), x.s.channel(lifecycle.ChangeEvents)).Scan(&seq)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) { // ON CONFLICT DO NOTHING
			return fmt.Errorf("postgres: append event %s: an event with this ID exists: %w", e.ID, lifecycle.ErrConflict)
		}
		return fmt.Errorf("postgres: append event %s: %w", e.ID, x.fail(err))
	}
	e.Sequence = seq
	return nil
}

// Events implements lifecycle.Store. Appends are serialised by the event
// counter, so events commit in sequence order and a reader never skips
// one.
func (s *Store) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	var b strings.Builder
	args := make([]any, 0, 4)
	b.WriteString("SELECT " + eventColumns + " FROM events WHERE seq > $1")
	args = append(args, f.After)
	if len(f.Types) > 0 {
		types := make([]string, len(f.Types))
		for i, t := range f.Types {
			types[i] = string(t)
		}
		args = append(args, types)
		b.WriteString(" AND type = ANY($" + strconv.Itoa(len(args)) + ")")
	}
	if f.TaskID != "" {
		args = append(args, f.TaskID)
		b.WriteString(" AND task_id = $" + strconv.Itoa(len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	args = append(args, limit)
	b.WriteString(" ORDER BY seq LIMIT $" + strconv.Itoa(len(args)))
	evs, err := queryAll(ctx, s.pool, scanEvent, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: events: %w", s.translate(err))
	}
	return evs, nil
}

// Event implements lifecycle.Store.
func (s *Store) Event(ctx context.Context, id string) (lifecycle.Event, error) {
	if s.closed.Load() {
		return lifecycle.Event{}, errClosed
	}
	e, err := scanEvent(s.pool.QueryRow(ctx, "SELECT "+eventColumns+" FROM events WHERE id = $1", id))
	if err != nil {
		return e, fmt.Errorf("postgres: event %s: %w", id, s.translate(err))
	}
	return e, nil
}

// LastEventSequence implements lifecycle.Store. It reads the committed
// value of the event counter, which pruning does not lower.
func (s *Store) LastEventSequence(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, "SELECT last_seq FROM event_counter").Scan(&seq); err != nil {
		return 0, fmt.Errorf("postgres: last event sequence: %w", s.translate(err))
	}
	return seq, nil
}

// DeleteEventsBefore implements lifecycle.Store.
func (s *Store) DeleteEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE occurred_at < $1 ORDER BY seq LIMIT $2)", millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete events: %w", err)
	}
	return n, nil
}

// deleteBatch is the most rows deleteInBatches deletes in one statement.
const deleteBatch = 5000

// deleteInBatches runs query, a DELETE of at most as many rows as its
// last parameter says, in statements of deleteBatch rows until one deletes
// fewer, so that a large prune holds no lock for long. It returns how many
// rows it deleted.
func (s *Store) deleteInBatches(ctx context.Context, query string, args ...any) (int64, error) {
	args = append(args, deleteBatch)
	var total int64
	for {
		if s.closed.Load() {
			return total, errClosed
		}
		tag, err := s.pool.Exec(ctx, query, args...)
		if err != nil {
			return total, s.translate(err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < deleteBatch {
			return total, nil
		}
	}
}
