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
	// The members and their JSON types are checked on the JSON object; the
	// values on the decoded Submission.
	raw := apitest.Decode(t, rec)["data"].(map[string]any)
	if diff := cmp.Diff(specSubmissionFields, shape(raw, specSubmissionFields)); diff != "" {
		t.Errorf("submission shape (-spec +got):\n%s", diff)
	}
	if got := raw["acceptedAt"]; got != "2026-11-21T10:01:00.000Z" {
		t.Errorf("acceptedAt = %v, want the clock's time in the API's form", got)
	}
	answer := apitest.DecodeAs[submissionAnswer](t, rec)
	sub := answer.Data
	pr, err := a.web.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !idRE("sub_").MatchString(sub.SubmissionID) {
		t.Errorf("submissionId %v is not sub_ and 20+ base62 characters", sub.SubmissionID)
	}
	branch, base, owner, repo, ciProvider := "lifecycle/eng-1", "main", "acme", "web", "memory"
	want := lifecycle.Submission{
		SubmissionID:     sub.SubmissionID,
		TaskID:           id,
		Status:           lifecycle.StatusInReview,
		PRURL:            pr.URL,
		PRNumber:         1,
		Head:             &branch,
		Base:             &base,
		HeadSHA:          &pr.HeadSHA,
		Action:           lifecycle.SubmissionCreated,
		IdempotencyKey:   "submit-eng-1-a",
		Owner:            &owner,
		Repo:             &repo,
		CIProvider:       &ciProvider,
		CodeReviewPolicy: lifecycle.PolicyGitHubRules,
		ReviewRoute:      lifecycle.ReviewRoute{Participants: []lifecycle.Participant{{ID: "octocat", Role: "reviewer"}, {ID: "hubot", Role: "reviewer"}}},
		AcceptedAt:       lifecycle.NewTimestamp(apitest.Epoch.Add(time.Minute)),
		AvailableActions: []lifecycle.Action{lifecycle.ActionViewCIStatus, lifecycle.ActionViewReviewFeedback},
	}
	if diff := cmp.Diff(want, sub); diff != "" {
		t.Errorf("submission (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sub.AvailableActions, answer.AvailableActions); diff != "" {
		t.Errorf("top-level availableActions differ from data's:\n%s", diff)
	}

	task := e.task(id)
	prNumber := 1
	wantPR := taskPR{Status: lifecycle.StatusInReview, SubmissionID: &sub.SubmissionID, PRURL: &pr.URL, PRNumber: &prNumber,
		Branch: &branch, BaseBranch: &base, HeadSHA: &pr.HeadSHA}
	if diff := cmp.Diff(wantPR, prOf(task)); diff != "" {
		t.Errorf("task after submit (-want +got):\n%s", diff)
	}

	last, data := newestEvent[lifecycle.TaskUpdatedData](e, id)
	if last.Type != lifecycle.EventTaskUpdated || data.PreviousStatus == nil || *data.PreviousStatus != lifecycle.StatusInProgress || data.Status != lifecycle.StatusInReview {
		t.Errorf("submit event = %s %v -> %v, want task.updated in_progress -> in_review", last.Type, data.PreviousStatus, data.Status)
	}
	if last.TraceID == nil || *last.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("traceId = %v, want the traceparent's", last.TraceID)
	}
	if diff := cmp.Diff([]string{"status", "availableActions", "submissionId", "prUrl", "prNumber", "branch", "baseBranch", "headSha", "prState"}, data.ChangedFields); diff != "" {
		t.Errorf("changedFields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lifecycle.EventLinks{Task: apitest.BaseURL + "/tasks/" + id, ReviewFeedback: apitest.BaseURL + "/tasks/" + id + "/review-feedback"}, data.Links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}, data.Actor); diff != "" {
		t.Errorf("actor (-want +got):\n%s", diff)
	}
}

// submissionAnswer is the answer to a submit: the submission and the
// task's next steps.
type submissionAnswer struct {
	Data             lifecycle.Submission
	AvailableActions []lifecycle.Action
}

// taskPR is what a task says about its latest submission's pull request.
type taskPR struct {
	Status                      lifecycle.Status
	SubmissionID, PRURL         *string
	PRNumber                    *int
	Branch, BaseBranch, HeadSHA *string
}

