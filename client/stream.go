package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// StreamParams selects the events of a [Stream].
type StreamParams struct {
	// EventTypes keeps only these types; empty means all.
	EventTypes []lifecycle.EventType
	// TaskID keeps only the events of this task.
	TaskID string
	// LastEventID resumes after this event, as a previous Stream's
	// [Stream.LastEventID] gives; empty starts at the live tail.
	LastEventID string
	// HeartbeatSeconds asks the server for a keepalive this often (10 to
	// 60; 0 leaves the server's default of 20). A connection silent for
	// three heartbeats is taken for dead and replaced.
	HeartbeatSeconds int
	// MaxReconnectDelay bounds the wait before a reconnection, which is
	// otherwise the delay the server's retry: field asks for. 0 means no
	// bound.
	MaxReconnectDelay time.Duration
	// Seen is how many recent event IDs are remembered to drop duplicates.
	// Defaults to 4096.
	Seen int
}

// GapError is returned by [Stream.Next] when the server no longer holds the
// events after the stream's cursor (410 cursor_expired): events may have
// been missed, and the caller should read again what it needs through the
// API. It is not fatal: the next call of Next continues from the live tail.
type GapError struct {
	// LastEventID is the cursor the server refused.
	LastEventID string
	// Message is the server's explanation.
	Message string
}

// Error implements error.
func (e *GapError) Error() string {
	return fmt.Sprintf("lifecycle event stream: events after %s are no longer kept (%s); continuing from the live tail", e.LastEventID, e.Message)
}

// Is reports whether target is lifecycle.ErrCursorExpired.
func (e *GapError) Is(target error) bool { return target == lifecycle.ErrCursorExpired }

// Stream reads the event stream, reconnecting as needed. Its methods are
// not safe for concurrent use, except Close.
type Stream struct {
	cl     *Client
	p      StreamParams
	ctx    context.Context
	cancel context.CancelFunc

	lastID    string
	retry     time.Duration // the server's reconnection delay
	body      io.ReadCloser
	lines     *bufio.Reader
	idle      *time.Timer   // closes a silent connection
	idleAfter time.Duration // three heartbeats
	failures  int           // consecutive failed connection attempts

	seen     map[string]struct{}
	seenRing []string
	seenNext int
}

// Events opens a Stream of task events (GET /task-events/stream, scope
// events:read). It connects on the first call of [Stream.Next]; the stream
// ends when ctx is done or Close is called.
func (cl *Client) Events(ctx context.Context, p StreamParams) *Stream {
	if p.Seen <= 0 {
		p.Seen = 4096
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{cl: cl, p: p, ctx: ctx, cancel: cancel, lastID: p.LastEventID, retry: 5 * time.Second,
		seen: make(map[string]struct{}, p.Seen), seenRing: make([]string, p.Seen)}
}

// LastEventID returns the ID of the last event Next returned (or the
// StreamParams cursor before the first): keep it to resume a later Stream.
func (s *Stream) LastEventID() string { return s.lastID }

// Close ends the stream; a Next blocked on it returns.
func (s *Stream) Close() error {
	s.cancel()
	return nil
}

// Next returns the next event not returned before. It reconnects after a
// disconnect or a server error, resuming after the last event returned,
// and waits the delay the server asked for. It returns a *GapError, once,
// when the server no longer holds the events after the cursor, and then
// continues from the live tail. It returns an *Error for answers that a
// reconnection cannot fix (401, 403, 400), and ctx's error once the stream
// ends.
func (s *Stream) Next() (lifecycle.Event, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			s.disconnect()
			return lifecycle.Event{}, err
		}
		if s.body == nil {
			if err := s.connect(); err != nil {
				var gap *GapError
				if errors.As(err, &gap) {
					return lifecycle.Event{}, err
				}
				if fatal(err) {
					s.disconnect()
					return lifecycle.Event{}, err
				}
				s.failures++
				if werr := sleep(s.ctx, s.reconnectDelay(err)); werr != nil {
					return lifecycle.Event{}, werr
				}
				continue
			}
		}
		ev, err := s.readEvent()
		if err != nil {
			s.disconnect()
			if werr := sleep(s.ctx, s.reconnectDelay(nil)); werr != nil {
				return lifecycle.Event{}, werr
			}
			continue
		}
		if s.markSeen(ev.ID) {
			continue
		}
		s.lastID = ev.ID
		return ev, nil
	}
}

