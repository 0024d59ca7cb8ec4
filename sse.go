package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/fanout"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/sse"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Limits and constants of the event stream (GET /task-events/stream).
const (
	// streamRetryAfter is the Retry-After, in seconds, of a stream refused
	// by the per-key limit: the same delay as the frames' retry field.
	streamRetryAfter = broker.RetryMillis / 1000
	// defaultHeartbeat, minHeartbeat and maxHeartbeat bound heartbeatSeconds.
	defaultHeartbeat = 20
	minHeartbeat     = 10
	maxHeartbeat     = 60
	// replayPage is how many stored events a stream reads at once.
	replayPage = 256
)

// Resume modes of the X-Service-Resume-Mode header.
const (
	resumeLive   = "live"
	resumeReplay = "replay_then_live"
)

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
	var v lifecycletype.Validator
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
			v.Add("eventTypes", fmt.Sprintf("unknown event type %s; allowed: %s", strings.Join(unknown, ", "), allowed))
		case empty:
			v.Add("eventTypes", "must be a comma-separated list without empty items of "+allowed)
		}
	}
	if vals, ok := q["taskId"]; ok {
		if len(vals) != 1 || !validTaskID(vals[0]) {
			v.Add("taskId", "must be one task ID matching tsk_[A-Za-z0-9]+")
		} else {
			p.filter.taskID = vals[0]
		}
	}
	if vals, ok := q["heartbeatSeconds"]; ok {
		n, err := strconv.Atoi(vals[0])
		if len(vals) != 1 || err != nil || n < minHeartbeat || n > maxHeartbeat {
			v.Add("heartbeatSeconds", fmt.Sprintf("must be an integer from %d to %d", minHeartbeat, maxHeartbeat))
		} else {
			p.heartbeat = time.Duration(n) * time.Second
		}
	}
	p.cursor = sse.LastEventID(r.Header, q, "cursor")
	return p, v.Err()
}

// handleStream serves GET /task-events/stream: the events after the cursor
// (or from the live tail), then live ones, as server-sent events.
func (s *Service) handleStream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	st, mode, err := s.openStream(w, r, p)
	if err != nil {
		return err
	}
	st.setHeaders(mode)
	st.key = s.streamKeys.watch(p.ID, r)
	st.Stop = st.key.revoked.Done()
	st.Done = p.Done
	if p.Done != nil && s.keys != nil {
		st.done = s.keys.DoneContext(p.ID, p.Done)
	}
	st.ExpiresAt = p.ExpiresAt
	st.endNote = cmp.Or(p.EndNote, defaultEndNote)
	// Over HTTP/1.x the stream takes its connection over from net/http
	// (see sse.Conn.TakeOver) when Config.TakeOverStreams asks for it.
	st.Run(r, s.broker.Hub().Context(), unwrapConn, s.cfg.TakeOverStreams, st)
	return nil
}

// openStream checks the request, takes one of the principal's places for
// streams and finds where the stream starts, and returns the stream with
// its resume mode. On success the caller must release the place.
func (s *Service) openStream(w http.ResponseWriter, r *http.Request, p *Principal) (*stream, string, error) {
	params, err := parseStreamParams(r)
	if err != nil {
		return nil, "", err
	}
	if err := s.acquireStream(r.Context(), p.ID); err != nil {
		return nil, "", err
	}
	start, err := sse.OffStack(func() (streamStart, error) { return s.streamStart(r.Context(), params.cursor) })
	if err != nil {
		s.broker.Hub().Release(p.ID)
		return nil, "", err
	}
	st := &stream{svc: s, filter: params.filter, principal: p.ID}
	s.tel.StreamOpened(r.Context())
	st.Stream = sse.Stream[[]Event]{Conn: sse.NewConn(w, s.cfg.StreamWriteTimeout), Pos: start.pos, Heartbeat: params.heartbeat, Clock: s.clock}
	return st, start.mode, nil
}

// acquireStream takes one of the places for streams of the principal key
// in the broker, starting it if it is the first. It returns a
// *RateLimitError when key already holds the most streams allowed, and an
// error matching ErrClosed after Close. Every successful acquireStream must
// be followed by one Release of the broker's hub.
func (s *Service) acquireStream(ctx context.Context, key string) error {
	err := s.broker.Acquire(ctx, key)
	if errors.Is(err, fanout.ErrLimit) {
		return &RateLimitError{
			RetryAfterSeconds: streamRetryAfter,
			Message:           fmt.Sprintf("This API key already holds %d open event streams, the most allowed; close one or retry later", s.cfg.MaxStreamsPerKey),
		}
	}
	return err
}

