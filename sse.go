package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
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
	replayPage = 256
	// liveBatch is the most frames a live stream writes before it flushes.
	liveBatch = 256
)

// Resume modes of the X-Service-Resume-Mode header.
const (
	resumeLive   = "live"
	resumeReplay = "replay_then_live"
)

// errStreamBehind ends a live stream that fell out of the broker's ring.
var errStreamBehind = errors.New("the consumer fell too far behind the newest events")

// errWrite marks failures to write to the client.
var errWrite = errors.New("write to the client")

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
	st, err := s.openStream(w, r, p)
	if err != nil {
		return err
	}
	st.setHeaders()
	var unwatch func()
	st.revoked, unwatch = s.streamKeys.watch(p.ID, r)
	st.ends = p.Done
	if !p.ExpiresAt.IsZero() {
		st.expires = s.clock.After(p.ExpiresAt.Sub(s.clock.Now()))
	}
	st.endNote = endComment(p.EndNote)
	if st.takeOver(r, unwatch) {
		return nil // the stream runs on goroutines of its own and releases its place
	}
	defer s.broker.release(p.ID)
	defer unwatch()
	st.serve(r.Context())
	return nil
}

// takeOver takes an HTTP/1.x connection from net/http and serves the stream
// on it from goroutines of its own, so that the handler returns and
// net/http lets go of what it holds per connection (its buffers, its
// background reader, the handler's deep stack): an idle stream then costs a
// few KiB instead of about 28. It reports false, having done nothing, for
// HTTP/2, when Config.KeepStreamsInHandler is set, or when the
// ResponseWriter (wrapped by middleware) cannot be hijacked; the stream is
// then served inside the handler.
func (st *stream) takeOver(r *http.Request, unwatch func()) bool {
	if r.ProtoMajor != 1 || st.svc.cfg.KeepStreamsInHandler {
		return false
	}
	head := st.w.Header().Clone() // the ResponseWriter is net/http's again once hijacked
	conn, _, err := st.rc.Hijack()
	if err != nil {
		return false
	}
	st.head = head
	// Let go of net/http's response and connection (their buffers), which
	// would otherwise stay reachable for as long as the stream lives.
	st.w, st.rc = nil, nil
	// Bytes the client sent after its request (a pipelined request) are
	// dropped: an event stream is the last response on its connection.
	conn = unwrapConn(conn) // write to the socket itself: one writev per wake-up
	st.conn, st.http10 = conn, r.ProtoMinor == 0
	ctx, cancel := context.WithCancel(st.svc.broker.ctx)
	go watchClient(conn, cancel)
	go func() {
		defer st.svc.broker.release(st.principal)
		defer unwatch()
		defer conn.Close()
		defer cancel()
		if err := st.writeHead(); err != nil {
			st.ended(ctx, err)
			return
		}
		st.ended(ctx, st.run(ctx))
	}()
	return true
}

// watchClient reads a taken-over connection until the client closes it (or
// the stream does), then cancels the stream. Clients of an event stream
// send nothing after their request; whatever they send is discarded.
func watchClient(conn net.Conn, cancel context.CancelFunc) {
	var b [16]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			cancel()
			return
		}
	}
}

// openStream checks the request, takes one of the principal's places for
// streams and finds where the stream starts. On success the caller must
// release the place.
func (s *Service) openStream(w http.ResponseWriter, r *http.Request, p *Principal) (*stream, error) {
	params, err := parseStreamParams(r)
	if err != nil {
		return nil, err
	}
	if err := s.broker.acquire(r.Context(), p.ID); err != nil {
		return nil, err
	}
	start, err := offStack(func() (streamStart, error) { return s.streamStart(r.Context(), params.cursor) })
	if err != nil {
		s.broker.release(p.ID)
		return nil, err
	}
	return &stream{
		svc:       s,
		w:         w,
		rc:        http.NewResponseController(w),
		filter:    params.filter,
		pos:       start.pos,
		mode:      start.mode,
		heartbeat: params.heartbeat,
		principal: p.ID,
	}, nil
}

// serve sends the response head, then events until the stream ends, and
// logs why it ended when that is worth knowing.
//
// The stream's goroutine waits here for as long as the stream lasts, so the
// frames of serve and run are kept small (the head, logging and formatting
// live in functions of their own): writes then fit in the smallest
// goroutine stack, which halves an idle stream's memory over HTTP/2.
func (st *stream) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(st.svc.broker.ctx, cancel)()
	if err := st.writeHead(); err != nil {
		st.ended(ctx, err)
		return
	}
	st.ended(ctx, st.run(ctx))
}

