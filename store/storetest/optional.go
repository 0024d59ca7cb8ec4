package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// implements opens a store to see whether it implements the optional
// interface T, and skips the test, saying why, when it does not.
func implements[T any](t *testing.T, h Harness, why string) {
	t.Helper()
	probe := h.Open(t)
	_, ok := probe.(T)
	probe.Close()
	if !ok {
		t.Skip(why)
	}
}

// testNotifier checks lifecycle.Notifier, when the Store implements it:
// Listen first reports ChangeAll, then each kind of change committed,
// and returns ctx's error once ctx is done.
func testNotifier(t *testing.T, h Harness) {
	implements[lifecycle.Notifier](t, h, "the Store does not implement lifecycle.Notifier: Services poll it")
	s := open(t, h)
	changes := make(chan lifecycle.Change, 1000)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() { listening <- s.(lifecycle.Notifier).Listen(ctx, func(c lifecycle.Change) { changes <- c }) }()
	// await waits, for 10 s at most, for a change that includes want.
	await := func(what string, want lifecycle.Change) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case c := <-changes:
				if c&want == want {
					return
				}
			case <-deadline:
				t.Fatalf("after %s: no change %d announced within 10 s", what, want)
			}
		}
	}
	await("Listen began", lifecycle.ChangeAll)
	task := minimalTask(1)
	create(t, s, task)
	e := event(task.ID, 1, ts(0))
	appendEvents(t, s, &e)
	await("an event committed", lifecycle.ChangeEvents)
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.CreateShipOperation(t.Context(), shipOp(task.ID, "shp_1", lifecycle.ShipQueued, 0))
	})
	await("a ship operation queued", lifecycle.ChangeShips)
	createSubscriptions(t, s, bareSubscription(1))
	await("a subscription created", lifecycle.ChangeSubscriptions)
	cancel()
	select {
	case err := <-listening:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Listen after its context ended = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen still runs 10 s after its context ended")
	}
}

// testRelaxedUpdater checks lifecycle.RelaxedUpdater, when the Store
// implements it: a relaxed commit is visible to every reader at once,
// and a relaxed transaction that fails keeps nothing.
func testRelaxedUpdater(t *testing.T, h Harness) {
	implements[lifecycle.RelaxedUpdater](t, h, "the Store does not implement lifecycle.RelaxedUpdater")
	s := open(t, h)
	r := s.(lifecycle.RelaxedUpdater)
	kept, dropped := minimalTask(1), minimalTask(2)
	if err := r.UpdateRelaxed(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateTask(t.Context(), kept) }); err != nil {
		t.Fatalf("UpdateRelaxed: %v", err)
	}
	if _, err := s.Task(t.Context(), kept.ID); err != nil {
		t.Errorf("Task after a relaxed commit: %v", err)
	}
	boom := errors.New("boom")
	err := r.UpdateRelaxed(t.Context(), func(tx lifecycle.Tx) error {
		return errors.Join(tx.CreateTask(t.Context(), dropped), boom)
	})
	if !errors.Is(err, boom) {
		t.Errorf("UpdateRelaxed(fn fails) error = %v, want fn's", err)
	}
	if _, err := s.Task(t.Context(), dropped.ID); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Task written by a failed relaxed transaction: error = %v, want ErrNotFound", err)
	}
}

// testFailureClassifier checks lifecycle.FailureClassifier, when the Store
// implements it, on what a store can be made to do here: none of its
// answers under the error contract (not found, conflict, closed) is a
// failure that may pass.
func testFailureClassifier(t *testing.T, h Harness) {
	implements[lifecycle.FailureClassifier](t, h, "the Store does not implement lifecycle.FailureClassifier: its failures are all 500s")
	s := open(t, h)
	c := s.(lifecycle.FailureClassifier)
	task := minimalTask(1)
	create(t, s, task)
	_, notFound := s.Task(t.Context(), "tsk_missing")
	conflict := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateTask(t.Context(), task) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, closed := s.Task(t.Context(), task.ID)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"not found", notFound, lifecycle.ErrNotFound},
		{"conflict", conflict, lifecycle.ErrConflict},
		{"closed", closed, lifecycle.ErrClosed},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error = %v, want %v", tc.name, tc.err, tc.want)
		}
		if c.Unavailable(tc.err) {
			t.Errorf("Unavailable(%v) = true for an answer of the error contract (%s)", tc.err, tc.name)
		}
	}
	if c.Unavailable(nil) {
		t.Error("Unavailable(nil) = true")
	}
}