// setHeaders sets the headers of the stream's response, before it is
// known whether net/http or the stream itself will write them.
func (st *stream) setHeaders(mode string) {
	h := st.Header()
	sse.SetHeaders(h)
	h.Set("X-Service-Replay-Window-Hours", strconv.FormatInt(int64(st.svc.cfg.EventRetention/time.Hour), 10))
	h.Set("X-Service-Stream-Heartbeat-Seconds", strconv.Itoa(int(st.Heartbeat/time.Second)))
	h.Set("X-Service-Resume-Mode", mode)
}

// Ended logs why the stream ended: nothing when the client left or the
// Service closed (ctx is done), little when a write failed, a warning when
// the consumer was cut off, an error when the Store failed.
func (st *stream) Ended(ctx context.Context, err error) {
	log := st.svc.log
	st.svc.tel.StreamEnded(ctx, st.endReason(ctx, err))
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, http.ErrNotSupported):
		log.ErrorContext(ctx, "event stream: the response writer cannot flush; mount the handler behind middleware whose ResponseWriter implements http.Flusher or Unwrap", "err", err)
	case errors.Is(err, errStreamBehind), errors.Is(err, os.ErrDeadlineExceeded):
		log.WarnContext(ctx, "event stream: consumer too slow, cut off; it resumes from its cursor", "principal", st.principal, "position", st.Pos, "err", err)
	case errors.Is(err, errKeyRevoked):
		log.InfoContext(ctx, "event stream ended: its API key was revoked", "principal", st.principal)
	case errors.Is(err, errCredentialEnded):
		log.InfoContext(ctx, "event stream ended with its credential", "principal", st.principal)
	case errors.Is(err, sse.ErrWrite):
		log.DebugContext(ctx, "event stream ended", "principal", st.principal, "position", st.Pos, "err", err)
	default:
		log.ErrorContext(ctx, "event stream failed", "principal", st.principal, "position", st.Pos, "err", err)
	}
}

// endReason is the reason lifecycle.stream.ended counts a stream's end
// under.
func (st *stream) endReason(ctx context.Context, err error) string {
	switch {
	case st.svc.broker.Hub().Context().Err() != nil:
		return "shutdown"
	case errors.Is(err, errStreamBehind), errors.Is(err, os.ErrDeadlineExceeded):
		return "lag"
	case errors.Is(err, errKeyRevoked):
		return "revoked"
	case errors.Is(err, errCredentialEnded) && st.done != nil: // an API key's Done closes when it is revoked
		return "revoked"
	case errors.Is(err, errCredentialEnded):
		return "expired"
	case err == nil || ctx.Err() != nil || errors.Is(err, sse.ErrWrite):
		return "closed"
	default:
		return "failed"
	}
}

// streamStart is where a stream starts.
type streamStart struct {
	pos  int64  // the sequence the stream starts after
	mode string // its X-Service-Resume-Mode
}

// streamStart returns where a stream starts: after the cursor's event, or
// after the last committed one when there is no cursor. An unknown cursor,
// or one older than the replay window, gives an error matching
// ErrCursorExpired.
func (s *Service) streamStart(ctx context.Context, cursor string) (streamStart, error) {
	if cursor == "" {
		bounds, err := s.store.EventBounds(ctx)
		if err != nil {
			return streamStart{}, fmt.Errorf("find the live tail: %w", err)
		}
		return streamStart{bounds.Last, resumeLive}, nil
	}
	expired := fmt.Errorf("cursor %q is unknown or older than the %d-hour replay window; reconnect without a cursor to get the live tail: %w",
		cursor, int64(s.cfg.EventRetention/time.Hour), ErrCursorExpired)
	if !id.Valid(cursor, "evt_") {
		return streamStart{}, expired
	}
	evs, err := s.store.Events(ctx, EventFilter{ID: cursor, Limit: 1})
	if err != nil {
		return streamStart{}, fmt.Errorf("find cursor %s: %w", cursor, err)
	}
	if len(evs) == 0 {
		return streamStart{}, expired
	}
	e := evs[0]
	if e.OccurredAt.Before(s.clock.Now().Add(-s.cfg.EventRetention)) {
		return streamStart{}, expired
	}
	return streamStart{e.Sequence, resumeReplay}, nil
}

// stream is one open event stream: the sse.Stream that writes it, and what
// it carries (the sse.Feed of the broker's ring and the Store).
type stream struct {
	sse.Stream[[]Event]
	svc       *Service
	filter    streamFilter
	principal string
	endNote   string          // the last comment of a stream ended by its credential (made into one by End)
	key       *streamKey      // the principal's entry among the streams' keys: its Signal is Stop's
	done      context.Context // Done's, when it is an API key's; nil otherwise
}

