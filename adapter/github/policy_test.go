package github

import (
	"errors"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// readBoth reads the CI and the review decision of pr at its head.
func readBoth(t *testing.T, a *Adapter, pr lifecycle.PullRequest) (lifecycle.CIReport, lifecycle.HostReviews) {
	t.Helper()
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	hr, err := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	return rep, hr
}

// TestRulesetsOfEveryType: GitHub's rules list holds types go-github v60
// does not know (merge_queue, code_scanning, ...), which must not hide the
// pull_request and required_status_checks rules beside them.
func TestRulesetsOfEveryType(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtectionError(http.StatusForbidden) // no admin rights: the rulesets are all there is
	f.SetRulesJSON("main",
		`{"type":"merge_queue","parameters":{"check_response_timeout_minutes":60,"grouping_strategy":"ALLGREEN","max_entries_to_build":5,"max_entries_to_merge":5,"merge_method":"MERGE","min_entries_to_merge":1,"min_entries_to_merge_wait_minutes":5},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
		`{"type":"pull_request","parameters":{"dismiss_stale_reviews_on_push":true,"require_code_owner_review":false,"require_last_push_approval":false,"required_approving_review_count":2,"required_review_thread_resolution":false},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
		`{"type":"code_scanning","parameters":{"code_scanning_tools":[{"tool":"CodeQL","security_alerts_threshold":"high_or_higher","alerts_threshold":"errors"}]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
		`{"type":"required_status_checks","parameters":{"required_status_checks":[{"context":"build","integration_id":15368}],"strict_required_status_checks_policy":false},"ruleset_source_type":"Organization","ruleset_source":"acme","ruleset_id":7}`,
		`{"type":"copilot_code_review","parameters":{"review_on_push":true},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
	)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	if !pr.DismissesStaleReviews {
		t.Error("DismissesStaleReviews false under a ruleset dismissing stale reviews")
	}
	f.CheckRun(pr.HeadSHA, "lint", "success")
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	rep, hr := readBoth(t, a, pr)
	if !rep.Pending || len(rep.Checks) != 0 {
		t.Errorf("CI = %+v; want pending on build, required by the ruleset, and lint not counted", rep)
	}
	if hr.Decision != lifecycle.DecisionPending {
		t.Errorf("one approval of the two the ruleset requires: %s, want pending", hr.Decision)
	}
	if n := f.Calls(githubtest.RouteRules); n != 1 {
		t.Errorf("rules read %d times for three reads, want once (kept for ProtectionTTL)", n)
	}
}

// TestPolicyNotLoosenedByAFailedRead: GitHub's rate limit or a server
// error on reading the branch's protection is not "unreadable": the reads
// that need the policy fail, temporarily, until it can be read; once read,
// a later failure keeps it.
func TestPolicyNotLoosenedByAFailedRead(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{
		RequiredStatusChecks:       &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}},
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 2, DismissStaleReviews: true},
	})
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	a := f.adapter(t, Config{Clock: clock})
	f.Push("lifecycle/eng-1")
	secondary := githubtest.Error(http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
	secondary.Header = http.Header{"Retry-After": {"30"}}
	f.Inject(githubtest.RouteProtection, secondary)
	_, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || te.RetryAfter != 30*time.Second {
		t.Fatalf("EnsurePullRequest with the protection rate-limited: %v, want temporary, 30 s", err)
	}
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	if err != nil || !pr.DismissesStaleReviews {
		t.Fatalf("EnsurePullRequest again = %+v, %v; want the pull request, dismissing stale reviews", pr, err)
	}
	f.CheckRun(pr.HeadSHA, "lint", "success")
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	for _, fault := range []githubtest.Fault{secondary, githubtest.Error(http.StatusBadGateway, "Server Error")} {
		clock.Advance(2 * time.Minute) // the policy is old: read again, and the read fails
		f.Inject(githubtest.RouteProtection, fault)
		rep, hr := readBoth(t, a, pr)
		if !rep.Pending || hr.Decision != lifecycle.DecisionPending {
			t.Errorf("after a failed read (%d): CI %+v, decision %s; want the policy read before: build pending, 2 approvals", fault.Status, rep, hr.Decision)
		}
	}
	b := f.adapter(t, Config{Clock: clock}) // nothing read yet
	f.Inject(githubtest.RouteProtection, githubtest.Error(http.StatusBadGateway, "Server Error"))
	if _, err := b.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("Checks with no policy ever read and a 502: %v, want a temporary error", err)
	}
}

