package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// TestReplicasCapStarts: replicas sharing one schema start one agent's
// tasks all at once, the agent one below Config.MaxInProgressPerAgent:
// exactly one start succeeds, the others are refused at the cap, at READ
// COMMITTED (the count is taken under a lock of the agent).
func TestReplicasCapStarts(t *testing.T) {
	const cap, replicas, perReplica = 3, 3, 4
	r := newReplicas(t, replicas, nil, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = cap })
	ctx := t.Context()
	create := func(ident string) string {
		task, err := r.svcs[0].CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: ident, Title: "Capped",
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident}, AssigneeAgentID: "agent-1", Actor: ops})
		if err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	for i := range cap - 1 {
		if _, err := r.svcs[i%replicas].StartTask(ctx, create(fmt.Sprint("PGCAP-S", i)), lifecycle.StartTaskParams{Actor: ops}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range replicas * perReplica {
		ids = append(ids, create(fmt.Sprint("PGCAP-", i)))
	}
	begin := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, capd int
	)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			_, err := r.svcs[i%replicas].StartTask(ctx, id, lifecycle.StartTaskParams{Actor: ops})
			var c *lifecycle.ConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.As(err, &c) && c.Reason == "max_in_progress_per_agent":
				capd++
			default:
				t.Errorf("start %s: %v", id, err)
			}
		}()
	}
	close(begin)
	wg.Wait()
	n, err := r.stores[0].CountInProgress(ctx, "agent-1")
	if ok != 1 || capd != len(ids)-1 || n != cap || err != nil {
		t.Errorf("%d starts succeeded, %d refused at the cap, %d in progress (%v); want 1, %d, %d", ok, capd, n, err, len(ids)-1, cap)
	}
	// Every replica's reads agree: no task of the agent offers start.
	for i, svc := range r.svcs {
		list, err := svc.ListTasks(ctx, lifecycle.ListTasksParams{Statuses: []lifecycle.Status{lifecycle.StatusTodo}, AssigneeAgentID: "agent-1", Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range list.Tasks {
			if len(task.AvailableActions) != 0 {
				t.Errorf("replica %d offers %v for %s at the cap", i, task.AvailableActions, task.Identifier)
			}
		}
	}
}
