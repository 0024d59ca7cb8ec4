package queuerun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/dueloop"
	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Domain is what the driver asks of the lifecycle: the host of a queue,
// the tasks and operations of its entries, and their events. Package
// lifecycle implements it.
type Domain interface {
	// Host returns the queue host and the CI provider of a queue's
	// repository, or an error when none carries it any more.
	Host(q lifecycletype.MergeQueueRecord) (lifecycletype.QueueHost, lifecycletype.CIProvider, error)
	// Task reads a task.
	Task(ctx context.Context, id string) (lifecycletype.Task, error)
	// EntryLive reports whether an entry still stands: its ship
	// operation is queued or running, and its task's head is still the
	// entry's. An entry that does not leaves the queue.
	EntryLive(ctx context.Context, taskID, operationID, head string) (bool, error)
	// Emit appends a task.merge_queue event about a task in tx.
	Emit(ctx context.Context, tx lifecycletype.Tx, taskID string, data lifecycletype.TaskMergeQueueData) error
}

// Config is what a Runner is built from.
type Config struct {
	// Owner is the holder of the queues' leases: Config.InstanceID.
	Owner string
	// Store keeps the queues; its Update's Tx is a MergeQueueTx.
	Store lifecycletype.MergeQueueStore
	// Update runs a Store transaction, with the transaction as a
	// MergeQueueTx, and then wakes the stream broker.
	Update func(ctx context.Context, fn func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error) error
	// Domain gives the hosts, tasks and events.
	Domain Domain
	// Clock tells the time.
	Clock lifecycletype.Clock
	// Log receives what fails.
	Log *slog.Logger
	// Tel records the queues' metrics.
	Tel *telemetry.Telemetry
	// Engine tunes the queues' logic.
	Engine mergequeue.Config
	// Poll is how often a queue is driven, and how often a ship
	// following its entry looks again.
	Poll time.Duration
	// Lease is how long a process drives a queue without renewing.
	Lease time.Duration
	// CITimeout fails a candidate whose CI has not finished in time.
	CITimeout time.Duration
	// BranchPrefix begins the names of queue branches.
	BranchPrefix string
	// HostTimeout bounds each call to the host.
	HostTimeout time.Duration
}

// Runner drives the merge queues of a Store.
type Runner struct {
	cfg  Config
	beat *dueloop.Beat
}

// New returns a Runner; it drives nothing until Run.
func New(cfg Config) *Runner {
	return &Runner{cfg: cfg, beat: dueloop.New(cfg.Clock, cfg.Poll, cfg.Poll)}
}

// Wake makes the runner drive the queues now.
func (r *Runner) Wake() { r.beat.Wake() }

// Run drives every queue that has work, every Poll and when woken, until
// ctx ends.
func (r *Runner) Run(ctx context.Context) {
	r.beat.Run(ctx, func(ctx context.Context) {
		qs, err := r.cfg.Store.MergeQueues(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Log.Error("list merge queues", "err", err)
			}
			return
		}
		for _, q := range qs {
			if ctx.Err() != nil {
				return
			}
			if err := r.Step(ctx, q.ID); err != nil && ctx.Err() == nil {
				r.cfg.Log.Warn("drive a merge queue", "queue", q.ID, "base", q.Base, "err", err)
			}
		}
	})
}

// errNotHeld says another process drives the queue.
var errNotHeld = errors.New("another process drives the queue")

