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
	if b := s.tasks.Get(taskID, rev, form); b != nil {
		s.tel.TaskCacheLookup(ctx, true)
		return b, nil
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
	s.tasks.Put(taskID, rev, form, b)
	return b, nil
}
