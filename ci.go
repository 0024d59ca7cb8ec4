package lifecycle

import (
	"context"
	"fmt"
	"net/http"
	"regexp"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

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

// refreshCI recomputes t's stored CI state from the checks tx holds for
// its head commit: reported ones, provider ones, and self-reported ones
// when the task's CI provider trusts them.
func (s *Service) refreshCI(ctx context.Context, tx Tx, t *Task) error {
	if t.HeadSHA == nil {
		t.Facts.CI = CINone
		return nil
	}
	stored, err := tx.Checks(ctx, t.ID, *t.HeadSHA)
	if err != nil {
		return fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	t.Facts.CI = overallOf(countedChecks(stored, s.ciFor(t)), t.Facts.CIPending)
	if t.Facts.CI == CIFailed {
		// Announced once per head commit (task.ci_failed, see
		// changeTaskRecorded).
		t.Facts.CIFailedHead = *t.HeadSHA
	}
	return s.markCIDue(ctx, tx, t, stored)
}

// CIStatus returns the CI state of a task's head commit, as last learned:
// it never calls the CI provider (the reconciler and provider events keep
// it current). CheckedAt says when the provider was last asked.
func (s *Service) CIStatus(ctx context.Context, taskID string) (CIStatus, []Action, error) {
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return CIStatus{}, nil, err
	}
	st, err := s.ciStatusOf(ctx, &t)
	if err != nil {
		return CIStatus{}, nil, err
	}
	return st, t.AvailableActions, nil
}

// ciStatusOf returns the CI state of t's head commit: its stored facts and
// checks.
func (s *Service) ciStatusOf(ctx context.Context, t *Task) (CIStatus, error) {
	st := CIStatus{Overall: t.CI(), HeadSHA: t.HeadSHA, Checks: []Check{}, CheckedAt: t.Facts.CICheckedAt, Stale: httpapi.NonNil(t.Facts.StaleChecks)}
	if t.HeadSHA == nil {
		return st, nil
	}
	if ci := s.ciFor(t); ci != nil {
		name := ci.Name()
		st.Provider = &name
	}
	stored, err := s.store.Checks(ctx, t.ID, *t.HeadSHA)
	if err != nil {
		return CIStatus{}, fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	if err := s.attachFailures(ctx, t.ID, *t.HeadSHA, stored); err != nil {
		return CIStatus{}, err
	}
	st.Checks = httpapi.NonNil(stored)
	return st, nil
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
	var v lifecycletype.Validator
	if !shaRE.MatchString(p.HeadSHA) {
		v.Add("headSha", "must be a full 40-character hex commit SHA")
	}
	if len(p.Checks) == 0 {
		v.Add("checks", "must list at least one check")
	}
	if len(p.Checks) > maxChecks {
		v.Add("checks", fmt.Sprintf("at most %d entries", maxChecks))
	}
	for i, c := range p.Checks {
		validateCheck(&v, fmt.Sprintf("checks[%d]", i), c.Name, c.Status)
		if c.URL != "" && !validURL(c.URL) {
			v.Add(fmt.Sprintf("checks[%d].url", i), "must be an absolute http or https URL")
		}
		validateFailure(&v, fmt.Sprintf("checks[%d]", i), c.Failure, c.Status)
	}
	return v.Err()
}

// validateCheck checks the name and status of one check.
func validateCheck(v *lifecycletype.Validator, field, name string, st CheckStatus) {
	if name == "" {
		v.Add(field+".name", "is required")
	}
	v.MaxLen(field+".name", name, 200)
	if !st.Valid() {
		v.Add(field+".status", "must be one of passed, failed, running, skipped")
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
	_, err := s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		now := s.now()
		checks := make([]Check, 0, len(p.Checks))
		for _, c := range p.Checks {
			var url *string
			if c.URL != "" {
				url = &c.URL
			}
			checks = append(checks, Check{TaskID: t.ID, HeadSHA: sha, Source: SourceReported, Name: c.Name, Status: c.Status, URL: url, Failure: c.Failure, UpdatedAt: now})
		}
		if err := tx.PutChecks(ctx, PutChecksParams{TaskID: t.ID, HeadSHA: sha, Source: SourceReported, Checks: checks}); err != nil {
			return taskEvent{}, fmt.Errorf("record checks: %w", err)
		}
		if err := s.putCIFailures(ctx, tx, t.ID, sha, checks, true); err != nil {
			return taskEvent{}, err
		}
		before := t.CI()
		if err := s.refreshCI(ctx, tx, t); err != nil {
			return taskEvent{}, err
		}
		if t.CI() == before {
			return taskEvent{activity: true, actor: p.Actor}, nil // the task's CI state did not change; a report is activity all the same
		}
		return taskEvent{typ: EventTaskUpdated, actor: p.Actor,
			summary: fmt.Sprintf("CI of task %s is %s", t.Identifier, t.CI())}, nil
	})
	if err != nil {
		return CIStatus{}, nil, err
	}
	return s.CIStatus(ctx, taskID)
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
	httpapi.WriteJSON(w, http.StatusOK, ciEnvelope{st, acts})
	return nil
}

func (s *Service) handleReportChecks(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params ReportChecksParams
	if err := httpapi.DecodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Actor = p.Actor
	st, acts, err := s.ReportChecks(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, ciEnvelope{st, acts})
	return nil
}
