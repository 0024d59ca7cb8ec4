package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// waitTimeout bounds, in real time, every wait for a stream.
const waitTimeout = 10 * time.Second

func TestPlainString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		want bool
	}{
		{"", true},
		{"evt_01HXYZ", true},
		{"task.updated", true},
		{"a b~", true},
		{`say "hi"`, false},
		{`back\slash`, false},
		{"line\nbreak", false},
		{"tab\t", false},
		{"\x7f", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := PlainString(tt.s); got != tt.want {
			t.Errorf("PlainString(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestCompactObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		b    string
		want bool
	}{
		{`{}`, true},
		{`{"a":1,"b":[true,null],"c":{"d":"e f"}}`, true},
		{`{"a":"quote \" and \\ inside"}`, true},
		{`{"a":"é"}`, true},
		{``, false},
		{`{`, false},
		{`[1,2]`, false},
		{`"s"`, false},
		{`{"a": 1}`, false},
		{"{\"a\":1,\n\"b\":2}", false},
		{"{\"a\":\"tab\there\"}", false},
		{`{"a":"unterminated}`, false},
		{` {"a":1}`, false},
	}
	for _, tt := range tests {
		if got := CompactObject([]byte(tt.b)); got != tt.want {
			t.Errorf("CompactObject(%q) = %v, want %v", tt.b, got, tt.want)
		}
	}
}

func TestOffStack(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	if v, err := OffStack(func() (int, error) { return 7, boom }); v != 7 || err != boom {
		t.Errorf("OffStack = %d, %v; want 7, %v", v, err, boom)
	}
}

// recorder is a ResponseWriter that records what is written and lets tests
// wait for it; Write fails with err once set.
type recorder struct {
	h http.Header

	mu      sync.Mutex
	status  int
	body    strings.Builder
	flushes int
	err     error
	changed chan struct{} // closed and replaced on every write
}

func newRecorder() *recorder {
	return &recorder{h: make(http.Header), changed: make(chan struct{})}
}

func (w *recorder) Header() http.Header { return w.h }

func (w *recorder) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = status
}

func (w *recorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.body.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *recorder) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes++
}

func (w *recorder) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

func (w *recorder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.String()
}

// waitFor waits until the body contains s.
func (w *recorder) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		w.mu.Lock()
		ok, ch := strings.Contains(w.body.String(), s), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %q; written: %q", s, w.String())
		}
	}
}

func TestConnInHandler(t *testing.T) {
	t.Parallel()
	w := newRecorder()
	c := NewConn(w, time.Second)
	SetHeaders(c.Header())
	if err := c.WriteHead(); err != nil {
		t.Fatal(err)
	}
	if err := c.Write([]byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if w.status != http.StatusOK || w.String() != "ab" || w.flushes != 2 {
		t.Errorf("status %d, body %q, %d flushes; want 200, \"ab\", 2", w.status, w.String(), w.flushes)
	}
	if got := w.h.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type %q", got)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close in the handler = %v", err)
	}
	w.fail(io.ErrClosedPipe)
	if err := c.Write([]byte("c")); !errors.Is(err, ErrWrite) || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("failed Write = %v, want ErrWrite wrapping the cause", err)
	}
}

// noFlusher is a ResponseWriter that cannot flush.
type noFlusher struct{ http.ResponseWriter }

func TestConnCannotFlush(t *testing.T) {
	t.Parallel()
	c := NewConn(noFlusher{httptest.NewRecorder()}, time.Second)
	if err := c.WriteHead(); !errors.Is(err, ErrWrite) || !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("WriteHead = %v, want ErrWrite and http.ErrNotSupported", err)
	}
}

func TestTakeOverRefusesHTTP2(t *testing.T) {
	t.Parallel()
	w := newRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.ProtoMajor, r.ProtoMinor = 2, 0
	c := NewConn(w, time.Second)
	if _, ok := c.TakeOver(r, context.Background(), nil); ok {
		t.Fatal("took an HTTP/2 stream over")
	}
	if _, ok := c.TakeOver(httptest.NewRequest("GET", "/", nil), context.Background(), nil); ok {
		t.Fatal("took over a ResponseWriter that cannot be hijacked")
	}
	if err := c.WriteHead(); err != nil || w.status != http.StatusOK {
		t.Errorf("WriteHead after refused takeovers = %v, status %d", err, w.status)
	}
}

