package lifecycle

import (
	"context"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/reconcile"
)

// This file is what the reconciler's loop (internal/reconcile) asks of the
// Service: it reads the host again for every task in review on a
// schedule, so that a lost webhook delays a fact but never loses it. How
// the host is read is in hostread.go; what a reading is applied with, and
// the entry points of webhooks ([Service.ApplyProviderEvent],
// [Service.QueueProviderEvent]), are in facts.go.

// reconcileTasks is what the reconciler asks of the domain: the host's
// facts, read and applied by the Service.
type reconcileTasks struct{ s *Service }

// Readable implements reconcile.Tasks.
func (reconcileTasks) Readable(t *Task) bool { return readable(t) }

// AdapterFor implements reconcile.Tasks: a task's readings are batched by
// its adapter binding.
func (r reconcileTasks) AdapterFor(t *Task) (ProviderAdapter, any, error) {
	adapter, err := r.s.adapterFor(t, t.SubmissionMode)
	if err != nil {
		return nil, nil, err
	}
	var key any = ModeArtifact
	if t.SubmissionMode != ModeArtifact {
		key = r.s.binding(t.Project())
	}
	return adapter, key, nil
}

// ReadTimeout implements reconcile.Tasks.
func (r reconcileTasks) ReadTimeout(n int) time.Duration { return r.s.readTimeout(n) }

// ReadHost implements reconcile.Tasks with a sweep's reading.
func (r reconcileTasks) ReadHost(ctx context.Context, adapter ProviderAdapter, tasks []Task) ([]reconcile.Result[observation], error) {
	reads, err := r.s.readHost(ctx, adapter, tasks, ReadSweep)
	if err != nil {
		return nil, err
	}
	out := make([]reconcile.Result[observation], len(reads))
	for i, rd := range reads {
		out[i] = reconcile.Result[observation]{Reading: rd.obs, Unchanged: rd.obs.unchanged, Err: rd.err}
	}
	return out, nil
}

// Apply implements reconcile.Tasks with applyObservation.
func (r reconcileTasks) Apply(ctx context.Context, t *Task, obs observation, next Timestamp) (bool, error) {
	return r.s.applyObservation(ctx, t.ID, t.PullRequestRef(), obs, hint{}, schedule{from: t.ReconcileAt, next: next})
}

// ApplyUnchanged implements reconcile.Tasks: the facts of a reading that
// found nothing new are applied quietly.
func (r reconcileTasks) ApplyUnchanged(ctx context.Context, tx Tx, cur *Task, obs observation) (bool, error) {
	if obs.predates(cur) || !readable(cur) {
		return false, nil
	}
	_, err := r.s.applyFacts(ctx, tx, cur, obs, true)
	return err == nil, err
}