// Step drives one queue once: it takes the queue's lease, drops the
// entries whose operations ended, follows the base, and does what the
// candidates' states ask of the host, applying each answer in a
// transaction.
func (r *Runner) Step(ctx context.Context, id string) error {
	rec, d, err := r.lease(ctx, id)
	if errors.Is(err, errNotHeld) {
		return nil
	}
	if err != nil || d == nil {
		return err
	}
	host, ci, err := r.cfg.Domain.Host(rec)
	if err != nil {
		return err
	}
	repo := lifecycletype.RepoRef{Owner: rec.Owner, Repo: rec.Repo}
	for _, e := range d.Engine.Entries {
		live, err := r.cfg.Domain.EntryLive(ctx, e.ID, d.Meta[e.ID].OperationID, e.Head)
		if err != nil {
			return err
		}
		if !live {
			if d, err = r.apply(ctx, id, "removed", mergequeue.Remove{ID: e.ID}); err != nil {
				return err
			}
		}
	}
	if d, err = r.verify(ctx, id, rec, d, host); err != nil {
		return err
	}
	if !landing(d) {
		head, err := r.host(ctx, func(ctx context.Context) (string, error) { return host.BranchHead(ctx, repo, rec.Base) })
		if err != nil {
			return fmt.Errorf("read the head of %s: %w", rec.Base, err)
		}
		if head != d.Engine.Base {
			if d, err = r.apply(ctx, id, "", mergequeue.BaseMoved{SHA: head}); err != nil {
				return err
			}
		}
	}
	for _, c := range slices.Clone(d.Engine.Candidates) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Nothing is built or landed while the queue is paused (its
		// runs go on), nor landed while a landing's trees are still to
		// be compared.
		if c.State == mergequeue.Landing && (d.Engine.Paused || d.Verify != "") || c.State == mergequeue.Building && d.Engine.Paused {
			continue
		}
		ev, change, err := r.work(ctx, rec, d, host, ci, c)
		if err != nil {
			r.cfg.Log.Warn("merge queue candidate", "queue", id, "candidate", c.ID, "state", c.State, "err", err)
			continue
		}
		if ev == nil {
			continue
		}
		if d, err = r.apply(ctx, id, change, ev); err != nil {
			return err
		}
		if d, err = r.verify(ctx, id, rec, d, host); err != nil {
			return err
		}
	}
	return r.deleteBranches(ctx, id, rec, d, host)
}

// verify compares the trees of the last landing, while they are still to
// be compared: the queue pauses should they differ. Until the host tells,
// candidates are built and tested, and none lands; it is asked again at
// the next step.
func (r *Runner) verify(ctx context.Context, id string, rec lifecycletype.MergeQueueRecord, d *Doc, host lifecycletype.QueueHost) (*Doc, error) {
	if d.Verify == "" {
		return d, nil
	}
	why, err := r.compareTrees(ctx, host, lifecycletype.RepoRef{Owner: rec.Owner, Repo: rec.Repo}, rec.Base, d.Verify)
	if err != nil {
		r.cfg.Log.Warn("compare the landed tree with the tested tree", "queue", id, "tested", d.Verify, "err", err)
		return d, nil
	}
	return r.apply(ctx, id, "", treesCompared{why: why})
}

// branchesGone lists the candidates whose queue branches were deleted.
type branchesGone []int

// deleteBranches deletes the queue branches of the candidates that left
// the queue, and then forgets them.
func (r *Runner) deleteBranches(ctx context.Context, id string, rec lifecycletype.MergeQueueRecord, d *Doc, host lifecycletype.QueueHost) error {
	var gone branchesGone
	repo := lifecycletype.RepoRef{Owner: rec.Owner, Repo: rec.Repo}
	for _, c := range d.Branches {
		if d.candidate(c) != nil {
			continue
		}
		_, err := r.host(ctx, func(ctx context.Context) (string, error) {
			return "", host.DeleteBranch(ctx, repo, r.Branch(rec.Base, c))
		})
		if err != nil {
			r.cfg.Log.Warn("delete a merge queue branch", "queue", id, "candidate", c, "err", err)
			continue
		}
		gone = append(gone, c)
	}
	if len(gone) == 0 {
		return nil
	}
	_, err := r.apply(ctx, id, "", gone)
	return err
}

// landing reports whether a candidate is landing: the base is then the
// queue's to move, and is not read as moved by someone else.
func landing(d *Doc) bool {
	return slices.ContainsFunc(d.Engine.Candidates, func(c mergequeue.Candidate) bool { return c.State == mergequeue.Landing })
}