// TestTakeOver serves a stream on a connection taken from net/http: the
// head carries the handler's headers and says the connection closes, the
// handler returns at once, and the stream's context ends when the client
// goes away.
func TestTakeOver(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			ended := make(chan error, 1)
			unwrapped := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c := NewConn(w, time.Second)
				SetHeaders(c.Header())
				c.Header().Set("X-Test", "yes")
				c.Header().Set("Content-Length", "99")
				ctx, ok := c.TakeOver(r, context.Background(), func(conn net.Conn) net.Conn {
					unwrapped <- struct{}{}
					return conn
				})
				if !ok {
					ended <- errors.New("not taken over")
					return
				}
				go func() {
					defer c.Close()
					if err := c.WriteHead(); err != nil {
						ended <- err
						return
					}
					if err := c.Write([]byte("data: one\n\n"), []byte("data: two\n\n")); err != nil {
						ended <- err
						return
					}
					<-ctx.Done()
					ended <- ctx.Err()
				}()
			}))
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "GET /stream %s\r\nHost: example.com\r\n\r\n", proto)
			br := bufio.NewReader(conn)
			status, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := proto + " 200 OK\r\n"; status != want {
				t.Errorf("status line %q, want %q", status, want)
			}
			tp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(status), br)), nil)
			if err != nil {
				t.Fatal(err)
			}
			h := tp.Header
			if h.Get("X-Test") != "yes" || h.Get("Content-Type") != "text/event-stream" || !tp.Close ||
				h.Get("Content-Length") != "" || h.Get("Date") == "" {
				t.Errorf("head: %v", h)
			}
			body := make([]byte, len("data: one\n\ndata: two\n\n"))
			if _, err := io.ReadFull(tp.Body, body); err != nil || string(body) != "data: one\n\ndata: two\n\n" {
				t.Errorf("body %q, %v", body, err)
			}
			select {
			case <-unwrapped:
			default:
				t.Error("unwrap was not called")
			}
			conn.Close()
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the stream ended with %v, want its context cancelled", err)
				}
			case <-time.After(waitTimeout):
				t.Fatal("the stream's context did not end when the client left")
			}
		})
	}
}

// feed is a Feed of numbered items: stored ones, and a buffer of the
// newest after base. Item n's frame is "n\n".
type feed struct {
	page int

	mu      sync.Mutex
	stored  int64         // items 1..stored are stored
	base    int64         // the buffer holds the items after base
	broken  bool          // Read reports every position behind the buffer
	changed chan struct{} // closed and replaced when stored grows
	fetches []int64       // the after of every Fetch
	ended   []error       // what Ended was told
	release func()        // called by Release
}

func newFeed(page int, stored, base int64) *feed {
	return &feed{page: page, stored: stored, base: base, changed: make(chan struct{})}
}

var (
	errStopped = errors.New("stopped")
	errExpired = errors.New("expired")
	errBehind  = errors.New("behind")
)

func (f *feed) add(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored += n
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *feed) Read(pos int64, dst [][]byte, limit int) ([][]byte, int64, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pos < f.base || f.broken {
		return dst, pos, nil, false
	}
	for pos < f.stored && len(dst) < limit {
		pos++
		dst = append(dst, fmt.Appendf(nil, "%d\n", pos))
	}
	return dst, pos, f.changed, true
}

func (f *feed) Fetch(_ context.Context, after int64) (Page[[]int64], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches = append(f.fetches, after)
	var p Page[[]int64]
	for n := after + 1; n <= f.stored && len(p.Items) < f.page; n++ {
		p.Items = append(p.Items, n)
	}
	p.N, p.Full, p.Through = len(p.Items), len(p.Items) == f.page, f.stored
	if p.N > 0 {
		p.Last = p.Items[p.N-1]
	}
	return p, nil
}

func (f *feed) Append(_ context.Context, dst []byte, items []int64) []byte {
	for _, n := range items {
		dst = fmt.Appendf(dst, "%d\n", n)
	}
	return dst
}

func (f *feed) Behind(int64) error { return errBehind }

func (f *feed) End(stopped bool) ([]byte, error) {
	if stopped {
		return []byte(": stopped\n\n"), errStopped
	}
	return []byte(": expired\n\n"), errExpired
}

func (f *feed) Ended(_ context.Context, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, err)
}

func (f *feed) Release() {
	if f.release != nil {
		f.release()
	}
}

