package queuerun

import (
	"context"
	"slices"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Views returns every queue, in ID order.
func (r *Runner) Views(ctx context.Context) ([]lifecycletype.MergeQueue, error) {
	recs, err := r.cfg.Store.MergeQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]lifecycletype.MergeQueue, 0, len(recs))
	for _, rec := range recs {
		d, err := decode(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, r.view(rec, d))
	}
	return out, nil
}

// ViewOf returns queue id; its error matches ErrNotFound when there is
// none.
func (r *Runner) ViewOf(ctx context.Context, id string) (lifecycletype.MergeQueue, error) {
	rec, err := r.cfg.Store.MergeQueue(ctx, id)
	if err != nil {
		return lifecycletype.MergeQueue{}, err
	}
	d, err := decode(rec)
	if err != nil {
		return lifecycletype.MergeQueue{}, err
	}
	return r.view(rec, d), nil
}

// Locate returns the queue and the entry of a task's change, if it is in
// a queue.
func (r *Runner) Locate(ctx context.Context, taskID string) (lifecycletype.MergeQueue, *lifecycletype.MergeQueueEntry, error) {
	vs, err := r.Views(ctx)
	if err != nil {
		return lifecycletype.MergeQueue{}, nil, err
	}
	for _, v := range vs {
		for i := range v.Entries {
			if v.Entries[i].TaskID == taskID {
				return v, &v.Entries[i], nil
			}
		}
	}
	return lifecycletype.MergeQueue{}, nil, lifecycletype.ErrNotFound
}

// view builds the view of a queue.
func (r *Runner) view(rec lifecycletype.MergeQueueRecord, d *Doc) lifecycletype.MergeQueue {
	e := d.Engine
	v := lifecycletype.MergeQueue{ID: rec.ID, Repository: rec.Owner + "/" + rec.Repo, Base: rec.Base, BaseSHA: e.Base, Paused: e.Paused,
		Entries: []lifecycletype.MergeQueueEntry{}, Candidates: []lifecycletype.MergeQueueCandidate{}, UpdatedAt: rec.UpdatedAt,
		Stats: lifecycletype.MergeQueueStats{CIRuns: e.Stats.Runs, Landed: e.Stats.Landed, Batches: e.Stats.Batches, FailedBatches: e.Stats.Failures,
			Bisections: e.Stats.Probes, Reworked: e.Stats.Convicted + e.Stats.Conflicts, FlakyBatches: e.Stats.FlakyBatches,
			MaxBisection: e.Stats.MaxBisection, FailRate: e.FailRate}}
	if d.PauseReason != "" {
		v.PauseReason = &d.PauseReason
	}
	for i, id := range d.order() {
		x := d.entry(id)
		m := d.Meta[id]
		ev := lifecycletype.MergeQueueEntry{TaskID: id, TaskIdentifier: m.Identifier, OperationID: m.OperationID, Position: i + 1, HeadSHA: x.Head,
			PullRequest: lifecycletype.MergeQueuePullRequest{Owner: m.PullRequest.Owner, Repo: m.PullRequest.Repo, Number: m.PullRequest.Number},
			Priority:    "normal", EnteredAt: m.Since, State: "waiting", CandidateID: x.Candidate}
		if x.Priority == mergequeue.Hotfix {
			ev.Priority = "hotfix"
		}
		if c := d.candidate(x.Candidate); c != nil {
			switch {
			case c.State == mergequeue.Landing:
				ev.State = "landing"
			case c.Probe != 0:
				ev.State = "bisecting"
			default:
				ev.State = "testing"
			}
		}
		v.Entries = append(v.Entries, ev)
	}
	for _, c := range e.Candidates {
		v.Candidates = append(v.Candidates, d.candidateView(c, rec.Base, r))
	}
	return v
}

// candidateView builds the view of a candidate.
func (d *Doc) candidateView(c mergequeue.Candidate, base string, r *Runner) lifecycletype.MergeQueueCandidate {
	kind := "chain"
	switch {
	case c.Probe != 0:
		kind = "probe"
	case c.Leaf:
		kind = "leaf"
	case c.Alt != 0:
		kind = "alternative"
	}
	v := lifecycletype.MergeQueueCandidate{ID: c.ID, Kind: kind, Branch: r.Branch(base, c.ID), State: string(c.State), ParentSHA: c.ParentSHA, SHA: c.SHA,
		TaskIDs: nonNil(slices.Clone(c.Entries)), Checks: nonNil(d.Runs[c.ID].Checks), FailedChecks: nonNil(slices.Clone(c.FailedJobs))}
	return v
}
