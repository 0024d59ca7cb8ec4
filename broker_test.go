package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/id"
)

// TestSlowConsumerIsCutOff blocks one stream's writes while events keep
// coming: the other stream gets every event at once, the blocked one is
// cut off once released, and resumes from its cursor without a gap.
func TestSlowConsumerIsCutOff(t *testing.T) {
	t.Parallel()
	s, store, logs := newMemService(t, func(c *Config) { c.StreamLagLimit = 8 })
	task := "tsk_slow"
	slow := newBlockingWriter()
	fast := newBlockingWriter()
	slowDone := serveStream(t, s, slow, "", "")
	serveStream(t, s, fast, "", "")
	slow.waitFrames(t, 0) // headers written: both are live
	fast.waitFrames(t, 0)

	slow.block()
	publish(t, s, store, task, 1)
	slow.waitBlocked(t) // the slow stream is stuck writing the first event
	for i := 2; i <= 21; i++ {
		publish(t, s, store, task, 1)
		fast.waitFrames(t, i) // the fast one is not held up
	}
	slow.release()
	select {
	case <-slowDone:
	case <-time.After(streamTimeout):
		t.Fatal("the slow stream was not cut off")
	}
	got := slow.eventIDs()
	all := store.eventIDs()
	if !slices.Equal(got, all[:1]) {
		t.Fatalf("the slow stream wrote %v, want only the first event", got)
	}
	if !strings.Contains(logs.String(), "cut off") {
		t.Errorf("no log of the cut-off:\n%s", logs)
	}

	// It resumes from its cursor with the rest, exactly once.
	again := newBlockingWriter()
	serveStream(t, s, again, got[0], "")
	again.waitFrames(t, 20)
	if !slices.Equal(again.eventIDs(), all[1:]) {
		t.Errorf("the resumed stream wrote %v, want %v", again.eventIDs(), all[1:])
	}
}

// TestStoreFaultLosesNoEvent makes the Store fail reads for a while: the
// broker retries by its clock and every event still reaches the stream,
// once and in order.
func TestStoreFaultLosesNoEvent(t *testing.T) {
	t.Parallel()
	s, store, logs := newMemService(t)
	clock := s.clock.(*fakeclock.Clock)
	w := newBlockingWriter()
	serveStream(t, s, w, "", "")
	w.waitFrames(t, 0)
	if !clock.WaitForWaiters(1, streamTimeout) { // the heartbeat
		t.Fatal("the stream never armed its heartbeat")
	}

	// Events commit while reads fail; one wake-up comes and is lost on the
	// failing read.
	store.failReads(errors.New("disk on fire"))
	for range 5 {
		if err := store.Update(t.Context(), func(tx Tx) error {
			return tx.AppendEvent(t.Context(), &Event{ID: id.New("evt_"), Type: EventTaskUpdated, TaskID: "tsk_a", Data: []byte("{}")})
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.broker.Wake()
	if !clock.WaitForWaiters(2, streamTimeout) { // the heartbeat and the broker's retry
		t.Fatal("the broker did not schedule a retry")
	}
	if got := w.eventIDs(); len(got) != 0 {
		t.Fatalf("stream wrote %v while the store failed", got)
	}
	store.failReads(nil)
	clock.Advance(broker.Retry)
	w.waitFrames(t, 5)
	if got, want := w.eventIDs(), store.eventIDs(); !slices.Equal(got, want) {
		t.Errorf("stream wrote %v, want %v", got, want)
	}
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("the fault was not logged:\n%s", logs)
	}
}

// streamTimeout bounds, in real time, every wait for a stream.
const streamTimeout = 10 * time.Second

// newMemService returns a Service on a memStore with a fake clock, no
// polling and an authenticator that lets every request read events.
func newMemService(t testing.TB, mutate ...func(*Config)) (*Service, *memStore, *lockedBuffer) {
	t.Helper()
	store := newMemStore()
	logs := &lockedBuffer{}
	cfg := Config{
		Store:             store,
		BaseURL:           "https://tasks.example.com/api",
		Clock:             fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)),
		Logger:            slog.New(slog.NewTextHandler(logs, nil)),
		Authenticator:     allowEvents{},
		EventPollInterval: -1,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), streamTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, store, logs
}

// serveStream serves one stream request to w in the background; the
// returned channel is closed when the handler returns.
func serveStream(t *testing.T, s *Service, w *blockingWriter, lastEventID, query string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := httptest.NewRequestWithContext(ctx, "GET", "/task-events/stream?"+query, nil)
	if lastEventID != "" {
		r.Header.Set("Last-Event-ID", lastEventID)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Handler().ServeHTTP(w, r)
	}()
	return done
}