func (f *feed) endings() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// serve serves a stream of f at pos to a recorder in the background, and
// returns them with the channel that receives how the stream ended.
func serve(t *testing.T, f *feed, pos int64, mutate func(*Stream[[]int64])) (*Stream[[]int64], *recorder, *fakeclock.Clock, <-chan error, context.CancelFunc) {
	t.Helper()
	w := newRecorder()
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC))
	s := &Stream[[]int64]{Conn: NewConn(w, time.Second), Pos: pos, Heartbeat: 10 * time.Second, Clock: clock}
	if mutate != nil {
		mutate(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, f) }()
	return s, w, clock, done, cancel
}

// ended waits for the stream to end and returns why.
func ended(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("the stream did not end")
		return nil
	}
}

// TestStreamReplaysThenFollows starts a stream behind the buffer: it
// replays the stored items page by page, then follows the buffer, until
// stopped.
func TestStreamReplaysThenFollows(t *testing.T) {
	t.Parallel()
	f := newFeed(2, 5, 3)
	stop := make(chan struct{})
	s, w, _, done, _ := serve(t, f, 0, func(s *Stream[[]int64]) { s.Stop = stop })
	w.waitFor(t, "1\n2\n3\n4\n5\n")
	f.add(2)
	w.waitFor(t, "5\n6\n7\n")
	close(stop)
	if err := ended(t, done); err != errStopped {
		t.Errorf("ended with %v, want %v", err, errStopped)
	}
	if got, want := w.String(), "1\n2\n3\n4\n5\n6\n7\n: stopped\n\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	if s.Pos != 7 {
		t.Errorf("Pos = %d, want 7", s.Pos)
	}
	if want := []int64{0, 2, 4}; fmt.Sprint(f.fetches) != fmt.Sprint(want) {
		t.Errorf("fetched after %v, want %v", f.fetches, want)
	}
}

// TestStreamEnds ends streams every way but by writing.
func TestStreamEnds(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name   string
		mutate func(*Stream[[]int64])
		cancel bool
		broken bool
		want   error
		last   string // the last thing written
	}{
		{"stopped", func(s *Stream[[]int64]) { s.Stop = closed }, false, false, errStopped, ": stopped\n\n"},
		{"done", func(s *Stream[[]int64]) { s.Done = closed }, false, false, errExpired, ": expired\n\n"},
		{"expired", func(s *Stream[[]int64]) { s.ExpiresAt = s.Clock.Now() }, false, false, errExpired, ": expired\n\n"},
		{"cancelled", nil, true, false, context.Canceled, "1\n"},
		{"fell behind", nil, false, true, errBehind, "1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFeed(2, 0, 0)
			_, w, _, done, cancel := serve(t, f, 0, tt.mutate)
			if tt.cancel || tt.broken {
				f.add(1)
				w.waitFor(t, "1\n") // live
			}
			if tt.cancel {
				cancel()
			}
			if tt.broken {
				f.mu.Lock()
				f.broken = true
				f.mu.Unlock()
				f.add(1)
			}
			if err := ended(t, done); !errors.Is(err, tt.want) {
				t.Errorf("ended with %v, want %v", err, tt.want)
			}
			if got := w.String(); !strings.HasSuffix(got, tt.last) {
				t.Errorf("wrote %q, want it to end with %q", got, tt.last)
			}
		})
	}
}

// TestStreamHeartbeat writes a keepalive comment once the stream has been
// idle for its heartbeat, and none while it writes.
func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFeed(2, 0, 0)
	_, w, clock, done, cancel := serve(t, f, 0, nil)
	if !clock.WaitForWaiters(1, waitTimeout) {
		t.Fatal("the stream never armed its heartbeat")
	}
	clock.Advance(4 * time.Second)
	f.add(1)
	w.waitFor(t, "1\n")
	clock.Advance(6 * time.Second) // 10 s since the head, 6 since the write
	if !clock.WaitForWaiters(1, waitTimeout) {
		t.Fatal("the stream did not wait for the rest of its heartbeat")
	}
	if strings.Contains(w.String(), "keepalive") {
		t.Fatalf("a keepalive 6 s after a write: %q", w.String())
	}
	clock.Advance(4 * time.Second)
	w.waitFor(t, ": keepalive 2026-11-21T10:00:14.123Z\n\n")
	cancel()
	if err := ended(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("ended with %v", err)
	}
}

