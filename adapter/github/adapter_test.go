package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

func testTask(n int) lifecycle.Task {
	project := "github"
	return lifecycle.Task{ID: fmt.Sprintf("tsk_gh%04d", n), Identifier: fmt.Sprintf("ENG-%d", n), Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/ENG-%d", n)}, Context: lifecycle.TaskContext{Project: &project}}
}

// open pushes the branch of task n and opens its pull request.
func open(t testing.TB, f *fakeGitHub, a *Adapter, n int) lifecycle.PullRequest {
	t.Helper()
	f.Push(fmt.Sprintf("lifecycle/eng-%d", n))
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(n), SubmissionID: "sub_1", Reviewers: []string{"octocat"}})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestEnsurePullRequest(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	if !pr.Created || pr.Head != "lifecycle/eng-1" || pr.Base != "main" || pr.State != lifecycle.PullRequestOpen || len(pr.RequestedReviewers) != 1 {
		t.Errorf("EnsurePullRequest = %+v", pr)
	}
	if !strings.HasPrefix(pr.URL, "https://github.example/acme/widgets/pull/") {
		t.Errorf("URL = %q", pr.URL)
	}
	// Another task's pull request exists; an unqualified head filter would return it.
	open(t, f, a, 2)
	again, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1), Title: "New title"})
	if err != nil || again.Created || again.Number != pr.Number {
		t.Fatalf("second EnsurePullRequest = %+v, %v; want #%d existing", again, err, pr.Number)
	}
	if got := f.pull(t, pr.Number).Title; got != "New title" {
		t.Errorf("title = %q, want the one applied", got)
	}
	if n := f.Calls("GET "); n != 1 {
		t.Errorf("the repository was read %d times, want once (default branch cached)", n)
	}

	// A head branch nobody pushed.
	_, err = a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(3)})
	var ve *lifecycle.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "pullRequest.head" {
		t.Errorf("missing head: error = %v, want a validation error on pullRequest.head", err)
	}
}

func TestEnsurePullRequestRaceAnswersExisting(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	first := open(t, f, a, 1)
	// Another process opened it between our list and our create: the list
	// answers nothing, the create 422.
	f.Inject(githubtest.RouteListPulls, githubtest.Fault{Status: 200, Body: "[]"})
	lists, creates := f.Calls(githubtest.RouteListPulls), f.Calls(githubtest.RouteCreatePull)
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	if err != nil || pr.Created || pr.Number != first.Number {
		t.Fatalf("EnsurePullRequest after a lost race = %+v, %v; want #%d existing", pr, err, first.Number)
	}
	// One create, answered 422 "A pull request already exists", then a
	// second listing that finds it; no second create.
	if l, c := f.Calls(githubtest.RouteListPulls)-lists, f.Calls(githubtest.RouteCreatePull)-creates; l != 2 || c != 1 {
		t.Errorf("%d listings and %d creates, want 2 and 1", l, c)
	}
	if n := f.PullRequests(); n != 1 {
		t.Errorf("%d pull requests, want 1", n)
	}
}

func TestChecksEveryPage(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	for i := range 150 {
		f.CheckRun(pr.HeadSHA, fmt.Sprintf("job-%03d", i), "success")
	}
	f.CheckRun(pr.HeadSHA, "job-149", "failure") // a rerun: the latest wins
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 150 || rep.Pending {
		t.Fatalf("%d checks (pending %v), want 150", len(rep.Checks), rep.Pending)
	}
	if c := rep.Checks[149]; c.Name != "job-149" || c.Status != lifecycle.CheckFailed {
		t.Errorf("rerun check = %+v, want failed", c)
	}
	if n := f.Calls("GET /commits/{ref}/check-runs"); n != 2 {
		t.Errorf("check runs read in %d requests, want 2 pages", n)
	}
}

