package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/id"
)

// Limits and constants of the event stream (GET /task-events/stream).
const (
	// streamRetryMillis is the reconnection delay every frame's retry
	// field asks of clients.
	streamRetryMillis = 5000
	// streamRetryAfter is the Retry-After, in seconds, of a stream refused
	// by the per-key limit: the same delay as the retry field.
	streamRetryAfter = streamRetryMillis / 1000
	// defaultHeartbeat, minHeartbeat and maxHeartbeat bound heartbeatSeconds.
	defaultHeartbeat = 20
	minHeartbeat     = 10
	maxHeartbeat     = 60
	// replayPage is how many stored events a stream reads at once.
	replayPage = 1000
	// liveBatch is the most frames a live stream writes before it flushes.
	liveBatch = 256
)

// Resume modes of the X-Service-Resume-Mode header.
const (
	resumeLive   = "live"
	resumeReplay = "replay_then_live"
)

// allEventTypes lists the event types in the order the contract names them.
var allEventTypes = []EventType{EventTaskUpdated, EventTaskReviewed, EventTaskShipped, EventTaskAwaitingUser}

// errStreamBehind ends a live stream that fell out of the broker's ring.
var errStreamBehind = errors.New("the consumer fell too far behind the newest events")

// streamFilter selects the events a stream carries.
type streamFilter struct {
	types  []EventType // empty: all
	taskID string      // "": all
}

// keep reports whether an event of type typ about task taskID passes f.
func (f *streamFilter) keep(typ EventType, taskID string) bool {
	if f.taskID != "" && f.taskID != taskID {
		return false
	}
	return len(f.types) == 0 || slices.Contains(f.types, typ)
}

// streamParams are the validated parameters of a stream request.
type streamParams struct {
	filter    streamFilter
	cursor    string // "" starts at the live tail
	heartbeat time.Duration
}

// parseStreamParams reads and checks the query and the Last-Event-ID
// header. It returns a *ValidationError naming every bad parameter.
func parseStreamParams(r *http.Request) (streamParams, error) {
	q := r.URL.Query()
	p := streamParams{heartbeat: defaultHeartbeat * time.Second}
	var v validator
	if vals, ok := q["eventTypes"]; ok {
		var unknown []string
		empty := false
		for _, part := range strings.Split(strings.Join(vals, ","), ",") {
			t := EventType(strings.TrimSpace(part))
			switch {
			case t == "":
				empty = true
			case !t.Valid():
				unknown = append(unknown, strconv.Quote(string(t)))
			case !slices.Contains(p.filter.types, t):
				p.filter.types = append(p.filter.types, t)
			}
		}
		allowed := "task.updated, task.reviewed, task.shipped or task.awaiting_user"
		switch {
		case len(unknown) > 0:
			v.add("eventTypes", fmt.Sprintf("unknown event type %s; allowed: %s", strings.Join(unknown, ", "), allowed))
		case empty:
			v.add("eventTypes", "must be a comma-separated list without empty items of "+allowed)
		}
	}
	if vals, ok := q["taskId"]; ok {
		if len(vals) != 1 || !validTaskID(vals[0]) {
			v.add("taskId", "must be one task ID matching tsk_[A-Za-z0-9]+")
		} else {
			p.filter.taskID = vals[0]
		}
	}
	if vals, ok := q["heartbeatSeconds"]; ok {
		n, err := strconv.Atoi(vals[0])
		if len(vals) != 1 || err != nil || n < minHeartbeat || n > maxHeartbeat {
			v.add("heartbeatSeconds", fmt.Sprintf("must be an integer from %d to %d", minHeartbeat, maxHeartbeat))
		} else {
			p.heartbeat = time.Duration(n) * time.Second
		}
	}
	p.cursor = strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if p.cursor == "" {
		p.cursor = strings.TrimSpace(q.Get("cursor"))
	}
	return p, v.err()
}

// handleStream serves GET /task-events/stream: the events after the cursor
// (or from the live tail), then live ones, as server-sent events.
func (s *Service) handleStream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	params, err := parseStreamParams(r)
	if err != nil {
		return err
	}
	if err := s.broker.acquire(r.Context(), p.ID); err != nil {
		return err
	}
	defer s.broker.release(p.ID)
	pos, mode, err := s.streamStart(r.Context(), params.cursor)
	if err != nil {
		return err
	}

	// From here on the response is a stream: errors end it and are logged.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.broker.ctx, cancel)()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
	h.Set("X-Service-Replay-Window-Hours", strconv.FormatInt(int64(s.cfg.EventRetention/time.Hour), 10))
	h.Set("X-Service-Stream-Heartbeat-Seconds", strconv.Itoa(int(params.heartbeat/time.Second)))
	h.Set("X-Service-Resume-Mode", mode)
	st := &stream{
		svc:       s,
		w:         w,
		rc:        http.NewResponseController(w),
		filter:    params.filter,
		pos:       pos,
		heartbeat: params.heartbeat,
		principal: p.ID,
	}
	w.WriteHeader(http.StatusOK)
	if err := st.flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			s.log.ErrorContext(ctx, "event stream: the response writer cannot flush; mount the handler behind middleware whose ResponseWriter implements http.Flusher or Unwrap", "err", err)
		}
		return nil
	}
	err = st.run(ctx)
	switch {
	case errors.Is(err, errStreamBehind):
		s.log.WarnContext(ctx, "event stream cut off; the client resumes from its cursor", "principal", p.ID, "position", st.pos, "err", err)
	case err != nil && ctx.Err() == nil:
		s.log.InfoContext(ctx, "event stream ended", "principal", p.ID, "position", st.pos, "err", err)
	}
	return nil
}

