package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// streamTimeout bounds, in real time, every wait for a stream to show
// something that must come.
const streamTimeout = 10 * time.Second

// noPolling turns the broker's polling off, so that the only waiters on the
// fake clock are the streams' heartbeats.
func noPolling(c *lifecycle.Config) { c.EventPollInterval = -1 }

// serve serves e's host mux on a loopback listener for the test's life.
func (e *env) serve() *httptest.Server {
	srv := httptest.NewServer(e.Host)
	e.T.Cleanup(srv.Close)
	return srv
}

// sseConn is an open event stream read block by block. A block is the raw
// text of one frame or comment, up to and including its blank line.
type sseConn struct {
	t      *testing.T
	resp   *http.Response
	blocks chan string
	err    chan error // the error that ended reading (io.EOF at a clean end)
	cancel context.CancelFunc
}

// openStream sends GET /api/task-events/stream?query to srv with key and
// the given headers, and returns the response with its body unread.
func openStream(t *testing.T, srv *httptest.Server, key, query string, header http.Header) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/task-events/stream?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, cancel
}

// stream opens a stream that must succeed, and reads it in the background.
func stream(t *testing.T, srv *httptest.Server, key, query string, header http.Header) *sseConn {
	t.Helper()
	resp, cancel := openStream(t, srv, key, query, header)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("stream ?%s = %d, want 200; body: %s", query, resp.StatusCode, body)
	}
	c := &sseConn{t: t, resp: resp, blocks: make(chan string, 1024), err: make(chan error, 1), cancel: cancel}
	t.Cleanup(c.close)
	go c.read()
	return c
}

// read splits the body into blocks until it ends.
func (c *sseConn) read() {
	br := bufio.NewReader(c.resp.Body)
	var block strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if block.Len() > 0 || line != "" {
				err = errors.Join(err, errors.New("stream ended inside a block: "+block.String()+line))
			}
			c.err <- err
			close(c.blocks)
			return
		}
		block.WriteString(line)
		if line == "\n" {
			c.blocks <- block.String()
			block.Reset()
		}
	}
}

// close disconnects.
func (c *sseConn) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next block, failing the test when none comes in time.
func (c *sseConn) next() string {
	c.t.Helper()
	select {
	case b, ok := <-c.blocks:
		if !ok {
			c.t.Fatalf("stream ended: %v", <-c.err)
		}
		return b
	case <-time.After(streamTimeout):
		c.t.Fatal("no frame within the timeout")
	}
	return ""
}

// nextIs fails the test unless the next event of the stream is marker:
// an event committed after whatever the test expects not to arrive, so
// that, the stream going in sequence order, anything that did arrive
// comes before it.
func (c *sseConn) nextIs(marker *lifecycle.Event) {
	c.t.Helper()
	if ev := c.event(); ev.ID != marker.ID {
		c.t.Fatalf("next event %s (%s of %s), want the marker %s", ev.ID, ev.Type, ev.TaskID, marker.ID)
	}
}

// ended waits for the server to end the stream and returns why reading
// stopped (io.EOF for a clean end).
func (c *sseConn) ended() error {
	c.t.Helper()
	deadline := time.After(streamTimeout)
	for {
		select {
		case b, ok := <-c.blocks:
			if !ok {
				return <-c.err
			}
			c.t.Logf("block before the end: %q", b)
		case <-deadline:
			c.t.Fatal("the stream did not end within the timeout")
		}
	}
}

// event reads the next block, which must be an event frame, and returns
// the event it carries.
func (c *sseConn) event() lifecycle.Event {
	c.t.Helper()
	return parseFrame(c.t, c.next())
}

// parseFrame checks that block is exactly an event frame (retry, id, event
// and data lines, then a blank line) whose id and event lines match its
// envelope, and returns the envelope.
func parseFrame(t *testing.T, block string) lifecycle.Event {
	t.Helper()
	lines := strings.Split(block, "\n")
	if len(lines) != 6 || lines[4] != "" || lines[5] != "" {
		t.Fatalf("frame %q does not have four lines and a blank line", block)
	}
	want := []string{"retry: ", "id: ", "event: ", "data: "}
	for i, prefix := range want {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Fatalf("line %d of frame %q does not begin %q", i+1, block, prefix)
		}
	}
	if lines[0] != "retry: 5000" {
		t.Errorf("retry line = %q, want retry: 5000", lines[0])
	}
	var e lifecycle.Event
	dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(lines[3], "data: ")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("data of frame %q: %v", block, err)
	}
	if id := strings.TrimPrefix(lines[1], "id: "); id != e.ID || !strings.HasPrefix(id, "evt_") {
		t.Errorf("id line %q, envelope id %q", id, e.ID)
	}
	if typ := strings.TrimPrefix(lines[2], "event: "); typ != string(e.Type) {
		t.Errorf("event line %q, envelope type %q", typ, e.Type)
	}
	return e
}

