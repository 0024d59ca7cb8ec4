package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// currentSeq is the greatest sequence handed out so far, or 0.
const currentSeq = "(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_seq)"

// seqKeyRange is the range of the second half of the advisory lock keys:
// a sequence modulo it. Readers recover the sequence from the current one.
const seqKeyRange = 1 << 31

// lockAppendsSQL takes the transaction's shared advisory lock, keyed by
// the schema and the greatest sequence handed out so far, before the
// transaction draws a sequence of its own: every sequence it draws is
// greater than the key.
const lockAppendsSQL = "SELECT pg_advisory_xact_lock_shared($1::int4, (" + currentSeq + " % " + "2147483648)::int4)"

// appendEventSQL inserts an event with the next sequence.
const appendEventSQL = `INSERT INTO events (seq, id, type, task_id, project, task_version, occurred_at, trace_id, data)
VALUES (nextval('events_seq'), $1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING RETURNING seq`

// AppendEvent implements lifecycle.Tx. The first append of a transaction
// takes its advisory lock, in the same round trip as the insert.
func (x *txn) AppendEvent(ctx context.Context, e *lifecycle.Event) error {
	var project *string
	if e.Project != "" {
		project = &e.Project
	}
	args := []any{e.ID, string(e.Type), e.TaskID, project, e.TaskVersion,
		sqlstore.Millis(e.OccurredAt.Time), e.TraceID, []byte(e.Data)}
	var (
		seq int64
		err error
	)
	if x.appending {
		err = x.tx.QueryRow(ctx, appendEventSQL, args...).Scan(&seq)
	} else {
		b := &pgx.Batch{}
		b.Queue(lockAppendsSQL, x.s.ns)
		b.Queue(appendEventSQL, args...)
		br := x.tx.SendBatch(ctx, b)
		if _, err = br.Exec(); err == nil {
			x.appending = true
			err = br.QueryRow().Scan(&seq)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) { // ON CONFLICT DO NOTHING
			return fmt.Errorf("postgres: append event %s: an event with this ID exists: %w", e.ID, lifecycle.ErrConflict)
		}
		return fmt.Errorf("postgres: append event %s: %w", e.ID, x.fail(err))
	}
	e.Sequence = seq
	x.Changes |= lifecycle.ChangeEvents
	return nil
}

// horizon returns a sequence at or before which every event has been
// committed or rolled back: the greatest sequence handed out, or less when
// a transaction that may hold a smaller one is still open. Its two reads
// come in this order, in one round trip: first the greatest sequence L,
// then the keys of the advisory locks held. A transaction that drew a
// sequence no greater than L took its lock before: if it is still open,
// its key (less than its sequences) is among those read; if it has ended,
// PostgreSQL made its events visible before it released its lock, so the
// next statement's snapshot sees them.
func (s *Store) horizon(ctx context.Context) (int64, error) {
	b := &pgx.Batch{}
	b.Queue("SELECT " + currentSeq)
	b.Queue(`SELECT objid::int8 FROM pg_locks WHERE locktype = 'advisory' AND classid::int8 = $1 AND objsubid = 2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, s.ns)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var last int64
	if err := br.QueryRow().Scan(&last); err != nil {
		return 0, err
	}
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	h := last
	for rows.Next() {
		var key int64
		if err := rows.Scan(&key); err != nil {
			return 0, err
		}
		// The greatest sequence no greater than last that is key modulo
		// seqKeyRange.
		h = min(h, last-((last-key)%seqKeyRange+seqKeyRange)%seqKeyRange)
	}
	return h, rows.Err()
}

// Events implements lifecycle.Store. It returns no event past the
// horizon, so that an event committed later with a smaller sequence is
// never skipped.
func (s *Store) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	h, err := s.horizon(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: events: %w", s.translate(err))
	}
	if h <= f.After {
		return nil, nil
	}
	return s.EventsThrough(ctx, f, h)
}

// EventBounds implements lifecycle.Store. Last is the greatest sequence
// of a committed event within the horizon, kept or pruned; PrunedThrough
// is the sequence deleteEventsBefore keeps. Both are read in one
// statement.
func (s *Store) EventBounds(ctx context.Context) (lifecycle.EventBounds, error) {
	if s.closed.Load() {
		return lifecycle.EventBounds{}, errClosed
	}
	h, err := s.horizon(ctx)
	if err != nil {
		return lifecycle.EventBounds{}, fmt.Errorf("postgres: event bounds: %w", s.translate(err))
	}
	var b lifecycle.EventBounds
	err = s.pool.QueryRow(ctx, `SELECT GREATEST((SELECT max(seq) FROM events WHERE seq <= $1), LEAST(max_seq, $1), 0), max_seq
		FROM event_pruned`, h).Scan(&b.Last, &b.PrunedThrough)
	if err != nil {
		return lifecycle.EventBounds{}, fmt.Errorf("postgres: event bounds: %w", s.translate(err))
	}
	return b, nil
}

// deleteEventsBefore deletes the events that occurred before t, in
// batches. It keeps the greatest sequence it deletes, for EventBounds.
func (s *Store) deleteEventsBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		if s.closed.Load() {
			return total, errClosed
		}
		var n int64
		err := s.pool.QueryRow(ctx, `WITH d AS (
			DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE occurred_at < $1 ORDER BY seq LIMIT $2) RETURNING seq),
		u AS (UPDATE event_pruned SET max_seq = GREATEST(max_seq, (SELECT max(seq) FROM d)) WHERE EXISTS (SELECT 1 FROM d))
		SELECT count(*) FROM d`, sqlstore.Millis(t), sqlstore.DeleteBatch).Scan(&n)
		if err != nil {
			return total, fmt.Errorf("postgres: delete events: %w", s.translate(err))
		}
		total += n
		if n < sqlstore.DeleteBatch {
			return total, nil
		}
	}
}
