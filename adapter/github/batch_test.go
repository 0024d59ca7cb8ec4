package github

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// readAll reads prs for purpose, with the versions given (or none), and
// fails the test unless every one is read.
func readAll(t *testing.T, a *Adapter, purpose lifecycle.ReadPurpose, prs []lifecycle.PullRequest, versions []string) []lifecycle.Reading {
	t.Helper()
	reads := make([]lifecycle.ReadRequest, len(prs))
	for i, pr := range prs {
		reads[i] = lifecycle.ReadRequest{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
		if versions != nil {
			reads[i].Version = versions[i]
		}
	}
	got, err := a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: purpose, Reads: reads})
	if err != nil {
		t.Fatalf("ReadPullRequests(%s): %v", purpose, err)
	}
	for i, r := range got {
		if r.Err != nil {
			t.Fatalf("reading %d (%s): %v", i, prs[i].PullRequestRef, r.Err)
		}
	}
	return got
}

// readOne reads pr for purpose.
func readOne(t *testing.T, a *Adapter, purpose lifecycle.ReadPurpose, pr lifecycle.PullRequest) lifecycle.Reading {
	t.Helper()
	return readAll(t, a, purpose, []lifecycle.PullRequest{pr}, nil)[0]
}

// openMany opens n pull requests.
func openMany(t *testing.T, f *fakeGitHub, a *Adapter, n int) []lifecycle.PullRequest {
	t.Helper()
	prs := make([]lifecycle.PullRequest, n)
	for i := range prs {
		prs[i] = open(t, f, a, i+1)
	}
	return prs
}

func versionsOf(rs []lifecycle.Reading) []string {
	v := make([]string, len(rs))
	for i, r := range rs {
		v[i] = r.Version
	}
	return v
}

// TestQuietSweeps: 149 pull requests nobody touches, swept ten times
// with the Versions of a first full reading: each sweep is one GraphQL
// query of one point (149 connections, GitHub's formula rounds 1.49 to
// one), and answers every pull request Unchanged; the base's policy is
// read again, conditionally, once per ProtectionTTL. Where the base names
// no required check, CI rests on the check suites too, which the probe
// then reads: two connections a pull request, still no full reading and
// no REST request charged.
func TestQuietSweeps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		required        []*gh.RequiredStatusCheck
		queries, points int64 // a sweep's
	}{
		{"a required check", []*gh.RequiredStatusCheck{{Context: "build"}}, 1, 1},
		// 74, 74 and 1 pull requests: 148, 148 and 2 connections.
		{"no required check", nil, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			prot := &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1}}
			if tc.required != nil {
				prot.RequiredStatusChecks = &gh.RequiredStatusChecks{Checks: &tc.required}
			}
			f.SetProtection("main", prot)
			f.SetGraphQLRateLimit(5000, time.Now().Add(time.Hour))
			clock := fakeclock.New(time.Now())
			a := f.adapter(t, Config{Clock: clock})
			prs := openMany(t, f, a, 149)
			for _, pr := range prs {
				f.CheckRun(pr.HeadSHA, "build", "success")
			}
			first := readAll(t, a, lifecycle.ReadNow, prs, nil)
			if u := f.Usage(); u.GraphQL != 3 || u.Points != 3 {
				t.Errorf("a full reading of 149: %d queries, %d points; want 3 of one point (50 each)", u.GraphQL, u.Points)
			}
			versions := versionsOf(first)
			calls, usage := f.Calls(""), f.Usage()
			for sweep := range 10 {
				clock.Advance(30 * time.Second) // past ProtectionTTL every other sweep
				for i, r := range readAll(t, a, lifecycle.ReadSweep, prs, versions) {
					if !r.Unchanged || r.Version != versions[i] {
						t.Fatalf("sweep %d, reading %d = %+v; want Unchanged with the same Version", sweep, i, r)
					}
				}
			}
			u := f.Usage()
			requests := f.Calls("") - calls
			if q, p := u.GraphQL-usage.GraphQL, u.Points-usage.Points; q != 10*tc.queries || p != 10*tc.points {
				t.Errorf("10 sweeps of 149: %d queries, %d points; want %d and %d", q, p, 10*tc.queries, 10*tc.points)
			}
			// Besides GraphQL, the policy: protection and rules, five
			// times, answered 304.
			if core, nm := u.Core-usage.Core, u.NotModified-usage.NotModified; core != 0 || nm != 10 || requests != 10*tc.queries+10 {
				t.Errorf("10 sweeps of 149: %d requests, %d charged against the REST limit, %d answered 304; want %d, none charged, 10",
					requests, core, nm, 10*tc.queries+10)
			}
			t.Logf("149 quiet pull requests, 10 sweeps: %d requests, %d GraphQL points, %d REST requests charged, %d answered 304",
				requests, u.Points-usage.Points, u.Core-usage.Core, u.NotModified-usage.NotModified)
			if rl, ok := a.RateLimit("graphql"); !ok || rl.Limit != 5000 || rl.Remaining != 5000-int(u.Points) {
				t.Errorf("RateLimit(graphql) = %+v, %v; want 5000, %d left", rl, ok, 5000-u.Points)
			}
		})
	}
}