// wantFrame is the exact frame of a stored event: the envelope is encoded
// as every JSON body of the API, without HTML escaping.
func wantFrame(t *testing.T, e lifecycle.Event) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return "retry: 5000\nid: " + e.ID + "\nevent: " + string(e.Type) + "\ndata: " + strings.TrimSuffix(buf.String(), "\n") + "\n\n"
}

// streamModes are the two ways a stream is served over HTTP/1.1: inside
// net/http's handler (the default) and taking the connection over.
var streamModes = []struct {
	name string
	set  func(*lifecycle.Config)
}{
	{"taken over", func(c *lifecycle.Config) { c.TakeOverStreams = true }},
	{"in the handler", func(*lifecycle.Config) {}},
}

func TestStreamHeadersAndFrames(t *testing.T) {
	t.Parallel()
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testStreamHeadersAndFrames(t, mode.set)
		})
	}
}

func testStreamHeadersAndFrames(t *testing.T, mode func(*lifecycle.Config)) {
	e := newEnv(t, noPolling, mode)
	// Host middleware sets a header before the handler runs: it must reach
	// the client however the stream is written.
	inner := e.Host
	e.Host = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "https://app.example.com")
		inner.ServeHTTP(w, r)
	})
	srv := e.serve()
	task := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + task + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + task + "/cancel", Key: e.Admin, Body: map[string]any{"reason": "a <duplicate> & more"}}, http.StatusOK)
	stored := e.Events()
	if len(stored) != 3 {
		t.Fatalf("%d events stored, want 3", len(stored))
	}

	c := stream(t, srv, e.Admin, "cursor="+stored[0].ID, nil)
	wantHeaders := map[string]string{
		"Access-Control-Allow-Origin":        "https://app.example.com",
		"Content-Type":                       "text/event-stream",
		"Cache-Control":                      "no-store",
		"X-Service-Replay-Window-Hours":      "72",
		"X-Service-Stream-Heartbeat-Seconds": "20",
		"X-Service-Resume-Mode":              "replay_then_live",
	}
	for k, v := range wantHeaders {
		if got := c.resp.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	// Replay: the events strictly after the cursor, byte for byte.
	for _, ev := range stored[1:] {
		if got, want := c.next(), wantFrame(t, ev); got != want {
			t.Errorf("replayed frame:\n got %q\nwant %q", got, want)
		}
	}
	// Live: an event committed now follows at once.
	e.CreateTask(apitest.TaskBody("ENG-2"))
	live := e.Events()[3]
	if got, want := c.next(), wantFrame(t, live); got != want {
		t.Errorf("live frame:\n got %q\nwant %q", got, want)
	}
	got := parseFrame(t, wantFrame(t, live))
	if got.Sequence != live.Sequence || got.TaskVersion != 1 || got.OccurredAt.String() != live.OccurredAt.String() || got.TraceID != nil {
		t.Errorf("decoded envelope %+v, want %+v", got, live)
	}

	plain := stream(t, srv, e.Admin, "heartbeatSeconds=15", nil)
	if got := plain.resp.Header.Get("X-Service-Resume-Mode"); got != "live" {
		t.Errorf("resume mode without a cursor = %q, want live", got)
	}
	if got := plain.resp.Header.Get("X-Service-Stream-Heartbeat-Seconds"); got != "15" {
		t.Errorf("heartbeat header = %q, want 15", got)
	}
	e.CreateTask(apitest.TaskBody("ENG-3"))
	if ev := plain.event(); ev.ID != e.Events()[4].ID {
		t.Errorf("live stream began with %s, want the event after it opened", ev.ID)
	}
	// Nothing else: the next event is the next one committed.
	marker := testEvent(e.Events()[4].TaskID, lifecycle.EventTaskUpdated)
	if err := e.Svc.AppendEventsForTest(t.Context(), []*lifecycle.Event{marker}); err != nil {
		t.Fatal(err)
	}
	plain.nextIs(marker)
}

