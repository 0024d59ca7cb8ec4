package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
)

// CIOverall is the combined state of a commit's CI checks.
type CIOverall string

// The overall CI states.
const (
	CIPassed  CIOverall = "passed"
	CIFailed  CIOverall = "failed"
	CIRunning CIOverall = "running"
	CIPending CIOverall = "pending"
	CINone    CIOverall = "none"
)

// CIStatus is the CI state of a task's head commit, as served by GET
// /tasks/{id}/ci-status.
type CIStatus struct {
	Overall  CIOverall `json:"overall"`
	HeadSHA  *string   `json:"headSha"`
	Provider *string   `json:"provider"`
	Checks   []Check   `json:"checks"`
}

// overallOf combines checks: failed if any failed; else running if any is
// running; else pending if the provider awaits CI; else passed if at least
// one passed (the rest passed or skipped); else none. Skipped checks carry
// no verdict: a commit whose only checks were skipped has none.
func overallOf(checks []Check, pending bool) CIOverall {
	var passed, running bool
	for _, c := range checks {
		switch c.Status {
		case CheckFailed:
			return CIFailed
		case CheckRunning:
			running = true
		case CheckPassed:
			passed = true
		}
	}
	switch {
	case running:
		return CIRunning
	case pending:
		return CIPending
	case passed:
		return CIPassed
	}
	return CINone
}

// countedChecks keeps the stored checks that count toward the overall
// state: reported ones always, self-reported ones when the task's CI
// provider trusts them.
func countedChecks(stored []Check, ci CIProvider) []Check {
	trust := ci != nil && ci.CountsSelfReported()
	out := make([]Check, 0, len(stored))
	for _, c := range stored {
		if c.Source != SourceSelfReported || trust {
			out = append(out, c)
		}
	}
	return out
}

// facts is what decides the actions of a task in review.
type facts struct {
	ci       CIOverall
	decision ReviewDecision
}

// actionsOf returns the actions available on t given f.
func actionsOf(t *Task, f facts) []Action {
	return actionsFor(t.Status, f.ci == CIPassed && f.decision.allowsShip() && t.ActiveShipID == "", t.ReworkRequested)
}

// recordedDecision is the review decision the Store holds for t.
func recordedDecision(t *Task) ReviewDecision {
	switch {
	case t.ReviewPolicy == PolicyNeverRequire:
		return DecisionNotRequired
	case t.ReviewDecision == "":
		return DecisionPending
	}
	return t.ReviewDecision
}