// TestSweepThroughABaseMove: a merge into the base makes GitHub work out
// every open pull request's mergeability anew; a sweep meanwhile
// (mergeable UNKNOWN) reads none of them in full, and one that finds a
// conflict reads that one.
func TestSweepThroughABaseMove(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	prs := openMany(t, f, a, 3)
	versions := versionsOf(readAll(t, a, lifecycle.ReadNow, prs, nil))
	for _, pr := range prs {
		f.ForgetMergeability(pr.Number) // the base moved
	}
	usage := f.Usage()
	for i, r := range readAll(t, a, lifecycle.ReadSweep, prs, versions) {
		if !r.Unchanged {
			t.Errorf("sweep while GitHub works mergeability out: reading %d = %+v, want Unchanged", i, r)
		}
	}
	if u := f.Usage(); u.GraphQL-usage.GraphQL != 1 {
		t.Errorf("the sweep made %d GraphQL queries, want the probe only", u.GraphQL-usage.GraphQL)
	}
	f.SetConflicting(prs[1].Number, true)
	got := readAll(t, a, lifecycle.ReadSweep, prs, versions)
	if !got[0].Unchanged || !got[2].Unchanged || got[1].Unchanged || got[1].PullRequest.Mergeable != lifecycle.MergeabilityConflicting {
		t.Errorf("sweep once worked out = %+v; want #%d read in full, conflicting, and the others Unchanged", got, prs[1].Number)
	}
}

// TestFreshFactsBeforeMerge: CI turning red and a reviewer requesting
// changes, with no webhook, are what a ReadMerge reading sees, though a
// sweep's Version was taken before.
func TestFreshFactsBeforeMerge(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
		RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	r := readOne(t, a, lifecycle.ReadNow, pr)
	if r.CI.Pending || len(r.CI.Checks) != 1 || r.CI.Checks[0].Status != lifecycle.CheckPassed || r.Reviews.Decision != lifecycle.DecisionApproved {
		t.Fatalf("shippable reading = CI %+v, reviews %+v", r.CI, r.Reviews)
	}
	if r.PullRequest.Mergeable != lifecycle.MergeabilityMergeable {
		t.Errorf("Mergeable = %q, want mergeable", r.PullRequest.Mergeable)
	}
	f.CheckRun(pr.HeadSHA, "build", "failure") // a re-run fails
	f.Review(pr.Number, "bob", "CHANGES_REQUESTED", pr.HeadSHA)
	m := readOne(t, a, lifecycle.ReadMerge, pr)
	if m.Unchanged || m.CI.Checks[0].Status != lifecycle.CheckFailed {
		t.Errorf("ReadMerge after CI turned red: %+v, want build failed", m.CI)
	}
	if m.Reviews.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("ReadMerge after changes were requested: decision %s", m.Reviews.Decision)
	}
	if m.Version == r.Version {
		t.Error("the Version did not change with CI and reviews")
	}
}

