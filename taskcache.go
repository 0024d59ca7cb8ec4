package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// EncodedTask returns the task with taskID as encode encodes it: the
// bytes GET /tasks/{id} would answer, in the form of another protocol, or
// any encoding that depends on nothing but the task (its available
// actions included). When the Store implements [TaskRevisioner], the
// encoding is kept under form (see [Config.TaskCacheBytes]), and a later
// call with the same form reads the task's revision and, while it is the
// same, returns the kept bytes without reading the task or calling encode.
// Give each encoding its own form; forms beginning with "lifecycle:" are
// the Service's own. The bytes returned are shared: do not modify them.
// A task that does not exist is an error matching [ErrNotFound].
func (s *Service) EncodedTask(ctx context.Context, taskID, form string, encode func(*Task) ([]byte, error)) ([]byte, error) {
	if strings.HasPrefix(form, ownForms) {
		return nil, fmt.Errorf("lifecycle: EncodedTask: form %q: the forms beginning with %q are the Service's own", form, ownForms)
	}
	return s.encodedTask(ctx, taskID, form, encode)
}

// ownForms begins the names of the Service's own encodings of tasks.
const ownForms = "lifecycle:"

// The encodings of GET /tasks/{id}'s answers.
const (
	formStandard = ownForms + "standard"
	formCompact  = ownForms + "compact"
)

func encodeStandard(t *Task) ([]byte, error) { return encodeTask(t, false) }
func encodeCompact(t *Task) ([]byte, error)  { return encodeTask(t, true) }

// encodedTask is EncodedTask for every form. With a cache, the task's
// revision is read first and, while it is the one kept, the kept bytes
// are the answer (see package taskcache); otherwise the task is read and
// encoded, and kept.
func (s *Service) encodedTask(ctx context.Context, taskID, form string, encode func(*Task) ([]byte, error)) ([]byte, error) {
	if s.tasks == nil || !validTaskID(taskID) {
		t, err := s.Task(ctx, taskID)
		if err != nil {
			return nil, err
		}
		return encode(&t)
	}
	rev, err := s.tasks.Revision(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound("task", taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", taskID, err)
	}
	if b, cond := s.tasks.Get(taskID, rev, form); b != nil {
		holds, err := s.capHolds(ctx, cond)
		if err != nil {
			return nil, err
		}
		if holds {
			s.tel.TaskCacheLookup(ctx, true)
			return b, nil
		}
	}
	s.tel.TaskCacheLookup(ctx, false)
	t, err := s.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	b, err := encode(&t)
	if err != nil {
		return nil, err
	}
	s.tasks.Put(taskID, rev, form, capCondition(&t, s.cfg.MaxInProgressPerAgent), b)
	return b, nil
}

// capCondition is the condition beyond its row under which t's encoding
// holds (see taskcache.Cache.Put): when whether start is offered depends
// on the count of its assignee's tasks in progress (needsCount), the
// assignee and whether it was at the cap, "at_cap" or "below_cap", then
// the agent's ID; else "".
func capCondition(t *Task, cap int) string {
	switch {
	case !needsCount(t, cap):
		return ""
	case t.AssigneeInProgress >= cap:
		return "at_cap " + *t.AssigneeAgentID
	}
	return "below_cap " + *t.AssigneeAgentID
}

// capHolds reports whether cond, made by capCondition, still holds: the
// agent it names is still at the cap, or still below it. It counts the
// agent's tasks in progress (one indexed read) only when cond names one.
func (s *Service) capHolds(ctx context.Context, cond string) (bool, error) {
	if cond == "" {
		return true, nil
	}
	state, agent, _ := strings.Cut(cond, " ")
	n, err := s.caps.counter.CountInProgress(ctx, agent) // New made sure there is one when a cap is set
	if err != nil {
		return false, fmt.Errorf("count the tasks in progress of agent %s: %w", agent, err)
	}
	return (n >= s.cfg.MaxInProgressPerAgent) == (state == "at_cap"), nil
}
