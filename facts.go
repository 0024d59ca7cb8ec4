package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tasklifecycle/lifecycle/internal/id"
)

// This file is how the Service learns what happens at a code host: a push
// to a pull request's branch, a review, CI turning green or red, a merge,
// close or reopen by hand. Webhooks ([Service.ApplyProviderEvent],
// [Service.QueueProviderEvent]) make it learn at once; the reconciler
// (its loop in internal/reconcile) reads the host again for every task in
// review on a schedule, so that a lost webhook delays a fact but never
// loses it. Both read the host through the task's adapter (hostread.go)
// and apply what they read with applyObservation, in one transaction with
// the events it causes; submit and ship apply what they read of the host
// with applyFacts too.

// readable reports whether the reconciler reads t: it is in review, or
// back in progress because its pull request was closed at the host.
func readable(t *Task) bool {
	return t.PRNumber != nil && (t.Status == StatusInReview || closedAtHost(t))
}

// Reconcile reads the code host for a task in review now and applies what
// it finds, as the reconciler does on its schedule. It returns a
// *ProviderError when the host cannot be read; a task not in review (nor
// back in progress because its pull request was closed at the host) is
// left alone.
func (s *Service) Reconcile(ctx context.Context, taskID string) error {
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return err
	}
	return s.reconcileTask(ctx, t, hint{}, ReadNow)
}

// rereads bounds the readings in full that reconcileTask makes in a row
// while the host keeps hinting at changes during them; the task is left
// due for the reconciler after the last.
const rereads = 3

// reconcileTask reads the host for t, in full, and applies what it finds;
// d, when not nil, is recorded in the transaction that applies it. When
// the host hinted at a change while it read (a webhook about the same
// pull request), it reads again: the hint is not folded into a reading
// that may have begun before the change.
func (s *Service) reconcileTask(ctx context.Context, t Task, h hint, purpose ReadPurpose) error {
	for range rereads {
		if !readable(&t) {
			return nil
		}
		adapter, err := s.adapterFor(&t, t.SubmissionMode)
		if err != nil {
			return err
		}
		t.Facts.HostVersion = "" // read in full
		reads, err := s.readHost(ctx, adapter, []Task{t}, purpose)
		if err == nil {
			err = reads[0].err
		}
		if err != nil {
			return s.providerError(ctx, "read the pull request", err)
		}
		again, err := s.applyObservation(ctx, t.ID, t.PullRequestRef(), reads[0].obs, h, schedule{})
		if err != nil || !again {
			return err
		}
		h = hint{} // counted and recorded with the reading applied
		if t, err = s.readTask(ctx, t.ID); err != nil {
			return err
		}
	}
	s.reconcile.Wake() // still hinted at: due for the reconciler
	return nil
}

// ApplyProviderEvent applies an event a code host reported (through an
// adapter's [WebhookIntake]). The event is a hint: the Service re-reads
// every task in review on the pull request (or head commit) it names
// through the task's adapter and applies what it reads, emitting events as
// for any change. A delivery whose ID or digest (ProviderEvent.Digest) was
// applied before is ignored. When the host cannot be read, the tasks are
// marked to be reconciled at once and an error is returned, so that the
// host may deliver again.
func (s *Service) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) error {
	records := ev.DeliveryRecords()
	for _, d := range records {
		_, err := s.store.ProviderDelivery(ctx, d.Source, d.ID)
		if err == nil {
			return nil // applied before
		}
		if !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("provider delivery %s: %w", d.ID, err)
		}
	}
	if ev.Kind == ProviderDeploymentStatus {
		if ev.Deployment != nil {
			if o, ok := s.cfg.Deployer.(DeploymentObserver); ok {
				o.ObserveDeployment(ctx, *ev.Deployment)
			}
		}
		return s.recordDelivery(ctx, ev)
	}
	tasks, err := s.tasksOf(ctx, ev)
	if err != nil {
		return err
	}
	var delivery []ProviderDelivery
	if len(tasks) == 1 {
		// Recorded with the change it causes: one write per delivery.
		delivery = records
	}
	var errs []error
	for _, t := range tasks {
		if err := s.reconcileTask(ctx, t, hint{hinted: true, deliveries: delivery}, ReadNow); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.ID, err))
			s.reconcileSoon(context.WithoutCancel(ctx), t.ID)
		}
	}
	if err := errors.Join(errs...); err != nil || delivery != nil {
		return err
	}
	return s.recordDelivery(ctx, ev)
}