// TestQueuedSuiteKeepsCIRunning: with the protection unreadable, a check
// that passed does not make CI pass while another CI's check suite is
// still queued (it has no check run yet); once the suite completes it
// does. The same rule holds for Checks.
func TestQueuedSuiteKeepsCIRunning(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtectionError(http.StatusForbidden)
	a := f.adapter(t, Config{Clock: fakeclock.New(f.Now())})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "lint", "success")
	f.CheckSuite(pr.HeadSHA, "circleci-checks", "queued", "")
	r := readOne(t, a, lifecycle.ReadNow, pr)
	if !r.CI.Pending {
		t.Errorf("CI with a queued suite = %+v, want Pending (running)", r.CI)
	}
	rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil || !rep.Pending {
		t.Errorf("Checks with a queued suite = %+v, %v; want Pending", rep, err)
	}
	// A sweep reads it in full while the suite runs: the probe does not
	// see suites.
	suites := f.Calls(githubtest.RouteCheckSuites)
	f.CheckSuite(pr.HeadSHA, "circleci-checks", "completed", "success")
	s := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{r.Version})[0]
	if s.Unchanged || s.CI.Pending || len(s.CI.Checks) != 1 || s.CI.Checks[0].Status != lifecycle.CheckPassed {
		t.Errorf("sweep after the suite completed = %+v, want read in full, CI passed", s)
	}
	if f.Calls(githubtest.RouteCheckSuites) == suites {
		t.Error("the suites were not read again")
	}
	// Failing checks keep CI from passing without reading suites.
	f.CheckRun(pr.HeadSHA, "lint", "failure")
	suites = f.Calls(githubtest.RouteCheckSuites)
	if r := readOne(t, a, lifecycle.ReadNow, pr); r.CI.Checks[0].Status != lifecycle.CheckFailed || f.Calls(githubtest.RouteCheckSuites) != suites {
		t.Errorf("with a failing check: CI %+v, suites read %d times more; want failed, none", r.CI, f.Calls(githubtest.RouteCheckSuites)-suites)
	}
	// A suite completed without check runs and failing (a workflow that
	// failed to start) fails CI.
	other := open(t, f, a, 2)
	f.CheckSuite(other.HeadSHA, "github-actions", "completed", "startup_failure")
	if r := readOne(t, a, lifecycle.ReadNow, other); len(r.CI.Checks) != 1 || r.CI.Checks[0].Status != lifecycle.CheckFailed {
		t.Errorf("a suite that failed to start: CI %+v, want a failed check", r.CI)
	}
}

// TestOutsidersDoNotCount: an approval from someone without write access
// (author association NONE) does not count and is not reported, through
// GraphQL and REST, whether the protection requiring one approval can be
// read or not (GitHub's reviewDecision decides then).
func TestOutsidersDoNotCount(t *testing.T) {
	t.Parallel()
	for _, readable := range []bool{true, false} {
		t.Run(fmt.Sprintf("protection readable %v", readable), func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1}})
			if !readable {
				f.SetProtectionError(http.StatusForbidden)
			}
			f.SetAuthorAssociation("drive-by", "NONE")
			a := f.adapter(t, Config{})
			pr := open(t, f, a, 1)
			f.Review(pr.Number, "drive-by", "APPROVED", pr.HeadSHA)
			r := readOne(t, a, lifecycle.ReadNow, pr)
			if r.Reviews.Decision != lifecycle.DecisionPending || len(r.Reviews.Reviews) != 0 {
				t.Errorf("batch after an outsider's approval: %+v, want pending and no review", r.Reviews)
			}
			hr, err := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
			if err != nil || hr.Decision != lifecycle.DecisionPending || len(hr.Reviews) != 0 {
				t.Errorf("ReviewDecision after an outsider's approval: %+v, %v; want pending and no review", hr, err)
			}
			f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA) // a collaborator
			if r := readOne(t, a, lifecycle.ReadNow, pr); r.Reviews.Decision != lifecycle.DecisionApproved || len(r.Reviews.Reviews) != 1 || r.Reviews.Reviews[0].Reviewer != "alice" {
				t.Errorf("batch after a collaborator's approval: %+v, want approved with alice's review only", r.Reviews)
			}
		})
	}
}

// TestHostReviewRules: GitHub's reviewDecision wins over the adapter's
// count: code owners and the approval of the last push.
func TestHostReviewRules(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{
		RequiredApprovingReviewCount: 1, RequireCodeOwnerReviews: true, RequireLastPushApproval: true}})
	f.SetCodeOwners("carol")
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	if r := readOne(t, a, lifecycle.ReadNow, pr); r.Reviews.Decision != lifecycle.DecisionPending {
		t.Errorf("approved by someone not a code owner: %s, want pending", r.Reviews.Decision)
	}
	head := f.PushBy(pr.Head, "carol")
	pr.HeadSHA = head
	f.Review(pr.Number, "carol", "APPROVED", head)
	if r := readOne(t, a, lifecycle.ReadNow, pr); r.Reviews.Decision != lifecycle.DecisionPending {
		t.Errorf("approved by the code owner who pushed last: %s, want pending", r.Reviews.Decision)
	}
	f.PushBy(pr.Head, "alice")
	p := f.pull(t, pr.Number)
	pr.HeadSHA = p.HeadSHA
	f.Review(pr.Number, "carol", "APPROVED", p.HeadSHA)
	if r := readOne(t, a, lifecycle.ReadNow, pr); r.Reviews.Decision != lifecycle.DecisionApproved {
		t.Errorf("the code owner approved the last push of someone else: %s, want approved", r.Reviews.Decision)
	}
}