// publish appends n events about task through the Service.
func publish(t *testing.T, s *Service, store *memStore, task string, n int) {
	t.Helper()
	for range n {
		err := s.update(t.Context(), func(tx Tx) error {
			return tx.AppendEvent(t.Context(), &Event{
				ID: id.New("evt_"), Type: EventTaskUpdated, OccurredAt: s.now(), TaskVersion: 1,
				Data: []byte(`{"taskId":"` + task + `"}`), TaskID: task,
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// allowEvents authenticates every request as a principal that reads events.
type allowEvents struct{}

func (allowEvents) Authenticate(*http.Request) (Principal, error) {
	return Principal{ID: "key_test", Actor: SystemActor(), Scopes: []Scope{ScopeEventsRead}}, nil
}

// blockingWriter is a ResponseWriter that records what is written and can
// be made to block inside Write, as a consumer that stops reading does.
type blockingWriter struct {
	h http.Header

	mu      sync.Mutex
	status  int
	body    bytes.Buffer
	blocked bool          // Write blocks while set
	waiting bool          // a Write is blocked
	changed chan struct{} // closed and replaced on every change
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{h: make(http.Header), changed: make(chan struct{})}
}

func (w *blockingWriter) Header() http.Header { return w.h }

func (w *blockingWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status = status
	w.signal()
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.blocked {
		w.waiting = true
		w.signal()
		ch := w.changed
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	w.waiting = false
	w.body.Write(p)
	w.signal()
	return len(p), nil
}

func (w *blockingWriter) Flush() {}

// signal wakes waiters; w.mu is held.
func (w *blockingWriter) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *blockingWriter) block() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blocked = true
}

func (w *blockingWriter) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blocked = false
	w.signal()
}

// await waits until cond, called with w.mu held, holds.
func (w *blockingWriter) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(streamTimeout)
	for {
		w.mu.Lock()
		ok, ch := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("timed out waiting for %s; written: %q", what, w.body.String())
		}
	}
}

func (w *blockingWriter) waitBlocked(t *testing.T) {
	t.Helper()
	w.await(t, "a blocked write", func() bool { return w.waiting })
}

// waitFrames waits for the status 200 and at least n event frames.
func (w *blockingWriter) waitFrames(t *testing.T, n int) {
	t.Helper()
	w.await(t, fmt.Sprintf("%d frames", n), func() bool {
		return w.status == http.StatusOK && strings.Count(w.body.String(), "\nid: ") >= n
	})
}

// eventIDs returns the ids of the frames written so far.
func (w *blockingWriter) eventIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, line := range strings.Split(w.body.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "id: "); ok {
			ids = append(ids, rest)
		}
	}
	return ids
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*lockedBuffer)(nil)

// memStore is an in-memory Store of events only, enough to run the event
// stream on something other than SQLite. Transactions are serialized, so
// sequences commit in order.
type memStore struct {
	Store // nil: the methods the stream never calls panic if called

	mu      sync.Mutex
	events  []Event
	seq     int64
	pruned  int64 // the greatest sequence pruned
	readErr error
}

func newMemStore() *memStore { return &memStore{} }

var _ Store = (*memStore)(nil)

// failReads makes every read fail with err; nil heals the store.
func (m *memStore) failReads(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readErr = err
}

func (m *memStore) eventIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for _, e := range m.events {
		ids = append(ids, e.ID)
	}
	return ids
}

func (m *memStore) Task(context.Context, string) (Task, error) { return Task{}, ErrNotFound }

func (m *memStore) ListTasks(context.Context, TaskFilter) (TaskPage, error) { return TaskPage{}, nil }

func (m *memStore) Events(_ context.Context, f EventFilter) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil {
		return nil, m.readErr
	}
	var out []Event
	for _, e := range m.events {
		if e.Sequence > f.After && (f.TaskID == "" || e.TaskID == f.TaskID) && (f.ID == "" || e.ID == f.ID) &&
			(len(f.Types) == 0 || slices.Contains(f.Types, e.Type)) {
			out = append(out, e)
			if len(out) == f.Limit {
				break
			}
		}
	}
	return out, nil
}

func (m *memStore) EventBounds(context.Context) (EventBounds, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil {
		return EventBounds{}, m.readErr
	}
	return EventBounds{Last: m.seq, PrunedThrough: m.pruned}, nil
}

// Prune prunes events only: the memStore keeps nothing else.
func (m *memStore) Prune(_ context.Context, p PruneParams) (PruneResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.events)
	m.events = slices.DeleteFunc(m.events, func(e Event) bool {
		if e.OccurredAt.Before(p.Before) {
			m.pruned = max(m.pruned, e.Sequence)
			return true
		}
		return false
	})
	return PruneResult{Events: int64(n - len(m.events))}, nil
}

func (m *memStore) APIKeyByHash(context.Context, []byte) (APIKey, error) {
	return APIKey{}, ErrNotFound
}

func (m *memStore) ListAPIKeys(context.Context) ([]APIKey, error) { return nil, nil }

func (m *memStore) Update(_ context.Context, fn func(tx Tx) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, seq := len(m.events), m.seq
	if err := fn(memTx{m: m}); err != nil {
		m.events, m.seq = m.events[:n], seq
		return err
	}
	return nil
}

func (m *memStore) Close() error { return nil }

// memTx is a transaction of memStore; m.mu is held.
type memTx struct {
	Tx // nil: the methods the stream never calls panic if called
	m  *memStore
}

func (x memTx) Task(context.Context, string) (Task, error) { return Task{}, ErrNotFound }
func (x memTx) CreateTask(context.Context, Task) error     { return nil }
func (x memTx) UpdateTask(context.Context, Task) error     { return nil }
func (x memTx) CreateAPIKey(context.Context, APIKey) error { return nil }
func (x memTx) RevokeAPIKey(context.Context, string, time.Time) (APIKey, error) {
	return APIKey{}, ErrNotFound
}

func (x memTx) AppendEvent(_ context.Context, e *Event) error {
	x.m.seq++
	e.Sequence = x.m.seq
	x.m.events = append(x.m.events, *e)
	return nil
}