// tasksOf returns the tasks a provider event concerns: those in review (or
// back in progress because the host closed their pull request, which a
// reopen puts back in review) on the pull request it names, or else those
// in review whose head is its commit.
func (s *Service) tasksOf(ctx context.Context, ev ProviderEvent) ([]Task, error) {
	f := TaskFilter{Statuses: []Status{StatusInReview, StatusInProgress}, PullRequest: ev.PullRequest, Limit: 100}
	switch {
	case ev.PullRequest.Number > 0:
	case ev.HeadSHA != "" && shaRE.MatchString(ev.HeadSHA):
		f.Statuses, f.PullRequest, f.HeadSHA = []Status{StatusInReview}, PullRequestRef{}, lowerHex(ev.HeadSHA)
	default:
		return nil, nil // names nothing the Service tracks
	}
	page, err := s.store.ListTasks(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("tasks of provider event: %w", err)
	}
	tasks := page.Tasks[:0]
	for _, t := range page.Tasks {
		if ev.PullRequest.Owner != "" && (t.PROwner != ev.PullRequest.Owner || t.PRRepo != ev.PullRequest.Repo) {
			continue // the same commit in another repository
		}
		if readable(&t) {
			tasks = append(tasks, t)
		}
	}
	return tasks, nil
}

// QueueProviderEvent takes a provider event durably and returns at once:
// in one transaction it records the delivery (a delivery queued or applied
// before is ignored) and makes the tasks the event concerns due for
// reconciliation now, to be read in full; the reconciler then reads them
// in the background, batched with whatever else is due. A webhook is so
// answered after one Store write, and a burst of deliveries about one pull
// request costs the host one reading when they arrive before it starts.
// It needs a started Service with reconciliation enabled; otherwise it
// applies the event as [Service.ApplyProviderEvent] does.
func (s *Service) QueueProviderEvent(ctx context.Context, ev ProviderEvent) error {
	s.mu.Lock()
	running := s.started && !s.closed
	s.mu.Unlock()
	if !running || s.cfg.ReconcileInterval <= 0 {
		return s.ApplyProviderEvent(ctx, ev)
	}
	if ev.Kind == ProviderDeploymentStatus {
		return s.ApplyProviderEvent(ctx, ev) // no host read: it is quick
	}
	tasks, err := s.tasksOf(ctx, ev)
	if err != nil {
		return err
	}
	err = s.updateRelaxed(ctx, func(tx Tx) error {
		for _, d := range ev.DeliveryRecords() {
			d.ReceivedAt = s.clock.Now()
			if err := tx.RecordProviderDelivery(ctx, d); err != nil {
				return err
			}
		}
		now := s.now()
		for _, t := range tasks {
			cur, err := tx.Task(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("get task %s: %w", t.ID, err)
			}
			if !readable(&cur) || cur.PullRequestRef() != t.PullRequestRef() {
				continue // left review
			}
			// Counted even when already due: a reading under way may
			// have begun before the change the hint announces.
			cur.Facts.Hints++
			markDue(&cur, now)
			if err := tx.UpdateTask(ctx, cur); err != nil {
				return fmt.Errorf("update task %s: %w", t.ID, err)
			}
		}
		return nil
	})
	if errors.Is(err, ErrConflict) {
		return nil // queued or applied before
	}
	if err != nil {
		return fmt.Errorf("queue provider event: %w", err)
	}
	s.reconcile.Wake()
	return nil
}

// markDue makes t due for a reading in full at now: what the host hinted
// at may not show in the summary a BatchReader compares.
func markDue(t *Task, now Timestamp) {
	t.ReconcileAt = now
	t.Facts.HostVersion = ""
}

// QueuedEvents returns a sink whose ApplyProviderEvent is
// [Service.QueueProviderEvent], for an adapter's webhook handler that
// should answer after one Store write:
//
//	mux.Handle("POST /hooks/github", gh.WebhookHandler(svc.QueuedEvents()))
func (s *Service) QueuedEvents() ProviderEventSink { return queuedEvents{s} }

// queuedEvents is the sink of QueuedEvents.
type queuedEvents struct{ s *Service }

// ApplyProviderEvent implements ProviderEventSink by queueing ev.
func (q queuedEvents) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) error {
	return q.s.QueueProviderEvent(ctx, ev)
}

