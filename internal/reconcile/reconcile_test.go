package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// store is a Store of tasks for the reconciler: its transactions are
// serialised, and it claims every task due.
type store struct {
	mu    sync.Mutex
	tasks map[string]lifecycletype.Task
	order []string
}

// tx is a transaction of store; the Tx methods the reconciler does not use
// panic.
type tx struct {
	lifecycletype.Tx
	s *store
}

func (s *store) update(_ context.Context, fn func(tx lifecycletype.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(tx{s: s})
}

func (t tx) Task(_ context.Context, id string) (lifecycletype.Task, error) {
	task, ok := t.s.tasks[id]
	if !ok {
		return lifecycletype.Task{}, lifecycletype.ErrNotFound
	}
	return task, nil
}

func (t tx) UpdateTask(_ context.Context, task lifecycletype.Task) error {
	t.s.tasks[task.ID] = task
	return nil
}

func (t tx) ClaimReconciliations(_ context.Context, p lifecycletype.ClaimReconciliationsParams) ([]lifecycletype.Task, error) {
	var out []lifecycletype.Task
	for _, id := range t.s.order {
		task := t.s.tasks[id]
		if len(out) == p.Limit || task.ReconcileAt.IsZero() || task.ReconcileAt.After(p.Now) {
			continue
		}
		task.ReconcileAt = lifecycletype.NewTimestamp(p.Until)
		t.s.tasks[id] = task
		out = append(out, task)
	}
	return out, nil
}

// reading is what the fake host says of a task.
type reading struct {
	unchanged bool
	err       error
}

// host is the domain of the test: tasks are read when their PRNumber is
// set, batched by PROwner, and the host says of each what says holds.
type host struct {
	mu      sync.Mutex
	says    map[string]reading
	readErr error
	batches [][]string
	applied map[string]lifecycletype.Timestamp
	quiet   []string
}

func (h *host) Readable(t *lifecycletype.Task) bool { return t.PRNumber != nil }

func (h *host) AdapterFor(t *lifecycletype.Task) (lifecycletype.ProviderAdapter, any, error) {
	return nil, t.PROwner, nil
}

func (h *host) ReadTimeout(n int) time.Duration { return time.Second }

func (h *host) ReadHost(_ context.Context, _ lifecycletype.ProviderAdapter, tasks []lifecycletype.Task) ([]Result[reading], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	out := make([]Result[reading], len(tasks))
	for i, t := range tasks {
		ids = append(ids, t.ID)
		rd := h.says[t.ID]
		out[i] = Result[reading]{Reading: rd, Unchanged: rd.unchanged, Err: rd.err}
	}
	h.batches = append(h.batches, ids)
	if h.readErr != nil {
		return nil, h.readErr
	}
	return out, nil
}

func (h *host) Apply(_ context.Context, t *lifecycletype.Task, _ reading, next lifecycletype.Timestamp) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.applied[t.ID] = next
	return false, nil
}

func (h *host) ApplyUnchanged(_ context.Context, _ lifecycletype.Tx, cur *lifecycletype.Task, _ reading) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.quiet = append(h.quiet, cur.ID)
	return true, nil
}

// newTest returns a reconciler of a beat of a minute over tasks, all due.
func newTest(t *testing.T, h *host, tasks ...lifecycletype.Task) (*Reconciler[reading], *store, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC))
	tel, err := telemetry.New(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider(), clock)
	if err != nil {
		t.Fatal(err)
	}
	s := &store{tasks: map[string]lifecycletype.Task{}}
	for _, task := range tasks {
		task.ReconcileAt = lifecycletype.NewTimestamp(clock.Now().Add(-time.Second))
		s.tasks[task.ID] = task
		s.order = append(s.order, task.ID)
	}
	h.applied = map[string]lifecycletype.Timestamp{}
	r := New(Config[reading]{Tasks: h, UpdateRelaxed: s.update, Clock: clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tel: tel,
		ReconcileInterval: time.Minute, ReconcilePollInterval: time.Minute})
	return r, s, clock
}

func task(id, owner string, pr int) lifecycletype.Task {
	t := lifecycletype.Task{ID: id, PROwner: owner, PRRepo: "repo"}
	if pr > 0 {
		t.PRNumber = &pr
	}
	return t
}

func TestSweepBatchesAndSchedules(t *testing.T) {
	h := &host{says: map[string]reading{"b": {unchanged: true}, "d": {err: errors.New("gone")}}}
	r, s, clock := newTest(t, h, task("a", "one", 1), task("b", "one", 2), task("c", "two", 3), task("d", "two", 4), task("idle", "one", 0))
	r.sweep(context.Background())

	if len(h.batches) != 2 {
		t.Fatalf("read the host in %d batches, want 2 (one per key): %v", len(h.batches), h.batches)
	}
	for _, b := range h.batches {
		if !slices.Equal(b, []string{"a", "b"}) && !slices.Equal(b, []string{"c", "d"}) {
			t.Errorf("batch %v mixes keys", b)
		}
	}
	next := lifecycletype.NewTimestamp(time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC))
	if got := h.applied["a"]; !got.Equal(next.Time) || len(h.applied) != 2 {
		t.Errorf("applied %v, want a and c with their next reading at %v", h.applied, next)
	}
	if !slices.Equal(h.quiet, []string{"b"}) {
		t.Errorf("applied quietly %v, want [b]", h.quiet)
	}
	if got := s.tasks["b"].ReconcileAt; !got.Equal(next.Time) {
		t.Errorf("unchanged task read next at %v, want %v", got, next)
	}
	lease := clock.Now().Add(time.Minute + time.Second)
	if got := s.tasks["d"].ReconcileAt; !got.Equal(lifecycletype.NewTimestamp(lease).Time) {
		t.Errorf("task that failed read next at %v, want its lease's end %v", got, lease)
	}
	if got := s.tasks["idle"].ReconcileAt; !got.IsZero() {
		t.Errorf("unread task read next at %v, want never", got)
	}
}

func TestSweepRateLimited(t *testing.T) {
	h := &host{readErr: &lifecycletype.TemporaryError{RateLimited: true, RetryAfter: 5 * time.Minute, Err: errors.New("spent")}}
	r, s, clock := newTest(t, h, task("a", "one", 1))
	r.sweep(context.Background())
	want := lifecycletype.NewTimestamp(clock.Now().Add(5 * time.Minute))
	if got := s.tasks["a"].ReconcileAt; !got.Equal(want.Time) {
		t.Errorf("rate-limited task read next at %v, want when the limit resets, %v", got, want)
	}
}
