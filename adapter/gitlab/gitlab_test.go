package gitlab_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

func newAdapter(t testing.TB, f *gitlabtest.Server, mutate ...func(*gitlab.Config)) *gitlab.Adapter {
	t.Helper()
	cfg := gitlab.Config{BaseURL: f.URL, Token: "glpat-test-token", Project: gitlabtest.ProjectPath}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := gitlab.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  gitlab.Config
		want string
	}{
		{gitlab.Config{Project: "a/b"}, "Token is required"},
		{gitlab.Config{Token: "x"}, "Project is required"},
		{gitlab.Config{Token: "x", Project: "a/b", BaseURL: "http://gitlab.example.com"}, "plain http is allowed only for loopback"},
		{gitlab.Config{Token: "x", Project: "a/b", BaseURL: "ftp://gitlab.example.com"}, "scheme must be https"},
		{gitlab.Config{Token: "x", Project: "a/b", SweepShare: -0.5}, "SweepShare -0.5 must be more than 0 and at most 1"},
		{gitlab.Config{Token: "x", Project: "a/b", SweepShare: 1.5}, "SweepShare 1.5 must be more than 0 and at most 1"},
		{gitlab.Config{Token: "x", Project: "a/b", SweepShare: math.NaN()}, "SweepShare NaN must be"},
	} {
		if _, err := gitlab.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := gitlab.New(gitlab.Config{Token: "x", Project: "42", BaseURL: "http://127.0.0.1:8929/"}); err != nil {
		t.Errorf("New on loopback http: %v", err)
	}
	for _, share := range []float64{0.01, 0.8, 1} {
		if _, err := gitlab.New(gitlab.Config{Token: "x", Project: "42", SweepShare: share}); err != nil {
			t.Errorf("New with SweepShare %v: %v", share, err)
		}
	}
}

func task(identifier string) lifecycle.Task {
	project := "gitlab"
	return lifecycle.Task{ID: "tsk_" + identifier, Identifier: identifier, Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + identifier}, Context: lifecycle.TaskContext{Project: &project}}
}

func ensure(t *testing.T, a *gitlab.Adapter, req lifecycle.PullRequestRequest) lifecycle.PullRequest {
	t.Helper()
	pr, err := a.EnsurePullRequest(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsurePullRequest: %v", err)
	}
	return pr
}

// A second submission finds the open merge request of the branch (one
// list call, no create) and applies the new reviewers to it; the merge
// request stays a draft.
func TestEnsureReusesOpenMergeRequest(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-7") // the agent pushed its work
	first := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-7"), Draft: true})
	if !first.Created || first.Head != "lifecycle/eng-7" || first.Base != "main" || !first.Draft || first.Owner != "acme" || first.Repo != "web" {
		t.Fatalf("first = %+v; want created, lifecycle/eng-7 into main, draft, acme/web", first)
	}
	if got := f.MergeRequest(1).Title; got != "Draft: ENG-7: Fix the login redirect" {
		t.Errorf("title = %q, want the Draft: prefix", got)
	}
	again := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-7"), Reviewers: []string{"bob"}})
	if again.Created || again.Number != first.Number || !again.Draft {
		t.Errorf("again = %+v; want #%d reused, still a draft", again, first.Number)
	}
	if got := f.MergeRequest(1).Title; got != "Draft: ENG-7: Fix the login redirect" {
		t.Errorf("title after a resubmission = %q, want it kept, Draft: prefix and all", got)
	}
	if len(again.RequestedReviewers) != 1 || again.RequestedReviewers[0] != "bob" {
		t.Errorf("RequestedReviewers = %v, want [bob]", again.RequestedReviewers)
	}
	if n := f.Calls(gitlabtest.RouteCreateMR); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

// A 409 on create (another process opened it meanwhile) lists again and
// uses the merge request found.
func TestEnsureConflictListsAgain(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	first := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	// The next list misses it, as if it were opened right after.
	f.Inject(gitlabtest.RouteListMRs, gitlabtest.Fault{Status: http.StatusOK, Body: "[]"})
	again := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	if again.Created || again.Number != first.Number {
		t.Errorf("after a 409: %+v, want #%d not created", again, first.Number)
	}
}

// GitLab's list of a project's merge requests filtered by source_branch
// ignores the source project: a fork's open merge request from a branch of
// the same name is listed. It is not the task's: the adapter opens the
// task's own merge request and leaves the fork's alone (its title, its
// head).
func TestForkMergeRequestIsNotAdopted(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	fork := f.OpenForkMergeRequest(4242, "lifecycle/eng-1", "main", "Someone else's work")
	forkHead := f.MergeRequest(fork).SHA
	head := f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	if !pr.Created || pr.Number == int(fork) || pr.HeadSHA != head {
		t.Errorf("EnsurePullRequest = #%d created %v head %s; want a new merge request at the project's head %s, not the fork's !%d", pr.Number, pr.Created, pr.HeadSHA, head, fork)
	}
	if got := f.MergeRequest(fork); got.Title != "Someone else's work" || got.SHA != forkHead || got.State != "opened" {
		t.Errorf("the fork's merge request became %+v", got)
	}
	again := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	if again.Created || again.Number != pr.Number {
		t.Errorf("again: #%d created %v, want #%d reused", again.Number, again.Created, pr.Number)
	}
}

func TestUnknownReviewerIsAValidationError(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	_, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task("ENG-1"), Reviewers: []string{"alice", "mallory"}})
	var ve *lifecycle.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "pullRequest.reviewers" || !strings.Contains(ve.Fields[0].Reason, "mallory") {
		t.Fatalf("error = %v, want a ValidationError on pullRequest.reviewers naming mallory", err)
	}
	if n := f.Calls(gitlabtest.RouteCreateMR); n != 0 {
		t.Errorf("a merge request was opened despite the unknown reviewer")
	}
}