// TestStreamWriteFails ends a stream whose write fails with that error.
func TestStreamWriteFails(t *testing.T) {
	t.Parallel()
	f := newFeed(2, 0, 0)
	_, w, _, done, _ := serve(t, f, 0, nil)
	w.fail(io.ErrClosedPipe)
	f.add(1)
	if err := ended(t, done); !errors.Is(err, ErrWrite) || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("ended with %v, want ErrWrite", err)
	}
}

func TestComment(t *testing.T) {
	t.Parallel()
	if got, want := string(Comment("ended:\r\nbye\nnow")), ": ended:  bye now\n\n"; got != want {
		t.Errorf("Comment = %q, want %q", got, want)
	}
}

func TestAppendHead(t *testing.T) {
	t.Parallel()
	got := string(AppendHead([]byte("x"), 5000, "evt_1", "task.updated"))
	if want := "xretry: 5000\nid: evt_1\nevent: task.updated\ndata: "; got != want {
		t.Errorf("AppendHead = %q, want %q", got, want)
	}
}

// TestRunInHandler serves a stream inside the handler (no takeover asked
// for): Run returns once the stream ended, with f told why and done called.
func TestRunInHandler(t *testing.T) {
	t.Parallel()
	f := newFeed(2, 0, 0)
	w := newRecorder()
	parent, stopAll := context.WithCancel(context.Background())
	s := &Stream[[]int64]{Conn: NewConn(w, time.Second), Heartbeat: time.Minute, Clock: fakeclock.New(time.Unix(0, 0))}
	returned := make(chan struct{})
	doneCalls := 0
	f.release = func() { doneCalls++ }
	go func() {
		defer close(returned)
		s.Run(httptest.NewRequest("GET", "/", nil), parent, nil, false, f)
	}()
	f.add(1)
	w.waitFor(t, "1\n")
	stopAll() // the parent ends the stream
	select {
	case <-returned:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return when its parent was done")
	}
	if got := f.endings(); len(got) != 1 || !errors.Is(got[0], context.Canceled) || doneCalls != 1 {
		t.Errorf("Ended with %v, Release called %d times; want context.Canceled, once", got, doneCalls)
	}
}

// TestRunTakesOver serves a stream from its own goroutines: the handler
// returns at once, and when the client leaves f is told and done called.
func TestRunTakesOver(t *testing.T) {
	t.Parallel()
	f := newFeed(2, 3, 3)
	done := make(chan struct{})
	f.release = func() { close(done) }
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &Stream[[]int64]{Conn: NewConn(w, time.Second), Pos: 1, Heartbeat: time.Minute, Clock: fakeclock.New(time.Unix(0, 0))}
		s.Run(r, context.Background(), nil, true, f)
		returned <- struct{}{}
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned:
	case <-time.After(waitTimeout):
		t.Fatal("the handler did not return")
	}
	body := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, body); err != nil || string(body) != "2\n3\n" {
		t.Errorf("body %q, %v; want the replay of 2 and 3", body, err)
	}
	select {
	case <-done:
		t.Fatal("Release called while the client was still there")
	default:
	}
	conn.Close()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Release not called when the client left")
	}
	if got := f.endings(); len(got) != 1 || !errors.Is(got[0], context.Canceled) {
		t.Errorf("Ended with %v, want context.Canceled", got)
	}
}

func TestLastEventID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string
		query  string
		want   string
	}{
		{"neither", "", "", ""},
		{"header", " evt_1 ", "cursor=evt_2", "evt_1"},
		{"blank header", "  ", "cursor=evt_2", "evt_2"},
		{"query", "", "cursor=%20evt_2%20", "evt_2"},
		{"other parameter", "", "after=evt_2", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/stream?"+tt.query, nil)
		if tt.header != "" {
			r.Header.Set("Last-Event-ID", tt.header)
		}
		if got := LastEventID(r.Header, r.URL.Query(), "cursor"); got != tt.want {
			t.Errorf("%s: LastEventID = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestAppendJSON(t *testing.T) {
	t.Parallel()
	got, err := AppendJSON([]byte("data: "), map[string]any{"a": "<b>&", "n": 1})
	if want := `data: {"a":"<b>&","n":1}`; err != nil || string(got) != want {
		t.Errorf("AppendJSON = %q, %v; want %q", got, err, want)
	}
	got, err = AppendJSON([]byte("data: "), json.RawMessage("{bad"))
	if err == nil || string(got) != "data: " {
		t.Errorf("AppendJSON of invalid JSON = %q, %v; want the prefix alone and an error", got, err)
	}
}
