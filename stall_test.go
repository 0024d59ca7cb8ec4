package lifecycle_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// stallAfter is the watchdog of the stall tests: half an hour in
// progress or in review.
func stallAfter(c *lifecycle.Config) {
	c.StallAfter = map[lifecycle.Status]time.Duration{lifecycle.StatusInProgress: 30 * time.Minute, lifecycle.StatusInReview: 30 * time.Minute}
}

// sweep runs one sweep of the stall watchdog and fails the test unless
// it marked want tasks.
func (e *env) sweep(want int) {
	e.T.Helper()
	n, err := e.Svc.SweepStallsForTest(e.T.Context())
	if err != nil || n != want {
		e.T.Fatalf("sweep marked %d, %v; want %d", n, err, want)
	}
}

// A task without activity for longer than its status allows is marked
// stalled once, with task.stalled; activity clears the mark, which the
// event of that activity lists in changedFields, and restarts the clock.
func TestStallMarksAndActivityClears(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stallAfter)
	ctx := t.Context()
	a := e.startedTask("STL-1")
	b := e.startedTask("STL-2")
	todo := e.CreateTask(apitest.TaskBody("STL-3"))["id"].(string) // todo is not watched
	started := e.Clock.Now()

	e.Clock.Advance(30 * time.Minute) // exactly the limit: not yet
	e.sweep(0)
	e.Clock.Advance(time.Second)
	e.sweep(2)
	e.sweep(0) // once per stall
	for _, id := range []string{a, b} {
		task := e.task(id)
		want := lifecycle.Stall{Since: lifecycle.NewTimestamp(e.Clock.Now()), LastActivityAt: lifecycle.NewTimestamp(started)}
		if task.Stalled == nil || *task.Stalled != want {
			t.Fatalf("%s stalled = %+v, want %+v", id, task.Stalled, want)
		}
		stored, err := e.Store.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ev, data := newestEvent[lifecycle.TaskStalledData](e, id)
		if ev.Type != lifecycle.EventTaskStalled || data.Status != lifecycle.StatusInProgress || data.StallAfterSeconds != 1800 ||
			!data.LastActivityAt.Equal(started) || ev.TaskVersion != stored.Version || !slices.Equal(data.AvailableActions, task.AvailableActions) {
			t.Errorf("%s: newest event %s v%d %+v; want task.stalled of version %d", id, ev.Type, ev.TaskVersion, data, stored.Version)
		}
	}
	if e.task(todo).Stalled != nil {
		t.Errorf("a task in todo stalled")
	}
	list := apitest.CallData[[]lifecycle.Task](e.Env, apitest.Request{Method: "GET", Path: "/tasks?stalled=true", Key: e.Admin}, http.StatusOK)
	if len(list) != 2 || list[0].ID != a || list[1].ID != b {
		t.Errorf("GET /tasks?stalled=true listed %d tasks, want %s and %s", len(list), a, b)
	}
	e.Call(apitest.Request{Method: "GET", Path: "/tasks?stalled=yes", Key: e.Admin}, http.StatusBadRequest)

	// A blocker is activity: its event says stalled changed.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + a + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusOK)
	if _, data := newestEvent[lifecycle.TaskAwaitingUserData](e, a); !slices.Contains(data.ChangedFields, "stalled") {
		t.Errorf("the blocker's event changed %v, want stalled among them", data.ChangedFields)
	}
	if got := e.task(a).Stalled; got != nil {
		t.Errorf("after a blocker, stalled = %+v", got)
	}

	// A reported check that leaves CI as it was is activity all the same:
	// clearing the mark is a change task.updated announces...
	report := func() {
		t.Helper()
		_, _, err := e.Svc.ReportChecks(ctx, b, lifecycle.ReportChecksParams{HeadSHA: strings.Repeat("a", 40),
			Checks: []lifecycle.CICheck{{Name: "unit", Status: lifecycle.CheckPassed}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	report()
	ev, data := newestEvent[lifecycle.TaskUpdatedData](e, b)
	if ev.Type != lifecycle.EventTaskUpdated || !slices.Equal(data.ChangedFields, []string{"stalled"}) {
		t.Errorf("after a report, newest event %s changed %v; want task.updated of stalled", ev.Type, data.ChangedFields)
	}
	if got := e.task(b).Stalled; got != nil {
		t.Errorf("after a report, stalled = %+v", got)
	}
	// ... and without a mark it moves the clock quietly.
	e.Clock.Advance(20 * time.Minute)
	report()
	if again, _ := newestEvent[lifecycle.TaskUpdatedData](e, b); again.ID != ev.ID {
		t.Errorf("a quiet report emitted %s", again.Type)
	}
	e.Clock.Advance(29 * time.Minute) // 49 minutes after the first report, 29 after the second
	e.sweep(0)
	e.Clock.Advance(2 * time.Minute)
	e.sweep(1)
	if e.task(b).Stalled == nil {
		t.Errorf("%s not stalled 31 minutes after its last report", b)
	}
}

// sweepCountingStore counts the calls a sweep makes.
type sweepCountingStore struct {
	*memory.Store
	reads, marks atomic.Int64
}

func (s *sweepCountingStore) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	s.reads.Add(1)
	return s.Store.Task(ctx, id)
}

func (s *sweepCountingStore) ListTasks(ctx context.Context, f lifecycle.TaskFilter) (lifecycle.TaskPage, error) {
	s.reads.Add(1)
	return s.Store.ListTasks(ctx, f)
}

func (s *sweepCountingStore) MarkStalled(ctx context.Context, p lifecycle.MarkStalledParams, fn func(tx lifecycle.Tx, marked []lifecycle.Task) error) error {
	s.marks.Add(1)
	return s.Store.MarkStalled(ctx, p, fn)
}

// A sweep makes one call of the Store whatever the number of tasks, and
// reads none of them; marking many takes one call per batch.
func TestStallSweepIsOneStoreCall(t *testing.T) {
	t.Parallel()
	store := &sweepCountingStore{Store: memory.New()}
	t.Cleanup(func() { store.Close() })
	clock := fakeclock.New(apitest.Epoch)
	cfg := lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Clock: clock}
	stallAfter(&cfg)
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1200
	for i := range n {
		task, err := svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "CNT-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + time.Duration(i).String(),
			Title: "t", Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/1"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.StartTask(t.Context(), task.ID, lifecycle.StartTaskParams{}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(after time.Duration, want int) (marks, reads int64) {
		t.Helper()
		clock.Set(apitest.Epoch.Add(after))
		store.marks.Store(0)
		store.reads.Store(0)
		got, err := svc.SweepStallsForTest(t.Context())
		if err != nil || got != want {
			t.Fatalf("sweep marked %d, %v; want %d", got, err, want)
		}
		return store.marks.Load(), store.reads.Load()
	}
	if marks, reads := count(10*time.Minute, 0); marks != 1 || reads != 0 {
		t.Errorf("a sweep of %d tasks none due made %d marking calls and %d reads; want 1 and 0", n, marks, reads)
	}
	// 1200 due: batches of 500, 500 and 200.
	if marks, reads := count(time.Hour, n); marks != 3 || reads != 0 {
		t.Errorf("a sweep of %d tasks all due made %d marking calls and %d reads; want 3 and 0", n, marks, reads)
	}
}

// New refuses Config.StallAfter for a Store that cannot mark stalled tasks.
func TestStallAfterNeedsAStallMarker(t *testing.T) {
	t.Parallel()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	cfg := lifecycle.Config{Store: struct{ lifecycle.Store }{store}, BaseURL: apitest.BaseURL}
	stallAfter(&cfg)
	if _, err := lifecycle.New(cfg); err == nil || !strings.Contains(err.Error(), "lifecycle.StallMarker") {
		t.Errorf("New = %v, want an error naming lifecycle.StallMarker", err)
	}
}

// A task whose change waits in the merge queue, however long (the queue
// paused), is not watched: its ship operation is the lifecycle's work, not
// its agent's, and has timeouts of its own. A sweep then marks nothing.
func TestStallSkipsTasksBeingShipped(t *testing.T) {
	t.Parallel()
	requireGit(t)
	e, _ := newQueueEnv(t, nil, stallAfter)
	id, sha := e.shippableTask("ENG-1")
	op := accepted(t, e.ship(id, "stall-ship-1", apitest.ShipBody("merge_only", "staging", sha)))
	var qid string
	testenv.WaitFor(t, 10*time.Second, "the change to enter the queue", func() bool {
		qs := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK)["data"].([]any)
		if len(qs) == 1 {
			qid = qs[0].(map[string]any)["id"].(string)
		}
		return qid != ""
	})
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: e.Admin, Body: map[string]any{"reason": "freeze"}}, http.StatusOK)
	e.Clock.Advance(2 * time.Hour)
	e.sweep(0)
	if got := e.task(id).Stalled; got != nil {
		t.Fatalf("a task waiting in a paused merge queue stalled: %+v", got)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/resume", Key: e.Admin}, http.StatusOK)
	if ops := e.driveQueue(op.OperationID); ops[0].Status != lifecycle.ShipSucceeded {
		t.Errorf("after resume = %+v, want succeeded", ops[0])
	}
	evs, err := e.Store.Events(t.Context(), lifecycle.EventFilter{TaskID: id, Types: []lifecycle.EventType{lifecycle.EventTaskStalled}, Limit: 10})
	if err != nil || len(evs) != 0 {
		t.Errorf("task.stalled events of a task being shipped: %d, %v", len(evs), err)
	}
}