func TestReviewerIDsAndTargetBranch(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.Push("release")
	f.Push("agents/eng-3")
	f.Push("agents/eng-4")
	a := newAdapter(t, f, func(c *gitlab.Config) { c.TargetBranch = "release"; c.BranchPrefix = "agents/" })
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-3"), Reviewers: []string{"carol", "alice"}})
	if pr.Base != "release" || pr.Head != "agents/eng-3" {
		t.Errorf("pr = %s into %s, want agents/eng-3 into release", pr.Head, pr.Base)
	}
	if got := f.MergeRequest(1).ReviewerIDs; len(got) != 2 || got[0] != 3 || got[1] != 1 {
		t.Errorf("reviewer_ids = %v, want [3 1]", got)
	}
	_, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task("ENG-4"), Base: "no-such-branch"})
	var ve *lifecycle.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "pullRequest.base" {
		t.Errorf("onto a missing branch: %v, want a validation error on pullRequest.base", err)
	}
}

// A merge request from a branch nobody pushed: GitLab answers 400 with its
// validation errors keyed by attribute, {"message":{"source_branch":
// ["does not exist"]}}, which is a ValidationError on pullRequest.head; a
// missing target branch one on pullRequest.base. GitLab's message may also
// be a string or an array of strings: the old text forms map too.
func TestMergeRequestOfAMissingBranch(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	fields := func(err error) []string {
		t.Helper()
		var ve *lifecycle.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("error = %v, want a ValidationError", err)
		}
		var out []string
		for _, fe := range ve.Fields {
			out = append(out, fe.Field)
			if !strings.Contains(fe.Reason, "does not exist") {
				t.Errorf("%s: reason %q does not say what GitLab said", fe.Field, fe.Reason)
			}
		}
		return out
	}
	_, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task("ENG-9")})
	if got := fields(err); !slices.Equal(got, []string{"pullRequest.head"}) {
		t.Errorf("from an unpushed branch: fields %v, want [pullRequest.head]", got)
	}
	_, err = a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task("ENG-9"), Base: "no-such-branch"})
	if got := fields(err); !slices.Equal(got, []string{"pullRequest.base", "pullRequest.head"}) {
		t.Errorf("from an unpushed branch onto a missing one: fields %v, want [pullRequest.base pullRequest.head]", got)
	}
	if n := f.Calls(gitlabtest.RouteCreateMR); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
	f.Push("lifecycle/eng-9")
	if pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-9")}); !pr.Created {
		t.Errorf("once pushed: %+v, want a merge request opened", pr)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"message":["Source branch \"lifecycle/eng-10\" does not exist"]}`, "pullRequest.head"},
		{`{"message":"Target branch \"nope\" does not exist"}`, "pullRequest.base"},
		{`{"message":{"target_branch":["does not exist"]}}`, "pullRequest.base"},
	} {
		f.Inject(gitlabtest.RouteCreateMR, gitlabtest.Fault{Status: http.StatusBadRequest, Body: tc.body})
		_, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task("ENG-10")})
		if got := fields(err); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("400 %s: fields %v, want [%s]", tc.body, got, tc.want)
		}
	}
}

func TestCIFromHeadPipeline(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	q := lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}

	rep, err := a.Checks(t.Context(), q)
	if err != nil || !rep.Pending || len(rep.Checks) != 0 {
		t.Fatalf("no head pipeline: %+v, %v; want pending", rep, err)
	}
	f.Pipeline(1, "failed",
		&gl.CommitStatus{Name: "build", Status: "success", TargetURL: "https://ci.example.com/1"},
		&gl.CommitStatus{Name: "test", Status: "failed"},
		&gl.CommitStatus{Name: "test", Status: "success"}, // retried: the latest counts
		&gl.CommitStatus{Name: "lint", Status: "failed", AllowFailure: true},
		&gl.CommitStatus{Name: "deploy-review", Status: "manual", AllowFailure: true},
		&gl.CommitStatus{Name: "e2e", Status: "waiting_for_resource"},
		&gl.CommitStatus{Name: "flaky", Status: "canceled"},
	)
	// A pipeline of another merge request on the same commit is not this one's.
	f.AddStatus(&gl.CommitStatus{SHA: pr.HeadSHA, Ref: "refs/merge-requests/2/head", Name: "other", Status: "failed", PipelineID: 4242})
	rep, err = a.Checks(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lifecycle.CheckStatus{"build": "passed", "test": "passed", "lint": "skipped", "deploy-review": "skipped", "e2e": "running", "flaky": "failed"}
	got := map[string]lifecycle.CheckStatus{}
	for _, c := range rep.Checks {
		got[c.Name] = c.Status
	}
	if rep.Pending || len(got) != len(want) {
		t.Fatalf("checks = %+v, want %v", rep, want)
	}
	for name, st := range want {
		if got[name] != st {
			t.Errorf("check %s = %s, want %s", name, got[name], st)
		}
	}

	// New commits: the head pipeline is still the old commit's → pending.
	head := f.Push("lifecycle/eng-1")
	rep, err = a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: head})
	if err != nil || !rep.Pending || len(rep.Checks) != 0 {
		t.Errorf("head pipeline of another SHA: %+v, %v; want pending, no checks", rep, err)
	}
}

// A manual job that is not allowed to fail (when: manual in rules, or
// allow_failure: false) blocks its pipeline until someone runs it: it is
// running, not skipped, so CI does not pass without it. A manual job
// allowed to fail (GitLab's default for when: manual outside rules) does
// not block, and is skipped.
func TestBlockingManualJobIsRunning(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.Pipeline(1, "manual",
		&gl.CommitStatus{Name: "build", Status: "success"},
		&gl.CommitStatus{Name: "approve-migration", Status: "manual", AllowFailure: false},
		&gl.CommitStatus{Name: "deploy-review", Status: "manual", AllowFailure: true},
	)
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lifecycle.CheckStatus{}
	for _, c := range rep.Checks {
		got[c.Name] = c.Status
	}
	want := map[string]lifecycle.CheckStatus{"build": lifecycle.CheckPassed, "approve-migration": lifecycle.CheckRunning, "deploy-review": lifecycle.CheckSkipped}
	if !maps.Equal(got, want) {
		t.Errorf("checks = %v, want %v", got, want)
	}
}

func TestReviewDecisionFromApprovals(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	q := lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	decide := func() lifecycle.HostReviews {
		t.Helper()
		hr, err := a.ReviewDecision(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		return hr
	}
	if hr := decide(); hr.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("no approval rules: %s, want not_required", hr.Decision)
	}

	f2 := gitlabtest.NewServer(t, gitlabtest.Options{ApprovalsRequired: 2, ResetApprovalsOnPush: true})
	a2 := newAdapter(t, f2)
	f2.Push("lifecycle/eng-1") // the agent pushed its work
	pr2 := ensure(t, a2, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	if !pr2.DismissesStaleReviews {
		t.Error("DismissesStaleReviews is false on a project that resets approvals on push")
	}
	f2.Approve(1, "alice")
	q2 := lifecycle.ReviewQuery{PullRequest: pr2.PullRequestRef, HeadSHA: pr2.HeadSHA}
	hr, err := a2.ReviewDecision(t.Context(), q2)
	if err != nil || hr.Decision != lifecycle.DecisionPending || len(hr.Reviews) != 1 || hr.Reviews[0].Reviewer != "alice" || hr.Reviews[0].CommitSHA != pr2.HeadSHA {
		t.Fatalf("one approval of two: %+v, %v; want pending with alice's approval at the head", hr, err)
	}
	f2.Approve(1, "bob")
	if hr, _ := a2.ReviewDecision(t.Context(), q2); hr.Decision != lifecycle.DecisionApproved || len(hr.Reviews) != 2 {
		t.Errorf("two approvals of two: %+v, want approved", hr)
	}
}

func TestMergeAtExpectedHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		mergeMethod string
		squash      bool
		want        func(mr gitlabtest.MergeRequest) string
	}{
		{"merge commit", "merge", false, func(mr gitlabtest.MergeRequest) string { return mr.MergeCommitSHA }},
		{"fast-forward", "ff", false, func(mr gitlabtest.MergeRequest) string { return mr.SHA }},
		{"squash", "ff", true, func(mr gitlabtest.MergeRequest) string { return mr.SquashCommitSHA }},
		{"squash and merge commit", "merge", true, func(mr gitlabtest.MergeRequest) string { return mr.MergeCommitSHA }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{MergeMethod: tc.mergeMethod})
			a := newAdapter(t, f, func(c *gitlab.Config) { c.Merge.Squash = tc.squash })
			f.Push("lifecycle/eng-1") // the agent pushed its work
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA, CommitTitle: "Merge ENG-1"})
			if err != nil {
				t.Fatal(err)
			}
			mr := f.MergeRequest(1)
			if want := tc.want(mr); res.MergeCommitSHA != want || want == "" {
				t.Errorf("merge commit = %s, want %s (merge_commit_sha %q, squash_commit_sha %q, sha %s)", res.MergeCommitSHA, want, mr.MergeCommitSHA, mr.SquashCommitSHA, mr.SHA)
			}
			got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
			if err != nil || got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != res.MergeCommitSHA {
				t.Errorf("after merge: %+v, %v", got, err)
			}
		})
	}
}

func TestMergeRefusals(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	old := pr.HeadSHA
	f.Push("lifecycle/eng-1")
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: old})
	if !errors.Is(err, lifecycle.ErrHeadMismatch) || !strings.Contains(err.Error(), "SHA does not match HEAD of source branch") {
		t.Errorf("409: %v, want ErrHeadMismatch with GitLab's message", err)
	}
	head := f.MergeRequest(1).SHA
	f.SetDetailedMergeStatus(1, "discussions_not_resolved")
	_, err = a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: head})
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "405 Method Not Allowed") || !strings.Contains(refused.Message, "all threads must be resolved") {
		t.Errorf("405: %v, want a RefusedError with GitLab's message and the blocking discussions", err)
	}
	if n := f.Calls(gitlabtest.RouteGetMR); n != 1 {
		t.Errorf("the refused merge request was read %d times, want once", n)
	}
}

// GitLab answers 405 to a merge it cannot make now: a merge request that
// is locked (GitLab is merging it) or whose mergeability is being worked
// out (checking, unchecked, preparing, approvals_syncing) or whose
// pipeline still runs may merge when asked again, and is a
// TemporaryError; one that someone must change first (conflicts, missing
// approvals, a draft, blocking discussions, a failed pipeline, a rebase)
// is a RefusedError in GitLab's words.
func TestMergeBlockedForNowIsTemporary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    string
		temporary bool
	}{
		{"checking", true}, {"unchecked", true}, {"preparing", true}, {"approvals_syncing", true}, {"ci_still_running", true},
		{"conflict", false}, {"not_approved", false}, {"draft_status", false}, {"discussions_not_resolved", false},
		{"ci_must_pass", false}, {"need_rebase", false}, {"requested_changes", false},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			a := newAdapter(t, f)
			f.Push("lifecycle/eng-1")
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			f.SetDetailedMergeStatus(1, tc.status)
			_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			var refused *lifecycle.RefusedError
			var te *lifecycle.TemporaryError
			reason := gitlab.ReasonMergeabilityUnknown
			if tc.status == "ci_still_running" {
				reason = gitlab.ReasonCIRunning
			}
			switch {
			case tc.temporary && (!errors.As(err, &te) || errors.As(err, &refused) || te.Reason != reason):
				t.Errorf("Merge: %v, want a TemporaryError whose Reason is %s", err, reason)
			case !tc.temporary && (!errors.As(err, &refused) || !strings.Contains(refused.Message, "405 Method Not Allowed") || !strings.Contains(refused.Message, tc.status)):
				t.Errorf("Merge: %v, want a RefusedError with GitLab's message and %s", err, tc.status)
			}
			if f.MergeRequest(1).State != "opened" {
				t.Error("merged")
			}
		})
	}
}

// While GitLab merges a merge request it is locked, and another merge
// answers 405: that is temporary, and once GitLab has merged it at the
// expected head, the next Merge reports it merged, never merging again.
func TestMergeWhileLockedIsTemporary(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	req := lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}
	f.LockForMerge(1)
	if _, err := a.Merge(t.Context(), req); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Fatalf("Merge of a locked merge request: %v, want a TemporaryError", err)
	}
	if got, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.State != lifecycle.PullRequestOpen {
		t.Errorf("a locked merge request reads %+v, %v; want open", got, err)
	}
	commit := f.MergeByHand(1)
	res, err := a.Merge(t.Context(), req)
	if err != nil || !res.AlreadyMerged || res.MergeCommitSHA != commit {
		t.Errorf("Merge once GitLab merged it: %+v, %v; want already merged as %s", res, err, commit)
	}
}

// A merge whose answer does not come before the deadline: the adapter
// reads the merge request again. Merged at the expected head is a success
// (merged once); still open is a TemporaryError, never a final failure.
func TestMergePastItsDeadlineReadsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		apply  bool // GitLab merged before the answer was lost
		merged bool
	}{{"merged meanwhile", true, true}, {"not merged", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			a := newAdapter(t, f)
			f.Push("lifecycle/eng-1")
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusGatewayTimeout, Body: `{"message":"504 Gateway Timeout"}`, Apply: tc.apply, Delay: 5 * time.Second})
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			res, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			mr := f.MergeRequest(1)
			switch {
			case tc.merged && (err != nil || res.MergeCommitSHA != mr.MergeCommitSHA || mr.MergeCommitSHA == ""):
				t.Errorf("Merge = %+v, %v; want merged as %s", res, err, mr.MergeCommitSHA)
			case !tc.merged && !errors.Is(err, lifecycle.ErrTemporary):
				t.Errorf("Merge = %+v, %v; want a TemporaryError", res, err)
			}
			if n := f.Calls(gitlabtest.RouteMerge); n > 1 {
				t.Errorf("merge sent %d times", n)
			}
		})
	}
}

// client-go retries every 5xx, PUT merge included: the adapter turns that
// off, so that a 502 on merge is one request and a temporary error.
func TestMergeIsNotRetriedByClient(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`})
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if !errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("502: %v, want a temporary error", err)
	}
	if n := f.Calls(gitlabtest.RouteMerge); n != 1 {
		t.Errorf("merge was sent %d times, want once", n)
	}
	if f.MergeRequest(1).State != "opened" {
		t.Error("merged despite the 502")
	}
}

