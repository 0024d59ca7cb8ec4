package eventstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/fanout"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/sse"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Limits and constants of the event stream.
const (
	// retryAfter is the Retry-After, in seconds, of a stream refused by
	// the per-key limit: the same delay as the frames' retry field.
	retryAfter = broker.RetryMillis / 1000
	// replayPage is how many stored events a stream reads at once.
	replayPage = 256
)

// Resume modes of the X-Service-Resume-Mode header.
const (
	resumeLive   = "live"
	resumeReplay = "replay_then_live"
)

// RevokedNote is the last comment of a stream ended because its API key
// was revoked.
const RevokedNote = "revoked: the API key of this stream was revoked; the stream ends"

// revokedComment is the last thing a stream ended by revocation sends: a
// comment saying why, before the connection closes. The client's next
// attempt gets 401.
const revokedComment = ": " + RevokedNote + "\n\n"

var (
	// errStreamBehind ends a live stream that fell out of the broker's ring.
	errStreamBehind = errors.New("the consumer fell too far behind the newest events")
	// errKeyRevoked ends an event stream whose API key was revoked.
	errKeyRevoked = errors.New("the stream's API key was revoked")
	// errCredentialEnded ends an event stream whose principal's credential
	// ended (its Done was closed, or its ExpiresAt passed).
	errCredentialEnded = errors.New("the stream's credential ended")
)

// Config is what Streams are built from.
type Config struct {
	// Broker feeds the streams from its ring and counts their places.
	Broker *broker.Broker
	// Store is read for the cursors and the replays.
	Store broker.Reader
	// Keys tracks the keys of open streams, for revocation.
	Keys *Keys
	// Clock judges the replay window and times heartbeats and latencies.
	Clock lifecycletype.Clock
	// Log gets why streams ended and the corrupt stored events.
	Log *slog.Logger
	// Tel counts the streams and the events they carry.
	Tel *telemetry.Telemetry
	// Unwrap finds the net.Conn a stream may take over (see sse.Conn).
	Unwrap func(net.Conn) net.Conn
	// The lifecycle.Config fields: EventRetention, MaxStreamsPerKey,
	// StreamWriteTimeout and TakeOverStreams, their defaults filled in.
	EventRetention     time.Duration
	MaxStreamsPerKey   int
	StreamWriteTimeout time.Duration
	TakeOverStreams    bool
}

// Streams opens and serves the event streams of a Service.
type Streams struct {
	cfg Config
}

// New returns the Streams built from cfg.
func New(cfg Config) *Streams { return &Streams{cfg: cfg} }

// Acquire takes one of the places for streams of the principal key in the
// broker, starting it if it is the first. It returns a
// *lifecycletype.RateLimitError when key already holds the most streams
// allowed, and an error matching lifecycletype.ErrClosed after the
// broker closed. Every successful Acquire must be followed by one Release
// of the broker's hub.
func (s *Streams) Acquire(ctx context.Context, key string) error {
	err := s.cfg.Broker.Acquire(ctx, key)
	if errors.Is(err, fanout.ErrLimit) {
		return &lifecycletype.RateLimitError{
			RetryAfterSeconds: retryAfter,
			Message:           fmt.Sprintf("This API key already holds %d open event streams, the most allowed; close one or retry later", s.cfg.MaxStreamsPerKey),
		}
	}
	return err
}

// Open takes one of principal's places for streams and finds where the
// stream of the request r with params starts, and returns the stream,
// which writes to w. Run it: it releases the place when it ends.
func (s *Streams) Open(w http.ResponseWriter, r *http.Request, principal string, params Params) (*Stream, error) {
	if err := s.Acquire(r.Context(), principal); err != nil {
		return nil, err
	}
	start, err := sse.OffStack(func() (start, error) { return s.start(r.Context(), params.Cursor) })
	if err != nil {
		s.cfg.Broker.Hub().Release(principal)
		return nil, err
	}
	st := &Stream{s: s, filter: params.Filter, principal: principal, mode: start.mode}
	s.cfg.Tel.StreamOpened(r.Context())
	st.out = sse.Stream[[]lifecycletype.Event]{Conn: sse.NewConn(w, s.cfg.StreamWriteTimeout), Pos: start.pos, Heartbeat: params.Heartbeat, Clock: s.cfg.Clock}
	return st, nil
}

// start is where a stream starts.
type start struct {
	pos  int64  // the sequence the stream starts after
	mode string // its X-Service-Resume-Mode
}

