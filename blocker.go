package lifecycle

import (
	"context"
	"fmt"
	"net/http"
	"regexp"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// RecordBlockerParams records why an agent cannot go on without a user.
// Its JSON form is the body of POST /tasks/{id}/blocker.
type RecordBlockerParams struct {
	// Reason is a machine-readable code such as "missing_credentials":
	// lower-case letters, digits, '_', '.' and '-', at most 100. Required.
	Reason string `json:"reason"`
	// ActionRequired says what the user must do. Required, at most 2000.
	ActionRequired string `json:"actionRequired"`
	// ResumeInstructions say how the agent resumes, at most 2000.
	ResumeInstructions string `json:"resumeInstructions"`
	// SourceRunID identifies the agent run, at most 200.
	SourceRunID string `json:"sourceRunId"`
	// Actor is the agent; its ID becomes the blocker's sourceAgentId.
	Actor Actor `json:"-"`
	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent with the rules of the HTTP API's
	// Idempotency-Key, as [SubmitParams.IdempotencyKey] does: the same key
	// with other parameters is a *ConflictError (idempotency_key_reused).
	IdempotencyKey string `json:"-"`
}

var reasonCodeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

func (p *RecordBlockerParams) validate() error {
	var v lifecycletype.Validator
	if !reasonCodeRE.MatchString(p.Reason) {
		v.Add("reason", "is required: a code of lower-case letters, digits, '_', '.' or '-'")
	}
	v.MaxLen("reason", p.Reason, 100)
	if p.ActionRequired == "" {
		v.Add("actionRequired", "is required")
	}
	v.MaxLen("actionRequired", p.ActionRequired, maxReasonLen)
	v.MaxLen("resumeInstructions", p.ResumeInstructions, maxReasonLen)
	v.MaxLen("sourceRunId", p.SourceRunID, maxAgentIDLen)
	return v.Err()
}

// RecordBlocker blocks an in-progress task on a user's action and emits
// task.awaiting_user. It returns a *ConflictError when the task is not in
// progress.
func (s *Service) RecordBlocker(ctx context.Context, taskID string, p RecordBlockerParams) (Task, error) {
	if err := p.validate(); err != nil {
		return Task{}, err
	}
	return s.taskOnce(ctx, p.Actor, blockerRoute, taskID, p.IdempotencyKey, p, func(ctx context.Context, record recordFunc) (Task, error) {
		return s.changeTaskRecorded(ctx, taskID, record, func(tx Tx, t *Task) (taskEvent, error) {
			if err := s.answer(t, ask{cmd: cmdBlock}); err != nil {
				return taskEvent{}, err
			}
			moveTask(t, moveBlock)
			t.Blocker = &Blocker{
				Kind:               BlockerKindAwaitingUser,
				SourceRunID:        p.SourceRunID,
				SourceAgentID:      p.Actor.ID,
				Reason:             p.Reason,
				ActionRequired:     p.ActionRequired,
				ResumeInstructions: p.ResumeInstructions,
				CreatedAt:          s.now(),
			}
			return taskEvent{typ: EventTaskAwaitingUser, actor: p.Actor,
				summary: fmt.Sprintf("Task %s is waiting for a user: %s", t.Identifier, p.ActionRequired)}, nil
		})
	})
}

// ResolveBlockerParams says how a blocker was resolved. Its JSON form is
// the body of POST /tasks/{id}/resolve-blocker.
type ResolveBlockerParams struct {
	// Resolution is optional, at most 2000 characters; it is kept in the event.
	Resolution string `json:"resolution"`
	// Actor resolves.
	Actor Actor `json:"-"`
	// IdempotencyKey makes the call idempotent, as
	// [RecordBlockerParams.IdempotencyKey] does.
	IdempotencyKey string `json:"-"`
}

// ResolveBlocker returns a blocked task to the status it had before the
// blocker and emits task.updated. It returns a *ConflictError when the
// task is not blocked.
func (s *Service) ResolveBlocker(ctx context.Context, taskID string, p ResolveBlockerParams) (Task, error) {
	var v lifecycletype.Validator
	v.MaxLen("resolution", p.Resolution, maxReasonLen)
	if err := v.Err(); err != nil {
		return Task{}, err
	}
	return s.taskOnce(ctx, p.Actor, resolveRoute, taskID, p.IdempotencyKey, p, func(ctx context.Context, record recordFunc) (Task, error) {
		return s.changeTaskRecorded(ctx, taskID, record, func(tx Tx, t *Task) (taskEvent, error) {
			if err := s.answer(t, ask{cmd: cmdResolve}); err != nil {
				return taskEvent{}, err
			}
			moveTask(t, moveResolve)
			summary := fmt.Sprintf("Blocker of task %s resolved", t.Identifier)
			if p.Resolution != "" {
				summary += ": " + p.Resolution
			}
			return taskEvent{typ: EventTaskUpdated, actor: p.Actor, summary: summary}, nil
		})
	})
}

func (s *Service) handleRecordBlocker(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params RecordBlockerParams
	if err := httpapi.DecodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Actor = p.Actor
	t, err := s.RecordBlocker(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	return writeTask(w, http.StatusOK, &t, false)
}

func (s *Service) handleResolveBlocker(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params ResolveBlockerParams
	if err := httpapi.DecodeJSON(w, r, &params, true); err != nil {
		return err
	}
	params.Actor = p.Actor
	t, err := s.ResolveBlocker(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	return writeTask(w, http.StatusOK, &t, false)
}