// TestUnprotectedBranchRequiresNothing: GitHub's 404 "Branch not
// protected" (to a token that may read protection) is an answer: no
// approval is required, as GitHub would merge; after a 403 (no admin
// rights) GitHub's reviewDecision, null, says the same, and only when that
// cannot be read either does Config.DefaultRequiredApprovals apply.
func TestUnprotectedBranchRequiresNothing(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	if _, hr := readBoth(t, a, pr); hr.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("unprotected branch: %s, want not_required", hr.Decision)
	}
	f.Review(pr.Number, "bob", "CHANGES_REQUESTED", pr.HeadSHA)
	if _, hr := readBoth(t, a, pr); hr.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("unprotected branch, changes requested: %s, want changes_requested (rework)", hr.Decision)
	}
	g := newFakeGitHub(t)
	g.SetProtectionError(http.StatusForbidden)
	b := g.adapter(t, Config{})
	gpr := open(t, g, b, 1)
	if _, hr := readBoth(t, b, gpr); hr.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("unreadable protection, GitHub's reviewDecision null: %s, want not_required", hr.Decision)
	}
	if r := readOne(t, b, lifecycle.ReadNow, gpr); r.Reviews.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("unreadable protection, batched, reviewDecision null: %s, want not_required", r.Reviews.Decision)
	}
	g.Inject(githubtest.RouteGraphQL, githubtest.Error(http.StatusBadGateway, "Server Error"))
	hr, err := b.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: gpr.PullRequestRef, HeadSHA: gpr.HeadSHA})
	if err != nil || hr.Decision != lifecycle.DecisionPending {
		t.Errorf("unreadable protection, GraphQL failing: %s, %v; want pending (one approval by default)", hr.Decision, err)
	}
}

// TestRequiredStatusChecksNamingNone: status checks required with none
// named require nothing at GitHub; every check counts.
func TestRequiredStatusChecksNamingNone(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: true, Contexts: &[]string{}, Checks: &[]*gh.RequiredStatusCheck{}}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	rep, _ := readBoth(t, a, pr)
	if rep.Pending || len(rep.Checks) != 1 || rep.Checks[0].Status != lifecycle.CheckPassed {
		t.Errorf("CI = %+v; want build, passed, not pending", rep)
	}
}

// TestNewestRunOfANameWins: of two check runs of one name (a re-run, or
// two suites), the one created last decides, even when the older one
// completes after it started.
func TestNewestRunOfANameWins(t *testing.T) {
	t.Parallel()
	m := map[string]found{}
	started := time.Unix(1_800_000_000, 0)
	keep(m, found{check: lifecycle.CICheck{Name: "build", Status: lifecycle.CheckRunning}, at: started.Add(time.Minute), id: 200, run: true})
	keep(m, found{check: lifecycle.CICheck{Name: "build", Status: lifecycle.CheckFailed}, at: started.Add(5 * time.Minute), id: 100, run: true})
	if got := m["build"]; got.id != 200 || got.check.Status != lifecycle.CheckRunning {
		t.Errorf("kept %+v, want run 200, running", got)
	}
	// Between a run and a commit status of one name, the later change wins.
	keep(m, found{check: lifecycle.CICheck{Name: "build", Status: lifecycle.CheckPassed}, at: started.Add(10 * time.Minute), id: 7})
	if got := m["build"]; got.run || got.check.Status != lifecycle.CheckPassed {
		t.Errorf("kept %+v, want the later status", got)
	}
}
