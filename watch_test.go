package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// watchLog records what a watch's function is given.
type watchLog struct {
	mu   sync.Mutex
	evs  []lifecycle.Event
	more chan struct{} // receives (without blocking) after each event
}

func newWatchLog() *watchLog { return &watchLog{more: make(chan struct{}, 1)} }

func (l *watchLog) add(e *lifecycle.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, *e)
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
}

func (l *watchLog) events() []lifecycle.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lifecycle.Event(nil), l.evs...)
}

// waitFor waits until n events were recorded.
func (l *watchLog) waitFor(t *testing.T, n int) []lifecycle.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if evs := l.events(); len(evs) >= n {
			return evs
		}
		select {
		case <-l.more:
		case <-timeout:
			t.Fatalf("the watch got %d events, want %d", len(l.events()), n)
		}
	}
}

func TestWatchTaskDeliversTheTasksEventsInOrder(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	id := e.CreateTask(apitest.TaskBody("WATCH-1"))["id"].(string)
	other := e.CreateTask(apitest.TaskBody("WATCH-2"))["id"].(string)
	log := newWatchLog()
	w, err := e.Svc.WatchTask(ctx, id, log.add)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	actor := lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}
	if _, err := e.Svc.StartTask(ctx, other, lifecycle.StartTaskParams{Actor: actor}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.RecordBlocker(ctx, id, lifecycle.RecordBlockerParams{Reason: "missing_secret", ActionRequired: "Add it", Actor: actor}); err != nil {
		t.Fatal(err)
	}
	evs := log.waitFor(t, 2)
	stored, err := e.Svc.TaskEventsAfter(ctx, id, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The creation came before the watch; start and blocker after it.
	if len(stored) != 3 {
		t.Fatalf("TaskEventsAfter(0) = %d events, want 3", len(stored))
	}
	for i, ev := range evs {
		want := stored[i+1]
		if ev.ID != want.ID || ev.TaskID != id || ev.Sequence != want.Sequence || ev.TaskVersion != want.TaskVersion || string(ev.Data) != string(want.Data) {
			t.Errorf("event %d = %+v, want %+v", i, ev, want)
		}
	}
	if evs[1].Type != lifecycle.EventTaskAwaitingUser {
		t.Errorf("second event is %s, want task.awaiting_user", evs[1].Type)
	}
	after, err := e.Svc.TaskEventsAfter(ctx, id, stored[1].Sequence, 10)
	if err != nil || len(after) != 1 || after[0].ID != stored[2].ID {
		t.Errorf("TaskEventsAfter(%d) = %v, %v; want the blocker's event", stored[1].Sequence, after, err)
	}
	if got, _ := e.Svc.TaskEventsAfter(ctx, "not-a-task", 0, 10); len(got) != 0 {
		t.Errorf("TaskEventsAfter of no task = %v", got)
	}
}

func TestWatchTaskEndsWithStopContextAndClose(t *testing.T) {
	e := newEnv(t)
	id := e.CreateTask(apitest.TaskBody("WATCH-3"))["id"].(string)
	actor := lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}

	stopped, err := e.Svc.WatchTask(t.Context(), id, func(*lifecycle.Event) { t.Error("a stopped watch was called") })
	if err != nil {
		t.Fatal(err)
	}
	stopped.Stop()
	stopped.Stop() // twice is fine
	<-stopped.Done()

	ctx, cancel := context.WithCancel(t.Context())
	byCtx, err := e.Svc.WatchTask(ctx, id, func(*lifecycle.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-byCtx.Done()
	if _, err := e.Svc.WatchTask(ctx, id, func(*lifecycle.Event) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("WatchTask with an ended context = %v, want context.Canceled", err)
	}

	// The dispatcher ended with the last watch; the next one starts
	// another, which sees the next change.
	log := newWatchLog()
	live, err := e.Svc.WatchTask(t.Context(), id, log.add)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{Actor: actor}); err != nil {
		t.Fatal(err)
	}
	log.waitFor(t, 1)

	if err := e.Svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-live.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the watch")
	}
	select {
	case <-e.Svc.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	if _, err := e.Svc.WatchTask(t.Context(), id, log.add); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("WatchTask after Close = %v, want ErrClosed", err)
	}
}