// setHeaders sets the headers of the stream's response, before it is
// known whether net/http or the stream itself will write them.
func (st *stream) setHeaders() {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
	h.Set("X-Service-Replay-Window-Hours", strconv.FormatInt(int64(st.svc.cfg.EventRetention/time.Hour), 10))
	h.Set("X-Service-Stream-Heartbeat-Seconds", strconv.Itoa(int(st.heartbeat/time.Second)))
	h.Set("X-Service-Resume-Mode", st.mode)
}

// writeHead sends the status and headers of the stream.
func (st *stream) writeHead() error {
	if st.conn == nil {
		st.w.WriteHeader(http.StatusOK)
		return st.write()
	}
	h := st.head
	// A taken-over connection gets the head net/http would have written,
	// with the headers middleware set, and a body that ends when the
	// connection does.
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Connection", "close")
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	var head bytes.Buffer
	if st.http10 {
		head.WriteString("HTTP/1.0 200 OK\r\n")
	} else {
		head.WriteString("HTTP/1.1 200 OK\r\n")
	}
	h.Write(&head) // sorted, and sanitised of line breaks
	head.WriteString("\r\n")
	return st.write(head.Bytes())
}

// ended logs why the stream ended: nothing when the client left or the
// Service closed (ctx is done), little when a write failed, a warning when
// the consumer was cut off, an error when the Store failed.
func (st *stream) ended(ctx context.Context, err error) {
	log := st.svc.log
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, http.ErrNotSupported):
		log.ErrorContext(ctx, "event stream: the response writer cannot flush; mount the handler behind middleware whose ResponseWriter implements http.Flusher or Unwrap", "err", err)
	case errors.Is(err, errStreamBehind), errors.Is(err, os.ErrDeadlineExceeded):
		log.WarnContext(ctx, "event stream: consumer too slow, cut off; it resumes from its cursor", "principal", st.principal, "position", st.pos, "err", err)
	case errors.Is(err, errKeyRevoked):
		log.InfoContext(ctx, "event stream ended: its API key was revoked", "principal", st.principal)
	case errors.Is(err, errCredentialEnded):
		log.InfoContext(ctx, "event stream ended with its credential", "principal", st.principal)
	case errors.Is(err, errWrite):
		log.DebugContext(ctx, "event stream ended", "principal", st.principal, "position", st.pos, "err", err)
	default:
		log.ErrorContext(ctx, "event stream failed", "principal", st.principal, "position", st.pos, "err", err)
	}
}

// offStack runs f on a goroutine of its own and returns its results. A
// stream's goroutine lives as long as the stream, and a goroutine stack
// that has grown stays grown unless it becomes mostly unused, which a
// waiting stream's is not. Store calls run deep (database/sql, cgo), so
// streams make them here, and an idle stream keeps the smallest stack.
func offStack[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
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

// stream is one open event stream.
type stream struct {
	svc       *Service
	w         http.ResponseWriter
	rc        *http.ResponseController
	conn      net.Conn    // the connection once taken over from net/http, else nil
	head      http.Header // the headers to send on a taken-over connection
	http10    bool        // the taken-over request was HTTP/1.0
	filter    streamFilter
	heartbeat time.Duration
	principal string
	revoked   <-chan struct{}  // closed when the principal's key is revoked
	ends      <-chan struct{}  // the principal's Done: closed when its credential ends
	expires   <-chan time.Time // fires at the principal's ExpiresAt; nil without one
	endNote   []byte           // the last comment of a stream ended by either
	mode      string           // X-Service-Resume-Mode

	// pos is the sequence read through: every event the stream carries
	// with a sequence up to pos has been written.
	pos int64
	// live is set once the stream reads from the broker's ring; falling
	// out of the ring afterwards cuts it off.
	live      bool
	lastWrite time.Time // by the Service's clock, for heartbeats
	deadline  time.Time // the write deadline last set, by the wall clock
	frames    [][]byte  // reused between reads of the ring
	buf       []byte    // reused frame encoding buffer of replay
}

// run writes events until the client goes away, the Service closes (both
// cancel ctx), a write fails or the stream falls too far behind.
func (st *stream) run(ctx context.Context) error {
	b, clock := st.svc.broker, st.svc.clock
	beat := clock.After(st.heartbeat)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-st.revoked:
			return st.endRevoked()
		case <-st.ends:
			return st.endCredential()
		case <-st.expires:
			return st.endCredential()
		default:
		}
		frames, next, changed, ok := b.read(st.pos, &st.filter, st.frames[:0], liveBatch)
		if !ok {
			if st.live {
				return st.behind()
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
			if cap(frames) > 16 {
				st.frames = nil // a burst's worth is not kept while idle
			}
			if err != nil {
				return err
			}
			if len(frames) == liveBatch {
				continue // there may be more already
			}
		}
		// changed was taken with the frames: it is already closed if
		// events came in since.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-st.revoked:
			return st.endRevoked()
		case <-st.ends:
			return st.endCredential()
		case <-st.expires:
			return st.endCredential()
		case <-changed:
		case <-beat:
			var err error
			if beat, err = st.beat(); err != nil {
				return err
			}
		}
	}
}