func TestStreamEventCarriesTraceID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	c := stream(t, e.serve(), e.Admin, "", nil)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1"),
		Header: http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}, http.StatusCreated)
	if ev := c.event(); ev.TraceID == nil || *ev.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traceId = %v, want the request's trace ID", ev.TraceID)
	}
}

func TestStreamValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	tests := []struct {
		query  string
		fields []string
	}{
		{"eventTypes=task.created", []string{"eventTypes"}},
		{"eventTypes=", []string{"eventTypes"}},
		{"eventTypes=task.updated,,task.shipped", []string{"eventTypes"}},
		{"eventTypes=TASK.UPDATED", []string{"eventTypes"}},
		{"taskId=abc", []string{"taskId"}},
		{"taskId=tsk_", []string{"taskId"}},
		{"taskId=tsk_a-b", []string{"taskId"}},
		{"taskId=tsk_a&taskId=tsk_b", []string{"taskId"}},
		{"heartbeatSeconds=9", []string{"heartbeatSeconds"}},
		{"heartbeatSeconds=61", []string{"heartbeatSeconds"}},
		{"heartbeatSeconds=15.5", []string{"heartbeatSeconds"}},
		{"heartbeatSeconds=", []string{"heartbeatSeconds"}},
		{"eventTypes=nope&taskId=x&heartbeatSeconds=0", []string{"eventTypes", "taskId", "heartbeatSeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			body := e.Call(apitest.Request{Method: "GET", Path: "/task-events/stream?" + tt.query, Key: e.Admin}, http.StatusBadRequest)
			if code := apitest.ErrorCode(body); code != "validation_error" {
				t.Errorf("code = %q, want validation_error", code)
			}
			var fields []string
			for _, f := range body["error"].(map[string]any)["details"].(map[string]any)["fields"].([]any) {
				fields = append(fields, f.(map[string]any)["field"].(string))
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("fields = %v, want %v", fields, tt.fields)
			}
		})
	}

	valid := []string{
		"eventTypes=task.updated",
		"eventTypes=task.updated,%20task.reviewed,task.shipped,task.awaiting_user,task.updated",
		"taskId=tsk_ABCabc123",
		"heartbeatSeconds=10",
		"heartbeatSeconds=60",
		"unknownParameter=1",
	}
	srv := e.serve()
	for _, q := range valid {
		c := stream(t, srv, e.Admin, q, nil)
		c.close()
	}
}

func TestStreamAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	tests := []struct {
		name   string
		key    string
		status int
		code   string
	}{
		{"no key", "", http.StatusUnauthorized, "unauthorized"},
		{"unknown key", "lsk_0123456789abcdefghijklmnopqrstuvwxyzABCDEF", http.StatusUnauthorized, "unauthorized"},
		{"without events:read", e.Key(lifecycle.ScopeTasksRead), http.StatusForbidden, "insufficient_scope"},
	}
	for _, tt := range tests {
		body := e.Call(apitest.Request{Method: "GET", Path: "/task-events/stream", Key: tt.key}, tt.status)
		if code := apitest.ErrorCode(body); code != tt.code {
			t.Errorf("%s: code = %q, want %q", tt.name, code, tt.code)
		}
	}
	c := stream(t, e.serve(), e.Key(lifecycle.ScopeEventsRead), "", nil)
	c.close()
	rec := e.Do(apitest.Request{Method: "POST", Path: "/task-events/stream", Key: e.Admin})
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET" {
		t.Errorf("POST = %d with Allow %q, want 405 with Allow GET", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestStreamCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	srv := e.serve()
	a := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + a + "/start", Key: e.Admin}, http.StatusOK)
	evs := e.Events()

	expired := []struct {
		name   string
		query  string
		header http.Header
	}{
		{"unknown cursor", "cursor=evt_0000000000000000000000", nil},
		{"malformed cursor", "cursor=42", nil},
		{"unknown Last-Event-ID", "", http.Header{"Last-Event-Id": {"evt_0000000000000000000000"}}},
		{"Last-Event-ID wins over a good cursor", "cursor=" + evs[0].ID, http.Header{"Last-Event-Id": {"evt_nope"}}},
	}
	for _, tt := range expired {
		body := e.Call(apitest.Request{Method: "GET", Path: "/task-events/stream?" + tt.query, Key: e.Admin, Header: tt.header}, http.StatusGone)
		if code := apitest.ErrorCode(body); code != "cursor_expired" {
			t.Errorf("%s: code = %q, want cursor_expired", tt.name, code)
		}
		if msg := body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "reconnect without a cursor") {
			t.Errorf("%s: message %q does not say what to do", tt.name, msg)
		}
	}

	// Last-Event-ID takes precedence over cursor.
	c := stream(t, srv, e.Admin, "cursor=evt_nope", http.Header{"Last-Event-Id": {evs[0].ID}})
	if ev := c.event(); ev.ID != evs[1].ID {
		t.Errorf("resumed at %s, want %s", ev.ID, evs[1].ID)
	}
	// The newest event as cursor: nothing to replay, then live.
	c = stream(t, srv, e.Admin, "cursor="+evs[1].ID, nil)
	if got := c.resp.Header.Get("X-Service-Resume-Mode"); got != "replay_then_live" {
		t.Errorf("resume mode = %q, want replay_then_live", got)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + a + "/cancel", Key: e.Admin}, http.StatusOK)
	if ev := c.event(); ev.ID != e.Events()[2].ID {
		t.Errorf("after the newest cursor came %s, want the next event", ev.ID)
	}

	// Older than the window, though not pruned yet: 410.
	e.Clock.Advance(72*time.Hour + time.Millisecond)
	body := e.Call(apitest.Request{Method: "GET", Path: "/task-events/stream?cursor=" + evs[0].ID, Key: e.Admin}, http.StatusGone)
	if code := apitest.ErrorCode(body); code != "cursor_expired" {
		t.Errorf("cursor past the window: code = %q, want cursor_expired", code)
	}
}

func TestStreamCursorPruned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling, func(c *lifecycle.Config) {
		c.EventRetention = 48 * time.Hour
		c.PruneInterval = time.Hour
	})
	srv := e.serve()
	a := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	e.Clock.Advance(24 * time.Hour)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + a + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + a + "/cancel", Key: e.Admin}, http.StatusOK)
	evs := e.Events()
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Svc.Close(context.Background()) })
	e.Clock.Advance(25 * time.Hour) // the creation is 49 hours old, the rest 25
	// Step the clock until the prune loop, wherever it sleeps, has run.
	apitest.WaitFor(t, func() bool {
		e.Clock.Advance(time.Minute)
		return len(e.Events()) == 2
	})

	c := stream(t, srv, e.Admin, "", nil)
	if got := c.resp.Header.Get("X-Service-Replay-Window-Hours"); got != "48" {
		t.Errorf("window header = %q, want the configured 48", got)
	}
	c.close()
	body := e.Call(apitest.Request{Method: "GET", Path: "/task-events/stream?cursor=" + evs[0].ID, Key: e.Admin}, http.StatusGone)
	if code := apitest.ErrorCode(body); code != "cursor_expired" {
		t.Errorf("pruned cursor: code = %q, want cursor_expired", code)
	}
	c = stream(t, srv, e.Admin, "cursor="+evs[1].ID, nil)
	if ev := c.event(); ev.ID != evs[2].ID {
		t.Errorf("kept cursor replayed %s, want %s", ev.ID, evs[2].ID)
	}
}

func TestStreamFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	srv := e.serve()
	a := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	b := e.CreateTask(apitest.TaskBody("ENG-2"))["id"].(string)
	genesis := e.Events()[1].ID
	// Events of all four types for both tasks, written as the Service would.
	var written []*lifecycle.Event
	for _, task := range []string{a, b} {
		for _, typ := range []lifecycle.EventType{lifecycle.EventTaskUpdated, lifecycle.EventTaskReviewed, lifecycle.EventTaskShipped, lifecycle.EventTaskAwaitingUser} {
			written = append(written, testEvent(task, typ))
		}
	}
	if err := e.Svc.AppendEventsForTest(t.Context(), written[:4]); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		query string
		keep  func(ev *lifecycle.Event) bool
	}{
		{"", func(*lifecycle.Event) bool { return true }},
		{"taskId=" + b, func(ev *lifecycle.Event) bool { return ev.TaskID == b }},
		{"eventTypes=task.shipped,task.reviewed", func(ev *lifecycle.Event) bool {
			return ev.Type == lifecycle.EventTaskShipped || ev.Type == lifecycle.EventTaskReviewed
		}},
		{"eventTypes=task.awaiting_user&taskId=" + a, func(ev *lifecycle.Event) bool {
			return ev.Type == lifecycle.EventTaskAwaitingUser && ev.TaskID == a
		}},
		{"taskId=tsk_none", func(*lifecycle.Event) bool { return false }},
	}
	conns := make([]*sseConn, len(tests))
	for i, tt := range tests {
		conns[i] = stream(t, srv, e.Admin, tt.query+"&cursor="+genesis, nil)
	}
	// The first half is replayed, the second half goes out live.
	if err := e.Svc.AppendEventsForTest(t.Context(), written[4:]); err != nil {
		t.Fatal(err)
	}
	last := testEvent(a, lifecycle.EventTaskUpdated) // a marker every stream but two sees
	if err := e.Svc.AppendEventsForTest(t.Context(), []*lifecycle.Event{last}); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		var want []string
		for _, ev := range append(written, last) {
			if tt.keep(ev) {
				want = append(want, ev.ID)
			}
		}
		var got []string
		for range want {
			got = append(got, conns[i].event().ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("?%s got %v, want %v", tt.query, got, want)
		}
	}
	// Nothing else reached a stream: markers, one kept by each filter,
	// come next.
	markers := []*lifecycle.Event{
		testEvent(b, lifecycle.EventTaskShipped),      // "", taskId=b, eventTypes=shipped,reviewed
		testEvent(a, lifecycle.EventTaskAwaitingUser), // awaiting_user of a
	}
	if err := e.Svc.AppendEventsForTest(t.Context(), markers); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		m := slices.IndexFunc(markers, func(m *lifecycle.Event) bool { return tt.keep(m) })
		if m < 0 {
			continue // taskId=tsk_none: no event can be of a task that does not exist
		}
		conns[i].nextIs(markers[m])
	}
}

// testEvent returns an event of type typ about task, with the data members
// every type shares.
func testEvent(task string, typ lifecycle.EventType) *lifecycle.Event {
	data, _ := json.Marshal(lifecycle.EventData{
		TaskID: task, TaskIdentifier: "ENG", Status: lifecycle.StatusInProgress, Summary: "test <event> & more",
		AvailableActions: []lifecycle.Action{}, Links: lifecycle.EventLinks{Task: apitest.BaseURL + "/tasks/" + task},
	})
	return &lifecycle.Event{
		ID: id.New("evt_"), Type: typ, OccurredAt: lifecycle.NewTimestamp(apitest.Epoch), TaskVersion: 1, Data: data, TaskID: task,
	}
}

func TestStreamKeepalive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	c := stream(t, e.serve(), e.Admin, "heartbeatSeconds=10", nil)
	if !e.Clock.WaitForWaiters(1, streamTimeout) {
		t.Fatal("the stream never armed its heartbeat")
	}
	e.Clock.Advance(10 * time.Second)
	if got, want := c.next(), ": keepalive 2026-11-21T10:00:10.000Z\n\n"; got != want {
		t.Errorf("keepalive = %q, want %q", got, want)
	}

	// An event resets the idle time: no keepalive 10 s after the last one,
	// but 10 s after the event.
	if !e.Clock.WaitForWaiters(1, streamTimeout) {
		t.Fatal("the stream did not rearm its heartbeat")
	}
	e.Clock.Advance(4 * time.Second)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	c.event()
	e.Clock.Advance(6 * time.Second) // the heartbeat fires, 6 s after the event
	if !e.Clock.WaitForWaiters(1, streamTimeout) {
		t.Fatal("the stream did not rearm its heartbeat after an event")
	}
	// A keepalive 10 s after the last one would come before this one.
	e.Clock.Advance(4 * time.Second)
	if got, want := c.next(), ": keepalive 2026-11-21T10:00:24.000Z\n\n"; got != want {
		t.Errorf("keepalive after an event = %q, want %q", got, want)
	}
}

func TestStreamRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling, func(c *lifecycle.Config) { c.MaxStreamsPerKey = 2 })
	srv := e.serve()
	first := stream(t, srv, e.Admin, "", nil)
	stream(t, srv, e.Admin, "", nil)

	resp, cancel := openStream(t, srv, e.Admin, "", nil)
	defer cancel()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("third stream = %d with Retry-After %q, want 429 with 5; body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var eb lifecycle.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code != "rate_limited" || !strings.Contains(eb.Error.Message, "2 open event streams") {
		t.Errorf("body = %s, want rate_limited saying why", body)
	}
	// Another key has its own allowance.
	stream(t, srv, e.Key(lifecycle.ScopeEventsRead), "", nil)
	// Closing a stream frees its place.
	first.close()
	apitest.WaitFor(t, func() bool {
		resp, cancel := openStream(t, srv, e.Admin, "", nil)
		defer cancel()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func TestStreamEndsOnClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	srv := e.serve()
	live := stream(t, srv, e.Admin, "", nil)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	e.CreateTask(apitest.TaskBody("ENG-2"))
	replaying := stream(t, srv, e.Admin, "cursor="+e.Events()[0].ID, nil)
	live.event()
	replaying.event()

	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	if err := e.Svc.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range []*sseConn{live, replaying} {
		if err := c.ended(); !errors.Is(err, io.EOF) {
			t.Errorf("stream ended with %v, want a clean end", err)
		}
	}
	// Once closed, the store may be closed: no stream may open.
	resp, cancelReq := openStream(t, srv, e.Admin, "", nil)
	defer cancelReq()
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream after Close = %d, want 503", resp.StatusCode)
	}
}

func TestStreamEndsOnDisconnect(t *testing.T) {
	t.Parallel()
	for _, mode := range streamModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testStreamEndsOnDisconnect(t, mode.set)
		})
	}
}

func testStreamEndsOnDisconnect(t *testing.T, mode func(*lifecycle.Config)) {
	e := newEnv(t, noPolling, mode, func(c *lifecycle.Config) { c.MaxStreamsPerKey = 1 })
	srv := e.serve()
	c := stream(t, srv, e.Admin, "", nil)
	c.close()
	// The handler has ended when the key's only place is free again; Close
	// then has no stream to wait for.
	apitest.WaitFor(t, func() bool {
		resp, cancel := openStream(t, srv, e.Admin, "", nil)
		defer cancel()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
	defer cancel()
	if err := e.Svc.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// wrapped is middleware that hides the ResponseWriter behind its own, as
// logging and metrics middleware do.
type wrapped struct {
	http.ResponseWriter
	status int
}

func (w *wrapped) WriteHeader(status int) { w.status = status; w.ResponseWriter.WriteHeader(status) }

// unwrapping can reach the real writer through Unwrap.
type unwrapping struct{ wrapped }

func (w *unwrapping) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// flushing implements http.Flusher only.
type flushing struct{ wrapped }

func (w *flushing) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func TestStreamUnderMiddleware(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wrap func(http.ResponseWriter) http.ResponseWriter
	}{
		{"Unwrap", func(w http.ResponseWriter) http.ResponseWriter { return &unwrapping{wrapped{ResponseWriter: w}} }},
		{"Flusher", func(w http.ResponseWriter) http.ResponseWriter { return &flushing{wrapped{ResponseWriter: w}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, noPolling)
			inner := e.Host
			e.Host = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(tt.wrap(w), r) })
			c := stream(t, e.serve(), e.Admin, "", nil)
			e.CreateTask(apitest.TaskBody("ENG-1"))
			if ev := c.event(); ev.ID != e.Events()[0].ID {
				t.Errorf("got %s, want the new task's event", ev.ID)
			}
		})
	}

	// A writer that can neither flush nor unwrap cannot stream: the
	// response ends at once, and the log says how to mount the handler.
	e := newEnv(t, noPolling)
	inner := e.Host
	e.Host = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(&wrapped{ResponseWriter: w}, r) })
	c := stream(t, e.serve(), e.Admin, "", nil)
	if err := c.ended(); !errors.Is(err, io.EOF) {
		t.Errorf("stream ended with %v, want a clean end", err)
	}
	if logs := e.LogText(); !strings.Contains(logs, "cannot flush") {
		t.Errorf("log does not explain the failure:\n%s", logs)
	}
}