// streamStart returns the sequence a stream starts after, and its resume
// mode: the cursor's sequence, or the last committed one when there is no
// cursor. An unknown cursor, or one older than the replay window, gives an
// error matching ErrCursorExpired.
func (s *Service) streamStart(ctx context.Context, cursor string) (int64, string, error) {
	if cursor == "" {
		last, err := s.store.LastEventSequence(ctx)
		if err != nil {
			return 0, "", fmt.Errorf("find the live tail: %w", err)
		}
		return last, resumeLive, nil
	}
	expired := fmt.Errorf("cursor %q is unknown or older than the %d-hour replay window; reconnect without a cursor to get the live tail: %w",
		cursor, int64(s.cfg.EventRetention/time.Hour), ErrCursorExpired)
	if !id.Valid(cursor, "evt_") {
		return 0, "", expired
	}
	e, err := s.store.Event(ctx, cursor)
	if errors.Is(err, ErrNotFound) {
		return 0, "", expired
	}
	if err != nil {
		return 0, "", fmt.Errorf("find cursor %s: %w", cursor, err)
	}
	if e.OccurredAt.Before(s.clock.Now().Add(-s.cfg.EventRetention)) {
		return 0, "", expired
	}
	return e.Sequence, resumeReplay, nil
}

// stream is one open event stream.
type stream struct {
	svc       *Service
	w         http.ResponseWriter
	rc        *http.ResponseController
	filter    streamFilter
	heartbeat time.Duration
	principal string

	// pos is the sequence read through: every event the stream carries
	// with a sequence up to pos has been written.
	pos int64
	// live is set once the stream reads from the broker's ring; falling
	// out of the ring afterwards cuts it off.
	live      bool
	lastWrite time.Time // by the Service's clock, for heartbeats
	frames    [][]byte  // reused between reads of the ring
	buf       []byte    // reused frame encoding buffer of replay
}

// run writes events until the client goes away, the Service closes (both
// cancel ctx), a write fails or the stream falls too far behind.
func (st *stream) run(ctx context.Context) error {
	b, clock := st.svc.broker, st.svc.clock
	st.lastWrite = clock.Now()
	beat := clock.After(st.heartbeat)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		frames, next, changed, ok := b.read(st.pos, &st.filter, st.frames[:0], liveBatch)
		if !ok {
			if st.live {
				return fmt.Errorf("%w: read through sequence %d, the broker keeps the last %d events", errStreamBehind, st.pos, len(b.ring.buf))
			}
			if err := st.replay(ctx); err != nil {
				return err
			}
			continue
		}
		st.live = true
		st.pos = next
		st.frames = frames
		if len(frames) > 0 {
			err := st.write(frames...)
			clear(frames) // let the ring's frames go
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-beat:
			now := clock.Now()
			idle := now.Sub(st.lastWrite)
			if idle < st.heartbeat {
				beat = clock.After(st.heartbeat - idle)
				continue
			}
			if err := st.write(fmt.Appendf(nil, ": keepalive %s\n\n", NewTimestamp(now))); err != nil {
				return err
			}
			beat = clock.After(st.heartbeat)
		}
	}
}

// replay writes the stored events after pos that pass the filter, up to
// the newest, and leaves pos where the broker's ring can take over.
func (st *stream) replay(ctx context.Context) error {
	for {
		// Every event up to the broker's position was committed before
		// this read starts, so the read returns those the filter keeps.
		through := st.svc.broker.position()
		evs, err := st.svc.store.Events(ctx, EventFilter{After: st.pos, Types: st.filter.types, TaskID: st.filter.taskID, Limit: replayPage})
		if err != nil {
			return fmt.Errorf("replay events after sequence %d: %w", st.pos, err)
		}
		if len(evs) > 0 {
			st.buf = st.buf[:0]
			for i := range evs {
				if st.buf, err = appendFrame(st.buf, &evs[i]); err != nil {
					st.svc.log.ErrorContext(ctx, "event stream: stored event is corrupt; sent with null data", "err", err)
				}
			}
			if err := st.write(st.buf); err != nil {
				return err
			}
			st.pos = evs[len(evs)-1].Sequence
		}
		if len(evs) < replayPage {
			st.pos = max(st.pos, through)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// write writes chunks and flushes them, within the write timeout.
func (st *stream) write(chunks ...[]byte) error {
	// A socket deadline is wall-clock time, not the Service's clock. It
	// also lifts any WriteTimeout of the host's http.Server.
	err := st.rc.SetWriteDeadline(time.Now().Add(st.svc.cfg.StreamWriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("set write deadline: %w", err)
	}
	for _, c := range chunks {
		if _, err := st.w.Write(c); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return st.flush()
}

// flush sends what has been written.
func (st *stream) flush() error {
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	st.lastWrite = st.svc.clock.Now()
	return nil
}

// appendFrame appends the server-sent event frame of e to dst: its retry,
// id, event and data fields and a blank line. The data is the event's JSON
// envelope on one line, encoded like every response body of the API. When
// the stored data of e is not valid JSON the frame carries "data": null and
// the error is returned, so that the caller logs it and the event, with its
// id, still reaches the client.
func appendFrame(dst []byte, e *Event) ([]byte, error) {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, streamRetryMillis, 10)
	dst = append(dst, "\nid: "...)
	dst = append(dst, e.ID...)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, e.Type...)
	dst = append(dst, "\ndata: "...)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(e)
	if err != nil {
		err = fmt.Errorf("encode event %s: %w", e.ID, err)
		buf.Reset()
		bad := *e
		bad.Data = json.RawMessage("null")
		enc.Encode(&bad) // a valid envelope always encodes
	}
	dst = append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	return append(dst, "\n\n"...), err
}