// prOf returns what task says about its pull request.
func prOf(task lifecycle.Task) taskPR {
	return taskPR{Status: task.Status, SubmissionID: task.SubmissionID, PRURL: task.PRURL, PRNumber: task.PRNumber,
		Branch: task.Branch, BaseBranch: task.BaseBranch, HeadSHA: task.HeadSHA}
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
	todo := e.createTask(apitest.TaskBody("ENG-1")).ID
	blocked := e.startedTask("ENG-2")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + blocked + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusOK)
	cancelled := e.createTask(apitest.TaskBody("ENG-3")).ID
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
	other := e.createTask(withMember(apitest.TaskBody("API-1"), "context", map[string]any{"project": "api", "goal": ""})).ID
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
	if got := e.task(id).Status; got != lifecycle.StatusInProgress {
		t.Errorf("a refused submit changed the task to %v", got)
	}
}

func TestArtifactModeSubmission(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	id := e.startedTask("ENG-1")
	sub := e.submitOK(id, "artifact-key-1", withMember(apitest.SubmitBody(), "mode", "artifact"))
	if sub.Action != lifecycle.SubmissionAccepted || sub.Owner == nil || *sub.Owner != "local" || sub.CIProvider == nil || *sub.CIProvider != "memory" {
		t.Errorf("artifact submission = action %v, owner %v, ciProvider %v; want accepted, local, memory", sub.Action, sub.Owner, sub.CIProvider)
	}
	if a.web.Calls(memory.OpEnsure) != 0 || a.artifact.Calls(memory.OpEnsure) != 1 {
		t.Errorf("calls: live adapter %d, artifact adapter %d; want 0 and 1", a.web.Calls(memory.OpEnsure), a.artifact.Calls(memory.OpEnsure))
	}
	// The artifact CI trusts self-reported checks (unit passed, lint
	// skipped) and no review is needed: ship is available at once.
	if diff := cmp.Diff(shipReady, sub.AvailableActions); diff != "" {
		t.Errorf("availableActions (-want +got):\n%s", diff)
	}
}

// inReview and shipReady are the actions of a task in review, before and
// once it may ship.
var (
	inReview  = []lifecycle.Action{lifecycle.ActionViewCIStatus, lifecycle.ActionViewReviewFeedback}
	shipReady = []lifecycle.Action{lifecycle.ActionShip, lifecycle.ActionViewCIStatus, lifecycle.ActionViewReviewFeedback}
)

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
	if got := e.task(id).Status; got != lifecycle.StatusInProgress {
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
	sub := e.submitOK(id, "review-key-1", apitest.SubmitBody())
	if sub.HeadSHA == nil {
		t.Fatal("submission has no headSha")
	}
	sha := *sub.HeadSHA
	reviewer := e.KeyAs(lifecycle.Actor{ID: "agent-rev", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite, lifecycle.ScopeTasksRead)
	outsider := e.KeyAs(lifecycle.Actor{ID: "someone", Role: lifecycle.RoleUser}, lifecycle.ScopeReviewsWrite)
	ci := e.Key(lifecycle.ScopeCIWrite)

	// CI passes (the memory CI does not trust self-reported checks).
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: ci, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed", "url": "https://ci.example.com/1"}},
	}}, http.StatusOK)
	if got := e.task(id).AvailableActions; cmp.Diff(inReview, got) != "" {
		t.Errorf("actions with CI passed but no approval = %v", got)
	}
	// An approval from outside the review route does not count.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: outsider, Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	if got := e.task(id).AvailableActions; cmp.Diff(inReview, got) != "" {
		t.Errorf("actions after an outsider's approval = %v", got)
	}
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "approved", "body": "LGTM"}})
	apitest.Answer(t, "POST /tasks/{id}/reviews", rec, http.StatusCreated)
	resp := apitest.DecodeAs[reviewAnswer](t, rec)
	review := resp.Data
	// submittedAt is checked in its wire form: a Timestamp decodes any RFC 3339.
	submittedAt, _ := apitest.Decode(t, rec)["data"].(map[string]any)["submittedAt"].(string)
	if !idRE("rev_").MatchString(review.ID) || review.Outcome != lifecycle.ReviewApproved || review.Body != "LGTM" ||
		review.Reviewer != (lifecycle.Actor{ID: "agent-rev", Role: lifecycle.RoleReviewer}) || !timestampRE.MatchString(submittedAt) {
		t.Errorf("review = %+v, submittedAt %q", review, submittedAt)
	}
	if diff := cmp.Diff(shipReady, resp.AvailableActions); diff != "" {
		t.Errorf("actions after approval (-want +got):\n%s", diff)
	}
	last, data := newestEvent[lifecycle.TaskReviewedData](e, id)
	if last.Type != lifecycle.EventTaskReviewed || data.ReviewOutcome != lifecycle.ReviewApproved || data.Status != lifecycle.StatusInReview ||
		data.Reviewer != (lifecycle.Actor{ID: "agent-rev", Role: lifecycle.RoleReviewer}) {
		t.Errorf("review event = %+v, data %+v", last, data)
	}
	if !strings.HasSuffix(data.Links.ReviewFeedback, "/tasks/"+id+"/review-feedback") {
		t.Errorf("links.reviewFeedback = %v", data.Links)
	}
	if diff := cmp.Diff(shipReady, data.AvailableActions); diff != "" {
		t.Errorf("event availableActions (-want +got):\n%s", diff)
	}
	fb := apitest.CallData[lifecycle.ReviewFeedback](e.Env, apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: reviewer}, http.StatusOK)
	if fb.Decision != lifecycle.DecisionApproved || len(fb.Reviews) != 2 {
		t.Errorf("review feedback = %+v, want approved with 2 reviews", fb)
	}
	_ = a
}

