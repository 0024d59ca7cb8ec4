package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// countInProgress returns the count of the agent's tasks in progress,
// read outside a transaction and through one, which must agree. The
// Store implements lifecycle.InProgressCounter.
func countInProgress(t *testing.T, s lifecycle.Store, agent string) int {
	t.Helper()
	n, err := s.(lifecycle.InProgressCounter).CountInProgress(t.Context(), agent)
	if err != nil {
		t.Fatalf("CountInProgress(%s): %v", agent, err)
	}
	var inTx int
	update(t, s, func(tx lifecycle.Tx) error {
		var err error
		c, ok := tx.(lifecycle.InProgressCounter)
		if !ok {
			return fmt.Errorf("the Store counts, its Tx %T does not", tx)
		}
		inTx, err = c.CountInProgress(t.Context(), agent)
		return err
	})
	if inTx != n {
		t.Fatalf("CountInProgress(%s) = %d, through a Tx %d", agent, n, inTx)
	}
	return n
}

// assigned returns minimalTask(n) assigned to agent (none for ""), in
// status st.
func assigned(n int, agent string, st lifecycle.Status) lifecycle.Task {
	task := minimalTask(n)
	task.Status = st
	if agent != "" {
		task.Assignee, task.AssigneeAgentID, task.TriageQueueID = &lifecycle.Agent{ID: agent, Name: agent}, ptr(agent), nil
	}
	return task
}

// testCountInProgress: CountInProgress counts the agent's tasks in
// progress as they are created, moved, reassigned, and not what a
// transaction rolled back; through a Tx, it sees the transaction's own
// writes.
func testCountInProgress(t *testing.T, h Harness) {
	implements[lifecycle.InProgressCounter](t, h, "the Store does not implement lifecycle.InProgressCounter: Config.MaxInProgressPerAgent cannot be set")
	s := open(t, h)
	ctx := t.Context()
	create(t, s,
		assigned(1, "agent-a", lifecycle.StatusInProgress),
		assigned(2, "agent-a", lifecycle.StatusInProgress),
		assigned(3, "agent-a", lifecycle.StatusTodo),
		assigned(4, "agent-a", lifecycle.StatusInReview),
		assigned(5, "agent-b", lifecycle.StatusInProgress),
		assigned(6, "", lifecycle.StatusInProgress),
	)
	for agent, want := range map[string]int{"agent-a": 2, "agent-b": 1, "agent-c": 0, "": 0} {
		if got := countInProgress(t, s, agent); got != want {
			t.Errorf("CountInProgress(%q) = %d, want %d", agent, got, want)
		}
	}
	move := func(n int, agent string, st lifecycle.Status) func(tx lifecycle.Tx) error {
		return func(tx lifecycle.Tx) error {
			task, err := tx.Task(ctx, assigned(n, "", "").ID)
			if err != nil {
				return err
			}
			next := assigned(n, agent, st)
			task.Status, task.Assignee, task.AssigneeAgentID, task.TriageQueueID = st, next.Assignee, next.AssigneeAgentID, next.TriageQueueID
			return tx.UpdateTask(ctx, task)
		}
	}
	update(t, s, move(1, "agent-a", lifecycle.StatusInReview))   // submitted
	update(t, s, move(3, "agent-a", lifecycle.StatusInProgress)) // started
	update(t, s, move(2, "agent-b", lifecycle.StatusInProgress)) // reassigned
	update(t, s, move(6, "agent-b", lifecycle.StatusInProgress)) // out of triage
	if a, b := countInProgress(t, s, "agent-a"), countInProgress(t, s, "agent-b"); a != 1 || b != 3 {
		t.Errorf("after the moves: agent-a %d, agent-b %d in progress; want 1 and 3", a, b)
	}
	// A transaction counts its own writes; a rollback keeps none.
	errRollback := errors.New("roll back")
	err := s.Update(ctx, func(tx lifecycle.Tx) error {
		if err := move(4, "agent-a", lifecycle.StatusInProgress)(tx); err != nil {
			return err
		}
		if err := tx.CreateTask(ctx, assigned(7, "agent-a", lifecycle.StatusInProgress)); err != nil {
			return err
		}
		if n, err := tx.(lifecycle.InProgressCounter).CountInProgress(ctx, "agent-a"); err != nil || n != 3 {
			return fmt.Errorf("inside the transaction: CountInProgress = %d, %v; want 3", n, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n := countInProgress(t, s, "agent-a"); n != 1 {
		t.Errorf("after a rollback: agent-a %d in progress, want 1", n)
	}
	update(t, s, move(5, "agent-b", lifecycle.StatusDone))
	if n := countInProgress(t, s, "agent-b"); n != 2 {
		t.Errorf("after a task done: agent-b %d in progress, want 2", n)
	}
}

// testConcurrentCountInProgress checks the lock of CountInProgress
// through a Tx: transactions that each count an agent's tasks and start
// one more while the count is below a cap, all at once, end with exactly
// the cap started, never more.
func testConcurrentCountInProgress(t *testing.T, h Harness) {
	implements[lifecycle.InProgressCounter](t, h, "the Store does not implement lifecycle.InProgressCounter: Config.MaxInProgressPerAgent cannot be set")
	s := open(t, h)
	const tasks, cap = 12, 3
	var all []lifecycle.Task
	for i := range tasks {
		all = append(all, assigned(i, "agent-a", lifecycle.StatusTodo))
	}
	create(t, s, all...)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started int
		errs    []error
	)
	begin := make(chan struct{})
	for i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			ok := false
			err := s.Update(context.Background(), func(tx lifecycle.Tx) error {
				ok = false
				task, err := tx.Task(context.Background(), all[i].ID)
				if err != nil {
					return err
				}
				n, err := tx.(lifecycle.InProgressCounter).CountInProgress(context.Background(), "agent-a")
				if err != nil || n >= cap {
					return err
				}
				for _, other := range all { // a wide window between the count and the write
					if _, err := tx.Task(context.Background(), other.ID+"x"); !errors.Is(err, lifecycle.ErrNotFound) {
						return fmt.Errorf("read a task that does not exist: %v", err)
					}
				}
				task.Status = lifecycle.StatusInProgress
				ok = true
				return tx.UpdateTask(context.Background(), task)
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				started++
			}
		}()
	}
	close(begin)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent starts: %v", errors.Join(errs...))
	}
	if n := countInProgress(t, s, "agent-a"); started != cap || n != cap {
		t.Errorf("%d transactions started a task, %d in progress; want %d, the cap", started, n, cap)
	}
}
