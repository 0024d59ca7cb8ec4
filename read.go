package lifecycle

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// This file holds reads for hosts that build views of their own on the
// Service (the operator console, package console, is one): what the HTTP
// API serves in other shapes, or not at all.

// Submissions returns every submission of a task, oldest first, each with
// the agent's summary, notes and actor. It returns an error matching
// ErrNotFound when there is no such task.
func (s *Service) Submissions(ctx context.Context, taskID string) ([]Submission, error) {
	if _, err := s.readTask(ctx, taskID); err != nil {
		return nil, err
	}
	subs, err := s.store.Submissions(ctx, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the submissions of %s: %w", taskID, err)
	}
	return httpapi.NonNil(subs), nil
}

// Reviews returns the reviews posted on a submission, oldest first; an
// unknown submission has none.
func (s *Service) Reviews(ctx context.Context, submissionID string) ([]Review, error) {
	reviews, err := s.store.Reviews(ctx, submissionID)
	if err != nil {
		return nil, fmt.Errorf("read the reviews of %s: %w", submissionID, err)
	}
	return httpapi.NonNil(reviews), nil
}

// ShipOperations returns every ship operation of a task, oldest first. It
// returns an error matching ErrNotFound when there is no such task.
func (s *Service) ShipOperations(ctx context.Context, taskID string) ([]ShipOperation, error) {
	if _, err := s.readTask(ctx, taskID); err != nil {
		return nil, err
	}
	ops, err := s.store.ShipOperations(ctx, taskID)
	if err != nil {
		return nil, fmt.Errorf("read the ship operations of %s: %w", taskID, err)
	}
	return httpapi.NonNil(ops), nil
}

// TaskEvents returns up to limit events of a task that are still stored
// (see [Config.EventRetention]), oldest first: in sequence order, which
// for one task is taskVersion order, as the event stream sends them. An
// unknown task has none.
func (s *Service) TaskEvents(ctx context.Context, taskID string, limit int) ([]Event, error) {
	if limit <= 0 {
		return []Event{}, nil
	}
	evs, err := s.store.Events(ctx, EventFilter{TaskID: taskID, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read the events of %s: %w", taskID, err)
	}
	return httpapi.NonNil(evs), nil
}

// LastEventID returns the ID of the last committed event, or "" when
// there is none or it was pruned: a view read at one moment opens the
// event stream with it as cursor, so that every change after the read
// reaches it. Read it before the view's data.
func (s *Service) LastEventID(ctx context.Context) (string, error) {
	b, err := s.store.EventBounds(ctx)
	if err != nil {
		return "", fmt.Errorf("read the last event sequence: %w", err)
	}
	last := b.Last
	if last == 0 {
		return "", nil
	}
	evs, err := s.store.Events(ctx, EventFilter{After: last - 1, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("read the last event: %w", err)
	}
	if len(evs) == 0 {
		return "", nil
	}
	return evs[0].ID, nil
}

// Clock returns the Clock the Service tells time by ([Config.Clock]), so
// that code beside it expires what it keeps by the same time.
func (s *Service) Clock() Clock { return s.clock }

// Logger returns the logger the Service logs to ([Config.Logger]).
func (s *Service) Logger() *slog.Logger { return s.log }