// reviewAnswer is the answer to a review: the review and the task's next
// steps.
type reviewAnswer struct {
	Data             lifecycle.Review
	AvailableActions []lifecycle.Action
}

// Rework: changes requested, start again, resubmit on the same pull request.
func TestReworkReusesThePullRequest(t *testing.T) {
	t.Parallel()
	// always_require with no configured participants: any reviewer counts.
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	})
	id := e.startedTask("ENG-1")
	first := e.submitOK(id, "rework-key-1", apitest.SubmitBody())
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusConflict)
	octocat := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	resp := apitest.CallAs[reviewAnswer](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: octocat, Body: map[string]any{"outcome": "changes_requested", "body": "add a test"}}, http.StatusCreated)
	if diff := cmp.Diff([]lifecycle.Action{lifecycle.ActionStart, lifecycle.ActionViewCIStatus, lifecycle.ActionViewReviewFeedback}, resp.AvailableActions); diff != "" {
		t.Errorf("actions after changes requested (-want +got):\n%s", diff)
	}
	fb := e.reviewFeedback(id)
	if fb.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("decision = %v, want changes_requested", fb.Decision)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	second := e.submitOK(id, "rework-key-2", apitest.SubmitBody())
	if second.Action != lifecycle.SubmissionExisting || second.PRNumber != first.PRNumber || second.PRURL != first.PRURL {
		t.Errorf("resubmission = %v #%v, want existing on #%v", second.Action, second.PRNumber, first.PRNumber)
	}
	if second.HeadSHA == nil || first.HeadSHA == nil {
		t.Fatalf("head SHAs %v and %v, want both set", first.HeadSHA, second.HeadSHA)
	}
	if *second.HeadSHA == *first.HeadSHA {
		t.Error("resubmission kept the old head SHA")
	}
	task := e.task(id)
	if cmp.Diff(second.HeadSHA, task.HeadSHA) != "" || cmp.Diff(&second.SubmissionID, task.SubmissionID) != "" {
		t.Errorf("task head %v, submission %v; want the resubmission's", task.HeadSHA, task.SubmissionID)
	}
	// The new submission starts a new review.
	fb = e.reviewFeedback(id)
	if fb.Decision != lifecycle.DecisionPending || len(fb.Reviews) != 0 {
		t.Errorf("feedback after resubmission = %+v, want pending with no reviews", fb)
	}
	if a.web.Calls(memory.OpEnsure) != 2 {
		t.Errorf("adapter asked %d times, want 2", a.web.Calls(memory.OpEnsure))
	}
}

