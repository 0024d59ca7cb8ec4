package queuerun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Change is a ship's change entering a queue.
type Change struct {
	// Mode and Project say which adapter carries the queue.
	Mode    lifecycletype.SubmitMode
	Project string
	// Base is the base branch.
	Base string
	// Task is the task shipped; OperationID its ship operation.
	Task        lifecycletype.Task
	OperationID string
	// PullRequest and Head are the change.
	PullRequest lifecycletype.PullRequestRef
	Head        string
}

// Enter puts a ship's change in its queue, or follows it there. It
// returns the merge when the change has landed; a
// *lifecycletype.QueueReworkError when the queue sent it back; and while
// it is in the queue, a *lifecycletype.TemporaryError whose Reason is
// merge_queue, saying where it is, to try again after Poll. host reads
// the base's head when the queue is new.
func (r *Runner) Enter(ctx context.Context, c Change, host lifecycletype.QueueHost) (lifecycletype.MergeResult, error) {
	repo := lifecycletype.RepoRef{Owner: c.PullRequest.Owner, Repo: c.PullRequest.Repo}
	id := QueueID(c.Mode, repo, c.Base)
	var (
		res     lifecycletype.MergeResult
		outcome *Outcome
		moved   bool // the task's head moved
		where   string
		created bool
	)
	err := r.cfg.Update(ctx, func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error {
		now := r.cfg.Clock.Now()
		rec, err := qtx.MergeQueue(ctx, id)
		created = errors.Is(err, lifecycletype.ErrNotFound)
		switch {
		case created:
			rec = lifecycletype.MergeQueueRecord{ID: id, Mode: c.Mode, Project: c.Project, Owner: repo.Owner, Repo: repo.Repo, Base: c.Base}
		case err != nil:
			return err
		}
		d, err := decode(rec)
		if err != nil {
			return err
		}
		if o, ok := d.Outcomes[c.Task.ID]; ok && strings.EqualFold(o.Head, c.Head) && o.OperationID == c.OperationID {
			outcome = &o
			return nil
		}
		// A head that moved since the ship was accepted is not queued:
		// the ship fails as a merge at that head would.
		t, err := tx.Task(ctx, c.Task.ID)
		if err != nil {
			return err
		}
		if moved = t.HeadSHA == nil || !strings.EqualFold(*t.HeadSHA, c.Head); moved {
			if d.entry(c.Task.ID) == nil {
				return nil
			}
			d.Engine.Apply(r.cfg.Engine, now, mergequeue.Remove{ID: c.Task.ID})
			if err := r.emit(ctx, tx, rec, d, "removed", []string{c.Task.ID}, nil, nil); err != nil {
				return err
			}
			return r.save(ctx, qtx, &rec, d, now, created)
		}
		if e := d.entry(c.Task.ID); e == nil || !strings.EqualFold(e.Head, c.Head) {
			pri := mergequeue.Normal
			if c.Task.Priority == lifecycletype.PriorityCritical {
				pri = mergequeue.Hotfix
			}
			delete(d.Outcomes, c.Task.ID)
			d.Engine.Apply(r.cfg.Engine, now, mergequeue.Add{Entry: mergequeue.Entry{ID: c.Task.ID, Head: c.Head, Priority: pri, Since: now}})
			d.Meta[c.Task.ID] = EntryMeta{TaskID: c.Task.ID, Identifier: c.Task.Identifier, OperationID: c.OperationID,
				PullRequest: c.PullRequest, Head: c.Head, Since: lifecycletype.NewTimestamp(now)}
			if err := r.emit(ctx, tx, rec, d, "entered", []string{c.Task.ID}, nil, nil); err != nil {
				return err
			}
		}
		where = d.where(c.Task.ID, rec.Base)
		return r.save(ctx, qtx, &rec, d, now, created)
	})
	if errors.Is(err, lifecycletype.ErrConflict) && created {
		return r.Enter(ctx, c, host) // another process created the queue meanwhile
	}
	if err != nil {
		return res, fmt.Errorf("merge queue into %s: %w", c.Base, err)
	}
	if moved {
		return res, fmt.Errorf("merge queue into %s: the task's head is no longer %s: %w", c.Base, c.Head, lifecycletype.ErrHeadMismatch)
	}
	if outcome != nil {
		if outcome.Rework != nil {
			return res, &lifecycletype.QueueReworkError{Rework: *outcome.Rework}
		}
		return lifecycletype.MergeResult{MergeCommitSHA: outcome.SHA}, nil
	}
	r.Wake()
	return res, &lifecycletype.TemporaryError{Reason: lifecycletype.WaitMergeQueue, RetryAfter: r.cfg.Poll, Err: errors.New(where)}
}

