package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/id"
)

// This file is how the Service learns what happens at a code host: a push
// to a pull request's branch, a review, CI turning green or red, a merge
// or close by hand. Webhooks ([Service.ApplyProviderEvent]) make it learn
// at once; the reconciler reads the host again for every task in review
// on a schedule, so that a lost webhook delays a fact but never loses it.
// Both read the host through the task's adapter and apply what they read
// with applyObservation, in one transaction with the events it causes.

// observation is what one reading of the host found for a task.
type observation struct {
	pr PullRequest
	// ci is the CI provider's report of the head, or nil when there is no
	// provider or it failed (ciFailed).
	ci       *CIReport
	ciFailed bool
	// reviews is the host's review state, or nil when the host does not
	// decide or failed.
	reviews *HostReviews
}

// observe reads the pull request of t and its CI and review state, all
// within ProviderTimeout. CI and reviews are read at the stored head beside
// the pull request, since most readings find the head where it was; when
// it moved, they are read again at the new head.
func (s *Service) observe(ctx context.Context, adapter ProviderAdapter, t *Task) (observation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	ref := t.pullRequestRef()
	var (
		early observation
		wg    sync.WaitGroup
	)
	if t.HeadSHA != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			early = s.observeAt(ctx, adapter, t, ref, *t.HeadSHA)
		}()
	}
	pr, err := adapter.PullRequest(ctx, ref)
	wg.Wait()
	if err != nil {
		return observation{}, fmt.Errorf("read pull request %s: %w", ref, err)
	}
	if !shaRE.MatchString(pr.HeadSHA) {
		return observation{}, fmt.Errorf("read pull request %s: the adapter returned head %q, not a 40-hex-digit SHA", ref, pr.HeadSHA)
	}
	pr.HeadSHA = lowerHex(pr.HeadSHA)
	switch {
	case pr.State != PullRequestOpen:
		return observation{pr: pr}, nil // nothing more will be merged or reviewed
	case t.HeadSHA != nil && *t.HeadSHA == pr.HeadSHA:
		early.pr = pr
		return early, nil
	}
	return s.observeHead(ctx, adapter, t, pr), nil
}

// observeHead reads the CI and review state of pr's head for t, at once.
func (s *Service) observeHead(ctx context.Context, adapter ProviderAdapter, t *Task, pr PullRequest) observation {
	if pr.State != PullRequestOpen {
		return observation{pr: pr}
	}
	obs := s.observeAt(ctx, adapter, t, pr.PullRequestRef, pr.HeadSHA)
	obs.pr = pr
	return obs
}

// observeAt reads the CI and review state of commit head of pull request
// ref for t, both at once. Failures are logged and leave the part unknown.
func (s *Service) observeAt(ctx context.Context, adapter ProviderAdapter, t *Task, ref PullRequestRef, head string) observation {
	var obs observation
	var wg sync.WaitGroup
	if ci := s.ciFor(t); ci != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := ci.Checks(ctx, CIQuery{Task: *t, PullRequest: ref, HeadSHA: head})
			if err != nil {
				if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
					s.log.WarnContext(ctx, "CI provider failed; the task's CI stays as last known", "provider", ci.Name(), "task", t.ID, "err", err)
				}
				obs.ciFailed = true
				return
			}
			obs.ci = &rep
		}()
	}
	if decider, ok := adapter.(ReviewDecider); ok && t.ReviewPolicy == PolicyGitHubRules {
		hr, err := decider.ReviewDecision(ctx, ReviewQuery{PullRequest: ref, HeadSHA: head})
		if err != nil {
			s.log.WarnContext(ctx, "host review decision failed; the task's decision stays as last known", "task", t.ID, "err", err)
		} else {
			obs.reviews = &hr
		}
	}
	wg.Wait()
	return obs
}