// start returns where a stream starts: after the cursor's event, or after
// the last committed one when there is no cursor. An unknown cursor, or
// one older than the replay window, gives an error matching
// ErrCursorExpired.
func (s *Streams) start(ctx context.Context, cursor string) (start, error) {
	if cursor == "" {
		bounds, err := s.cfg.Store.EventBounds(ctx)
		if err != nil {
			return start{}, fmt.Errorf("find the live tail: %w", err)
		}
		return start{bounds.Last, resumeLive}, nil
	}
	expired := fmt.Errorf("cursor %q is unknown or older than the %d-hour replay window; reconnect without a cursor to get the live tail: %w",
		cursor, int64(s.cfg.EventRetention/time.Hour), lifecycletype.ErrCursorExpired)
	if !id.Valid(cursor, "evt_") {
		return start{}, expired
	}
	evs, err := s.cfg.Store.Events(ctx, lifecycletype.EventFilter{ID: cursor, Limit: 1})
	if err != nil {
		return start{}, fmt.Errorf("find cursor %s: %w", cursor, err)
	}
	if len(evs) == 0 {
		return start{}, expired
	}
	e := evs[0]
	if e.OccurredAt.Before(s.cfg.Clock.Now().Add(-s.cfg.EventRetention)) {
		return start{}, expired
	}
	return start{e.Sequence, resumeReplay}, nil
}

// Credential is what ends a stream besides its client and the Service's
// Close: the credential of its principal.
type Credential struct {
	// Done, when closed, ends the stream; nil: never.
	Done <-chan struct{}
	// KeyDone is Done's context when it is an API key's (every revocation
	// cancels it); nil otherwise.
	KeyDone context.Context
	// ExpiresAt ends the stream as Done does. Zero: never.
	ExpiresAt time.Time
	// EndNote is the last comment of a stream ended by its credential.
	EndNote string
}

// Stream is one open event stream: the sse.Stream that writes it, and
// what it carries (the sse.Feed of the broker's ring and the Store).
type Stream struct {
	out       sse.Stream[[]lifecycletype.Event]
	s         *Streams
	filter    Filter
	principal string
	mode      string          // its X-Service-Resume-Mode
	endNote   string          // the last comment of a stream ended by its credential (made into one by End)
	key       *Key            // the principal's entry among the streams' keys: its revocation is Stop's
	done      context.Context // Done's, when it is an API key's; nil otherwise
}

// Run serves the stream of the request r, whose principal holds c, until
// it ends, then releases its place. Over HTTP/1.x the stream takes its
// connection over from net/http (see sse.Conn.TakeOver) when
// Config.TakeOverStreams asks for it.
func (st *Stream) Run(r *http.Request, c Credential) {
	st.setHeaders()
	st.key = st.s.cfg.Keys.Watch(st.principal, r)
	st.out.Stop = st.key.revoked.Done()
	st.out.Done = c.Done
	st.done = c.KeyDone
	st.out.ExpiresAt = c.ExpiresAt
	st.endNote = c.EndNote
	st.out.Run(r, st.s.cfg.Broker.Hub().Context(), st.s.cfg.Unwrap, st.s.cfg.TakeOverStreams, st)
}

// setHeaders sets the headers of the stream's response, before it is
// known whether net/http or the stream itself will write them.
func (st *Stream) setHeaders() {
	h := st.out.Header()
	sse.SetHeaders(h)
	h.Set("X-Service-Replay-Window-Hours", strconv.FormatInt(int64(st.s.cfg.EventRetention/time.Hour), 10))
	h.Set("X-Service-Stream-Heartbeat-Seconds", strconv.Itoa(int(st.out.Heartbeat/time.Second)))
	h.Set("X-Service-Resume-Mode", st.mode)
}

// Ended implements sse.Feed: it logs why the stream ended: nothing when
// the client left or the Service closed (ctx is done), little when a
// write failed, a warning when the consumer was cut off, an error when
// the Store failed.
func (st *Stream) Ended(ctx context.Context, err error) {
	log := st.s.cfg.Log
	st.s.cfg.Tel.StreamEnded(ctx, st.endReason(ctx, err))
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, http.ErrNotSupported):
		log.ErrorContext(ctx, "event stream: the response writer cannot flush; mount the handler behind middleware whose ResponseWriter implements http.Flusher or Unwrap", "err", err)
	case errors.Is(err, errStreamBehind), errors.Is(err, os.ErrDeadlineExceeded):
		log.WarnContext(ctx, "event stream: consumer too slow, cut off; it resumes from its cursor", "principal", st.principal, "position", st.out.Pos, "err", err)
	case errors.Is(err, errKeyRevoked):
		log.InfoContext(ctx, "event stream ended: its API key was revoked", "principal", st.principal)
	case errors.Is(err, errCredentialEnded):
		log.InfoContext(ctx, "event stream ended with its credential", "principal", st.principal)
	case errors.Is(err, sse.ErrWrite):
		log.DebugContext(ctx, "event stream ended", "principal", st.principal, "position", st.out.Pos, "err", err)
	default:
		log.ErrorContext(ctx, "event stream failed", "principal", st.principal, "position", st.out.Pos, "err", err)
	}
}