// TestDraftAndMergeability: a draft is read as such; mergeability follows
// GitHub's (unknown after the base moves until GitHub computed it,
// conflicting, behind when the base requires branches up to date), in
// GraphQL and REST readings alike.
func TestDraftAndMergeability(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: true, Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	both := func() (lifecycle.PullRequest, lifecycle.PullRequest) {
		t.Helper()
		r := readOne(t, a, lifecycle.ReadNow, pr).PullRequest
		rest, err := a.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		return r, rest
	}
	f.SetDraft(pr.Number, true)
	if r, rest := both(); !r.Draft || !rest.Draft {
		t.Errorf("draft: batch %v, REST %v; want both drafts", r.Draft, rest.Draft)
	}
	f.SetDraft(pr.Number, false)
	f.ForgetMergeability(pr.Number)
	r := readOne(t, a, lifecycle.ReadNow, pr).PullRequest
	if r.Mergeable != lifecycle.MergeabilityUnknown {
		t.Errorf("while GitHub computes: %q, want unknown", r.Mergeable)
	}
	if r, rest := both(); r.Mergeable != lifecycle.MergeabilityMergeable || rest.Mergeable != lifecycle.MergeabilityMergeable {
		t.Errorf("once computed: batch %q, REST %q; want mergeable", r.Mergeable, rest.Mergeable)
	}
	f.SetConflicting(pr.Number, true)
	if r, rest := both(); r.Mergeable != lifecycle.MergeabilityConflicting || rest.Mergeable != lifecycle.MergeabilityConflicting {
		t.Errorf("conflicting: batch %q, REST %q", r.Mergeable, rest.Mergeable)
	}
	f.SetConflicting(pr.Number, false)
	f.Push("main") // the base moves on
	f.pull(t, pr.Number)
	readOne(t, a, lifecycle.ReadNow, pr) // GitHub computes
	if r, rest := both(); r.Mergeable != lifecycle.MergeabilityBehind || rest.Mergeable != lifecycle.MergeabilityBehind {
		t.Errorf("behind a base that requires branches up to date: batch %q, REST %q", r.Mergeable, rest.Mergeable)
	}
}

// TestMergeWhileMergeabilityUnknown: right after another merge into the
// same base, GitHub answers 405 "Pull Request is not mergeable" while it
// computes mergeability: a temporary failure, and the retry merges. A
// conflict is a final refusal.
func TestMergeWhileMergeabilityUnknown(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	first, second := open(t, f, a, 1), open(t, f, a, 2)
	if _, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: first.PullRequestRef, ExpectedHeadSHA: first.HeadSHA}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: second.PullRequestRef, ExpectedHeadSHA: second.HeadSHA})
	var refused *lifecycle.RefusedError
	if !errors.Is(err, lifecycle.ErrTemporary) || !errors.As(err, &refused) || refused.Message != "Pull Request is not mergeable" {
		t.Fatalf("merge right after another into the same base: %v, want temporary with GitHub's message", err)
	}
	if _, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: second.PullRequestRef, ExpectedHeadSHA: second.HeadSHA}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	third := open(t, f, a, 3)
	readOne(t, a, lifecycle.ReadNow, third)
	f.SetConflicting(third.Number, true)
	_, err = a.Merge(t.Context(), lifecycle.MergeRequest{Ref: third.PullRequestRef, ExpectedHeadSHA: third.HeadSHA})
	if !errors.As(err, &refused) || errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("merge of a conflicting pull request: %v, want a final refusal", err)
	}
}

// TestMergeRefusedForPolicy: GitHub's 405s for a review or a required
// check are refusals carrying GitHub's words.
func TestMergeRefusedForPolicy(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{EnforceBranchProtection: true})
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
		RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	req := lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}
	for _, tc := range []struct {
		before func()
		want   string
	}{
		{func() {}, `Required status check "build" is expected.`},
		{func() { f.CheckRun(pr.HeadSHA, "build", "") }, `Required status check "build" is in progress.`},
		{func() { f.CheckRun(pr.HeadSHA, "build", "success") }, "At least 1 approving review is required by reviewers with write access."},
	} {
		tc.before()
		_, err := a.Merge(t.Context(), req)
		var refused *lifecycle.RefusedError
		if !errors.As(err, &refused) || refused.Message != tc.want || errors.Is(err, lifecycle.ErrTemporary) {
			t.Errorf("merge: %v, want a refusal saying %q", err, tc.want)
		}
	}
	f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)
	if _, err := a.Merge(t.Context(), req); err != nil {
		t.Errorf("merge once required: %v", err)
	}
}