func TestRateLimitIsTemporaryWithItsReset(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = clock })
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	reset := clock.Now().Add(42 * time.Second).Unix()
	f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusTooManyRequests,
		Header: http.Header{"Ratelimit-Reset": {strconv.FormatInt(reset, 10)}}, Body: `{"message":"Retry later"}`})
	req := lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}
	_, err := a.Merge(t.Context(), req)
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || te.RetryAfter != 42*time.Second || !te.RateLimited {
		t.Fatalf("429: %v, want a rate-limited TemporaryError retrying after 42s", err)
	}
	// Until then nothing is sent: GitLab would answer 429 again.
	clock.Advance(40 * time.Second)
	if _, err := a.Merge(t.Context(), req); !errors.As(err, &te) || te.RetryAfter != 2*time.Second || !te.RateLimited {
		t.Errorf("merge 40s into the wait: %v, want a rate-limited TemporaryError retrying after 2s", err)
	}
	if n := f.Calls(gitlabtest.RouteMerge); n != 1 {
		t.Errorf("merge sent %d times within GitLab's wait, want once", n)
	}
	clock.Advance(2 * time.Second)
	f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"7"}}, Body: `{"message":"Retry later"}`})
	_, err = a.Merge(t.Context(), req)
	if !errors.As(err, &te) || te.RetryAfter != 7*time.Second || !te.RateLimited {
		t.Errorf("429 with Retry-After: %v, want a rate-limited TemporaryError retrying after 7s", err)
	}
	clock.Advance(7 * time.Second)
	if res, err := a.Merge(t.Context(), req); err != nil || res.MergeCommitSHA == "" {
		t.Errorf("merge once the wait passed: %+v, %v", res, err)
	}
}