func TestChecksMapping(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	sha := pr.HeadSHA
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: sha})
	if err != nil || len(rep.Checks) != 0 || rep.Pending {
		t.Fatalf("no checks, no statuses (combined state pending) = %+v, %v; want no checks, not pending", rep, err)
	}
	want := map[string]lifecycle.CheckStatus{}
	for conclusion, st := range map[string]lifecycle.CheckStatus{
		"success": lifecycle.CheckPassed, "neutral": lifecycle.CheckPassed, "skipped": lifecycle.CheckPassed,
		"failure": lifecycle.CheckFailed, "timed_out": lifecycle.CheckFailed, "cancelled": lifecycle.CheckFailed,
		"action_required": lifecycle.CheckFailed, "stale": lifecycle.CheckFailed, "": lifecycle.CheckRunning,
	} {
		f.CheckRun(sha, "run-"+conclusion, conclusion)
		want["run-"+conclusion] = st
	}
	for state, st := range map[string]lifecycle.CheckStatus{"success": lifecycle.CheckPassed, "pending": lifecycle.CheckRunning, "failure": lifecycle.CheckFailed, "error": lifecycle.CheckFailed} {
		f.Status(sha, "ci/"+state, state)
		want["ci/"+state] = st
	}
	rep, err = a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: sha})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != len(want) {
		t.Errorf("%d checks, want %d", len(rep.Checks), len(want))
	}
	for _, c := range rep.Checks {
		if want[c.Name] != c.Status {
			t.Errorf("check %s = %s, want %s", c.Name, c.Status, want[c.Name])
		}
	}
}

func TestRequiredChecks(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: true, Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}, {Context: "ci/lint"}}}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	f.CheckRun(pr.HeadSHA, "flaky-optional", "failure")
	q := lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	rep, err := a.Checks(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pending || len(rep.Checks) != 1 || rep.Checks[0].Name != "build" {
		t.Errorf("required ci/lint missing: %+v; want pending with build only", rep)
	}
	f.Status(pr.HeadSHA, "ci/lint", "success")
	if rep, _ = a.Checks(t.Context(), q); rep.Pending || len(rep.Checks) != 2 {
		t.Errorf("every required check passed: %+v", rep)
	}
	if n := f.Calls("GET /branches/{branch}/protection"); n != 1 {
		t.Errorf("protection read %d times, want once (cached)", n)
	}
}

func TestRequiredChecksFromRulesets(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtectionError(http.StatusForbidden) // no admin rights
	params := []byte(`{"required_status_checks":[{"context":"build","integration_id":15368}],"strict_required_status_checks_policy":false}`)
	rules := []byte(`{"dismiss_stale_reviews_on_push":true,"require_code_owner_review":false,"require_last_push_approval":false,"required_approving_review_count":2,"required_review_thread_resolution":false}`)
	f.SetRules("main", []*gh.RepositoryRule{
		{Type: "required_status_checks", Parameters: (*jsonRaw)(&params).ptr()},
		{Type: "pull_request", Parameters: (*jsonRaw)(&rules).ptr()},
	})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	if !pr.DismissesStaleReviews {
		t.Error("DismissesStaleReviews false with a ruleset dismissing stale reviews")
	}
	rep, _ := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if !rep.Pending {
		t.Errorf("required check from a ruleset missing: %+v, want pending", rep)
	}
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	hr, _ := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if hr.Decision != lifecycle.DecisionPending {
		t.Errorf("one approval of two required: %s", hr.Decision)
	}
}

func TestUnreadableProtectionEveryCheckCounts(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtectionError(http.StatusForbidden)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "optional", "failure")
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil || len(rep.Checks) != 1 || rep.Checks[0].Status != lifecycle.CheckFailed {
		t.Errorf("Checks = %+v, %v; want the failing check to count", rep, err)
	}
	// GitHub's own decision, null: the base requires no review.
	hr, _ := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if hr.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("no review, protection unreadable, none required at GitHub: decision %s, want not_required", hr.Decision)
	}
}