// save stores queue rec with d as its state: inserted when created.
func (r *Runner) save(ctx context.Context, qtx lifecycletype.MergeQueueTx, rec *lifecycletype.MergeQueueRecord, d *Doc, now time.Time, created bool) error {
	if err := d.encode(rec); err != nil {
		return err
	}
	rec.Version++
	rec.UpdatedAt = lifecycletype.NewTimestamp(now)
	if created {
		return qtx.CreateMergeQueue(ctx, *rec)
	}
	return qtx.UpdateMergeQueue(ctx, *rec)
}

// where says in words where an entry is.
func (d *Doc) where(id, base string) string {
	pos, n := d.position(id)
	s := fmt.Sprintf("position %d of %d in the merge queue into %s", pos, n, base)
	if e := d.entry(id); e != nil && e.Candidate != 0 {
		if c := d.candidate(e.Candidate); c != nil {
			s += fmt.Sprintf(", in candidate %d, %s", c.ID, c.State)
			if run, ok := d.Runs[c.ID]; ok && len(run.Checks) > 0 {
				s += " (" + checksSummary(run.Checks) + ")"
			}
		}
	}
	if d.Engine.Paused {
		s += "; the queue is paused"
	}
	return s
}

// checksSummary counts checks by status: "2 running, 1 passed".
func checksSummary(checks []lifecycletype.CICheck) string {
	counts := map[lifecycletype.CheckStatus]int{}
	for _, c := range checks {
		counts[c.Status]++
	}
	var parts []string
	for _, st := range []lifecycletype.CheckStatus{lifecycletype.CheckFailed, lifecycletype.CheckRunning, lifecycletype.CheckPassed, lifecycletype.CheckSkipped} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return strings.Join(parts, ", ")
}

// emit appends the events of a change: one per task it is about, and one
// per entry that left the queue. tested, when not nil, is the candidate
// whose CI run ended, which the events of passed and failed show.
func (r *Runner) emit(ctx context.Context, tx lifecycletype.Tx, rec lifecycletype.MergeQueueRecord, d *Doc, change string, subject []string, gone []left, tested *lifecycletype.MergeQueueCandidate) error {
	base := lifecycletype.MergeQueueEvent{ID: rec.ID, Repository: rec.Owner + "/" + rec.Repo, Base: rec.Base, Entries: len(d.Engine.Entries), Paused: d.Engine.Paused}
	if d.Engine.Paused {
		base.PauseReason = d.PauseReason
	}
	done := map[string]bool{}
	for _, l := range gone {
		q := base
		q.Rework = l.outcome.Rework
		if l.outcome.Rework == nil {
			q.LandedSHA = l.outcome.SHA
		}
		done[l.id] = true
		if err := r.cfg.Domain.Emit(ctx, tx, d.Meta[l.id].TaskID, lifecycletype.TaskMergeQueueData{Change: l.change, Queue: q}); err != nil {
			return err
		}
	}
	if change == "" {
		return nil
	}
	for _, id := range subject {
		if done[id] {
			continue
		}
		m, ok := d.Meta[id]
		if !ok {
			continue
		}
		q := base
		q.Position, _ = d.position(id)
		if tested != nil {
			q.Candidate = tested // the candidate whose run ended, not the one the entry moved to
		} else if e := d.entry(id); e != nil && e.Candidate != 0 {
			if c := d.candidate(e.Candidate); c != nil {
				v := d.candidateView(*c, rec.Base, r)
				q.Candidate = &v
			}
		}
		if err := r.cfg.Domain.Emit(ctx, tx, m.TaskID, lifecycletype.TaskMergeQueueData{Change: change, Queue: q}); err != nil {
			return err
		}
	}
	return nil
}

// SetPaused pauses or resumes queue id, saying why, and returns its view.
// Candidates under test go on; nothing is built or landed while it is
// paused.
func (r *Runner) SetPaused(ctx context.Context, id string, paused bool, why string) (lifecycletype.MergeQueue, error) {
	var v lifecycletype.MergeQueue
	err := r.cfg.Update(ctx, func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error {
		rec, err := qtx.MergeQueue(ctx, id)
		if err != nil {
			return err
		}
		d, err := decode(rec)
		if err != nil {
			return err
		}
		if d.Engine.Paused != paused {
			var ev mergequeue.Event = mergequeue.Resume{}
			change := "resumed"
			d.PauseReason = ""
			if paused {
				ev, change, d.PauseReason = mergequeue.Pause{}, "paused", why
			}
			d.Engine.Apply(r.cfg.Engine, r.cfg.Clock.Now(), ev)
			if err := r.emit(ctx, tx, rec, d, change, d.entryIDs(), nil, nil); err != nil {
				return err
			}
			if err := r.save(ctx, qtx, &rec, d, r.cfg.Clock.Now(), false); err != nil {
				return err
			}
		}
		v = r.view(rec, d)
		return nil
	})
	if err == nil && !paused {
		r.Wake()
	}
	return v, err
}