// TestSweepPacedWithinShare: once what is left of the GraphQL limit is
// the part kept for urgent requests, a sweep fails unsent, RateLimited
// until the reset, while a reading before a merge still goes.
func TestSweepPacedWithinShare(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	reset := time.Now().Add(20 * time.Minute).Truncate(time.Second)
	f.SetGraphQLRateLimit(10, reset)
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock, SweepShare: 0.5})
	pr := open(t, f, a, 1)
	for range 5 { // 5 points used: what is left is the urgent half
		readOne(t, a, lifecycle.ReadSweep, pr)
	}
	queries := f.Usage().GraphQL
	_, err := a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef}}})
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter < 19*time.Minute || te.RetryAfter > 21*time.Minute {
		t.Fatalf("sweep with its share spent: %v, want RateLimited for about 20 minutes", err)
	}
	if f.Usage().GraphQL != queries {
		t.Error("the sweep's query was sent")
	}
	if r := readOne(t, a, lifecycle.ReadMerge, pr); r.PullRequest.HeadSHA != pr.HeadSHA {
		t.Errorf("ReadMerge within the urgent part = %+v", r)
	}
	// GitHub's own answer once the limit is spent: 200 with a RATE_LIMIT
	// error.
	for range 4 {
		readOne(t, a, lifecycle.ReadMerge, pr)
	}
	b := f.adapter(t, Config{Clock: clock}) // knows nothing of the limit yet
	_, err = b.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef}}})
	if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter < 19*time.Minute {
		t.Errorf("GitHub's RATE_LIMIT answer: %v, want RateLimited until the reset", err)
	}
}

// TestConditionalReads: REST reads made again are conditional: GitHub's
// 304 is not charged, and the answer is the one kept.
func TestConditionalReads(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	q := lifecycle.CIQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	first, err := a.Checks(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	before := f.Usage()
	clock.Advance(2 * time.Minute) // the policy is read again too
	again, err := a.Checks(t.Context(), q)
	if err != nil || len(again.Checks) != 1 || again.Checks[0] != first.Checks[0] {
		t.Fatalf("Checks again = %+v, %v; want %+v", again, err, first)
	}
	u := f.Usage()
	if u.Core != before.Core || u.NotModified-before.NotModified < 3 {
		t.Errorf("reading again: %d charged, %d answered 304; want none charged (check runs, statuses, protection, rules all 304)", u.Core-before.Core, u.NotModified-before.NotModified)
	}
	f.CheckRun(pr.HeadSHA, "build", "failure")
	if rep, _ := a.Checks(t.Context(), q); rep.Checks[0].Status != lifecycle.CheckFailed {
		t.Errorf("after a change: %+v, want the new answer", rep)
	}
}

// TestManyChecksPaged: a head with more checks than a page holds has the
// rest read for that pull request alone.
func TestManyChecksPaged(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	prs := openMany(t, f, a, 3)
	for i := range 230 {
		f.CheckRun(prs[1].HeadSHA, fmt.Sprintf("job-%03d", i), "success")
	}
	f.CheckRun(prs[1].HeadSHA, "job-229", "failure")
	got := readAll(t, a, lifecycle.ReadNow, prs, nil)
	if n := len(got[1].CI.Checks); n != 230 {
		t.Fatalf("%d checks read, want 230", n)
	}
	if c := got[1].CI.Checks[229]; c.Name != "job-229" || c.Status != lifecycle.CheckFailed {
		t.Errorf("last check = %+v, want job-229 failed", c)
	}
	if n := f.Usage().GraphQL; n != 3 {
		t.Errorf("%d queries, want 3: one for all, two more pages for one", n)
	}
}

// TestReopenedSeenBySweep: a pull request closed and reopened at the host
// is read open again.
func TestReopenedSeenBySweep(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	v := readOne(t, a, lifecycle.ReadNow, pr).Version
	f.ClosePullRequest(pr.Number)
	closed := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{v})[0]
	if closed.Unchanged || closed.PullRequest.State != lifecycle.PullRequestClosed {
		t.Fatalf("after closing: %+v", closed)
	}
	f.Reopen(pr.Number)
	if r := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{closed.Version})[0]; r.Unchanged || r.PullRequest.State != lifecycle.PullRequestOpen {
		t.Errorf("after reopening: %+v, want open", r)
	}
}