func TestReviewDecision(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{DismissStaleReviews: true, RequiredApprovingReviewCount: 1}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	decide := func(head string) lifecycle.HostReviews {
		t.Helper()
		hr, err := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: head})
		if err != nil {
			t.Fatal(err)
		}
		return hr
	}
	if !pr.DismissesStaleReviews {
		t.Error("PullRequest.DismissesStaleReviews false under a protection that dismisses stale reviews")
	}
	f.Review(pr.Number, "bob", "CHANGES_REQUESTED", pr.HeadSHA)
	if d := decide(pr.HeadSHA).Decision; d != lifecycle.DecisionChangesRequested {
		t.Errorf("changes requested: %s", d)
	}
	f.Review(pr.Number, "bob", "COMMENTED", pr.HeadSHA) // a comment changes nothing
	if d := decide(pr.HeadSHA).Decision; d != lifecycle.DecisionChangesRequested {
		t.Errorf("changes requested then commented: %s", d)
	}
	approval := f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	f.Review(pr.Number, "bob", "APPROVED", pr.HeadSHA)
	hr := decide(pr.HeadSHA)
	if hr.Decision != lifecycle.DecisionApproved || len(hr.Reviews) != 4 {
		t.Errorf("approved by both: %s with %d reviews, want approved with 4", hr.Decision, len(hr.Reviews))
	}
	// Stale approvals: a push makes both approvals of the old head not count.
	head := f.Push(pr.Head)
	if d := decide(head).Decision; d != lifecycle.DecisionPending {
		t.Errorf("after a push, with stale reviews dismissed: %s, want pending", d)
	}
	again := f.Review(pr.Number, "alice", "APPROVED", head)
	if d := decide(head).Decision; d != lifecycle.DecisionApproved {
		t.Errorf("approved again at the new head: %s", d)
	}
	// A dismissed review is dropped.
	f.Dismiss(pr.Number, approval)
	f.Dismiss(pr.Number, again)
	if d := decide(head).Decision; d != lifecycle.DecisionPending {
		t.Errorf("after dismissal: %s, want pending", d)
	}
}

func TestReviewDecisionKeepsStaleApprovalsWithoutDismissal(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	head := f.Push(pr.Head)
	hr, _ := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: head})
	if hr.Decision != lifecycle.DecisionApproved {
		t.Errorf("approval of an earlier head, stale reviews not dismissed: %s, want approved", hr.Decision)
	}
	f.SetProtection("main", &gh.Protection{})
	b := f.adapter(t, Config{})
	if hr, _ := b.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: head}); hr.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("protection requiring no reviews: %s, want not_required", hr.Decision)
	}
}

func TestMergeErrors(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	req := lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}

	f.Inject("PUT /pulls/{number}/merge", githubtest.Error(http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again."))
	_, err := a.Merge(t.Context(), req)
	var kept *lifecycle.RefusedError
	if !errors.Is(err, lifecycle.ErrTemporary) || !errors.As(err, &kept) || kept.Message != "Base branch was modified. Review and try the merge again." {
		t.Errorf("405 base modified: %v, want temporary, keeping GitHub's message", err)
	}
	// A method refused is tried once more another way; refused again, the
	// refusal is final.
	calls := f.Calls(githubtest.RouteMerge)
	f.Inject("PUT /pulls/{number}/merge", githubtest.Error(http.StatusMethodNotAllowed, "Merge commits are not allowed on this repository."),
		githubtest.Error(http.StatusMethodNotAllowed, "Squash merges are not allowed on this repository."))
	_, err = a.Merge(t.Context(), req)
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || refused.Message != "Squash merges are not allowed on this repository." || errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("405 not allowed twice: %v, want a refusal with GitHub's last message", err)
	}
	if n := f.Calls(githubtest.RouteMerge) - calls; n != 2 {
		t.Errorf("%d merge requests, want 2: the merge refused and one retry", n)
	}
	f.Push(pr.Head)
	if _, err = a.Merge(t.Context(), req); !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("409: %v, want ErrHeadMismatch", err)
	}
	if f.Merges() != 0 {
		t.Errorf("%d merges, want none", f.Merges())
	}
}

func TestMergeLostAnswer(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.Inject("PUT /pulls/{number}/merge", githubtest.Fault{Drop: true})
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil || !res.AlreadyMerged || res.MergeCommitSHA != f.pull(t, pr.Number).MergeCommitSHA {
		t.Fatalf("Merge with its answer lost = %+v, %v; want the merge recognised", res, err)
	}
	if n := f.Merges(); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
}

func TestRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock})
	pr := open(t, f, a, 1)
	reset := fmt.Sprint(clock.Now().Add(90 * time.Second).Unix())
	limited := func(status int, header http.Header, message string) githubtest.Fault {
		s := githubtest.Error(status, message)
		s.Header = header
		return s
	}
	for _, tc := range []struct {
		name   string
		answer githubtest.Fault
		wait   time.Duration
	}{
		{"primary 403", limited(403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset}}, "API rate limit exceeded for user ID 1."), 90 * time.Second},
		{"primary 429", limited(429, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset}}, "API rate limit exceeded for user ID 1."), 90 * time.Second},
		{"secondary 403 Retry-After", limited(403, http.Header{"Retry-After": {"30"}}, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."), 30 * time.Second},
		{"secondary 429 Retry-After", limited(429, http.Header{"Retry-After": {"7"}}, "You have exceeded a secondary rate limit."), 7 * time.Second},
		{"secondary 403 without headers", limited(403, nil, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."), time.Minute},
		{"429 without headers", limited(429, nil, "Too Many Requests"), time.Minute},
		{"502", limited(502, nil, "Server Error"), 0},
		{"503 Retry-After", limited(503, http.Header{"Retry-After": {"5"}}, "Service Unavailable"), 5 * time.Second},
	} {
		f.Inject("GET /pulls/{number}", tc.answer)
		_, err := a.PullRequest(t.Context(), pr.PullRequestRef)
		var te *lifecycle.TemporaryError
		if !errors.As(err, &te) || te.RetryAfter != tc.wait {
			t.Errorf("%s: error %v, want temporary with RetryAfter %s", tc.name, err, tc.wait)
		}
	}
	// A 403 that is not a rate limit is final.
	f.Inject("GET /pulls/{number}", githubtest.Error(403, "Resource not accessible by personal access token"))
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err == nil || errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("403 permission: %v, want a final error", err)
	}
	// go-github keeps no rate-limit state of its own: the next call goes out.
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Errorf("after the limits: %v", err)
	}
	if _, err := a.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "widgets", Number: 99}); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("unknown pull request: %v, want ErrNotFound", err)
	}
}

func TestDeployFoundAgainAfterRestart(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock, DeployPollInterval: time.Minute})
	req := lifecycle.DeployRequest{Task: testTask(1), OperationID: "shp_one", Environment: lifecycle.EnvironmentStaging, CommitSHA: f.Push("main")}

	// The first process creates the deployment, then dies while it waits.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := a.Deploy(ctx, req); done <- err }()
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy does not wait")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Deploy: %v", err)
	}
	dep := f.LastDeployment()
	if dep == nil || string(dep.Payload) != `{"operation_id":"shp_one","task":"ENG-1"}` || dep.GetEnvironment() != "staging" || dep.GetSHA() != req.CommitSHA {
		t.Fatalf("deployment = %+v, payload %s", dep, dep.Payload)
	}

	// The restarted process finds it; the deploy system's status wakes it.
	b := f.adapter(t, Config{Clock: clock, DeployPollInterval: time.Hour})
	type result struct {
		d   lifecycle.Deployment
		err error
	}
	res := make(chan result, 1)
	go func() { d, err := b.Deploy(t.Context(), req); res <- result{d, err} }()
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy does not wait")
	}
	f.DeploymentStatus(dep.GetID(), "in_progress", "")
	f.DeploymentStatus(dep.GetID(), "success", "https://staging.example.com")
	b.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: fmt.Sprint(dep.GetID()), State: "success"})
	r := <-res
	if r.err != nil || r.d.URL != "https://staging.example.com" || r.d.ID != fmt.Sprint(dep.GetID()) {
		t.Fatalf("Deploy = %+v, %v", r.d, r.err)
	}
	if n := f.Calls("POST /deployments"); n != 1 {
		t.Errorf("%d deployments created, want 1", n)
	}
}