// Watches share one reader of the broker, outside the per-key limit of
// event streams, and a function may stop its own watch.
func TestWatchesDoNotCountAgainstStreams(t *testing.T) {
	e := newEnv(t, func(c *lifecycle.Config) { c.MaxStreamsPerKey = 1 })
	id := e.CreateTask(apitest.TaskBody("WATCH-4"))["id"].(string)
	const n = 50
	logs := make([]*watchLog, n)
	for i := range logs {
		logs[i] = newWatchLog()
		var (
			w   *lifecycle.TaskWatch
			err error
			mu  sync.Mutex
		)
		mu.Lock()
		w, err = e.Svc.WatchTask(t.Context(), id, func(ev *lifecycle.Event) {
			logs[i].add(ev)
			mu.Lock()
			defer mu.Unlock()
			w.Stop() // from fn: one event each
		})
		mu.Unlock()
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	// A watch that stays: once it has seen three events, the second has
	// been handed to every watch (one event at a time, to each in turn).
	control := newWatchLog()
	if _, err := e.Svc.WatchTask(t.Context(), id, control.add); err != nil {
		t.Fatal(err)
	}
	// A stream of the admin key still opens: the watches took no place of it.
	srv := httptest.NewServer(e.Host)
	defer srv.Close()
	sctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"/api/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.Admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream beside 50 watches = %d, want 200", resp.StatusCode)
	}
	cancel()
	resp.Body.Close()
	if _, err := e.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "a", Role: lifecycle.RoleAgent}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.RecordBlocker(t.Context(), id, lifecycle.RecordBlockerParams{Reason: "r", ActionRequired: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.ResolveBlocker(t.Context(), id, lifecycle.ResolveBlockerParams{Resolution: "done"}); err != nil {
		t.Fatal(err)
	}
	control.waitFor(t, 3)
	for i, l := range logs {
		if evs := l.events(); len(evs) != 1 || evs[0].Type != lifecycle.EventTaskUpdated {
			t.Errorf("watch %d got %d events (first %v), want the one before it stopped itself", i, len(evs), evs)
		}
	}
}

// A dispatcher that fell out of the broker's ring reads what it missed
// from the Store, and delivers every event in order.
func TestWatchTaskCatchesUpFromTheStore(t *testing.T) {
	e := newEnv(t, func(c *lifecycle.Config) { c.StreamLagLimit = 4 })
	ctx := t.Context()
	id := e.CreateTask(apitest.TaskBody("WATCH-5"))["id"].(string)
	release := make(chan struct{})
	first := make(chan struct{})
	log := newWatchLog()
	var once sync.Once
	w, err := e.Svc.WatchTask(ctx, id, func(ev *lifecycle.Event) {
		log.add(ev)
		once.Do(func() {
			close(first)
			<-release // hold the dispatcher while the ring turns over
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	actor := lifecycle.Actor{ID: "a", Role: lifecycle.RoleAgent}
	if _, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor}); err != nil {
		t.Fatal(err)
	}
	<-first
	const rounds = 6 // 12 events: three rings' worth
	for i := range rounds {
		if _, err := e.Svc.RecordBlocker(ctx, id, lifecycle.RecordBlockerParams{Reason: fmt.Sprintf("r%d", i), ActionRequired: "x", Actor: actor}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Svc.ResolveBlocker(ctx, id, lifecycle.ResolveBlockerParams{Actor: actor}); err != nil {
			t.Fatal(err)
		}
	}
	// Let the broker load every event, pushing the held position out of
	// its ring.
	all, err := e.Svc.TaskEventsAfter(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1].Sequence
	testenv.WaitFor(t, 10*time.Second, "the broker to load the events", func() bool { return e.Svc.BrokerPositionForTest() >= last })
	close(release)
	evs := log.waitFor(t, 1+2*rounds)
	stored, err := e.Svc.TaskEventsAfter(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored = stored[1:] // the creation came before the watch
	if len(evs) != len(stored) {
		t.Fatalf("the watch got %d events, want %d", len(evs), len(stored))
	}
	for i := range evs {
		if evs[i].ID != stored[i].ID {
			t.Fatalf("event %d is %s, want %s (in sequence order, none twice)", i, evs[i].ID, stored[i].ID)
		}
	}
}
