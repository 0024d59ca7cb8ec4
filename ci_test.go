package lifecycle_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

func TestCIStatusSources(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	// The CI status is compared as a whole JSON object: the nulls, the empty
	// lists and the timestamps' form are part of what is checked.
	none := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK)
	if diff := cmp.Diff(map[string]any{"overall": "none", "headSha": nil, "provider": nil, "checks": []any{}, "checkedAt": nil, "stale": []any{}}, none["data"]); diff != "" {
		t.Errorf("CI status before any submission (-want +got):\n%s", diff)
	}
	sha := headOf(t, e.submitOK(id, "ci-key-123", apitest.SubmitBody()))
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckRunning, URL: "https://ci.example.com/b"}},
		Stale: []lifecycle.StaleCheck{{Name: "Codecov", Since: lifecycle.NewTimestamp(apitest.Epoch.Add(-time.Hour))}}})
	// Reads answer from what was learned; the reconciler learns what changed.
	if o := e.ciOverall(id); o != "none" {
		t.Errorf("overall before the host was read again = %v, want none (what submit learned)", o)
	}
	e.Clock.Advance(time.Second)
	e.reconcile(id)

	got := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK)
	want := map[string]any{
		"overall":   "running",
		"headSha":   sha,
		"provider":  "memory",
		"checkedAt": "2026-11-21T10:00:01.000Z",
		"stale":     []any{map[string]any{"name": "Codecov", "since": "2026-11-21T09:00:00.000Z"}},
		"checks": []any{
			map[string]any{"name": "build", "status": "running", "url": "https://ci.example.com/b", "source": "provider", "failure": nil},
			// Self-reported checks are shown; the memory CI does not count them.
			map[string]any{"name": "lint", "status": "skipped", "url": nil, "source": "self_reported", "failure": nil},
			map[string]any{"name": "unit", "status": "passed", "url": nil, "source": "self_reported", "failure": nil},
		},
	}
	if diff := cmp.Diff(want, got["data"]); diff != "" {
		t.Errorf("CI status (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got["availableActions"]); diff != "" {
		t.Errorf("availableActions (-want +got):\n%s", diff)
	}

	// The provider says pending: nothing else decides.
	a.web.SetChecks(sha, lifecycle.CIReport{Pending: true})
	e.reconcile(id)
	if o := e.ciOverall(id); o != "pending" {
		t.Errorf("overall with the provider pending = %v", o)
	}
	// The provider fails: what was learned last stands, and the failure is logged.
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	a.web.FailNext("checks", errNetwork)
	e.reconcile(id)
	if o := e.ciOverall(id); o != "pending" {
		t.Errorf("overall with the provider down = %v, want pending as last learned", o)
	}
	if !strings.Contains(e.LogText(), "CI provider failed") {
		t.Error("a failing CI provider was not logged")
	}
	e.reconcile(id)
	if o := e.ciOverall(id); o != "passed" {
		t.Errorf("overall once the provider answers again = %v, want passed", o)
	}
}

// ciOverall reads the overall CI state of a task.
func (e *env) ciOverall(id string) lifecycle.CIOverall {
	e.T.Helper()
	return apitest.CallData[lifecycle.CIStatus](e.Env, apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK).Overall
}

// headOf returns a submission's head commit, failing t when it has none.
func headOf(t *testing.T, sub lifecycle.Submission) string {
	t.Helper()
	if sub.HeadSHA == nil {
		t.Fatalf("submission %s has no headSha", sub.SubmissionID)
	}
	return *sub.HeadSHA
}

// ciAnswer is the answer to a CI report: the task's CI status and its
// next steps.
type ciAnswer struct {
	Data             lifecycle.CIStatus
	AvailableActions []lifecycle.Action
}

var errNetwork = &netError{}

type netError struct{}

func (*netError) Error() string { return "connection refused" }

func TestReportedChecks(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	id := e.startedTask("ENG-1")
	sha := headOf(t, e.submitOK(id, "report-key-1", apitest.SubmitBody()))
	ci := e.Key(lifecycle.ScopeCIWrite)
	report := func(sha string, checks ...map[string]any) ciAnswer {
		return apitest.CallAs[ciAnswer](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: ci, Body: map[string]any{"headSha": sha, "checks": checks}}, http.StatusOK)
	}
	versions := func() int { return len(e.EventsOf(id)) }
	before := versions()

	// Checks of another commit are kept but do not count.
	stale := report(strings.Repeat("a", 40), map[string]any{"name": "build", "status": "passed"})
	if stale.Data.Overall != lifecycle.CINone || versions() != before {
		t.Errorf("a stale commit's checks: overall %v, events %d -> %d", stale.Data.Overall, before, versions())
	}
	running := report(strings.ToUpper(sha), map[string]any{"name": "build", "status": "running"})
	if running.Data.Overall != lifecycle.CIRunning || versions() != before+1 {
		t.Errorf("running: overall %v; events %d -> %d, want one for the change of CI", running.Data.Overall, before, versions())
	}
	before = versions()
	report(sha, map[string]any{"name": "build", "status": "running"})
	if versions() != before {
		t.Errorf("the same report again: events %d -> %d, want none", before, versions())
	}
	passed := report(sha, map[string]any{"name": "build", "status": "passed", "url": "https://ci.example.com/9"})
	if diff := cmp.Diff(shipReady, passed.AvailableActions); diff != "" {
		t.Errorf("actions once CI passed (-want +got):\n%s", diff)
	}
	if n := versions(); n != before+1 {
		t.Fatalf("events %d -> %d, want one for the change of CI", before, n)
	}
	_, data := newestEvent[lifecycle.TaskUpdatedData](e, id)
	if diff := cmp.Diff([]string{"availableActions", "ciStatus"}, data.ChangedFields); diff != "" {
		t.Errorf("changedFields of a CI change (-want +got):\n%s", diff)
	}
	// A later failure takes ship away again, and offers start for rework.
	failed := report(sha, map[string]any{"name": "build", "status": "failed"})
	if failed.Data.Overall != lifecycle.CIFailed || cmp.Diff(append([]lifecycle.Action{lifecycle.ActionStart}, inReview...), failed.AvailableActions) != "" {
		t.Errorf("after failure: %+v", failed)
	}
}

func TestReportChecksValidation(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	sha := strings.Repeat("b", 40)
	tests := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"headSha": "abc", "checks": []map[string]any{{"name": "x", "status": "passed"}}}, "headSha"},
		{map[string]any{"headSha": sha, "checks": []map[string]any{}}, "checks"},
		{map[string]any{"headSha": sha, "checks": []map[string]any{{"name": "x", "status": "ok"}}}, "checks[0].status"},
		{map[string]any{"headSha": sha, "checks": []map[string]any{{"name": "x", "status": "passed", "url": "ftp://x"}}}, "checks[0].url"},
	}
	for _, tt := range tests {
		body := e.callError(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: tt.body}, http.StatusBadRequest)
		if !namesField(body, tt.field) {
			t.Errorf("details.fields lacks %q: %+v", tt.field, body)
		}
	}
	ok := map[string]any{"headSha": sha, "checks": []map[string]any{{"name": "x", "status": "passed"}}}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Key(lifecycle.ScopeTasksWrite), Body: ok}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/checks", Key: e.Admin, Body: ok}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/tsk_doesnotexist/ci-status", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Key(lifecycle.ScopeCIWrite)}, http.StatusForbidden)
}