// errCredentialEnded ends an event stream whose principal's credential
// ended (its Done was closed, or its ExpiresAt passed).
var errCredentialEnded = errors.New("the stream's credential ended")

// endComment returns the comment that ends a stream with its principal's
// credential: note (see Principal.EndNote) on one line.
func endComment(note string) []byte {
	if note == "" {
		note = defaultEndNote
	}
	note = strings.NewReplacer("\r", " ", "\n", " ").Replace(note)
	return []byte(": " + note + "\n\n")
}

// endCredential writes the comment that says the stream's credential
// ended, and returns the error that ends the stream.
func (st *stream) endCredential() error {
	if err := st.write(st.endNote); err != nil {
		return err
	}
	return errCredentialEnded
}

// endRevoked writes the comment that says the stream's key was revoked,
// and returns the error that ends the stream.
func (st *stream) endRevoked() error {
	if err := st.write([]byte(revokedComment)); err != nil {
		return err
	}
	return errKeyRevoked
}

// behind returns the error that cuts off a live stream that fell out of the
// broker's ring.
func (st *stream) behind() error {
	return fmt.Errorf("%w: read through sequence %d, the broker keeps the last %d events", errStreamBehind, st.pos, len(st.svc.broker.ring.buf))
}

// beat writes a keepalive comment when the stream has been idle for the
// heartbeat, and returns when to look again.
func (st *stream) beat() (<-chan time.Time, error) {
	clock := st.svc.clock
	now := clock.Now()
	if idle := now.Sub(st.lastWrite); idle < st.heartbeat {
		return clock.After(st.heartbeat - idle), nil
	}
	c := append(make([]byte, 0, 48), ": keepalive "...)
	c = NewTimestamp(now).Time.AppendFormat(c, timestampLayout)
	if err := st.write(append(c, "\n\n"...)); err != nil {
		return nil, err
	}
	return clock.After(st.heartbeat), nil
}

