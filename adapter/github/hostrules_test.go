package github

import (
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// both reads pr through GraphQL and REST.
func both(t *testing.T, a *Adapter, pr lifecycle.PullRequest) (batch, rest lifecycle.PullRequest) {
	t.Helper()
	batch = readOne(t, a, lifecycle.ReadNow, pr).PullRequest
	rest, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	return batch, rest
}

// TestBlockedByConversations: GitHub's BLOCKED while CI passed and the
// approval required is given (unresolved conversations the base requires
// resolved) is blocked, the reason naming conversations, through GraphQL
// and REST; once the conversation is resolved, mergeable.
func TestBlockedByConversations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(f *fakeGitHub)
	}{
		{"branch protection", func(f *fakeGitHub) {
			f.SetProtection("main", &gh.Protection{
				RequiredPullRequestReviews:     &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
				RequiredStatusChecks:           &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}},
				RequiredConversationResolution: &gh.RequiredConversationResolution{Enabled: true},
			})
		}},
		{"ruleset, protection unreadable", func(f *fakeGitHub) {
			f.SetProtectionError(http.StatusForbidden)
			f.SetRulesJSON("main",
				`{"type":"pull_request","parameters":{"required_approving_review_count":1,"dismiss_stale_reviews_on_push":false,"require_code_owner_review":false,"require_last_push_approval":false,"required_review_thread_resolution":true},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`,
				`{"type":"required_status_checks","parameters":{"strict_required_status_checks_policy":false,"required_status_checks":[{"context":"build"}]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHubWith(t, githubtest.Options{EnforceBranchProtection: true})
			tc.set(f)
			a := f.adapter(t, Config{})
			pr := open(t, f, a, 1)
			f.SetUnresolvedConversations(pr.Number, 1)
			f.CheckRun(pr.HeadSHA, "build", "success")
			f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
			batch, rest := both(t, a, pr)
			for _, got := range []lifecycle.PullRequest{batch, rest} {
				if got.Mergeable != lifecycle.MergeabilityBlocked || !strings.Contains(got.BlockedReason, "conversations resolved") {
					t.Errorf("blocked by a conversation: %q %q, want blocked naming conversations", got.Mergeable, got.BlockedReason)
				}
			}
			if _, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err == nil || !strings.Contains(err.Error(), "A conversation must be resolved") {
				t.Errorf("Merge = %v, want GitHub's refusal", err)
			}
			f.SetUnresolvedConversations(pr.Number, 0)
			batch, rest = both(t, a, pr)
			if batch.Mergeable != lifecycle.MergeabilityMergeable || rest.Mergeable != lifecycle.MergeabilityMergeable || batch.BlockedReason != "" || rest.BlockedReason != "" {
				t.Errorf("conversation resolved: batch %q %q, REST %q %q; want mergeable", batch.Mergeable, batch.BlockedReason, rest.Mergeable, rest.BlockedReason)
			}
		})
	}
}

// TestBlockedForWhatTheLifecycleModels: GitHub's BLOCKED for a review
// missing, or a required check not passed, is what the lifecycle refuses
// to ship for itself: mergeable, with no reason, even where the base
// requires conversations resolved too.
func TestBlockedForWhatTheLifecycleModels(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{
		RequiredPullRequestReviews:     &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
		RequiredStatusChecks:           &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}},
		RequiredConversationResolution: &gh.RequiredConversationResolution{Enabled: true},
	})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.SetUnresolvedConversations(pr.Number, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"a review missing", func() {}},
		{"changes requested", func() { f.Review(pr.Number, "bob", "CHANGES_REQUESTED", pr.HeadSHA) }},
		{"approved, the required check failing", func() {
			f.Review(pr.Number, "bob", "APPROVED", pr.HeadSHA)
			f.CheckRun(pr.HeadSHA, "build", "failure")
		}},
		{"approved, the required check running", func() { f.CheckRun(pr.HeadSHA, "build", "") }},
	} {
		step.do()
		batch, rest := both(t, a, pr)
		for _, got := range []lifecycle.PullRequest{batch, rest} {
			if got.Mergeable != lifecycle.MergeabilityMergeable || got.BlockedReason != "" {
				t.Errorf("%s: %q %q, want mergeable (the lifecycle refuses for it itself)", step.what, got.Mergeable, got.BlockedReason)
			}
		}
	}
	f.CheckRun(pr.HeadSHA, "build", "success")
	if batch, rest := both(t, a, pr); batch.Mergeable != lifecycle.MergeabilityBlocked || rest.Mergeable != lifecycle.MergeabilityBlocked {
		t.Errorf("everything modelled met, a conversation unresolved: batch %q, REST %q; want blocked", batch.Mergeable, rest.Mergeable)
	}
}

// TestBlockedReasonUnreadable: with the protection unreadable and no
// ruleset naming what blocks, the reason says the protection cannot be
// read.
func TestBlockedReasonUnreadable(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredConversationResolution: &gh.RequiredConversationResolution{Enabled: true}})
	f.SetProtectionError(http.StatusForbidden)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.SetUnresolvedConversations(pr.Number, 2)
	f.CheckRun(pr.HeadSHA, "build", "success")
	got := readOne(t, a, lifecycle.ReadNow, pr).PullRequest
	if got.Mergeable != lifecycle.MergeabilityBlocked || !strings.Contains(got.BlockedReason, "cannot read") {
		t.Errorf("blocked by an unreadable protection: %q %q, want blocked saying the protection cannot be read", got.Mergeable, got.BlockedReason)
	}
}

// TestRequiredChecksLearned: most App and bot tokens cannot read branch
// protection; GitHub's isRequired says which checks are required, so an
// optional check failing (codecov/patch) does not fail CI while the
// required one passes, and a required one failing does. Through GraphQL
// and REST (Checks asks isRequired in one small query).
func TestRequiredChecksLearned(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}, {Context: "ci/lint"}}}})
	f.SetProtectionError(http.StatusForbidden)
	clock := fakeclock.New(f.Now())
	a := f.adapter(t, Config{Clock: clock})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	f.Status(pr.HeadSHA, "ci/lint", "success")
	f.Status(pr.HeadSHA, "codecov/patch", "failure")
	check := func(what string, wantFailed bool) {
		t.Helper()
		r := readOne(t, a, lifecycle.ReadNow, pr)
		rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []lifecycle.CIReport{*r.CI, rep} {
			names := []string{}
			failed := false
			for _, c := range got.Checks {
				names = append(names, c.Name)
				failed = failed || c.Status == lifecycle.CheckFailed
			}
			if strings.Join(names, ",") != "build,ci/lint" || got.Pending || failed != wantFailed {
				t.Errorf("%s: %+v; want build and ci/lint only, failed %v", what, got, wantFailed)
			}
		}
	}
	check("the optional check failing", false)
	graphql := f.Usage().GraphQL
	if _, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}); err != nil || f.Usage().GraphQL-graphql != 1 {
		t.Errorf("Checks made %d GraphQL queries (%v), want the one of isRequired", f.Usage().GraphQL-graphql, err)
	}
	f.Status(pr.HeadSHA, "ci/lint", "failure")
	check("a required check failing", true)
}

// TestSuiteQueuedForEver: with the required checks not all known, a check
// suite an App left queued with no run keeps CI pending for
// Config.StaleSuiteAfter from its creation, and is then reported stale
// and no longer waited on; the reading after the grace is a full one.
func TestSuiteQueuedForEver(t *testing.T) {
	t.Parallel()
	for _, readable := range []bool{false, true} {
		name := "protection unreadable, a check marked required"
		if readable {
			name = "nothing required: every check counts"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			if !readable {
				f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
				f.SetProtectionError(http.StatusForbidden)
			}
			clock := fakeclock.New(f.Now())
			a := f.adapter(t, Config{Clock: clock, StaleSuiteAfter: 5 * time.Minute})
			pr := open(t, f, a, 1)
			f.CheckRun(pr.HeadSHA, "build", "success")
			before := f.Now()
			f.CheckSuite(pr.HeadSHA, "codecov", "queued", "")
			after := f.Now() // the suite was created between
			read := func() (lifecycle.Reading, lifecycle.CIReport) {
				t.Helper()
				rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
				if err != nil {
					t.Fatal(err)
				}
				return readOne(t, a, lifecycle.ReadNow, pr), rep
			}
			r, rep := read()
			for _, got := range []lifecycle.CIReport{*r.CI, rep} {
				if !got.Pending || len(got.Stale) != 0 {
					t.Errorf("within the grace: %+v, want pending, nothing stale", got)
				}
			}
			clock.Set(before.Add(5 * time.Minute))
			if _, rep := read(); !rep.Pending {
				t.Errorf("before the grace ends: %+v, want pending", rep)
			}
			clock.Set(after.Add(5 * time.Minute))
			s := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{r.Version})[0]
			r, rep = read()
			for _, got := range []lifecycle.CIReport{*s.CI, *r.CI, rep} {
				if got.Pending || len(got.Stale) != 1 || got.Stale[0].Name != "codecov" || got.Stale[0].Since.Before(before) || got.Stale[0].Since.After(after) ||
					len(got.Checks) != 1 || got.Checks[0].Status != lifecycle.CheckPassed {
					t.Errorf("after the grace: %+v, want build passed, codecov stale since its creation", got)
				}
			}
		})
	}
}