// lease takes or renews the queue's lease for this process and returns
// the queue; a nil Doc when it has nothing to drive.
func (r *Runner) lease(ctx context.Context, id string) (lifecycletype.MergeQueueRecord, *Doc, error) {
	var (
		rec lifecycletype.MergeQueueRecord
		d   *Doc
	)
	err := r.cfg.Update(ctx, func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error {
		var err error
		if rec, err = qtx.MergeQueue(ctx, id); err != nil {
			return err
		}
		now := r.cfg.Clock.Now()
		if rec.LeaseOwner != r.cfg.Owner && rec.LeaseUntil.After(now) {
			return errNotHeld
		}
		if d, err = decode(rec); err != nil {
			return err
		}
		if !d.busy() {
			d = nil
			return nil
		}
		d.prune(now)
		rec.LeaseOwner, rec.LeaseUntil = r.cfg.Owner, lifecycletype.NewTimestamp(now.Add(r.cfg.Lease))
		if err := d.encode(&rec); err != nil {
			return err
		}
		rec.Version++
		rec.UpdatedAt = lifecycletype.NewTimestamp(now)
		return qtx.UpdateMergeQueue(ctx, rec)
	})
	return rec, d, err
}

// host calls f with the host timeout.
func (r *Runner) host(ctx context.Context, f func(ctx context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.HostTimeout)
	defer cancel()
	return f(ctx)
}

// Branch returns the name of the queue branch of a candidate.
func (r *Runner) Branch(base string, candidate int) string {
	return fmt.Sprintf("%s%s/%d", r.cfg.BranchPrefix, base, candidate)
}

// work does what candidate c's state asks of the host and returns the
// event of the answer, or nil when there is none yet.
func (r *Runner) work(ctx context.Context, rec lifecycletype.MergeQueueRecord, d *Doc, host lifecycletype.QueueHost, ci lifecycletype.CIProvider, c mergequeue.Candidate) (any, string, error) {
	repo := lifecycletype.RepoRef{Owner: rec.Owner, Repo: rec.Repo}
	req := r.candidateRequest(rec, d, c)
	switch c.State {
	case mergequeue.Building:
		sha, err := r.host(ctx, func(ctx context.Context) (string, error) { return host.BuildCandidate(ctx, req) })
		var conflict *lifecycletype.CandidateConflictError
		switch {
		case errors.As(err, &conflict):
			i := slices.IndexFunc(req.Heads, func(h lifecycletype.CandidateHead) bool { return h.SHA == conflict.Head.SHA })
			if i < 0 {
				return nil, "", fmt.Errorf("build candidate %d: a conflict of a head it does not hold: %w", c.ID, err)
			}
			// A head that does not merge onto the base itself goes back;
			// one that does not merge onto what is ahead of it waits.
			onBase := c.Parent == 0 && i == 0
			return mergequeue.Conflict{Candidate: c.ID, Entry: c.Entries[i], Base: onBase}, "", nil
		case refusal(err) != "":
			// No other candidate would fare better.
			return refused{why: fmt.Sprintf("the build of candidate %d was refused: %s", c.ID, refusal(err))}, "", nil
		case err != nil:
			return nil, "", fmt.Errorf("build candidate %d: %w", c.ID, err)
		}
		return mergequeue.Built{Candidate: c.ID, SHA: sha}, "testing", nil
	case mergequeue.Testing:
		return r.test(ctx, rec, d, ci, c, req)
	case mergequeue.Landing:
		_, err := r.host(ctx, func(ctx context.Context) (string, error) {
			return "", host.AdvanceBranch(ctx, lifecycletype.AdvanceRequest{Repo: repo, Branch: rec.Base, From: d.Engine.Base, To: c.SHA})
		})
		if errors.Is(err, lifecycletype.ErrBranchMoved) {
			head, herr := r.host(ctx, func(ctx context.Context) (string, error) { return host.BranchHead(ctx, repo, rec.Base) })
			if herr != nil {
				return nil, "", fmt.Errorf("land candidate %d: %w; then reading the base: %w", c.ID, err, herr)
			}
			return mergequeue.BaseMoved{SHA: head}, "", nil
		}
		if why := refusal(err); why != "" {
			return refused{why: fmt.Sprintf("the landing of candidate %d was refused: %s", c.ID, why)}, "", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("land candidate %d: %w", c.ID, err)
		}
		// The landing stands; its trees are compared next (see verify).
		return landedTree{Landed: mergequeue.Landed{Candidate: c.ID}, tested: c.SHA}, "landed", nil
	}
	return nil, "", nil
}