// Release gives back the stream's place among its principal's streams.
func (st *stream) Release() {
	st.svc.tel.StreamClosed(context.Background())
	st.svc.streamKeys.unwatch(st.principal, st.key)
	st.svc.broker.Hub().Release(st.principal)
}

// Parks implements sse.Parker: a stream whose Done is not an API key's
// (a host's credential, a console session's) cannot park, as nothing
// would wake it when Done closes.
func (st *stream) Parks() bool { return st.Done == nil || st.done != nil }

// Park implements sse.Parker: the stream is woken when the broker's ring
// holds events after pos that its filter keeps (or the broker closes),
// and when its key is revoked: through its Done when it is an API key's
// (every revocation closes it, before Stop), else through Stop.
func (st *stream) Park(pos int64, wake func()) (func() int64, bool) {
	end := st.done
	if end == nil {
		end = st.key.revoked
	}
	stopFeed, ok := st.svc.broker.Hub().OnChange(pos, st.keep, wake)
	if !ok {
		return nil, false
	}
	stopEnd := context.AfterFunc(end, wake) // at once if revoked already
	return func() int64 {
		stopEnd()
		return stopFeed()
	}, true
}

// keep reports whether the stream carries an event of the broker's ring.
func (st *stream) keep(e *broker.Event) bool { return st.filter.keep(e.Type, e.TaskID) }

// Read appends to dst the frames of the events in the broker's ring after
// pos that the stream's filter keeps (see fanout.Scan).
func (st *stream) Read(pos int64, dst [][]byte, limit int) ([][]byte, int64, <-chan struct{}, bool) {
	var first time.Time // when the first event read was committed
	frames, next, changed, ok := fanout.Scan(st.svc.broker.Hub(), pos, dst, limit,
		st.keep,
		func(e *broker.Event) []byte {
			if first.IsZero() {
				first = e.At
			}
			return e.Frame
		})
	if len(frames) > 0 {
		st.svc.tel.Sent(context.Background(), len(frames), st.svc.clock.Now().Sub(first))
	}
	return frames, next, changed, ok
}

// errCredentialEnded ends an event stream whose principal's credential
// ended (its Done was closed, or its ExpiresAt passed).
var errCredentialEnded = errors.New("the stream's credential ended")

// End returns the comment that says the stream's key was revoked
// (stopped) or that its credential ended, and the error it ends with.
func (st *stream) End(stopped bool) ([]byte, error) {
	if stopped {
		return []byte(revokedComment), errKeyRevoked
	}
	return sse.Comment(st.endNote), errCredentialEnded
}

// Behind returns the error that cuts off a live stream that fell out of
// the broker's ring.
func (st *stream) Behind(pos int64) error {
	return fmt.Errorf("%w: read through sequence %d, the broker keeps the last %d events", errStreamBehind, pos, st.svc.broker.Hub().Size())
}

// Fetch reads the page of stored events after the sequence after that
// pass the filter, for a replay.
func (st *stream) Fetch(ctx context.Context, after int64) (sse.Page[[]Event], error) {
	// Every event up to the broker's position before the read had been
	// committed, so a short page holds every event up to it that the
	// filter keeps.
	through := st.svc.broker.Hub().Position()
	st.svc.tel.ReplayRead(ctx, "stream")
	evs, err := st.svc.store.Events(ctx, EventFilter{After: after, Types: st.filter.types, TaskID: st.filter.taskID, Limit: replayPage})
	if err != nil {
		return sse.Page[[]Event]{}, fmt.Errorf("replay events after sequence %d: %w", after, err)
	}
	p := sse.Page[[]Event]{Items: evs, N: len(evs), Full: len(evs) == replayPage, Through: through}
	if len(evs) > 0 {
		p.Last = evs[len(evs)-1].Sequence
	}
	return p, nil
}

// Append appends the frames of evs to dst.
func (st *stream) Append(ctx context.Context, dst []byte, evs []Event) []byte {
	if len(evs) > 0 {
		st.svc.tel.Replayed(ctx, len(evs)) // replayed: no latency (see Telemetry.Sent)
	}
	for i := range evs {
		var err error
		if dst, err = broker.AppendFrame(dst, &evs[i]); err != nil {
			st.svc.log.ErrorContext(ctx, "event stream: stored event is corrupt; sent with null data", "err", err)
		}
	}
	return dst
}