func TestGraphQLEndpoint(t *testing.T) {
	t.Parallel()
	for api, want := range map[string]string{
		DefaultAPIURL:                      "https://api.github.com/graphql",
		"https://api.github.com":           "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/":  "https://ghe.example.com/api/graphql",
		"https://ghe.example.com/api/v3":   "https://ghe.example.com/api/graphql",
		"http://127.0.0.1:8080/":           "http://127.0.0.1:8080/graphql",
		"https://proxy.example.com/github": "https://proxy.example.com/github/graphql",
	} {
		if got := graphqlEndpoint(api); got != want {
			t.Errorf("graphqlEndpoint(%q) = %q, want %q", api, got, want)
		}
	}
	// Both forms reach the fake.
	f := newFakeGitHub(t)
	root, err := New(Config{Owner: githubtest.Owner, Repo: githubtest.Repo, Token: githubtest.Token, APIURL: f.RootAPIURL()})
	if err != nil {
		t.Fatal(err)
	}
	enterprise := f.adapter(t, Config{})
	pr := open(t, f, enterprise, 1)
	for _, a := range []*Adapter{root, enterprise} {
		if r := readOne(t, a, lifecycle.ReadNow, pr); r.PullRequest.HeadSHA != pr.HeadSHA {
			t.Errorf("reading = %+v", r)
		}
	}
}

func TestSweepShareValidated(t *testing.T) {
	t.Parallel()
	for _, share := range []float64{-0.5, 1.5} {
		if _, err := New(Config{Owner: "o", Repo: "r", Token: "x", SweepShare: share}); err == nil {
			t.Errorf("SweepShare %v accepted", share)
		}
	}
	if _, err := New(Config{Owner: "o", Repo: "r", Token: "x", GraphQLURL: "http://github.example.com/graphql"}); err == nil {
		t.Error("a plain http GraphQLURL to a host not loopback accepted")
	}
	if _, err := New(Config{Owner: "o", Repo: "r", Token: "x", SweepShare: 1}); err != nil {
		t.Errorf("SweepShare 1: %v", err)
	}
}

// TestAdaptiveBatches: GitHub gives up on queries of more than 60 pull
// requests (502 "Something went wrong while executing your query"). A
// sweep of 150 still reads every one: the probe of 149 and then of 74
// time out, and the rest go 37 at a time; the next sweep starts at 37
// and times out no more. Once GitHub answers in time again, the size
// grows back to 149 after queries of each size succeed. A full reading
// shrinks the same way.
func TestAdaptiveBatches(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.SetProtection("main", &gh.Protection{RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock})
	prs := openMany(t, f, a, 150)
	versions := versionsOf(readAll(t, a, lifecycle.ReadNow, prs, nil))
	sweep := func() int64 {
		t.Helper()
		clock.Advance(time.Minute)
		before := f.Calls(githubtest.RouteGraphQL)
		for i, r := range readAll(t, a, lifecycle.ReadSweep, prs, versions) {
			if !r.Unchanged {
				t.Fatalf("reading %d = %+v, want Unchanged", i, r)
			}
		}
		return f.Calls(githubtest.RouteGraphQL) - before
	}
	f.SetGraphQLTimeout(60)
	if q, n := sweep(), f.GraphQLTimeouts(); q != 7 || n != 2 {
		t.Errorf("first sweep: %d queries, %d timed out; want 7 (149 and 74 timed out, then 37, 37, 37, 37, 2) and 2", q, n)
	}
	if q, n := sweep(), f.GraphQLTimeouts(); q != 5 || n != 2 {
		t.Errorf("second sweep: %d queries, %d timed out in all; want 5, none more", q, n)
	}
	f.SetGraphQLTimeout(0)
	for range 30 {
		if sweep() == 2 {
			break
		}
	}
	if q := sweep(); q != 2 {
		t.Errorf("long after GitHub answers in time again: %d queries a sweep, want 2 (149 and 1)", q)
	}
	f.SetGraphQLTimeout(20)
	before := f.GraphQLTimeouts()
	readAll(t, a, lifecycle.ReadNow, prs, nil)
	if n := f.GraphQLTimeouts() - before; n != 2 {
		t.Errorf("a full reading of 150 with queries of more than 20 timing out: %d timed out, want 2 (50, 25)", n)
	}
}