// landedTree is a landing of tested commit tested, whose trees are still
// to be compared.
type landedTree struct {
	mergequeue.Landed
	tested string
}

// treesCompared is the comparison of a landing's trees: why they differ,
// or "".
type treesCompared struct{ why string }

// refused is a landing, or a candidate's build, the host refused for
// good (see refusal): the queue pauses, saying why, until an operator
// resumes it, rather than asking again at every step.
type refused struct{ why string }

// refusal returns the host's words when err is a refusal for good (a
// *lifecycletype.RefusedError: its rules, the token's rights, which
// asking again does not change until a person does), or "".
func refusal(err error) string {
	var r *lifecycletype.RefusedError
	if errors.As(err, &r) {
		return r.Message
	}
	return ""
}

// compareTrees compares the tree the base now has with the tested
// candidate's, and returns why they differ, or "" when they do not; an
// error when the host could not tell.
func (r *Runner) compareTrees(ctx context.Context, host lifecycletype.QueueHost, repo lifecycletype.RepoRef, base, tested string) (string, error) {
	head, err := r.host(ctx, func(ctx context.Context) (string, error) { return host.BranchHead(ctx, repo, base) })
	if err != nil {
		return "", fmt.Errorf("read the head of %s: %w", base, err)
	}
	landed, err1 := r.host(ctx, func(ctx context.Context) (string, error) { return host.Tree(ctx, repo, head) })
	want, err2 := r.host(ctx, func(ctx context.Context) (string, error) { return host.Tree(ctx, repo, tested) })
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("read the trees of %s and %s: %w", head, tested, err)
	}
	if landed != want {
		return fmt.Sprintf("after landing %s, %s is at %s whose tree %s is not the tested tree %s", tested, base, head, landed, want), nil
	}
	return "", nil
}

// candidateRequest returns the request that builds c.
func (r *Runner) candidateRequest(rec lifecycletype.MergeQueueRecord, d *Doc, c mergequeue.Candidate) lifecycletype.CandidateRequest {
	req := lifecycletype.CandidateRequest{Repo: lifecycletype.RepoRef{Owner: rec.Owner, Repo: rec.Repo}, Base: rec.Base,
		Branch: r.Branch(rec.Base, c.ID), Parent: c.ParentSHA, Title: "Merge queue candidate " + fmt.Sprint(c.ID)}
	for _, id := range c.Entries {
		h := lifecycletype.CandidateHead{PullRequest: d.Meta[id].PullRequest}
		if e := d.entry(id); e != nil {
			h.SHA = e.Head
		}
		req.Heads = append(req.Heads, h)
	}
	return req
}

// test reads the CI of candidate c and returns Tested when it has
// finished: failed as soon as a check fails; passed when every check has
// passed or been skipped and the provider expects no more, or, with a
// provider that has no checks of its own (local repositories), when it
// reports none. A run that outlasts CITimeout fails.
func (r *Runner) test(ctx context.Context, rec lifecycletype.MergeQueueRecord, d *Doc, ci lifecycletype.CIProvider, c mergequeue.Candidate, req lifecycletype.CandidateRequest) (any, string, error) {
	now := r.cfg.Clock.Now()
	run, ok := d.Runs[c.ID]
	if !ok {
		run = Run{SHA: c.SHA, Since: lifecycletype.NewTimestamp(now)}
	}
	q := lifecycletype.CIQuery{HeadSHA: c.SHA, Candidate: &req}
	if len(c.Entries) > 0 {
		m := d.Meta[c.Entries[0]]
		q.PullRequest = m.PullRequest
		t, err := r.cfg.Domain.Task(ctx, m.TaskID)
		if err != nil && !errors.Is(err, lifecycletype.ErrNotFound) {
			return nil, "", err
		}
		q.Task = t
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.HostTimeout)
	rep, err := ci.Checks(cctx, q)
	cancel()
	if err != nil {
		return nil, "", fmt.Errorf("read the CI of candidate %d: %w", c.ID, err)
	}
	run.Checks = rep.Checks
	var failed []string
	running := rep.Pending
	for _, ch := range rep.Checks {
		switch ch.Status {
		case lifecycletype.CheckFailed:
			failed = append(failed, ch.Name)
		case lifecycletype.CheckRunning:
			running = true
		}
	}
	var ev mergequeue.Event
	switch {
	case len(failed) > 0:
		slices.Sort(failed)
		ev = mergequeue.Tested{Candidate: c.ID, FailedJobs: failed}
	case !running && (len(rep.Checks) > 0 || ci.CountsSelfReported()):
		ev = mergequeue.Tested{Candidate: c.ID, Passed: true}
	case now.Sub(run.Since.Time) > r.cfg.CITimeout:
		ev = mergequeue.Tested{Candidate: c.ID, FailedJobs: []string{"ci_timeout"}}
	}
	if ev == nil {
		if !ok || !slices.Equal(run.Checks, d.Runs[c.ID].Checks) {
			return runSeen{Candidate: c.ID, Run: run}, "", nil
		}
		return nil, "", nil
	}
	change := "failed"
	if ev.(mergequeue.Tested).Passed {
		change = "passed"
	}
	return testedRun{Tested: ev.(mergequeue.Tested), Run: run}, change, nil
}

