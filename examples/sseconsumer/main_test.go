package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

func init() { log.SetOutput(io.Discard) }

// server is a lifecycle Service behind a loopback server that records the
// Last-Event-ID of every stream request.
type server struct {
	svc   *lifecycle.Service
	store *memory.Store
	srv   *httptest.Server
	key   string
	mu    sync.Mutex
	seen  []string // Last-Event-ID of each request, "" when absent
}

func newServer(t *testing.T) *server {
	t.Helper()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	// Streams stay in net/http's handler (the default), so that the test
	// server can drop them with CloseClientConnections (a stream that took
	// its connection over is ended by Service.Close instead).
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", Logger: slog.New(slog.DiscardHandler)})
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

// create creates a task.
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

// eventIDs returns the IDs of every event in the store.
func (s *server) eventIDs(t *testing.T) []string {
	t.Helper()
	evs, err := s.store.Events(t.Context(), lifecycle.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	return ids
}

// start runs consume and sends what it handles to the channel returned;
// the returned function stops it.
func start(t *testing.T, s *server, state string) (<-chan lifecycle.Event, func()) {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: s.srv.URL, APIKey: s.key})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan lifecycle.Event, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		consume(ctx, c, client.StreamParams{MaxReconnectDelay: 10 * time.Millisecond}, state, func(e lifecycle.Event) { got <- e })
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return got, stop
}

// receive returns the IDs of the next n events handled.
func receive(t *testing.T, got <-chan lifecycle.Event, n int) []string {
	t.Helper()
	var out []string
	for range n {
		select {
		case e := <-got:
			out = append(out, e.ID)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events handled, want %d", len(out), n)
		}
	}
	return out
}

func TestConsumerResumesAfterDisconnectsAndRestarts(t *testing.T) {
	s := newServer(t)
	state := filepath.Join(t.TempDir(), "cursor.txt")
	s.create(t, "T-0")
	os.WriteFile(state, []byte(s.eventIDs(t)[0]+"\n"), 0o600)

	got, stop := start(t, s, state)
	for i := 1; i <= 3; i++ {
		s.create(t, fmt.Sprintf("T-%d", i))
	}
	handled := receive(t, got, 3)
	s.srv.CloseClientConnections() // a disconnect: the consumer resumes
	s.create(t, "T-4")
	handled = append(handled, receive(t, got, 1)...)
	stop() // a restart: the state file has the cursor
	s.create(t, "T-5")
	got, stop = start(t, s, state)
	handled = append(handled, receive(t, got, 1)...)
	stop()

	if want := s.eventIDs(t)[1:]; !slices.Equal(handled, want) {
		t.Errorf("handled %v, want %v", handled, want)
	}
	reqs := s.requests()
	if len(reqs) < 3 || reqs[0] != s.eventIDs(t)[0] || reqs[len(reqs)-1] != handled[3] {
		t.Errorf("requests carried Last-Event-ID %q", reqs)
	}
	if b, _ := os.ReadFile(state); strings.TrimSpace(string(b)) != handled[4] {
		t.Errorf("state file %q, want %s", b, handled[4])
	}
}

func TestConsumerRestartsLiveAfterExpiredCursor(t *testing.T) {
	s := newServer(t)
	state := filepath.Join(t.TempDir(), "cursor.txt")
	os.WriteFile(state, []byte("evt_0000000000000000000000\n"), 0o600)
	got, _ := start(t, s, state)
	// After the 410 the stream starts at the live tail: create tasks until
	// one reaches the consumer.
	for i := 0; ; i++ {
		s.create(t, fmt.Sprintf("T-%d", i))
		select {
		case <-got:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	if reqs := s.requests(); len(reqs) != 2 || reqs[0] != "evt_0000000000000000000000" || reqs[1] != "" {
		t.Errorf("requests carried Last-Event-ID %q, want the expired cursor, then none", reqs)
	}
}
