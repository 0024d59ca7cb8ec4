package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

func init() { log.SetOutput(io.Discard) }

// server is a lifecycle Service behind a loopback server that records the
// Last-Event-ID of every stream request.
type server struct {
	svc   *lifecycle.Service
	store *sqlite.Store
	srv   *httptest.Server
	key   string
	mu    sync.Mutex
	seen  []string // Last-Event-ID of each request, "" when absent
}

func newServer(t *testing.T) *server {
	t.Helper()
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// Streams stay in net/http's handler, so that the test server can drop
	// them with CloseClientConnections (a stream that took its connection
	// over is ended by Service.Close instead).
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", Logger: slog.New(slog.DiscardHandler),
		KeepStreamsInHandler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	_, key, err := svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "t", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead},
		Actor: lifecycle.Actor{ID: "t", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{svc: svc, store: store, key: key}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get("Last-Event-ID"))
		s.mu.Unlock()
		svc.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// create creates a task and returns the ID of its event.
func (s *server) create(t *testing.T, ident string) {
	t.Helper()
	_, err := s.svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: ident, Title: "t",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident}, Actor: lifecycle.Actor{ID: "t", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// start runs a consumer that does not wait between connections, sends
// what it handles to the first channel returned and the resume mode of
// each connection it opens to the second.
func start(t *testing.T, url, key, lastID string) (<-chan event, <-chan string) {
	t.Helper()
	got, opens := make(chan event, 100), make(chan string, 100)
	c := &consumer{url: url, key: key, lastID: lastID, client: http.DefaultClient,
		handle: func(e event) { got <- e },
		opened: func(mode string) {
			select {
			case opens <- mode:
			default: // a test that does not read them
			}
		},
		sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return got, opens
}

// opened waits for the consumer to open a connection and returns its
// resume mode.
func opened(t *testing.T, opens <-chan string) string {
	t.Helper()
	select {
	case mode := <-opens:
		return mode
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not connect")
	}
	return ""
}

// receive returns the next n events handled.
func receive(t *testing.T, got <-chan event, n int) []event {
	t.Helper()
	var out []event
	for range n {
		select {
		case e := <-got:
			out = append(out, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events handled, want %d", len(out), n)
		}
	}
	return out
}

func TestConsumerResumesWithLastEventID(t *testing.T) {
	s := newServer(t)
	s.create(t, "T-0")
	got, opens := start(t, s.srv.URL+"/task-events/stream", s.key, "")
	if mode := opened(t, opens); mode != "live" {
		t.Errorf("first connection %q, want live", mode)
	}
	for i := 1; i <= 3; i++ {
		s.create(t, fmt.Sprintf("T-%d", i))
	}
	first := receive(t, got, 3)
	s.srv.CloseClientConnections()
	for i := 4; i <= 6; i++ {
		s.create(t, fmt.Sprintf("T-%d", i))
	}
	if mode := opened(t, opens); mode != "replay_then_live" {
		t.Errorf("second connection %q, want replay_then_live", mode)
	}
	rest := receive(t, got, 3)

	var ids []string
	for _, e := range append(first, rest...) {
		if e.typ != "task.updated" {
			t.Errorf("event %s has type %q", e.id, e.typ)
		}
		ids = append(ids, e.id)
	}
	var want []string
	evs, err := s.store.Events(t.Context(), lifecycle.EventFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[1:] {
		want = append(want, e.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("handled %v, want %v", ids, want)
	}
	if reqs := s.requests(); len(reqs) != 2 || reqs[0] != "" || reqs[1] != first[2].id {
		t.Errorf("requests carried Last-Event-ID %q, want none, then %s", reqs, first[2].id)
	}
}

func TestConsumerRestartsLiveAfterExpiredCursor(t *testing.T) {
	s := newServer(t)
	got, opens := start(t, s.srv.URL+"/task-events/stream", s.key, "evt_0000000000000000000000")
	if mode := opened(t, opens); mode != "live" {
		t.Errorf("connection after 410 %q, want live", mode)
	}
	s.create(t, "T-1")
	receive(t, got, 1)
	if reqs := s.requests(); len(reqs) != 2 || reqs[0] != "evt_0000000000000000000000" || reqs[1] != "" {
		t.Errorf("requests carried Last-Event-ID %q, want the expired cursor, then none", reqs)
	}
}

func TestConsumerDropsDuplicates(t *testing.T) {
	// A server that replays the same two events on every connection, as an
	// at-least-once source may.
	var conns atomic.Int32
	third := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "retry: 5000\nid: evt_a\nevent: task.updated\ndata: {\"n\":1}\n\n: keepalive\n\nid: evt_b\nevent: task.shipped\ndata: {\ndata: \"n\":2}\n\n")
		if conns.Add(1) == 3 {
			close(third)
		}
	}))
	defer srv.Close()
	got, _ := start(t, srv.URL, "k", "")
	<-third
	handled := receive(t, got, 2)
	if handled[0].id != "evt_a" || handled[1].id != "evt_b" || handled[1].typ != "task.shipped" || handled[1].data != "{\n\"n\":2}" {
		t.Errorf("handled %+v", handled)
	}
	select {
	case e := <-got:
		t.Errorf("a duplicate was handled: %+v", e)
	default:
	}
}