// runSeen records what was read of a run that has not finished.
type runSeen struct {
	Candidate int
	Run       Run
}

// testedRun is a finished run, with its checks.
type testedRun struct {
	mergequeue.Tested
	Run Run
}

// apply applies ev to queue id in a transaction, under this process's
// lease: records what left the queue, appends the events, and returns
// the queue as it is after.
func (r *Runner) apply(ctx context.Context, id, change string, ev any) (*Doc, error) {
	var (
		out      *Doc
		measures []func() // counted once the transaction commits
	)
	err := r.cfg.Update(ctx, func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error {
		measures = measures[:0] // a Store may run the transaction again
		rec, err := qtx.MergeQueue(ctx, id)
		if err != nil {
			return err
		}
		now := r.cfg.Clock.Now()
		if rec.LeaseOwner != r.cfg.Owner {
			return errNotHeld
		}
		d, err := decode(rec)
		if err != nil {
			return err
		}
		var (
			engineEv mergequeue.Event
			pause    string   // why the queue pauses itself
			pauseLog string   // what it logs then
			subject  []string // the tasks the change is about
			tested   *lifecycletype.MergeQueueCandidate
		)
		switch ev := ev.(type) {
		case runSeen:
			d.Runs[ev.Candidate] = ev.Run
		case testedRun:
			d.Runs[ev.Candidate] = ev.Run
			engineEv = ev.Tested
			subject = candidateEntries(d, ev.Candidate)
			if c := d.candidate(ev.Candidate); c != nil && c.State == mergequeue.Testing {
				v := d.candidateView(*c, rec.Base, r)
				v.State, v.Checks, v.FailedChecks = string(mergequeue.Failed), nonNil(ev.Run.Checks), nonNil(ev.FailedJobs)
				if ev.Passed {
					v.State = string(mergequeue.Passed)
				}
				tested = &v
				depth := 0
				for _, g := range d.Engine.Groups {
					if g.ID == c.Probe {
						depth = g.Depth
					}
				}
				measures = append(measures, func() { r.cfg.Tel.QueueTested(ctx, v.Kind, ev.Passed, depth) })
			}
		case landedTree:
			engineEv, d.Verify = ev.Landed, ev.tested
			subject = candidateEntries(d, ev.Candidate)
		case treesCompared:
			d.Verify, pause = "", ev.why
			pauseLog = "merge queue paused: the landed tree is not the tested tree"
		case refused:
			pause, pauseLog = ev.why, "merge queue paused: the host refused a candidate's build or landing"
		case mergequeue.Built:
			engineEv = ev
			subject = candidateEntries(d, ev.Candidate)
			d.Branches = append(d.Branches, ev.Candidate)
		case branchesGone:
			d.Branches = slices.DeleteFunc(d.Branches, func(id int) bool { return slices.Contains(ev, id) })
		case mergequeue.Landed:
			engineEv = ev
			subject = candidateEntries(d, ev.Candidate)
		case mergequeue.Remove:
			engineEv = ev
			subject = []string{ev.ID}
		case mergequeue.Event:
			engineEv = ev
		}
		var acts []mergequeue.Action
		if engineEv != nil {
			acts = d.Engine.Apply(r.cfg.Engine, now, engineEv)
		}
		for _, a := range acts {
			if _, ok := a.(mergequeue.Test); ok {
				measures = append(measures, func() { r.cfg.Tel.QueueRunStarted(ctx) })
			}
		}
		if pause != "" {
			acts = append(acts, d.Engine.Apply(r.cfg.Engine, now, mergequeue.Pause{})...)
			d.PauseReason = pause
			r.cfg.Log.Error(pauseLog, "queue", id, "why", pause)
		}
		events := r.record(d, now, acts)
		for _, l := range events {
			took := now.Sub(l.outcome.Since.Time)
			measures = append(measures, func() { r.cfg.Tel.QueueLeft(ctx, l.change, took) })
		}
		if err := r.emit(ctx, tx, rec, d, change, subject, events, tested); err != nil {
			return err
		}
		if pause != "" {
			// Every entry left waits for an operator: each task hears it.
			if err := r.emit(ctx, tx, rec, d, "paused", d.entryIDs(), nil, nil); err != nil {
				return err
			}
		}
		d.prune(now)
		out = d
		return r.save(ctx, qtx, &rec, d, now, false)
	})
	if err == nil {
		for _, m := range measures {
			m()
		}
	}
	return out, err
}

