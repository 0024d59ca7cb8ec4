package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// This file holds the watches of single tasks: what a host that pushes
// changes to clients of its own (package mcp's resource subscriptions and
// wait_for_task_change) needs, fed from the broker that feeds the event
// streams, so that nothing polls the Store (see eventstream.Watches).

// TaskWatch is a watch of one task's events, made by [Service.WatchTask].
type TaskWatch struct {
	w *eventstream.Watch
}

// Stop ends the watch. It may be called more than once, and from fn. An
// event being delivered while Stop runs may still reach fn; none does
// once Stop has returned, unless Stop was called from fn itself.
func (w *TaskWatch) Stop() {
	w.w.Stop()
}

// Done returns a channel closed when the watch ends: by Stop, by the end
// of the context given to WatchTask, or by [Service.Close].
func (w *TaskWatch) Done() <-chan struct{} { return w.w.Done() }

// WatchTask calls fn with each event of the task taskID that is committed
// after WatchTask returns (and possibly one committed just before), in
// sequence order, until the watch is stopped, ctx ends or the Service
// closes. The events come from the broker that feeds the event streams
// (GET /task-events/stream), read once from the Store for every stream
// and watch, so a watch costs no Store read of its own: commits made
// through this Service reach it at once, those of other processes sharing
// the Store within [Config.EventPollInterval].
//
// fn is called from one goroutine that serves every watch of the Service:
// it must return quickly and never block (hand the event to a buffered
// channel or a goroutine of your own). The *Event is shared by the
// watches of the task: read it, never write it. Watches are not counted
// against [Config.MaxStreamsPerKey]; every watch of a Service shares one
// reader of the broker. WatchTask does not check that the task exists.
// It returns an error matching ErrClosed after [Service.Close], and the
// Store's error when the broker could not start.
func (s *Service) WatchTask(ctx context.Context, taskID string, fn func(*Event)) (*TaskWatch, error) {
	if fn == nil {
		return nil, errors.New("lifecycle: WatchTask needs a function to call")
	}
	w, err := s.watches.Watch(ctx, taskID, fn)
	if err != nil {
		return nil, err
	}
	return &TaskWatch{w}, nil
}

// Done returns a channel that is closed when [Service.Close] is called:
// work that lasts as long as its client (a wait, a stream of a protocol
// of the host's) ends with it.
func (s *Service) Done() <-chan struct{} { return s.broker.Hub().Context().Done() }

// TaskEventsAfter returns up to limit of the stored events of task taskID
// whose sequence is greater than after, oldest first: what a client that
// saw the event of sequence after missed since. An unknown task has none.
func (s *Service) TaskEventsAfter(ctx context.Context, taskID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 || !validTaskID(taskID) {
		return []Event{}, nil
	}
	evs, err := s.store.Events(ctx, EventFilter{TaskID: taskID, After: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read the events of %s after sequence %d: %w", taskID, after, err)
	}
	return httpapi.NonNil(evs), nil
}
