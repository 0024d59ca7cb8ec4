package client_test

import (
	"errors"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
)

// TestAgentCap: the client reads a task's reworkRounds, and a start at
// the assignee's cap comes back as a *client.Error with reason
// max_in_progress_per_agent and the task's availableActions.
func TestAgentCap(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()
	var ids []string
	for _, ident := range []string{"CAP-1", "CAP-2"} {
		p := taskParams(ident)
		p.AssigneeAgentID = "agent-1"
		task, err := c.CreateTask(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	started, err := c.StartTask(ctx, ids[0])
	if err != nil || started.ReworkRounds != 0 {
		t.Fatalf("StartTask = %d rework rounds, %v", started.ReworkRounds, err)
	}
	_, err = c.StartTask(ctx, ids[1])
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != "max_in_progress_per_agent" || len(ce.AvailableActions) != 0 || !errors.Is(err, lifecycle.ErrConflict) {
		t.Fatalf("start at the cap = %v", err)
	}
	if task, err := c.Task(ctx, ids[1]); err != nil || len(task.AvailableActions) != 0 {
		t.Fatalf("Task at the cap = %v, %v", task.AvailableActions, err)
	}
}