// endReason is the reason lifecycle.stream.ended counts a stream's end
// under.
func (st *Stream) endReason(ctx context.Context, err error) string {
	switch {
	case st.s.cfg.Broker.Hub().Context().Err() != nil:
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

// Release implements sse.Feed: it gives back the stream's place among its
// principal's streams.
func (st *Stream) Release() {
	st.s.cfg.Tel.StreamClosed(context.Background())
	st.s.cfg.Keys.Unwatch(st.principal, st.key)
	st.s.cfg.Broker.Hub().Release(st.principal)
}

// Parks implements sse.Parker: a stream whose Done is not an API key's
// (a host's credential, a console session's) cannot park, as nothing
// would wake it when Done closes.
func (st *Stream) Parks() bool { return st.out.Done == nil || st.done != nil }

// Park implements sse.Parker: the stream is woken when the broker's ring
// holds events after pos that its filter keeps (or the broker closes),
// and when its key is revoked: through its Done when it is an API key's
// (every revocation closes it, before Stop), else through Stop.
func (st *Stream) Park(pos int64, wake func()) (func() int64, bool) {
	end := st.done
	if end == nil {
		end = st.key.revoked
	}
	stopFeed, ok := st.s.cfg.Broker.Hub().OnChange(pos, st.keep, wake)
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
func (st *Stream) keep(e *broker.Event) bool { return st.filter.Keep(e.Type, e.TaskID) }

// Read implements sse.Feed: it appends to dst the frames of the events in
// the broker's ring after pos that the stream's filter keeps (see
// fanout.Scan).
func (st *Stream) Read(pos int64, dst [][]byte, limit int) ([][]byte, int64, <-chan struct{}, bool) {
	var first time.Time // when the first event read was committed
	frames, next, changed, ok := fanout.Scan(st.s.cfg.Broker.Hub(), pos, dst, limit,
		st.keep,
		func(e *broker.Event) []byte {
			if first.IsZero() {
				first = e.At
			}
			return e.Frame
		})
	if len(frames) > 0 {
		st.s.cfg.Tel.Sent(context.Background(), len(frames), st.s.cfg.Clock.Now().Sub(first))
	}
	return frames, next, changed, ok
}

// End implements sse.Feed: it returns the comment that says the stream's
// key was revoked (stopped) or that its credential ended, and the error
// it ends with.
func (st *Stream) End(stopped bool) ([]byte, error) {
	if stopped {
		return []byte(revokedComment), errKeyRevoked
	}
	return sse.Comment(st.endNote), errCredentialEnded
}

// Behind implements sse.Feed: it returns the error that cuts off a live
// stream that fell out of the broker's ring.
func (st *Stream) Behind(pos int64) error {
	return fmt.Errorf("%w: read through sequence %d, the broker keeps the last %d events", errStreamBehind, pos, st.s.cfg.Broker.Hub().Size())
}

// Fetch implements sse.Feed: it reads the page of stored events after the
// sequence after that pass the filter, for a replay.
func (st *Stream) Fetch(ctx context.Context, after int64) (sse.Page[[]lifecycletype.Event], error) {
	// Every event up to the broker's position before the read had been
	// committed, so a short page holds every event up to it that the
	// filter keeps.
	through := st.s.cfg.Broker.Hub().Position()
	st.s.cfg.Tel.ReplayRead(ctx, "stream")
	evs, err := st.s.cfg.Store.Events(ctx, lifecycletype.EventFilter{After: after, Types: st.filter.Types, TaskID: st.filter.TaskID, Limit: replayPage})
	if err != nil {
		return sse.Page[[]lifecycletype.Event]{}, fmt.Errorf("replay events after sequence %d: %w", after, err)
	}
	p := sse.Page[[]lifecycletype.Event]{Items: evs, N: len(evs), Full: len(evs) == replayPage, Through: through}
	if len(evs) > 0 {
		p.Last = evs[len(evs)-1].Sequence
	}
	return p, nil
}

// Append implements sse.Feed: it appends the frames of evs to dst.
func (st *Stream) Append(ctx context.Context, dst []byte, evs []lifecycletype.Event) []byte {
	if len(evs) > 0 {
		st.s.cfg.Tel.Replayed(ctx, len(evs)) // replayed: no latency (see Telemetry.Sent)
	}
	for i := range evs {
		var err error
		if dst, err = broker.AppendFrame(dst, &evs[i]); err != nil {
			st.s.cfg.Log.ErrorContext(ctx, "event stream: stored event is corrupt; sent with null data", "err", err)
		}
	}
	return dst
}