func TestStreamPollsSharedStore(t *testing.T) {
	t.Parallel()
	// Two Services, as two processes would, share one database file.
	e := newEnv(t, func(c *lifecycle.Config) { c.EventPollInterval = 2 * time.Second })
	other, err := sqlite.New(sqlite.Config{Path: e.Store.Path()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	writer, err := lifecycle.New(lifecycle.Config{Store: other, BaseURL: apitest.BaseURL, Clock: fakeclock.New(apitest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}
	c := stream(t, e.serve(), e.Admin, "", nil)
	if !e.Clock.WaitForWaiters(2, streamTimeout) { // the heartbeat and the poll
		t.Fatal("the broker never armed its poll")
	}
	created, err := writer.CreateTask(t.Context(), lifecycle.CreateTaskParams{
		Identifier: "ENG-1", Title: "Written elsewhere", Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-1"},
		Actor: lifecycle.Actor{ID: "other", Role: lifecycle.RoleUser},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(2 * time.Second) // the poll reads what the other Service committed
	if ev := c.event(); !strings.Contains(string(ev.Data), created.ID) {
		t.Errorf("polled event %s does not describe %s", ev.Data, created.ID)
	}
}

// TestIdleStreamParks: with the system's clock, an idle stream that took
// its connection over parks (see internal/sse's Parker) and is woken by
// events, by its key's revocation and by its client's leaving.
func TestIdleStreamParks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Clock = nil; c.TakeOverStreams = true })
	srv := e.serve()
	parked := func(n int) {
		t.Helper()
		testenv.WaitFor(t, streamTimeout, fmt.Sprintf("%d streams parked", n), func() bool { return e.Svc.ParkedStreamsForTest() == n })
	}
	key, plaintext, err := e.Svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "parker", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead},
		Actor: lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	c := stream(t, srv, plaintext, "", nil)
	parked(1)
	id := e.CreateTask(apitest.TaskBody("PARK-1"))["id"].(string)
	if b := c.next(); !strings.Contains(b, "event: task.updated") || !strings.Contains(b, id) {
		t.Fatalf("block %q, want the task's event", b)
	}
	parked(1)

	other := stream(t, srv, e.Key(lifecycle.ScopeEventsRead), "", nil)
	parked(2)
	other.close()
	parked(1)

	if _, err := e.Svc.RevokeAPIKey(t.Context(), key.ID); err != nil {
		t.Fatal(err)
	}
	if b := c.next(); !strings.Contains(b, "revoked") {
		t.Fatalf("block %q, want the revocation's comment", b)
	}
	select {
	case err := <-c.err:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("the stream ended with %v, want its end", err)
		}
	case <-time.After(streamTimeout):
		t.Fatal("the revoked stream did not end")
	}
	parked(0)
}

// TestParkedStreamSkipsWhatItFilters: a parked stream filtered to one task
// is not cut off when more events of other tasks than the broker holds
// pass while it waits (the broker moves its position past them), and gets
// its task's next event.
func TestParkedStreamSkipsWhatItFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Clock = nil; c.StreamLagLimit = 8; c.TakeOverStreams = true })
	srv := e.serve()
	id := e.CreateTask(apitest.TaskBody("MINE-1"))["id"].(string)
	c := stream(t, srv, e.Key(lifecycle.ScopeEventsRead), "taskId="+id, nil)
	testenv.WaitFor(t, streamTimeout, "the stream parked", func() bool { return e.Svc.ParkedStreamsForTest() == 1 })
	for i := range 20 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("OTHER-%d", i)))
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	if b := c.next(); !strings.Contains(b, id) || !strings.Contains(b, "in_progress") {
		t.Fatalf("block %q, want the start of %s", b, id)
	}
	// None of the other tasks' events: the next is the task's own.
	marker := testEvent(id, lifecycle.EventTaskUpdated)
	if err := e.Svc.AppendEventsForTest(t.Context(), []*lifecycle.Event{marker}); err != nil {
		t.Fatal(err)
	}
	c.nextIs(marker)
}