// recordDelivery remembers that ev's delivery was applied.
func (s *Service) recordDelivery(ctx context.Context, ev ProviderEvent) error {
	records := ev.DeliveryRecords()
	if len(records) == 0 {
		return nil
	}
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		for _, d := range records {
			d.ReceivedAt = s.clock.Now()
			if err := tx.RecordProviderDelivery(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrConflict) {
		return nil // applied by a concurrent delivery of the same event
	}
	return err
}

// reconcileSoon makes a task due for a reading in full now.
func (s *Service) reconcileSoon(ctx context.Context, taskID string) {
	err := s.transact(ctx, false, func(tx Tx) error {
		t, err := tx.Task(ctx, taskID)
		if err != nil || !readable(&t) {
			return err
		}
		markDue(&t, s.now())
		return tx.UpdateTask(ctx, t)
	})
	if err != nil {
		s.log.WarnContext(ctx, "schedule a reconciliation; the task is read again at its usual time", "task", taskID, "err", err)
	}
	s.reconcile.Wake()
}

// applyFacts writes what obs found into t (and the checks and reviews tx
// holds), and returns a task.reviewed event for each host review not seen
// before. quiet records host reviews without events (a submission takes
// over the reviews its pull request already has).
func (s *Service) applyFacts(ctx context.Context, tx Tx, t *Task, obs observation, quiet bool) ([]taskEvent, error) {
	now := s.now()
	started := now
	if !obs.started.IsZero() {
		started = NewTimestamp(obs.started)
	}
	if last := t.Facts.ReadStartedAt; last != nil && started.Before(last.Time) {
		return nil, nil // a later reading's facts are stored: these are older
	}
	t.Facts.ReadStartedAt = &started
	t.Facts.CheckedAt = &now
	switch {
	case obs.predates(t):
		t.Facts.HostVersion = "" // what the hint announced may not show in it: read in full next
	case obs.version != "":
		t.Facts.HostVersion = obs.version
	}
	if obs.unchanged {
		if t.Facts.CICheckedAt != nil {
			t.Facts.CICheckedAt = &now
		}
		return nil, nil
	}
	head := obs.pr.HeadSHA
	headChanged := t.HeadSHA == nil || *t.HeadSHA != head
	if headChanged {
		t.HeadSHA = &head
	}
	if base := obs.pr.Base; base != "" && (t.BaseBranch == nil || *t.BaseBranch != base) {
		t.BaseBranch = &base // retargeted at the host: judged by the new base's rules
	}
	t.Facts.PRState = obs.pr.State
	t.Facts.MergeCommitSHA = obs.pr.MergeCommitSHA
	t.Facts.DismissesStaleReviews = obs.pr.DismissesStaleReviews
	t.Facts.Draft = obs.pr.Draft
	t.Facts.Mergeable = obs.pr.Mergeable
	t.Facts.BlockedReason = ""
	if obs.pr.Mergeable == MergeabilityBlocked {
		t.Facts.BlockedReason = obs.pr.BlockedReason
	}
	switch {
	case obs.ci != nil:
		t.Facts.StaleChecks = slices.Clone(obs.ci.Stale)
		checks := make([]Check, 0, len(obs.ci.Checks))
		for _, c := range obs.ci.Checks {
			if !c.Status.Valid() || c.Name == "" {
				return nil, fmt.Errorf("task %s: the CI provider reported check %q with status %q", t.ID, c.Name, c.Status)
			}
			checks = append(checks, Check{Name: c.Name, Status: c.Status, URL: optional(c.URL), Source: SourceProvider, TaskID: t.ID, HeadSHA: head, Failure: c.Failure, UpdatedAt: now})
		}
		if err := tx.PutChecks(ctx, PutChecksParams{TaskID: t.ID, HeadSHA: head, Source: SourceProvider, Checks: checks, Replace: true}); err != nil {
			return nil, fmt.Errorf("record provider checks of task %s: %w", t.ID, err)
		}
		if err := s.putCIFailures(ctx, tx, t.ID, head, checks, false); err != nil {
			return nil, err
		}
		t.Facts.CIPending, t.Facts.CICheckedAt = obs.ci.Pending, &now
	case obs.ciFailed && headChanged:
		t.Facts.CIPending, t.Facts.CICheckedAt, t.Facts.StaleChecks = true, nil, nil // the new head's CI is unknown
	}
	if err := s.refreshCI(ctx, tx, t); err != nil {
		return nil, err
	}
	var events []taskEvent
	switch {
	case obs.reviews != nil && t.SubmissionID != nil:
		var err error
		if events, err = s.recordHostReviews(ctx, tx, t, obs.reviews, quiet); err != nil {
			return nil, err
		}
	case obs.reviewsFailed && headChanged && t.Facts.HostDecision != "":
		// The host's decision on the old head says nothing of the new
		// one: an approval may have been dismissed by the push.
		t.Facts.HostDecision = DecisionPending
	}
	if headChanged {
		// Approvals posted for an earlier head may no longer count.
		if err := s.redecide(ctx, tx, t); err != nil {
			return nil, err
		}
	}
	liftRefusal(t)
	return events, nil
}

// liftRefusal forgets the host's refusal of t's last merge once a fact it
// could depend on changed, or the host hinted at a change since.
func liftRefusal(t *Task) {
	if r := t.Facts.MergeRefusal; r != nil && (r.Facts != mergeFacts(t) || r.Hints != t.Facts.Hints) {
		t.Facts.MergeRefusal = nil
	}
}

// predates reports whether the host hinted at a change of t (a webhook)
// after the reading of obs began: what the hint announced may not show
// in it.
func (obs observation) predates(t *Task) bool {
	return !obs.started.IsZero() && obs.hints != t.Facts.Hints
}

// recordHostReviews takes the host's decision into t and records the host
// reviews tx does not hold yet, returning a task.reviewed event for each
// unless quiet.
func (s *Service) recordHostReviews(ctx context.Context, tx Tx, t *Task, hr *HostReviews, quiet bool) ([]taskEvent, error) {
	d := hr.Decision
	switch d {
	case DecisionApproved, DecisionChangesRequested, DecisionPending, DecisionNotRequired:
	default:
		s.log.WarnContext(ctx, "host review decision unknown; taken as pending", "task", t.ID, "decision", d)
		d = DecisionPending
	}
	t.Facts.HostDecision = d
	known, err := tx.Reviews(ctx, *t.SubmissionID)
	if err != nil {
		return nil, fmt.Errorf("reviews of task %s: %w", t.ID, err)
	}
	seen := make(map[string]bool, len(known))
	for _, r := range known {
		if r.HostID != "" {
			seen[r.HostID] = true
		}
	}
	now := s.now()
	var events []taskEvent
	for _, hr := range hr.Reviews {
		if hr.ID == "" || seen[hr.ID] || !hr.Outcome.Valid() {
			continue
		}
		seen[hr.ID] = true
		r := Review{ID: id.New("rev_"), Reviewer: Actor{ID: hr.Reviewer, Role: RoleReviewer}, Outcome: hr.Outcome, Body: hr.Body,
			SubmittedAt: NewTimestamp(hr.SubmittedAt), TaskID: t.ID, SubmissionID: *t.SubmissionID, HeadSHA: lowerHex(hr.CommitSHA), HostID: hr.ID}
		if hr.SubmittedAt.IsZero() {
			r.SubmittedAt = now
		}
		if err := tx.CreateReview(ctx, r); err != nil {
			return nil, fmt.Errorf("record host review %s of task %s: %w", hr.ID, t.ID, err)
		}
		if !quiet {
			events = append(events, taskEvent{typ: EventTaskReviewed, actor: r.Reviewer, reviewOutcome: r.Outcome,
				summary: fmt.Sprintf("Task %s reviewed by %s at the code host: %s", t.Identifier, hr.Reviewer, hr.Outcome)})
		}
	}
	return events, nil
}

// schedule says when the reconciler reads a task next, after a reading it
// claimed the task for: at next, unless the task's ReconcileAt is no longer
// from, the claim's lease (a webhook made it due again meanwhile). The
// zero schedule leaves ReconcileAt alone.
type schedule struct {
	from, next Timestamp
}

// apply sets t's next reading.
func (sc schedule) apply(t *Task) {
	if !sc.next.IsZero() && t.ReconcileAt.Equal(sc.from.Time) {
		t.ReconcileAt = sc.next
	}
}

// applyObservation applies what a reading of the host found to the task,
// if it is still in review on the pull request read (or back in progress
// because the host closed it), and emits the events it causes:
// task.updated when its head, base, pull request state, CI, review
// decision, mergeability or status changed, task.reviewed for each new
// host review. A pull request merged by hand makes the task done; one
// closed without merging sends it back to in_progress, and one reopened
// puts it back in review (see settle). ds are the records of the webhook
// delivery recorded in the same transaction, if any. It reports whether
// the host hinted at a change after the reading began (see
// observation.predates): the task is then left due for a reading in full,
// which a caller that reads on its own makes at once.
func (s *Service) applyObservation(ctx context.Context, taskID string, ref PullRequestRef, obs observation, h hint, sc schedule) (again bool, err error) {
	_, err = s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		again = false
		for _, d := range h.deliveries {
			d.ReceivedAt = s.clock.Now()
			if err := tx.RecordProviderDelivery(ctx, d); err != nil {
				return taskEvent{}, err // ErrConflict: a concurrent delivery of the same event applied it
			}
		}
		if t.PullRequestRef() != ref || (t.Status != StatusInReview && !closedAtHost(t)) {
			return taskEvent{}, nil // resubmitted, started or done meanwhile
		}
		before := *t
		if h.hinted {
			// The reading began after the hint: it shows what the hint
			// announced.
			stale := obs.predates(t)
			t.Facts.Hints++
			if !stale {
				obs.hints = t.Facts.Hints
			}
		}
		if t.Status != StatusInReview && (obs.unchanged || obs.pr.State == PullRequestClosed) {
			// Still closed: the task stays as its agent has it, and only
			// the time of the reading moves.
			obs = observation{unchanged: true, version: obs.version}
		}
		reviewed, err := s.applyFacts(ctx, tx, t, obs, false)
		if err != nil {
			return taskEvent{}, err
		}
		settle(t, before.Facts.PRState)
		if again = obs.predates(t) && readable(t); again {
			t.ReconcileAt = s.now()
		} else {
			sc.apply(t)
		}
		s.setActions(t)
		changed := changedFields(&before, t)
		if len(reviewed) == 0 && len(changed) == 0 {
			// Nothing a client sees changed: keep the facts' times, quietly.
			if err := tx.UpdateTask(ctx, *t); err != nil {
				return taskEvent{}, fmt.Errorf("update task %s: %w", t.ID, err)
			}
			return taskEvent{}, nil
		}
		var events []taskEvent
		if onlyReview(changed) && len(reviewed) > 0 {
			events = reviewed
		} else {
			events = append([]taskEvent{{typ: EventTaskUpdated, summary: factSummary(&before, t, changed)}}, reviewed...)
		}
		ev := events[0]
		ev.extra = events[1:]
		return ev, nil
	})
	if len(h.deliveries) > 0 && errors.Is(err, ErrConflict) {
		return false, nil
	}
	return again, err
}

