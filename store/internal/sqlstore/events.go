package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle"
)

const eventColumns = "seq, id, type, task_id, project, task_version, occurred_at, trace_id, data"

func scanEvent(row Row) (lifecycle.Event, error) {
	var (
		e        lifecycle.Event
		typ      string
		project  sql.NullString
		trace    sql.NullString
		occurred int64
		data     []byte
	)
	if err := row.Scan(&e.Sequence, &e.ID, &typ, &e.TaskID, &project, &e.TaskVersion, &occurred, &trace, &data); err != nil {
		return e, err
	}
	e.Type = lifecycle.EventType(typ)
	e.Project = project.String
	e.OccurredAt = FromMillis(occurred)
	e.TraceID = NullString(&trace)
	e.Data = data
	return e, nil
}

// EventsThrough returns the events f selects whose sequence is not past
// through, for lifecycle.Store.Events: a store gives the greatest
// sequence at or below which every event is committed or rolled back.
func (s *Reads) EventsThrough(ctx context.Context, f lifecycle.EventFilter, through int64) ([]lifecycle.Event, error) {
	if err := s.Open(); err != nil {
		return nil, err
	}
	var b strings.Builder
	args := make([]any, 0, 5+len(f.Types))
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	b.WriteString("SELECT " + eventColumns + " FROM events WHERE seq > " + arg(f.After) + " AND seq <= " + arg(through))
	if len(f.Types) > 0 {
		b.WriteString(" AND type IN (")
		for i, t := range f.Types {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(arg(string(t)))
		}
		b.WriteString(")")
	}
	if f.TaskID != "" {
		b.WriteString(" AND task_id = " + arg(f.TaskID))
	}
	if f.ID != "" {
		b.WriteString(" AND id = " + arg(f.ID))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	b.WriteString(" ORDER BY seq LIMIT " + arg(limit))
	evs, err := QueryAll(ctx, s.X, scanEvent, b.String(), args...)
	if err != nil {
		return nil, s.F.errorf("events: %w", err)
	}
	return evs, nil
}