// txFacts computes the facts of t from what the transaction holds: the
// recorded review decision and the stored checks of its head commit.
func (s *Service) txFacts(ctx context.Context, tx Tx, t *Task) (facts, error) {
	if t.Status != StatusInReview || t.HeadSHA == nil {
		return facts{ci: CINone, decision: recordedDecision(t)}, nil
	}
	stored, err := tx.Checks(ctx, t.ID, *t.HeadSHA)
	if err != nil {
		return facts{}, fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	return facts{ci: overallOf(countedChecks(stored, s.ciFor(t)), false), decision: recordedDecision(t)}, nil
}

// txActions returns the actions of t as the transaction knows them.
func (s *Service) txActions(ctx context.Context, tx Tx, t *Task) ([]Action, error) {
	f, err := s.txFacts(ctx, tx, t)
	if err != nil {
		return nil, err
	}
	return actionsOf(t, f), nil
}

// liveActions returns the actions of t for a read: a task in review also
// consults its CI provider and, under github_rules, the host's decision.
func (s *Service) liveActions(ctx context.Context, t *Task) ([]Action, error) {
	if t.Status != StatusInReview {
		return actionsFor(t.Status, false, false), nil
	}
	ci, decision, err := s.liveReview(ctx, t)
	if err != nil {
		return nil, err
	}
	return actionsOf(t, facts{ci: ci.Overall, decision: decision}), nil
}

// liveReview returns the CI status and review decision of t, asking its
// CI provider and host once each.
func (s *Service) liveReview(ctx context.Context, t *Task) (CIStatus, ReviewDecision, error) {
	ci, err := s.ciStatus(ctx, t)
	if err != nil {
		return CIStatus{}, "", err
	}
	return ci, s.liveDecision(ctx, t), nil
}

// readTask returns a stored task without computing its actions.
func (s *Service) readTask(ctx context.Context, taskID string) (Task, error) {
	if !validTaskID(taskID) {
		return Task{}, notFound("task", taskID)
	}
	t, err := s.store.Task(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return Task{}, notFound("task", taskID)
	}
	if err != nil {
		return Task{}, fmt.Errorf("get task %s: %w", taskID, err)
	}
	return t, nil
}

// ciStatus returns the CI state of t's head commit: the stored checks and
// the provider's. A provider that fails is logged and makes the state
// pending, since what it would say is unknown.
func (s *Service) ciStatus(ctx context.Context, t *Task) (CIStatus, error) {
	st := CIStatus{Overall: CINone, HeadSHA: t.HeadSHA, Checks: []Check{}}
	if t.HeadSHA == nil {
		return st, nil
	}
	stored, err := s.store.Checks(ctx, t.ID, *t.HeadSHA)
	if err != nil {
		return st, fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	ci := s.ciFor(t)
	checks := countedChecks(stored, ci)
	pending := false
	if ci != nil {
		name := ci.Name()
		st.Provider = &name
		rep, err := ci.Checks(ctx, CIQuery{Task: *t, PullRequest: t.pullRequestRef(), HeadSHA: *t.HeadSHA})
		switch {
		case err != nil && ctx.Err() != nil:
			return st, ctx.Err()
		case err != nil:
			s.log.WarnContext(ctx, "CI provider failed; CI status is pending", "provider", name, "task", t.ID, "err", err)
			pending = true
		default:
			pending = rep.Pending
			for _, c := range rep.Checks {
				var url *string
				if c.URL != "" {
					url = &c.URL
				}
				checks = append(checks, Check{Name: c.Name, Status: c.Status, URL: url, Source: SourceProvider, TaskID: t.ID, HeadSHA: *t.HeadSHA})
			}
		}
	}
	// Show every stored check, counted or not, but decide on the counted ones.
	st.Overall = overallOf(checks, pending)
	st.Checks = append(st.Checks, stored...)
	for _, c := range checks {
		if c.Source == SourceProvider {
			st.Checks = append(st.Checks, c)
		}
	}
	return st, nil
}

// CIStatus returns the CI state of a task's head commit.
func (s *Service) CIStatus(ctx context.Context, taskID string) (CIStatus, []Action, error) {
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return CIStatus{}, nil, err
	}
	ci, decision, err := s.liveReview(ctx, &t)
	if err != nil {
		return CIStatus{}, nil, err
	}
	return ci, actionsOf(&t, facts{ci: ci.Overall, decision: decision}), nil
}

// ReportChecksParams reports CI checks of a commit. Its JSON form is the
// body of POST /tasks/{id}/checks.
type ReportChecksParams struct {
	// HeadSHA is the commit the checks ran on: 40 hex digits. Required.
	HeadSHA string `json:"headSha"`
	// Checks are the results; at least one, at most 100.
	Checks []CICheck `json:"checks"`
	// Actor reports.
	Actor Actor `json:"-"`
}

var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// maxChecks bounds the checks of one report or submission.
const maxChecks = 100

func (p *ReportChecksParams) validate() error {
	var v validator
	if !shaRE.MatchString(p.HeadSHA) {
		v.add("headSha", "must be a full 40-character hex commit SHA")
	}
	if len(p.Checks) == 0 {
		v.add("checks", "must list at least one check")
	}
	if len(p.Checks) > maxChecks {
		v.add("checks", fmt.Sprintf("at most %d entries", maxChecks))
	}
	for i, c := range p.Checks {
		validateCheck(&v, fmt.Sprintf("checks[%d]", i), c.Name, c.Status)
		if c.URL != "" && !validURL(c.URL) {
			v.add(fmt.Sprintf("checks[%d].url", i), "must be an absolute http or https URL")
		}
	}
	return v.err()
}

// validateCheck checks the name and status of one check.
func validateCheck(v *validator, field, name string, st CheckStatus) {
	if name == "" {
		v.add(field+".name", "is required")
	}
	v.maxLen(field+".name", name, 200)
	if !st.Valid() {
		v.add(field+".status", "must be one of passed, failed, running, skipped")
	}
}

// ReportChecks records CI results for a commit of a task. When they change
// what the task may do next (ship becomes available, say), the task's
// version is bumped and task.updated is emitted.
func (s *Service) ReportChecks(ctx context.Context, taskID string, p ReportChecksParams) (CIStatus, []Action, error) {
	if err := p.validate(); err != nil {
		return CIStatus{}, nil, err
	}
	sha := lowerHex(p.HeadSHA)
	t, err := s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		now := s.now()
		for _, c := range p.Checks {
			var url *string
			if c.URL != "" {
				url = &c.URL
			}
			err := tx.PutCheck(ctx, Check{TaskID: t.ID, HeadSHA: sha, Source: SourceReported, Name: c.Name, Status: c.Status, URL: url, UpdatedAt: now})
			if err != nil {
				return taskEvent{}, fmt.Errorf("record check %s: %w", c.Name, err)
			}
		}
		after, err := s.txActions(ctx, tx, t)
		if err != nil {
			return taskEvent{}, err
		}
		if slices.Equal(after, t.AvailableActions) {
			return taskEvent{}, nil // nothing the task can do changed
		}
		return taskEvent{typ: EventTaskUpdated, actor: p.Actor,
			summary: fmt.Sprintf("CI of task %s changed its next steps to %v", t.Identifier, after)}, nil
	})
	if err != nil {
		return CIStatus{}, nil, err
	}
	ci, decision, err := s.liveReview(ctx, &t)
	if err != nil {
		return CIStatus{}, nil, err
	}
	return ci, actionsOf(&t, facts{ci: ci.Overall, decision: decision}), nil
}

// lowerHex lower-cases a hex string.
func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ciEnvelope is the body of the CI status endpoints.
type ciEnvelope struct {
	Data             CIStatus `json:"data"`
	AvailableActions []Action `json:"availableActions"`
}

func (s *Service) handleCIStatus(w http.ResponseWriter, r *http.Request, p *Principal) error {
	st, acts, err := s.CIStatus(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ciEnvelope{st, acts})
	return nil
}

func (s *Service) handleReportChecks(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params ReportChecksParams
	if err := decodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Actor = p.Actor
	st, acts, err := s.ReportChecks(requestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ciEnvelope{st, acts})
	return nil
}
