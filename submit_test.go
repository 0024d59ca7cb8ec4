package lifecycle_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// specSubmissionFields are the Submission members of docs/api.md.
var specSubmissionFields = map[string]string{
	"submissionId":     "string",
	"taskId":           "string",
	"status":           "string",
	"prUrl":            "string",
	"prNumber":         "integer",
	"head":             "string|null",
	"base":             "string|null",
	"headSha":          "string|null",
	"action":           "string",
	"idempotencyKey":   "string",
	"owner":            "string|null",
	"repo":             "string|null",
	"ciProvider":       "string|null",
	"codeReviewPolicy": "string",
	"reviewRoute":      "object",
	"acceptedAt":       "string",
	"availableActions": "string[]",
}

// Transition table, row 1: in_progress, submit accepted -> in_review.
func TestSubmitMovesTaskToReview(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	e.Clock.Advance(time.Minute)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: apitest.SubmitBody(), Header: http.Header{
		"Idempotency-Key": {"submit-eng-1-a"},
		"Traceparent":     {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("submit = %d: %s", rec.Code, rec.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	sub := body["data"].(map[string]any)
	if diff := cmp.Diff(specSubmissionFields, shape(sub, specSubmissionFields)); diff != "" {
		t.Errorf("submission shape (-spec +got):\n%s", diff)
	}
	pr, err := a.web.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"taskId":           id,
		"status":           "in_review",
		"prUrl":            pr.URL,
		"prNumber":         1.0,
		"head":             "lifecycle/eng-1",
		"base":             "main",
		"headSha":          pr.HeadSHA,
		"action":           "created",
		"idempotencyKey":   "submit-eng-1-a",
		"owner":            "acme",
		"repo":             "web",
		"ciProvider":       "memory",
		"codeReviewPolicy": "github_rules",
		"reviewRoute":      map[string]any{"participants": []any{map[string]any{"id": "octocat", "role": "reviewer"}, map[string]any{"id": "hubot", "role": "reviewer"}}},
		"acceptedAt":       "2026-11-21T10:01:00.000Z",
		"availableActions": []any{"view_ci_status", "view_review_feedback"},
	}
	for k, v := range want {
		if diff := cmp.Diff(v, sub[k]); diff != "" {
			t.Errorf("submission.%s (-want +got):\n%s", k, diff)
		}
	}
	if !idRE("sub_").MatchString(sub["submissionId"].(string)) {
		t.Errorf("submissionId %v is not sub_ and 20+ base62 characters", sub["submissionId"])
	}
	if diff := cmp.Diff(sub["availableActions"], body["availableActions"]); diff != "" {
		t.Errorf("top-level availableActions differ from data's:\n%s", diff)
	}

	task := e.Task(id)
	for k, v := range map[string]any{
		"status": "in_review", "submissionId": sub["submissionId"], "prUrl": pr.URL, "prNumber": 1.0,
		"branch": "lifecycle/eng-1", "baseBranch": "main", "headSha": pr.HeadSHA,
	} {
		if task[k] != v {
			t.Errorf("task.%s = %v, want %v", k, task[k], v)
		}
	}

	evs := e.EventsOf(id)
	last := evs[len(evs)-1]
	data := last["data"].(map[string]any)
	if last["type"] != "task.updated" || data["previousStatus"] != "in_progress" || data["status"] != "in_review" {
		t.Errorf("submit event = %s %v -> %v, want task.updated in_progress -> in_review", last["type"], data["previousStatus"], data["status"])
	}
	if last["traceId"] != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("traceId = %v, want the traceparent's", last["traceId"])
	}
	if diff := cmp.Diff([]any{"status", "availableActions", "submissionId", "prUrl", "prNumber", "branch", "baseBranch", "headSha", "prState"}, data["changedFields"]); diff != "" {
		t.Errorf("changedFields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"task": apitest.BaseURL + "/tasks/" + id, "reviewFeedback": apitest.BaseURL + "/tasks/" + id + "/review-feedback"}, data["links"]); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"id": "tester", "role": "user"}, data["actor"]); diff != "" {
		t.Errorf("actor (-want +got):\n%s", diff)
	}
}

// Transition table, row 2: in_review, submit called -> 409.
func TestSubmitWhileInReviewConflicts(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	e.SubmitOK(id, "first-key-1", apitest.SubmitBody())
	rec := e.Submit(id, "second-key-2", apitest.SubmitBody())
	if rec.Code != http.StatusConflict {
		t.Fatalf("second submit = %d, want 409: %s", rec.Code, rec.Body)
	}
	var body lifecycle.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := lifecycle.ErrorObject{Code: "conflict", Details: &lifecycle.ErrorDetails{Reason: "already_in_review",
		AvailableActions: []lifecycle.Action{lifecycle.ActionViewCIStatus, lifecycle.ActionViewReviewFeedback}}}
	body.Error.Message = ""
	if diff := cmp.Diff(want, body.Error); diff != "" {
		t.Errorf("conflict (-want +got):\n%s", diff)
	}
}

func TestSubmitOutsideInProgressConflicts(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	todo := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	blocked := e.startedTask("ENG-2")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + blocked + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusOK)
	cancelled := e.CreateTask(apitest.TaskBody("ENG-3"))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + cancelled + "/cancel", Key: e.Admin}, http.StatusOK)
	for name, id := range map[string]string{"todo": todo, "blocked": blocked, "cancelled": cancelled} {
		rec := e.Submit(id, "key-"+name+"-1234", apitest.SubmitBody())
		if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), `"availableActions"`) {
			t.Errorf("submit on a %s task = %d %s, want 409 with availableActions", name, rec.Code, rec.Body)
		}
	}
}

