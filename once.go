package lifecycle

import (
	"context"
	"sync/atomic"
)

// This file makes the changes of a task that the HTTP API takes without
// an Idempotency-Key (start, record and resolve a blocker) idempotent for
// the Go API, as Submit and Ship are with their IdempotencyKey: a host
// whose clients retry calls they cannot tell the outcome of (package
// mcp's tools) goes through the same idempotency records as the HTTP
// API's keyed requests.

// The routes whose keys scope the calls of this file.
const (
	startRoute   = "/tasks/{id}/start"
	blockerRoute = "/tasks/{id}/blocker"
	resolveRoute = "/tasks/{id}/resolve-blocker"
)

// StartTaskOnce is [Service.StartTask] made idempotent under key (8 to
// 128 visible ASCII characters), with the rules of the HTTP API's
// Idempotency-Key scoped to the actor: a retry with the same key returns
// the task as the first call answered it, without starting it again; a
// call still running under the key is a *ConflictError
// (request_in_progress). The task is recorded in the transaction that
// starts it, so a call that committed is never run twice, whatever failed
// after. An empty key runs StartTask as it is.
func (s *Service) StartTaskOnce(ctx context.Context, taskID string, actor Actor, key string) (Task, error) {
	return s.taskOnce(ctx, actor, startRoute, taskID, key, struct{}{}, func(ctx context.Context) (Task, error) {
		return s.StartTask(ctx, taskID, actor)
	})
}

// RecordBlockerOnce is [Service.RecordBlocker] made idempotent under key,
// as [Service.StartTaskOnce] is: the same key with other parameters is a
// *ConflictError (idempotency_key_reused).
func (s *Service) RecordBlockerOnce(ctx context.Context, taskID string, p RecordBlockerParams, key string) (Task, error) {
	if err := p.validate(); err != nil {
		return Task{}, err
	}
	return s.taskOnce(ctx, p.Actor, blockerRoute, taskID, key, p, func(ctx context.Context) (Task, error) {
		return s.RecordBlocker(ctx, taskID, p)
	})
}

// ResolveBlockerOnce is [Service.ResolveBlocker] made idempotent under
// key, as [Service.StartTaskOnce] is: the same key with other parameters
// is a *ConflictError (idempotency_key_reused).
func (s *Service) ResolveBlockerOnce(ctx context.Context, taskID string, p ResolveBlockerParams, key string) (Task, error) {
	return s.taskOnce(ctx, p.Actor, resolveRoute, taskID, key, p, func(ctx context.Context) (Task, error) {
		return s.ResolveBlocker(ctx, taskID, p)
	})
}

// taskOnce runs change, a change of one task through changeTask, under
// key: the task envelope the HTTP API would answer is recorded in the
// transaction of the change, and an identical earlier call's is returned
// instead of running change again.
func (s *Service) taskOnce(ctx context.Context, actor Actor, route, taskID, key string, params any, change func(ctx context.Context) (Task, error)) (Task, error) {
	return goIdempotentData(s, ctx, actor, route, taskID, key, params,
		func(t *Task) any {
			return taskEnvelope{Data: t, AvailableActions: t.AvailableActions, Meta: taskMeta{TokenBudgetHint: "standard", TruncatedFields: []string{}}}
		},
		func(ctx context.Context, respond func(Tx, *Task) error) (Task, error) {
			return change(context.WithValue(ctx, commitHookKey{}, respond))
		})
}

// commitHookKey is the context key of a function that changeTask runs in
// the transaction of its change, with the task as it now is: taskOnce
// records its answer there.
type commitHookKey struct{}

// runCommitHook runs the commit hook ctx carries, if any.
func runCommitHook(ctx context.Context, tx Tx, t *Task) error {
	if hook, ok := ctx.Value(commitHookKey{}).(func(Tx, *Task) error); ok {
		return hook(tx, t)
	}
	return nil
}

// replayNoteKey is the context key of the flag NoteReplays sets.
type replayNoteKey struct{}

// NoteReplays returns a context for calls of the Go API made under an
// idempotency key (Submit, Ship, StartTaskOnce, RecordBlockerOnce,
// ResolveBlockerOnce), and a function that reports whether one of them
// answered from the record of an earlier call instead of running: a host
// that derives keys from its clients' calls (package mcp) tells a retry
// from the same call made again on purpose this way.
func NoteReplays(ctx context.Context) (context.Context, func() bool) {
	replayed := new(atomic.Bool)
	return context.WithValue(ctx, replayNoteKey{}, replayed), replayed.Load
}

// noteReplay records, in the flag of NoteReplays that ctx carries, that a
// call answered from a record.
func noteReplay(ctx context.Context) {
	if replayed, ok := ctx.Value(replayNoteKey{}).(*atomic.Bool); ok {
		replayed.Store(true)
	}
}