// hint is the host's hint that a reading applies: a webhook delivery.
type hint struct {
	// hinted says the reading was made for a hint, which it counts
	// (Facts.Hints).
	hinted bool
	// deliveries are the records of its delivery, recorded in the
	// transaction that applies the reading, or nil.
	deliveries []ProviderDelivery
}

// onlyReview reports whether changed names nothing but what a review
// changes.
func onlyReview(changed []string) bool {
	for _, f := range changed {
		if f != "reviewDecision" && f != "availableActions" {
			return false
		}
	}
	return true
}

// factSummary says in words what the host changed.
func factSummary(before, t *Task, changed []string) string {
	n := *t.PRNumber
	switch {
	case t.Status == StatusDone:
		return fmt.Sprintf("Pull request #%d of task %s was merged at the code host", n, t.Identifier)
	case t.Status == StatusInProgress:
		return fmt.Sprintf("Pull request #%d of task %s was closed at the code host; submit again", n, t.Identifier)
	case before.Status == StatusInProgress:
		return fmt.Sprintf("Pull request #%d of task %s was reopened at the code host; the task is in review again", n, t.Identifier)
	case slices.Contains(changed, "headSha"):
		return fmt.Sprintf("New commits on pull request #%d of task %s: head is %s", n, t.Identifier, *t.HeadSHA)
	case slices.Contains(changed, "mergeable") && t.Facts.Mergeable == MergeabilityConflicting:
		return fmt.Sprintf("Pull request #%d of task %s conflicts with its base branch %s; start, rebase it and submit again", n, t.Identifier, deref(t.BaseBranch))
	case slices.Contains(changed, "mergeable") && t.Facts.Mergeable == MergeabilityBehind:
		return fmt.Sprintf("Pull request #%d of task %s is behind its base branch %s, which must be up to date to merge; start, rebase it and submit again", n, t.Identifier, deref(t.BaseBranch))
	case slices.Contains(changed, "baseBranch"):
		return fmt.Sprintf("Pull request #%d of task %s now merges into %s", n, t.Identifier, deref(t.BaseBranch))
	case slices.Contains(changed, "draft") && t.Facts.Draft:
		return fmt.Sprintf("Pull request #%d of task %s is a draft; it cannot be shipped until it is marked ready", n, t.Identifier)
	case slices.Contains(changed, "draft"):
		return fmt.Sprintf("Pull request #%d of task %s is ready for review", n, t.Identifier)
	case slices.Contains(changed, "ciStatus"):
		return fmt.Sprintf("CI of task %s is %s", t.Identifier, t.CI())
	}
	return fmt.Sprintf("Task %s changed at the code host: %v", t.Identifier, changed)
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