// candidateEntries returns the entries of candidate id.
func candidateEntries(d *Doc, id int) []string {
	if c := d.candidate(id); c != nil {
		return slices.Clone(c.Entries)
	}
	return nil
}

// left is an entry that left the queue in a transaction.
type left struct {
	id      string
	change  string
	outcome Outcome
}

// record keeps the outcomes of the actions that take entries out of the
// queue, and returns them.
func (r *Runner) record(d *Doc, now time.Time, acts []mergequeue.Action) []left {
	var out []left
	for _, a := range acts {
		switch a := a.(type) {
		case mergequeue.Done:
			o := Outcome{SHA: a.SHA, At: lifecycletype.NewTimestamp(now)}
			out = append(out, left{id: a.Entry, change: "landed", outcome: o})
		case mergequeue.Rework:
			rw := &lifecycletype.QueueRework{Reason: a.Reason, CandidateSHA: a.SHA}
			if a.Reason == mergequeue.ReworkConflict {
				rw.Reason = lifecycletype.ReworkMergeConflict
				rw.Message = "The change does not merge with the changes ahead of it in the merge queue; rebase it on the base branch and submit again."
			} else {
				rw.Reason = lifecycletype.ReworkChecksFailed
				rw.Checks = failedChecks(d, a)
				rw.Message = fmt.Sprintf("The change failed the merge queue's CI (%s), tested apart from the changes ahead of it, on candidate %s, where the checks' logs are; fix it and submit again.", strings.Join(a.Jobs, ", "), a.SHA)
			}
			out = append(out, left{id: a.Entry, change: "reworked", outcome: Outcome{SHA: "", Rework: rw, At: lifecycletype.NewTimestamp(now)}})
		}
	}
	for i := range out {
		l := &out[i]
		m := d.Meta[l.id] // the entry is gone from the engine; its meta stays until prune
		l.outcome.Head, l.outcome.Since, l.outcome.OperationID = m.Head, m.Since, m.OperationID
		d.Outcomes[l.id] = l.outcome
	}
	return out
}

// failedChecks returns the checks of a's candidate run that failed, with
// their links.
func failedChecks(d *Doc, a mergequeue.Rework) []lifecycletype.CICheck {
	var out []lifecycletype.CICheck
	for _, run := range d.Runs {
		if run.SHA != a.SHA {
			continue
		}
		for _, ch := range run.Checks {
			if ch.Status == lifecycletype.CheckFailed && slices.Contains(a.Jobs, ch.Name) && !slices.ContainsFunc(out, func(x lifecycletype.CICheck) bool { return x.Name == ch.Name }) {
				out = append(out, ch)
			}
		}
	}
	if len(out) == 0 {
		for _, j := range a.Jobs {
			out = append(out, lifecycletype.CICheck{Name: j, Status: lifecycletype.CheckFailed})
		}
	}
	return out
}

// nonNil returns s, or an empty slice for nil: a JSON array, not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