func TestSubmitWithoutAdapterIsNotFound(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) { c.ArtifactAdapter = nil })
	id := e.startedTask("ENG-1")
	other := e.CreateTask(withMember(apitest.TaskBody("API-1"), "context", map[string]any{"project": "api", "goal": ""}))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + other + "/start", Key: e.Admin}, http.StatusOK)
	tests := []struct {
		name, task string
		body       map[string]any
	}{
		{"project without a live adapter", other, apitest.SubmitBody()},
		{"artifact mode without an artifact adapter", id, withMember(apitest.SubmitBody(), "mode", "artifact")},
		{"unknown task", "tsk_doesnotexist", apitest.SubmitBody()},
	}
	for i, tt := range tests {
		rec := e.Submit(tt.task, fmt.Sprintf("not-found-%d", i), tt.body)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"not_found"`) {
			t.Errorf("%s: submit = %d %s, want 404 not_found", tt.name, rec.Code, rec.Body)
		}
	}
	if got := e.Task(id)["status"]; got != "in_progress" {
		t.Errorf("a refused submit changed the task to %v", got)
	}
}

func TestArtifactModeSubmission(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	id := e.startedTask("ENG-1")
	sub := e.SubmitOK(id, "artifact-key-1", withMember(apitest.SubmitBody(), "mode", "artifact"))
	if sub["action"] != "accepted" || sub["owner"] != "local" || sub["ciProvider"] != "memory" {
		t.Errorf("artifact submission = action %v, owner %v, ciProvider %v; want accepted, local, memory", sub["action"], sub["owner"], sub["ciProvider"])
	}
	if a.web.Calls(memory.OpEnsure) != 0 || a.artifact.Calls(memory.OpEnsure) != 1 {
		t.Errorf("calls: live adapter %d, artifact adapter %d; want 0 and 1", a.web.Calls(memory.OpEnsure), a.artifact.Calls(memory.OpEnsure))
	}
	// The artifact CI trusts self-reported checks (unit passed, lint
	// skipped) and no review is needed: ship is available at once.
	if diff := cmp.Diff([]any{"ship", "view_ci_status", "view_review_feedback"}, sub["availableActions"]); diff != "" {
		t.Errorf("availableActions (-want +got):\n%s", diff)
	}
}

func TestProviderFailureIs502AndReleasesTheKey(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	a.web.FailNext(memory.OpEnsure, errors.New("github: 503 secret-token-abc"))
	rec := e.Submit(id, "retry-me-123", apitest.SubmitBody())
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), `"provider_error"`) {
		t.Fatalf("submit with the host down = %d %s, want 502 provider_error", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "secret-token") {
		t.Errorf("the provider's error leaked to the client: %s", rec.Body)
	}
	if got := e.Task(id)["status"]; got != "in_progress" {
		t.Errorf("status after a failed submit = %v, want in_progress", got)
	}
	// The same key runs again once the host is back.
	e.SubmitOK(id, "retry-me-123", apitest.SubmitBody())
}

// Transition table, row 3: reviews; approval makes ship available once CI passed.
func TestReviewsAndShipAvailability(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Projects: map[string]lifecycle.ReviewPlan{
			"web": {Policy: lifecycle.PolicyAlwaysRequire, Participants: []lifecycle.Participant{{ID: "agent-rev", Role: "reviewer"}}},
		}}
	})
	id := e.startedTask("ENG-1")
	sub := e.SubmitOK(id, "review-key-1", apitest.SubmitBody())
	sha := sub["headSha"].(string)
	reviewer := e.KeyAs(lifecycle.Actor{ID: "agent-rev", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite, lifecycle.ScopeTasksRead)
	outsider := e.KeyAs(lifecycle.Actor{ID: "someone", Role: lifecycle.RoleUser}, lifecycle.ScopeReviewsWrite)
	ci := e.Key(lifecycle.ScopeCIWrite)

	// CI passes (the memory CI does not trust self-reported checks).
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: ci, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed", "url": "https://ci.example.com/1"}},
	}}, http.StatusOK)
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions with CI passed but no approval = %v", got)
	}
	// An approval from outside the review route does not count.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: outsider, Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions after an outsider's approval = %v", got)
	}
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "approved", "body": "LGTM"}}, http.StatusCreated)
	review := resp["data"].(map[string]any)
	if !idRE("rev_").MatchString(review["id"].(string)) || review["outcome"] != "approved" || review["body"] != "LGTM" ||
		cmp.Diff(map[string]any{"id": "agent-rev", "role": "reviewer"}, review["reviewer"]) != "" || !timestampRE.MatchString(review["submittedAt"].(string)) {
		t.Errorf("review = %v", review)
	}
	if diff := cmp.Diff([]any{"ship", "view_ci_status", "view_review_feedback"}, resp["availableActions"]); diff != "" {
		t.Errorf("actions after approval (-want +got):\n%s", diff)
	}
	evs := e.EventsOf(id)
	last := evs[len(evs)-1]
	data := last["data"].(map[string]any)
	if last["type"] != "task.reviewed" || data["reviewOutcome"] != "approved" || data["status"] != "in_review" ||
		cmp.Diff(map[string]any{"id": "agent-rev", "role": "reviewer"}, data["reviewer"]) != "" {
		t.Errorf("review event = %v", last)
	}
	if !strings.HasSuffix(data["links"].(map[string]any)["reviewFeedback"].(string), "/tasks/"+id+"/review-feedback") {
		t.Errorf("links.reviewFeedback = %v", data["links"])
	}
	if diff := cmp.Diff([]any{"ship", "view_ci_status", "view_review_feedback"}, data["availableActions"]); diff != "" {
		t.Errorf("event availableActions (-want +got):\n%s", diff)
	}
	fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: reviewer}, http.StatusOK)["data"].(map[string]any)
	if fb["decision"] != "approved" || len(fb["reviews"].([]any)) != 2 {
		t.Errorf("review feedback = %v, want approved with 2 reviews", fb)
	}
	_ = a
}

// Rework: changes requested, start again, resubmit on the same pull request.
func TestReworkReusesThePullRequest(t *testing.T) {
	t.Parallel()
	// always_require with no configured participants: any reviewer counts.
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	})
	id := e.startedTask("ENG-1")
	first := e.SubmitOK(id, "rework-key-1", apitest.SubmitBody())
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusConflict)
	octocat := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: octocat, Body: map[string]any{"outcome": "changes_requested", "body": "add a test"}}, http.StatusCreated)
	if diff := cmp.Diff([]any{"start", "view_ci_status", "view_review_feedback"}, resp["availableActions"]); diff != "" {
		t.Errorf("actions after changes requested (-want +got):\n%s", diff)
	}
	fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if fb["decision"] != "changes_requested" {
		t.Errorf("decision = %v, want changes_requested", fb["decision"])
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	second := e.SubmitOK(id, "rework-key-2", apitest.SubmitBody())
	if second["action"] != "existing" || second["prNumber"] != first["prNumber"] || second["prUrl"] != first["prUrl"] {
		t.Errorf("resubmission = %v #%v, want existing on #%v", second["action"], second["prNumber"], first["prNumber"])
	}
	if second["headSha"] == first["headSha"] {
		t.Error("resubmission kept the old head SHA")
	}
	task := e.Task(id)
	if task["headSha"] != second["headSha"] || task["submissionId"] != second["submissionId"] {
		t.Errorf("task head %v, submission %v; want the resubmission's", task["headSha"], task["submissionId"])
	}
	// The new submission starts a new review.
	fb = e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if fb["decision"] != "pending" || len(fb["reviews"].([]any)) != 0 {
		t.Errorf("feedback after resubmission = %v, want pending with no reviews", fb)
	}
	if a.web.Calls(memory.OpEnsure) != 2 {
		t.Errorf("adapter asked %d times, want 2", a.web.Calls(memory.OpEnsure))
	}
}

func TestGitHubRulesUsesTheHostsDecision(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	sub := e.SubmitOK(id, "gh-rules-key", apitest.SubmitBody())
	a.web.SetChecks(sub["headSha"].(string), lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions before the host approves = %v", got)
	}
	e.reconcile(id)
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions while the host's decision is pending = %v", got)
	}
	a.web.SetReviewDecision(1, lifecycle.DecisionApproved)
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions before the host is read again = %v; reads must not call the host", got)
	}
	e.reconcile(id)
	if got := e.Task(id)["availableActions"]; cmp.Diff([]any{"ship", "view_ci_status", "view_review_feedback"}, got) != "" {
		t.Errorf("actions after the host approves = %v", got)
	}
	fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if fb["decision"] != "approved" {
		t.Errorf("decision = %v, want the host's approved", fb["decision"])
	}
}

func TestReviewConflictsAndValidation(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Admin, Body: map[string]any{"outcome": "approved"}}, http.StatusConflict)
	if d := resp["error"].(map[string]any)["details"].(map[string]any); d["reason"] != "not_in_review" || cmp.Diff([]any{"submit"}, d["availableActions"]) != "" {
		t.Errorf("review of a task in progress: details = %v", d)
	}
	e.SubmitOK(id, "review-val-1", apitest.SubmitBody())
	for _, body := range []any{
		map[string]any{"outcome": "lgtm"},
		map[string]any{"outcome": "approved", "body": strings.Repeat("x", 10001)},
		map[string]any{},
	} {
		e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Admin, Body: body}, http.StatusBadRequest)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Admin, Body: map[string]any{"outcome": "commented", "body": strings.Repeat("x", 10000)}}, http.StatusCreated)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Key(lifecycle.ScopeTasksWrite), Body: map[string]any{"outcome": "approved"}}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/reviews", Key: e.Admin, Body: map[string]any{"outcome": "approved"}}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/tsk_doesnotexist/review-feedback", Key: e.Admin}, http.StatusNotFound)
}

func blockerBody() map[string]any {
	return map[string]any{
		"reason":             "missing_credentials",
		"actionRequired":     "Add the STRIPE_KEY secret to the repository",
		"resumeInstructions": "Re-run the integration tests",
		"sourceRunId":        "run_42",
	}
}

// Transition table, row 6: in_progress, agent records a blocker -> blocked.
func TestBlockerAndResolution(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	agent := e.KeyAs(lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}, lifecycle.ScopeTasksWrite)
	e.Clock.Advance(time.Second)
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: agent, Body: blockerBody()}, http.StatusOK)
	task := resp["data"].(map[string]any)
	wantBlocker := map[string]any{
		"kind": "awaiting_user", "sourceRunId": "run_42", "sourceAgentId": "agent-web", "reason": "missing_credentials",
		"actionRequired": "Add the STRIPE_KEY secret to the repository", "resumeInstructions": "Re-run the integration tests",
		"createdAt": "2026-11-21T10:00:01.000Z",
	}
	if diff := cmp.Diff(wantBlocker, task["blocker"]); diff != "" {
		t.Errorf("blocker (-want +got):\n%s", diff)
	}
	if task["status"] != "blocked" || cmp.Diff([]any{"resolve_blocker"}, resp["availableActions"]) != "" {
		t.Errorf("after blocker: status %v, actions %v; want blocked, [resolve_blocker]", task["status"], resp["availableActions"])
	}
	evs := e.EventsOf(id)
	ev := evs[len(evs)-1]
	data := ev["data"].(map[string]any)
	if ev["type"] != "task.awaiting_user" || data["previousStatus"] != "in_progress" ||
		cmp.Diff(map[string]any{"kind": "awaiting_user", "reason": "missing_credentials", "actionRequired": "Add the STRIPE_KEY secret to the repository"}, data["blocker"]) != "" ||
		cmp.Diff(map[string]any{"id": "agent-web", "role": "agent"}, data["actor"]) != "" {
		t.Errorf("blocker event = %v", ev)
	}
	if diff := cmp.Diff([]any{"status", "availableActions", "blocker"}, data["changedFields"]); diff != "" {
		t.Errorf("changedFields (-want +got):\n%s", diff)
	}

	// A second blocker, or a submit, conflicts while blocked.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: agent, Body: blockerBody()}, http.StatusConflict)
	resolved := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: agent, Body: map[string]any{"resolution": "secret added"}}, http.StatusOK)
	if got := resolved["data"].(map[string]any); got["status"] != "in_progress" || got["blocker"] != nil {
		t.Errorf("after resolution: status %v, blocker %v; want in_progress, null", got["status"], got["blocker"])
	}
	evs = e.EventsOf(id)
	ev = evs[len(evs)-1]
	if data := ev["data"].(map[string]any); ev["type"] != "task.updated" || data["previousStatus"] != "blocked" || !strings.Contains(data["summary"].(string), "secret added") {
		t.Errorf("resolution event = %v", ev)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: agent}, http.StatusConflict)
}

func TestBlockerValidationAndConflicts(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	todo := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + todo + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusConflict)
	if d := resp["error"].(map[string]any)["details"].(map[string]any); d["reason"] != "not_in_progress" {
		t.Errorf("blocker on a todo task: %v", d)
	}
	id := e.startedTask("ENG-2")
	bad := []struct {
		body  map[string]any
		field string
	}{
		{withMember(blockerBody(), "reason", "Needs Secret"), "reason"},
		{withMember(blockerBody(), "reason", ""), "reason"},
		{withMember(blockerBody(), "actionRequired", ""), "actionRequired"},
		{withMember(blockerBody(), "actionRequired", strings.Repeat("a", 2001)), "actionRequired"},
		{withMember(blockerBody(), "resumeInstructions", strings.Repeat("a", 2001)), "resumeInstructions"},
	}
	for _, b := range bad {
		resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: e.Admin, Body: b.body}, http.StatusBadRequest)
		if !hasFieldError(resp["error"].(map[string]any), b.field) {
			t.Errorf("details.fields lacks %s: %v", b.field, resp)
		}
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: e.Admin, Body: map[string]any{"resolution": strings.Repeat("a", 2001)}}, http.StatusBadRequest)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: e.Key(lifecycle.ScopeTasksRead), Body: blockerBody()}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusNotFound)
}

// Submits with different keys race: one is accepted, the adapter is asked once.
func TestConcurrentSubmitsWithDifferentKeysAcceptOne(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.Submit(id, fmt.Sprintf("distinct-key-%02d", i), apitest.SubmitBody()).Code
		}()
	}
	wg.Wait()
	accepted := 0
	for _, c := range codes {
		switch c {
		case http.StatusAccepted:
			accepted++
		case http.StatusConflict:
		default:
			t.Errorf("a concurrent submit got %d", c)
		}
	}
	if accepted != 1 || a.web.Calls(memory.OpEnsure) != 1 {
		t.Errorf("%d submits accepted and the adapter asked %d times; want 1 and 1", accepted, a.web.Calls(memory.OpEnsure))
	}
}