// fatal reports whether a failed connection cannot be fixed by trying again.
func fatal(err error) bool {
	var ae *Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.StatusCode {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

// reconnectDelay is the wait before the next connection: the server's
// retry: delay (or Retry-After), growing after repeated failures, within
// MaxReconnectDelay.
func (s *Stream) reconnectDelay(err error) time.Duration {
	d := s.retry
	var ae *Error
	if errors.As(err, &ae) && ae.RetryAfter > d {
		d = ae.RetryAfter
	}
	if s.failures > 1 {
		d = min(d<<min(s.failures-1, 4), time.Minute)
	}
	if s.p.MaxReconnectDelay > 0 && d > s.p.MaxReconnectDelay {
		d = s.p.MaxReconnectDelay
	}
	return d
}

// connect opens the stream after the last event returned.
func (s *Stream) connect() error {
	q := url.Values{}
	if len(s.p.EventTypes) > 0 {
		types := make([]string, len(s.p.EventTypes))
		for i, t := range s.p.EventTypes {
			types[i] = string(t)
		}
		q.Set("eventTypes", strings.Join(types, ","))
	}
	if s.p.TaskID != "" {
		q.Set("taskId", s.p.TaskID)
	}
	if s.p.HeartbeatSeconds != 0 {
		q.Set("heartbeatSeconds", strconv.Itoa(s.p.HeartbeatSeconds))
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.cl.url("/task-events/stream", q), nil)
	if err != nil {
		return err
	}
	s.cl.authorize(req)
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := s.cl.http.Do(req)
	if err != nil {
		return &transportError{err: err}
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		apiErr := parseError(resp.StatusCode, resp.Header, raw)
		if resp.StatusCode == http.StatusGone && apiErr.Code == "cursor_expired" {
			gap := &GapError{LastEventID: s.lastID, Message: apiErr.Message}
			s.lastID = ""
			return gap
		}
		return apiErr
	}
	s.body = resp.Body
	s.lines = bufio.NewReaderSize(resp.Body, 64<<10)
	s.failures = 0
	heartbeat := 20
	if h, err := strconv.Atoi(resp.Header.Get("X-Service-Stream-Heartbeat-Seconds")); err == nil && h > 0 {
		heartbeat = h
	}
	s.idleAfter = 3 * time.Duration(heartbeat) * time.Second
	s.idle = time.AfterFunc(s.idleAfter, func() { resp.Body.Close() })
	return nil
}

// disconnect closes the current connection, if any.
func (s *Stream) disconnect() {
	if s.body != nil {
		s.idle.Stop()
		s.body.Close()
		s.body, s.lines = nil, nil
	}
}

// readEvent reads frames until one carries an event. Comments keep the
// connection alive; retry: fields set the reconnection delay.
func (s *Stream) readEvent() (lifecycle.Event, error) {
	var id, data string
	hasData := false
	for {
		line, err := s.lines.ReadString('\n')
		if err != nil {
			return lifecycle.Event{}, err
		}
		s.idle.Reset(s.idleAfter)
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !hasData {
				continue
			}
			var ev lifecycle.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return lifecycle.Event{}, fmt.Errorf("client: event %s: %w", id, err)
			}
			if ev.ID == "" {
				ev.ID = id
			}
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// markSeen remembers id and reports whether it was seen before.
func (s *Stream) markSeen(id string) bool {
	if _, ok := s.seen[id]; ok {
		return true
	}
	if old := s.seenRing[s.seenNext]; old != "" {
		delete(s.seen, old)
	}
	s.seenRing[s.seenNext] = id
	s.seenNext = (s.seenNext + 1) % len(s.seenRing)
	s.seen[id] = struct{}{}
	return false
}