// applyFacts writes what obs found into t (and the checks and reviews tx
// holds), and returns a task.reviewed event for each host review not seen
// before. quiet records host reviews without events (a submission takes
// over the reviews its pull request already has).
func (s *Service) applyFacts(ctx context.Context, tx Tx, t *Task, obs observation, quiet bool) ([]taskEvent, error) {
	now := s.now()
	head := obs.pr.HeadSHA
	headChanged := t.HeadSHA == nil || *t.HeadSHA != head
	if headChanged {
		t.HeadSHA = &head
	}
	t.Facts.PRState = obs.pr.State
	t.Facts.MergeCommitSHA = obs.pr.MergeCommitSHA
	t.Facts.DismissesStaleReviews = obs.pr.DismissesStaleReviews
	t.Facts.CheckedAt = &now
	switch {
	case obs.ci != nil:
		checks := make([]Check, 0, len(obs.ci.Checks))
		for _, c := range obs.ci.Checks {
			if !c.Status.Valid() || c.Name == "" {
				return nil, fmt.Errorf("task %s: the CI provider reported check %q with status %q", t.ID, c.Name, c.Status)
			}
			checks = append(checks, Check{Name: c.Name, Status: c.Status, URL: optional(c.URL), Source: SourceProvider, TaskID: t.ID, HeadSHA: head, UpdatedAt: now})
		}
		if err := tx.ReplaceChecks(ctx, t.ID, head, SourceProvider, checks); err != nil {
			return nil, fmt.Errorf("record provider checks of task %s: %w", t.ID, err)
		}
		t.Facts.CIPending, t.Facts.CICheckedAt = obs.ci.Pending, &now
	case obs.ciFailed && headChanged:
		t.Facts.CIPending, t.Facts.CICheckedAt = true, nil // the new head's CI is unknown
	}
	if err := s.refreshCI(ctx, tx, t); err != nil {
		return nil, err
	}
	var events []taskEvent
	if obs.reviews != nil && t.SubmissionID != nil {
		d := obs.reviews.Decision
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
		for _, hr := range obs.reviews.Reviews {
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
	}
	if headChanged {
		// Approvals posted for an earlier head may no longer count.
		if err := s.redecide(ctx, tx, t); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// applyObservation applies what a reading of the host found to the task,
// if it is still in review on the pull request read, and emits the events
// it causes: task.updated when its head, pull request state, CI, review
// decision or status changed, task.reviewed for each new host review. A
// pull request merged by hand makes the task done; one closed without
// merging sends it back to in_progress (see settle).
func (s *Service) applyObservation(ctx context.Context, taskID string, ref PullRequestRef, obs observation, d *ProviderDelivery) error {
	_, err := s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if d != nil {
			d.ReceivedAt = s.clock.Now()
			if err := tx.RecordProviderDelivery(ctx, *d); err != nil {
				return taskEvent{}, err // ErrConflict: a concurrent delivery of the same event applied it
			}
		}
		if t.Status != StatusInReview || t.pullRequestRef() != ref {
			return taskEvent{}, nil // resubmitted, started or done meanwhile
		}
		before := *t
		reviewed, err := s.applyFacts(ctx, tx, t, obs, false)
		if err != nil {
			return taskEvent{}, err
		}
		settle(t)
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
			events = append([]taskEvent{{typ: EventTaskUpdated, summary: factSummary(t, changed)}}, reviewed...)
		}
		ev := events[0]
		ev.extra = events[1:]
		return ev, nil
	})
	if d != nil && errors.Is(err, ErrConflict) {
		return nil
	}
	return err
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
func factSummary(t *Task, changed []string) string {
	switch {
	case t.Status == StatusDone:
		return fmt.Sprintf("Pull request #%d of task %s was merged at the code host", *t.PRNumber, t.Identifier)
	case t.Status == StatusInProgress:
		return fmt.Sprintf("Pull request #%d of task %s was closed at the code host; submit again", *t.PRNumber, t.Identifier)
	case slices.Contains(changed, "headSha"):
		return fmt.Sprintf("New commits on pull request #%d of task %s: head is %s", *t.PRNumber, t.Identifier, *t.HeadSHA)
	case slices.Contains(changed, "ciStatus"):
		return fmt.Sprintf("CI of task %s is %s", t.Identifier, ciOf(t))
	}
	return fmt.Sprintf("Task %s changed at the code host: %v", t.Identifier, changed)
}

// Reconcile reads the code host for a task in review now and applies what
// it finds, as the reconciler does on its schedule. It returns a
// *ProviderError when the host cannot be read; a task not in review is
// left alone.
func (s *Service) Reconcile(ctx context.Context, taskID string) error {
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return err
	}
	return s.reconcileTask(ctx, t)
}