// replay writes the stored events after pos that pass the filter, up to
// the newest, and leaves pos where the broker's ring can take over. It
// reads the next page from the Store while it writes the current one.
func (st *stream) replay(ctx context.Context) error {
	page := st.fetch(ctx, st.pos)
	for {
		res := <-page
		if res.err != nil {
			return fmt.Errorf("replay events after sequence %d: %w", st.pos, res.err)
		}
		evs := res.events
		full := len(evs) == replayPage
		if full {
			page = st.fetch(ctx, evs[len(evs)-1].Sequence)
		}
		if len(evs) > 0 {
			st.buf = st.buf[:0]
			for i := range evs {
				var err error
				if st.buf, err = appendFrame(st.buf, &evs[i]); err != nil {
					st.svc.log.ErrorContext(ctx, "event stream: stored event is corrupt; sent with null data", "err", err)
				}
			}
			if err := st.write(st.buf); err != nil {
				return err
			}
			st.pos = evs[len(evs)-1].Sequence
		}
		if !full {
			st.pos = max(st.pos, res.through)
			st.buf = nil // a page of frames: not kept while live
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// storedPage is a page of stored events read for a replay.
type storedPage struct {
	events []Event
	// through is the broker's position before the read: every event up
	// to it had been committed, so a short page holds every event up to
	// it that the filter keeps.
	through int64
	err     error
}

// fetch reads the page of events after seq on a goroutine of its own (see
// offStack) and delivers it on the returned channel.
func (st *stream) fetch(ctx context.Context, after int64) <-chan storedPage {
	ch := make(chan storedPage, 1)
	through := st.svc.broker.position()
	f := EventFilter{After: after, Types: st.filter.types, TaskID: st.filter.taskID, Limit: replayPage}
	go func() {
		evs, err := st.svc.store.Events(ctx, f)
		ch <- storedPage{evs, through, err}
	}()
	return ch
}

// write writes chunks and flushes them, within the write timeout.
func (st *stream) write(chunks ...[]byte) error {
	// Idle time counts from when a write starts: a client may read the
	// bytes before the write returns.
	st.lastWrite = st.svc.clock.Now()
	// A socket deadline is wall-clock time, not the Service's clock. It
	// also lifts any WriteTimeout of the host's http.Server. Setting it
	// costs a timer update, so it is renewed only once half spent: a write
	// that blocks is cut off after half to all of StreamWriteTimeout.
	if now, timeout := time.Now(), st.svc.cfg.StreamWriteTimeout; st.deadline.Sub(now) < timeout/2 {
		st.deadline = now.Add(timeout)
		var err error
		if st.conn != nil {
			err = st.conn.SetWriteDeadline(st.deadline)
		} else {
			err = st.rc.SetWriteDeadline(st.deadline)
		}
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("%w: set deadline: %w", errWrite, err)
		}
	}
	if st.conn != nil {
		// One system call for every frame of the wake-up (writev on TCP).
		bufs := net.Buffers(chunks)
		if _, err := bufs.WriteTo(st.conn); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
		return nil
	}
	for _, c := range chunks {
		if _, err := st.w.Write(c); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
	}
	return st.flush()
}

// flush sends what has been written.
func (st *stream) flush() error {
	if err := st.rc.Flush(); err != nil {
		return fmt.Errorf("%w: flush: %w", errWrite, err)
	}
	return nil
}

// appendFrame appends the server-sent event frame of e to dst: its retry,
// id, event and data fields and a blank line. The data is the event's JSON
// envelope on one line, encoded like every response body of the API (see
// appendEventJSON). When the stored data of e is found not to be valid JSON
// the frame carries "data": null and the error is returned, so that the
// caller logs it and the event, with its id, still reaches the client.
func appendFrame(dst []byte, e *Event) ([]byte, error) {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, streamRetryMillis, 10)
	dst = append(dst, "\nid: "...)
	dst = append(dst, e.ID...)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, e.Type...)
	dst = append(dst, "\ndata: "...)
	dst, err := appendEventJSON(dst, e)
	return append(dst, "\n\n"...), err
}

// appendEventJSON appends the JSON envelope of e exactly as a json.Encoder
// without HTML escaping writes it, minus the newline. The Service writes
// events with plain identifiers and data from json.Marshal, which is
// compact; such data is trusted to be the valid JSON the Service stored and
// is copied as it is, at a fraction of the encoder's cost (replay is bound
// by it). Anything else goes through encoding/json, which compacts the data
// onto one line, or finds it invalid.
func appendEventJSON(dst []byte, e *Event) ([]byte, error) {
	if !plainJSONString(e.ID) || !plainJSONString(string(e.Type)) || (e.TraceID != nil && !plainJSONString(*e.TraceID)) || !compactJSON(e.Data) {
		return appendEventJSONSlow(dst, e)
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, e.ID...)
	dst = append(dst, `","type":"`...)
	dst = append(dst, e.Type...)
	dst = append(dst, `","occurredAt":"`...)
	dst = e.OccurredAt.UTC().AppendFormat(dst, timestampLayout)
	dst = append(dst, `","sequence":`...)
	dst = strconv.AppendInt(dst, e.Sequence, 10)
	dst = append(dst, `,"taskVersion":`...)
	dst = strconv.AppendInt(dst, e.TaskVersion, 10)
	if e.TraceID == nil {
		dst = append(dst, `,"traceId":null`...)
	} else {
		dst = append(dst, `,"traceId":"`...)
		dst = append(dst, *e.TraceID...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"data":`...)
	dst = append(dst, e.Data...)
	return append(dst, '}'), nil
}

// appendEventJSONSlow is appendEventJSON through encoding/json.
func appendEventJSONSlow(dst []byte, e *Event) ([]byte, error) {
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
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), err
}

// plainJSONString reports whether s encodes as a JSON string by itself
// between quotes: printable ASCII without quote or backslash.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// compactJSON reports whether b, taken to be JSON, is an object with no
// whitespace outside its strings and no control character inside them,
// which encoding/json would copy unchanged (and which fits on one line).
func compactJSON(b []byte) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case c < 0x20:
			return false
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ':
			return false
		}
	}
	return !inString
}