func TestDeployFailure(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock, DeployPollInterval: time.Minute})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Deploy(t.Context(), lifecycle.DeployRequest{Task: testTask(1), OperationID: "shp_x", Environment: lifecycle.EnvironmentProduction, CommitSHA: f.Push("main")})
		errc <- err
	}()
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy does not wait")
	}
	f.DeploymentStatus(f.LastDeployment().GetID(), "failure", "")
	clock.Advance(time.Minute) // polling finds it without a webhook
	var refused *lifecycle.RefusedError
	if err := <-errc; !errors.As(err, &refused) || !strings.Contains(refused.Message, "failure") {
		t.Errorf("failed deployment: %v, want a refusal saying so", err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Repo: "r", Token: "x"},
		{Owner: "o", Repo: "r"},
		{Owner: "o", Repo: "r", Token: "x", MergeMethod: "fast-forward"},
		{Owner: "o", Repo: "r", Token: "x", APIURL: "http://github.example.com/api/v3/"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if _, err := New(Config{Owner: "o", Repo: "r", Token: "x", APIURL: "http://127.0.0.1:1/api/v3/"}); err != nil {
		t.Errorf("loopback http: %v", err)
	}
}

type jsonRaw []byte

func (j *jsonRaw) ptr() *json.RawMessage { m := json.RawMessage(*j); return &m }

// TestDeployStatusBeforeWait: a deployment's status observed before its
// Deploy waits (between the creation and the wait) is not lost: the wait
// reads at once instead of sleeping a poll interval. A Deploy that creates
// its deployment costs 3 calls: the listing, the creation and one read
// of the statuses once told.
func TestDeployStatusBeforeWait(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock, DeployPollInterval: time.Hour})
	a.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: "7", State: "success"})
	select {
	case <-a.watch("7"):
	default:
		t.Error("a status observed before the wait does not wake it")
	}

	req := lifecycle.DeployRequest{Task: testTask(1), OperationID: "shp_early", Environment: lifecycle.EnvironmentStaging, CommitSHA: f.Push("main")}
	res := make(chan error, 1)
	go func() { _, err := a.Deploy(t.Context(), req); res <- err }()
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy does not wait")
	}
	d := f.LastDeployment()
	f.DeploymentStatus(d.GetID(), "success", "https://staging.example.com")
	a.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: fmt.Sprint(d.GetID()), State: "success"})
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if n := f.Calls(githubtest.RouteListDeployments) + f.Calls(githubtest.RouteCreateDeployment) + f.Calls(githubtest.RouteDeploymentStatuses); n != 3 {
		t.Errorf("Deploy made %d calls, want 3", n)
	}
}

// TestDeployRetriedAfterAFailure: a deploy system that retries on the
// same deployment posts in_progress after its failure; the newest status
// decides, so the deployment is not over until the retry ends.
func TestDeployRetriedAfterAFailure(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock, DeployPollInterval: time.Minute})
	type result struct {
		d   lifecycle.Deployment
		err error
	}
	res := make(chan result, 1)
	go func() {
		d, err := a.Deploy(t.Context(), lifecycle.DeployRequest{Task: testTask(1), OperationID: "shp_retried", Environment: lifecycle.EnvironmentStaging, CommitSHA: f.Push("main")})
		res <- result{d, err}
	}()
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy does not wait")
	}
	id := f.LastDeployment().GetID()
	for _, state := range []string{"in_progress", "failure", "in_progress"} {
		f.DeploymentStatus(id, state, "")
	}
	clock.Advance(time.Minute)
	if !clock.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Deploy did not wait again")
	}
	select {
	case r := <-res:
		t.Fatalf("Deploy ended while the deploy system retried: %+v, %v", r.d, r.err)
	default:
	}
	f.DeploymentStatus(id, "success", "https://staging.example.com")
	clock.Advance(time.Minute)
	if r := <-res; r.err != nil || r.d.URL != "https://staging.example.com" {
		t.Errorf("Deploy = %+v, %v; want deployed", r.d, r.err)
	}
}