// reconcileTask reads the host for t and applies what it finds.
func (s *Service) reconcileTask(ctx context.Context, t Task) error {
	return s.reconcileTaskFor(ctx, t, nil)
}

// reconcileTaskFor is reconcileTask that also records the delivery d,
// when not nil, in the transaction that applies what it found.
func (s *Service) reconcileTaskFor(ctx context.Context, t Task, d *ProviderDelivery) error {
	if t.Status != StatusInReview || t.PRNumber == nil {
		return nil
	}
	adapter, err := s.adapterFor(&t, t.SubmissionMode)
	if err != nil {
		return err
	}
	obs, err := s.observe(ctx, adapter, &t)
	if err != nil {
		return s.providerError(ctx, "read the pull request", err)
	}
	return s.applyObservation(ctx, t.ID, t.pullRequestRef(), obs, d)
}

// ApplyProviderEvent applies an event a code host reported (through an
// adapter's [WebhookIntake]). The event is a hint: the Service re-reads
// every task in review on the pull request (or head commit) it names
// through the task's adapter and applies what it reads, emitting events as
// for any change. A delivery whose ID was applied before is ignored. When
// the host cannot be read, the tasks are marked to be reconciled at once
// and an error is returned, so that the host may deliver again.
func (s *Service) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) error {
	if ev.DeliveryID != "" {
		_, err := s.store.ProviderDelivery(ctx, ev.Source, ev.DeliveryID)
		if err == nil {
			return nil // applied before
		}
		if !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("provider delivery %s: %w", ev.DeliveryID, err)
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
	var delivery *ProviderDelivery
	if ev.DeliveryID != "" && len(tasks) == 1 {
		// Recorded with the change it causes: one write per delivery.
		delivery = &ProviderDelivery{Source: ev.Source, ID: ev.DeliveryID}
	}
	var errs []error
	for _, t := range tasks {
		if err := s.reconcileTaskFor(ctx, t, delivery); err != nil {
			errs = append(errs, fmt.Errorf("task %s: %w", t.ID, err))
			s.reconcileSoon(context.WithoutCancel(ctx), t.ID)
		}
	}
	if err := errors.Join(errs...); err != nil || delivery != nil {
		return err
	}
	return s.recordDelivery(ctx, ev)
}

// tasksOf returns the tasks in review that a provider event concerns: those
// of the pull request it names, or else those whose head is its commit.
func (s *Service) tasksOf(ctx context.Context, ev ProviderEvent) ([]Task, error) {
	f := TaskFilter{Statuses: []Status{StatusInReview}, PullRequest: ev.PullRequest, Limit: 100}
	switch {
	case ev.PullRequest.Number > 0:
	case ev.HeadSHA != "" && shaRE.MatchString(ev.HeadSHA):
		f.PullRequest, f.HeadSHA = PullRequestRef{}, lowerHex(ev.HeadSHA)
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
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// QueueProviderEvent takes a provider event durably and returns at once:
// in one transaction it records the delivery (a delivery queued or applied
// before is ignored) and makes the tasks the event concerns due for
// reconciliation now; the reconciler then reads them in the background,
// [Config.ReconcileConcurrency] at a time. A webhook is so answered after
// one Store write, and a burst of deliveries about one pull request costs
// the host one reading when they arrive before it starts. It needs a
// started Service with reconciliation enabled; otherwise it applies the
// event as [Service.ApplyProviderEvent] does.
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
		if ev.DeliveryID != "" {
			err := tx.RecordProviderDelivery(ctx, ProviderDelivery{Source: ev.Source, ID: ev.DeliveryID, ReceivedAt: s.clock.Now()})
			if err != nil {
				return err
			}
		}
		now := s.now()
		for _, t := range tasks {
			cur, err := tx.Task(ctx, t.ID)
			if err != nil {
				return fmt.Errorf("get task %s: %w", t.ID, err)
			}
			if cur.Status != StatusInReview || cur.pullRequestRef() != t.pullRequestRef() || !cur.ReconcileAt.After(now.Time) {
				continue // left review, or already due
			}
			cur.ReconcileAt = now
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
	s.reconcile.wakeUp()
	return nil
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
	if ev.DeliveryID == "" {
		return nil
	}
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		return tx.RecordProviderDelivery(ctx, ProviderDelivery{Source: ev.Source, ID: ev.DeliveryID, ReceivedAt: s.clock.Now()})
	})
	if errors.Is(err, ErrConflict) {
		return nil // applied by a concurrent delivery of the same event
	}
	return err
}

// reconcileSoon makes a task in review due for reconciliation now.
func (s *Service) reconcileSoon(ctx context.Context, taskID string) {
	err := s.store.Update(ctx, func(tx Tx) error {
		t, err := tx.Task(ctx, taskID)
		if err != nil || t.Status != StatusInReview {
			return err
		}
		t.ReconcileAt = s.now()
		return tx.UpdateTask(ctx, t)
	})
	if err != nil {
		s.log.WarnContext(ctx, "schedule a reconciliation; the task is read again at its usual time", "task", taskID, "err", err)
	}
	s.reconcile.wakeUp()
}

// firstReconcile returns when a task that entered review at now is first
// reconciled: at a random point of the second half of the interval, so
// that the readings of many tasks spread out.
func (s *Service) firstReconcile(now time.Time) Timestamp {
	iv := s.cfg.ReconcileInterval
	if iv <= 0 {
		return NewTimestamp(now)
	}
	return NewTimestamp(now.Add(iv/2 + rand.N(iv/2+1)))
}

// reconciler reads the host again for every task in review whose
// ReconcileAt has come, ReconcileConcurrency at a time. Claims go through
// the Store, so Services sharing one reconcile each task once per interval.
type reconciler struct {
	s    *Service
	wake chan struct{}
}

func newReconciler(s *Service) *reconciler {
	return &reconciler{s: s, wake: make(chan struct{}, 1)}
}

// wakeUp makes the reconciler look for due tasks now.
func (r *reconciler) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run reconciles until ctx ends.
func (r *reconciler) run(ctx context.Context) {
	s := r.s
	slots := make(chan struct{}, s.cfg.ReconcileConcurrency)
	for {
		if free := cap(slots) - len(slots); free > 0 {
			tasks, err := r.claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				s.log.Error("claim tasks to reconcile", "err", err)
			}
			for _, t := range tasks {
				slots <- struct{}{}
				s.goBackground(func() {
					defer func() {
						<-slots
						r.wakeUp()
					}()
					if err := s.reconcileTask(ctx, t); err != nil && ctx.Err() == nil {
						s.log.Warn("reconcile task; it is read again next interval", "task", t.ID, "err", err)
					}
				})
			}
			if len(tasks) == free {
				continue // there may be more
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-s.clock.After(s.cfg.ReconcilePollInterval):
		}
	}
}

// claim claims up to limit due tasks until their next reading.
func (r *reconciler) claim(ctx context.Context, limit int) ([]Task, error) {
	s := r.s
	var claimed []Task
	// A claim lost in a power cut only makes the task due again.
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		now := s.clock.Now()
		tasks, err := tx.ClaimReconciliations(ctx, ClaimReconciliationsParams{Now: now, Until: now.Add(s.cfg.ReconcileInterval), Limit: limit})
		claimed = tasks
		return err
	})
	return claimed, err
}