func TestGitHubRulesUsesTheHostsDecision(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	sub := e.submitOK(id, "gh-rules-key", apitest.SubmitBody())
	if sub.HeadSHA == nil {
		t.Fatal("submission has no headSha")
	}
	a.web.SetChecks(*sub.HeadSHA, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	if got := e.task(id).AvailableActions; cmp.Diff(inReview, got) != "" {
		t.Errorf("actions before the host approves = %v", got)
	}
	e.reconcile(id)
	if got := e.task(id).AvailableActions; cmp.Diff(inReview, got) != "" {
		t.Errorf("actions while the host's decision is pending = %v", got)
	}
	a.web.SetReviewDecision(1, lifecycle.DecisionApproved)
	if got := e.task(id).AvailableActions; cmp.Diff(inReview, got) != "" {
		t.Errorf("actions before the host is read again = %v; reads must not call the host", got)
	}
	e.reconcile(id)
	if got := e.task(id).AvailableActions; cmp.Diff(shipReady, got) != "" {
		t.Errorf("actions after the host approves = %v", got)
	}
	if fb := e.reviewFeedback(id); fb.Decision != lifecycle.DecisionApproved {
		t.Errorf("decision = %v, want the host's approved", fb.Decision)
	}
}

func TestReviewConflictsAndValidation(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	resp := apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Admin, Body: map[string]any{"outcome": "approved"}}, http.StatusConflict)
	if d := resp.Error.Details; d == nil || d.Reason != "not_in_review" || cmp.Diff([]lifecycle.Action{lifecycle.ActionSubmit}, d.AvailableActions) != "" {
		t.Errorf("review of a task in progress: details = %+v", d)
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
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: agent, Body: blockerBody()})
	apitest.Answer(t, "POST /tasks/{id}/blocker", rec, http.StatusOK)
	resp := apitest.DecodeAs[taskAnswer](t, rec)
	task := resp.Data
	wantBlocker := &lifecycle.Blocker{
		Kind: "awaiting_user", SourceRunID: "run_42", SourceAgentID: "agent-web", Reason: "missing_credentials",
		ActionRequired: "Add the STRIPE_KEY secret to the repository", ResumeInstructions: "Re-run the integration tests",
		CreatedAt: lifecycle.NewTimestamp(apitest.Epoch.Add(time.Second)),
	}
	if diff := cmp.Diff(wantBlocker, task.Blocker); diff != "" {
		t.Errorf("blocker (-want +got):\n%s", diff)
	}
	// createdAt in its wire form: a Timestamp decodes any RFC 3339.
	if !strings.Contains(rec.Body.String(), `"createdAt":"2026-11-21T10:00:01.000Z"`) {
		t.Errorf("blocker.createdAt is not 2026-11-21T10:00:01.000Z: %s", rec.Body)
	}
	if task.Status != lifecycle.StatusBlocked || cmp.Diff([]lifecycle.Action{lifecycle.ActionResolveBlocker}, resp.AvailableActions) != "" {
		t.Errorf("after blocker: status %v, actions %v; want blocked, [resolve_blocker]", task.Status, resp.AvailableActions)
	}
	ev, data := newestEvent[lifecycle.TaskAwaitingUserData](e, id)
	if ev.Type != lifecycle.EventTaskAwaitingUser || data.PreviousStatus == nil || *data.PreviousStatus != lifecycle.StatusInProgress ||
		data.Blocker != (lifecycle.EventBlocker{Kind: "awaiting_user", Reason: "missing_credentials", ActionRequired: "Add the STRIPE_KEY secret to the repository"}) ||
		data.Actor != (lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}) {
		t.Errorf("blocker event = %+v, data %+v", ev, data)
	}
	if diff := cmp.Diff([]string{"status", "availableActions", "blocker"}, data.ChangedFields); diff != "" {
		t.Errorf("changedFields (-want +got):\n%s", diff)
	}

	// A second blocker, or a submit, conflicts while blocked.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: agent, Body: blockerBody()}, http.StatusConflict)
	resolved := apitest.CallData[lifecycle.Task](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: agent, Body: map[string]any{"resolution": "secret added"}}, http.StatusOK)
	if resolved.Status != lifecycle.StatusInProgress || resolved.Blocker != nil {
		t.Errorf("after resolution: status %v, blocker %v; want in_progress, null", resolved.Status, resolved.Blocker)
	}
	ev2, upd := newestEvent[lifecycle.TaskUpdatedData](e, id)
	if ev2.Type != lifecycle.EventTaskUpdated || upd.PreviousStatus == nil || *upd.PreviousStatus != lifecycle.StatusBlocked || !strings.Contains(upd.Summary, "secret added") {
		t.Errorf("resolution event = %+v, data %+v", ev2, upd)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: agent}, http.StatusConflict)
}

func TestBlockerValidationAndConflicts(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	todo := e.createTask(apitest.TaskBody("ENG-1")).ID
	resp := apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + todo + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusConflict)
	if d := resp.Error.Details; d == nil || d.Reason != "not_in_progress" {
		t.Errorf("blocker on a todo task: %+v", d)
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
		resp := e.callError(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: e.Admin, Body: b.body}, http.StatusBadRequest)
		if !namesField(resp, b.field) {
			t.Errorf("details.fields lacks %s: %+v", b.field, resp)
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