func TestOtherProjectIsNotFound(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	_, err := a.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "other", Repo: "web", Number: 1})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a merge request of another project: %v, want ErrNotFound", err)
	}
}

// A reading of CI is two requests: the merge request (its head pipeline)
// and the statuses of that pipeline, whether the task names its branch or
// not. The head pipeline is here a merge request pipeline (on
// refs/merge-requests/1/head), newer than the branch pipeline of the same
// commit; a pipeline of another branch at the same commit does not count.
func TestCIReadsTheMergeRequestAndTheHeadsStatuses(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.Pipeline(1, "success", &gl.CommitStatus{Name: "build", Status: "success"})
	f.MergeRequestPipeline(1, "failed", &gl.CommitStatus{Name: "test", Status: "failed"})
	f.AddStatus(&gl.CommitStatus{SHA: pr.HeadSHA, Ref: "someone-else", Name: "other", Status: "failed", PipelineID: 9001})
	for _, named := range []bool{true, false} {
		tk := task("ENG-1")
		if named {
			tk.Branch = &pr.Head
		}
		before, reads := f.TotalCalls(), f.Calls(gitlabtest.RouteGetMR)
		rep, err := a.Checks(t.Context(), lifecycle.CIQuery{Task: tk, PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Pending || len(rep.Checks) != 1 || rep.Checks[0].Name != "test" || rep.Checks[0].Status != lifecycle.CheckFailed {
			t.Errorf("checks = %+v, want only the merge request pipeline's failed test", rep)
		}
		if n, r := f.TotalCalls()-before, f.Calls(gitlabtest.RouteGetMR)-reads; n != 2 || r != 1 {
			t.Errorf("branch named %v: %d requests (%d reads of the merge request), want 2: the merge request and the statuses", named, n, r)
		}
	}
}

// A busy commit: many pipelines ran at the head (retries, schedules, the
// merge request pipeline), a hundred jobs each, and the newest, the head
// pipeline, fails. Only the head pipeline's statuses are read, every page
// of them: CI is failed, not passed, whatever the older pipelines said
// (GitLab lists a commit's statuses oldest first: reading the commit's
// first pages would have found only passed ones).
func TestBusyCommitNewestPipelineFails(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	jobs := func(n int, failing string) []*gl.CommitStatus {
		var out []*gl.CommitStatus
		for i := range n {
			st := &gl.CommitStatus{Name: fmt.Sprintf("job-%03d", i), Status: "success"}
			if st.Name == failing {
				st.Status = "failed"
			}
			out = append(out, st)
		}
		return out
	}
	for range 12 {
		f.Pipeline(1, "success", jobs(100, "")...)
	}
	f.Pipeline(1, "failed", jobs(250, "job-249")...) // the head pipeline, three pages
	q := lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	before := f.Calls(gitlabtest.RouteStatuses)
	rep, err := a.Checks(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range rep.Checks {
		if c.Status == lifecycle.CheckFailed {
			failed++
		}
	}
	if rep.Pending || len(rep.Checks) != 250 || failed != 1 {
		t.Errorf("checks: %d, %d failed, pending %v; want the head pipeline's 250, job-249 failed", len(rep.Checks), failed, rep.Pending)
	}
	if n := f.Calls(gitlabtest.RouteStatuses) - before; n != 3 {
		t.Errorf("%d requests of statuses, want 3: the head pipeline's pages only", n)
	}
}

// With pipelines for merged results (GitLab Premium) or a merge train,
// the merge request's head pipeline runs on refs/merge-requests/<iid>/merge
// at a merge commit of the head into the target branch; the head commit
// has no status of it. Its statuses are the checks of the head, once the
// merge commit is known to merge that head (one more request, the first
// time). After a push, GitLab keeps the previous head's pipeline as the
// head pipeline until a new one runs: that one does not count for the new
// head, which is pending.
func TestCIFromMergedResultsPipeline(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	branch := "lifecycle/eng-1"
	f.Push(branch)
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.MergedResultsPipeline(1, "running",
		&gl.CommitStatus{Name: "build", Status: "success", TargetURL: "https://ci.example.com/build"},
		&gl.CommitStatus{Name: "test", Status: "failed"},
		&gl.CommitStatus{Name: "test", Status: "success"}, // retried: the latest counts
		&gl.CommitStatus{Name: "e2e", Status: "running"},
	)
	tk := task("ENG-1")
	tk.Branch = &branch
	q := lifecycle.CIQuery{Task: tk, PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	want := map[string]lifecycle.CheckStatus{"build": lifecycle.CheckPassed, "test": lifecycle.CheckPassed, "e2e": lifecycle.CheckRunning}
	for i, calls := range []int{3, 2} {
		before := f.TotalCalls()
		rep, err := a.Checks(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]lifecycle.CheckStatus{}
		for _, c := range rep.Checks {
			got[c.Name] = c.Status
		}
		if rep.Pending || !maps.Equal(got, want) {
			t.Errorf("reading %d: %+v, want %v", i+1, rep, want)
		}
		if n := f.TotalCalls() - before; n != calls {
			t.Errorf("reading %d: %d requests, want %d", i+1, n, calls)
		}
	}

	head := f.Push(branch)
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{Task: tk, PullRequest: pr.PullRequestRef, HeadSHA: head})
	if err != nil || !rep.Pending || len(rep.Checks) != 0 {
		t.Errorf("new head, head pipeline still the previous head's: %+v, %v; want pending", rep, err)
	}
}

// client-go would retry a 429 or a 5xx by itself, up to five times, on the
// wall clock and without reading Retry-After: the adapter turns its
// retries off for every request, so that one answer asking to wait is one
// request and a *lifecycle.TemporaryError carrying the wait GitLab asked
// for, measured on the adapter's Clock.
func TestHostAskingToWaitIsOneRequest(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
	}{
		{"429 Retry-After seconds", http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{"429 Retry-After date", http.StatusTooManyRequests, http.Header{"Retry-After": {now.Add(45 * time.Second).Format(http.TimeFormat)}}, 45 * time.Second},
		{"429 RateLimit-Reset", http.StatusTooManyRequests, http.Header{"Ratelimit-Reset": {strconv.FormatInt(now.Add(42*time.Second).Unix(), 10)}}, 42 * time.Second},
		{"502", http.StatusBadGateway, nil, 0},
		{"503 Retry-After", http.StatusServiceUnavailable, http.Header{"Retry-After": {"5"}}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = fakeclock.New(now) })
			f.Push("lifecycle/eng-1") // the agent pushed its work
			pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
			f.Inject(gitlabtest.RouteGetMR, gitlabtest.Fault{Status: tc.status, Header: tc.header, Body: fmt.Sprintf(`{"message":"%d %s"}`, tc.status, http.StatusText(tc.status))})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := a.PullRequest(ctx, pr.PullRequestRef)
			var te *lifecycle.TemporaryError
			if !errors.As(err, &te) || te.RetryAfter != tc.want {
				t.Errorf("PullRequest: %v, want a TemporaryError retrying after %s", err, tc.want)
			}
			if n := f.Calls(gitlabtest.RouteGetMR); n != 1 {
				t.Errorf("the merge request was read %d times, want once", n)
			}
		})
	}
}
