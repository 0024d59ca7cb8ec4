package lifecycle

import (
	"context"
	"sync/atomic"

	"github.com/tasklifecycle/lifecycle/internal/taskjson"
)

// This file makes the changes of a task that the HTTP API takes without
// an Idempotency-Key (start, record and resolve a blocker) idempotent for
// the Go API under their params' IdempotencyKey, as Submit and Ship are: a
// host whose clients retry calls they cannot tell the outcome of (package
// mcp's tools) goes through the same idempotency records as the HTTP
// API's keyed requests.

// The routes whose keys scope the calls of this file.
const (
	startRoute   = "/tasks/{id}/start"
	blockerRoute = "/tasks/{id}/blocker"
	resolveRoute = "/tasks/{id}/resolve-blocker"
)

// recordFunc records the answer of a keyed change of a task, in the
// transaction of the change, with the task as the change left it.
type recordFunc func(tx Tx, t *Task) error

// taskOnce runs change, a change of one task through changeTaskRecorded,
// under key (without one, goIdempotent simply runs it): the task envelope
// the HTTP API would answer is recorded through record in the transaction
// of the change, and an identical earlier call's is returned instead of
// running change again.
func (s *Service) taskOnce(ctx context.Context, actor Actor, route, taskID, key string, params any, change func(ctx context.Context, record recordFunc) (Task, error)) (Task, error) {
	return goIdempotentData(s, ctx, actor, route, taskID, key, params,
		func(t *Task) any {
			return taskjson.StandardEnvelope(t)
		},
		func(ctx context.Context, respond func(Tx, *Task) error) (Task, error) {
			return change(ctx, respond)
		})
}

// replayNoteKey is the context key of the flag NoteReplays sets.
type replayNoteKey struct{}

// NoteReplays returns a context for calls of the Go API made under an
// idempotency key (Submit, Ship, StartTask, RecordBlocker, ResolveBlocker
// with their params' IdempotencyKey), and a function that reports whether
// one of them answered from the record of an earlier call instead of
// running: a host that derives keys from its clients' calls (package mcp)
// tells a retry from the same call made again on purpose this way.
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