// testTaskRevisioner checks lifecycle.TaskRevisioner, when the Store
// implements it: a task's revision holds while nothing writes the task,
// and changes with every write, a claim of its reconciliation included.
func testTaskRevisioner(t *testing.T, h Harness) {
	implements[lifecycle.TaskRevisioner](t, h, "the Store does not implement lifecycle.TaskRevisioner: GET /tasks/{id} reads the whole task every time")
	s := open(t, h)
	r := s.(lifecycle.TaskRevisioner)
	if _, err := r.TaskRevision(t.Context(), "tsk_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("TaskRevision of a missing task = %v, want ErrNotFound", err)
	}
	task, other := minimalTask(1), minimalTask(2)
	create(t, s, task, other)
	seen := map[int64]string{}
	revision := func(what string) int64 {
		t.Helper()
		rev, err := r.TaskRevision(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("TaskRevision after %s: %v", what, err)
		}
		if again, err := r.TaskRevision(t.Context(), task.ID); err != nil || again != rev {
			t.Fatalf("TaskRevision after %s, read again = %d, %v; want %d", what, again, err, rev)
		}
		if before, ok := seen[rev]; ok {
			t.Fatalf("after %s the revision is %d again, as after %s", what, rev, before)
		}
		seen[rev] = what
		return rev
	}
	revision("create")
	// A write of another task leaves it.
	otherRev, err := r.TaskRevision(t.Context(), other.ID)
	if err != nil {
		t.Fatal(err)
	}
	task.Title = "Changed"
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), task) })
	revision("an update")
	if rev, err := r.TaskRevision(t.Context(), other.ID); err != nil || rev != otherRev {
		t.Fatalf("the other task's revision = %d, %v after an update of the first; want %d", rev, err, otherRev)
	}
	// A write that changes nothing still writes.
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), task) })
	revision("an update changing nothing")
	// A claim of the task's reconciliation writes its ReconcileAt.
	task.Status = lifecycle.StatusInReview
	task.ReconcileAt = ts(0)
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), task) })
	revision("the move to review")
	update(t, s, func(tx lifecycle.Tx) error {
		claimed, err := tx.ClaimReconciliations(t.Context(), lifecycle.ClaimReconciliationsParams{Now: base.Add(time.Second), Until: base.Add(time.Minute), Limit: 10})
		if err == nil && len(claimed) != 1 {
			err = fmt.Errorf("claimed %d tasks, want 1", len(claimed))
		}
		return err
	})
	revision("a claimed reconciliation")
}

// testShipQueueCounter checks lifecycle.ShipQueueCounter, when the Store
// implements it: queued and running operations are counted, finished ones
// are not.
func testShipQueueCounter(t *testing.T, h Harness) {
	implements[lifecycle.ShipQueueCounter](t, h, "the Store does not implement lifecycle.ShipQueueCounter: Services report no ship queue depth")
	s := open(t, h)
	count := func() lifecycle.ShipQueueCounts {
		t.Helper()
		c, err := s.(lifecycle.ShipQueueCounter).CountShipQueue(t.Context())
		if err != nil {
			t.Fatalf("CountShipQueue: %v", err)
		}
		return c
	}
	if c := count(); c != (lifecycle.ShipQueueCounts{}) {
		t.Fatalf("an empty store counts %+v, want none", c)
	}
	statuses := []lifecycle.ShipStatus{lifecycle.ShipQueued, lifecycle.ShipQueued, lifecycle.ShipRunning, lifecycle.ShipSucceeded, lifecycle.ShipFailed}
	for i, st := range statuses {
		task := minimalTask(i + 1)
		create(t, s, task)
		update(t, s, func(tx lifecycle.Tx) error {
			return tx.CreateShipOperation(t.Context(), shipOp(task.ID, "shp_"+string(rune('a'+i)), st, 0))
		})
	}
	if got, want := count(), (lifecycle.ShipQueueCounts{Queued: 2, Running: 1}); got != want {
		t.Fatalf("CountShipQueue = %+v, want %+v", got, want)
	}
}
