package github

import (
	"net/http"
	"slices"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// fixture is a pull request of TestProbeSeesEveryFact.
type fixture struct {
	f      *fakeGitHub
	pr     lifecycle.PullRequest
	review int64             // the review a case's before made
	first  lifecycle.Reading // the reading before the change
}

// TestProbeSeesEveryFact: for each fact a task shows, a change at GitHub
// that moves no updatedAt where GitHub moves none, with no webhook, makes
// the next sweep read the pull request in full, and the reading shows it
// (the table of the package documentation). A change of mergeability by
// a push to the base shows at the second sweep: GitHub answers UNKNOWN to
// the first, which starts its computation.
func TestProbeSeesEveryFact(t *testing.T) {
	t.Parallel()
	// main: build required, one approval; release: protection unreadable
	// (every check counts, CI rests on the check suites, the Adapter
	// decides reviews with one approval required).
	protection := &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
		RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}}
	check := func(name string, status lifecycle.CheckStatus) func(x *fixture, r lifecycle.Reading) bool {
		return func(_ *fixture, r lifecycle.Reading) bool {
			return slices.ContainsFunc(r.CI.Checks, func(c lifecycle.CICheck) bool { return c.Name == name && c.Status == status })
		}
	}
	for _, tc := range []struct {
		name   string
		base   string // "" for main
		before func(x *fixture)
		change func(x *fixture)
		sweeps int // the sweep that sees it; 1 unless said
		// readable makes the protection readable with the Adapter's
		// credentials: a change of it shows only then.
		readable bool
		shows    func(x *fixture, r lifecycle.Reading) bool
	}{
		{
			// The case: an optional check failed (rollup
			// FAILURE), a review is missing (BLOCKED); the required
			// check completing changes neither.
			name: "a required check completes in place",
			before: func(x *fixture) {
				x.f.CheckRun(x.pr.HeadSHA, "lint", "failure")
				x.f.CheckRun(x.pr.HeadSHA, "build", "")
			},
			change: func(x *fixture) { x.f.CompleteCheckRun(x.pr.HeadSHA, "build", "success") },
			shows:  check("build", lifecycle.CheckPassed),
		},
		{
			name:   "a check re-run passes again, with a new run",
			before: func(x *fixture) { x.f.CheckRun(x.pr.HeadSHA, "build", "success") },
			change: func(x *fixture) { x.f.CheckRun(x.pr.HeadSHA, "build", "success") },
			shows: func(x *fixture, r lifecycle.Reading) bool {
				return len(r.CI.Checks) == 1 && r.CI.Checks[0].Status == lifecycle.CheckPassed && r.CI.Checks[0].URL != x.first.CI.Checks[0].URL // the re-run's
			},
		},
		{
			name: "two checks swap states",
			base: "release",
			before: func(x *fixture) {
				x.f.CheckRun(x.pr.HeadSHA, "lint", "")
				x.f.CheckRun(x.pr.HeadSHA, "test", "success")
			},
			change: func(x *fixture) {
				x.f.CompleteCheckRun(x.pr.HeadSHA, "lint", "success")
				x.f.CheckRun(x.pr.HeadSHA, "test", "") // re-run
			},
			shows: func(_ *fixture, r lifecycle.Reading) bool {
				return check("lint", lifecycle.CheckPassed)(nil, r) && check("test", lifecycle.CheckRunning)(nil, r)
			},
		},
		{
			name:   "a commit status posted while the rollup stays green",
			base:   "release",
			before: func(x *fixture) { x.f.CheckRun(x.pr.HeadSHA, "build", "success") },
			change: func(x *fixture) { x.f.Status(x.pr.HeadSHA, "ci/jenkins", "success") },
			shows:  check("ci/jenkins", lifecycle.CheckPassed),
		},
		{
			name:   "a check suite queued, the required checks unknown",
			base:   "release",
			before: func(x *fixture) { x.f.CheckRun(x.pr.HeadSHA, "lint", "success") },
			change: func(x *fixture) { x.f.CheckSuite(x.pr.HeadSHA, "circleci-checks", "queued", "") },
			shows:  func(_ *fixture, r lifecycle.Reading) bool { return r.CI.Pending },
		},
		{
			name:   "a check suite that failed to start",
			base:   "release",
			before: func(x *fixture) { x.f.CheckRun(x.pr.HeadSHA, "lint", "success") },
			change: func(x *fixture) { x.f.CheckSuite(x.pr.HeadSHA, "circleci-checks", "completed", "startup_failure") },
			shows:  check("circleci-checks check suite", lifecycle.CheckFailed),
		},
		{
			name:   "a review submitted",
			change: func(x *fixture) { x.f.Review(x.pr.Number, "alice", "APPROVED", x.pr.HeadSHA) },
			shows: func(_ *fixture, r lifecycle.Reading) bool {
				return r.Reviews.Decision == lifecycle.DecisionApproved && len(r.Reviews.Reviews) == 1
			},
		},
		{
			// GitHub gives no decision (release requires no review); the
			// Adapter's, from the writers' reviews, changes with a
			// dismissal, which moves no probed field: changes requested
			// no longer, no review required.
			name:   "a review dismissed, GitHub deciding nothing",
			base:   "release",
			before: func(x *fixture) { x.review = x.f.Review(x.pr.Number, "bob", "CHANGES_REQUESTED", x.pr.HeadSHA) },
			change: func(x *fixture) { x.f.Dismiss(x.pr.Number, x.review) },
			shows: func(_ *fixture, r lifecycle.Reading) bool {
				return r.Reviews.Decision == lifecycle.DecisionNotRequired && len(r.Reviews.Reviews) == 0
			},
		},
		{
			name:     "the base's protection changes",
			readable: true,
			change: func(x *fixture) {
				x.f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1, DismissStaleReviews: true},
					RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
			},
			shows: func(_ *fixture, r lifecycle.Reading) bool { return r.PullRequest.DismissesStaleReviews },
		},
		{
			name: "a push to the base that conflicts",
			change: func(x *fixture) {
				x.f.Push("main")
				x.f.SetConflicting(x.pr.Number, true)
			},
			sweeps: 2,
			shows: func(_ *fixture, r lifecycle.Reading) bool {
				return r.PullRequest.Mergeable == lifecycle.MergeabilityConflicting
			},
		},
		{
			name:   "marked a draft",
			change: func(x *fixture) { x.f.SetDraft(x.pr.Number, true) },
			shows:  func(_ *fixture, r lifecycle.Reading) bool { return r.PullRequest.Draft },
		},
		{
			name:   "retargeted",
			change: func(x *fixture) { x.f.SetBase(x.pr.Number, "release") },
			shows:  func(_ *fixture, r lifecycle.Reading) bool { return r.PullRequest.Base == "release" },
		},
		{
			name:   "pushed",
			change: func(x *fixture) { x.f.Push(x.pr.Head) },
			shows:  func(x *fixture, r lifecycle.Reading) bool { return r.PullRequest.HeadSHA != x.pr.HeadSHA },
		},
		{
			name:   "closed",
			change: func(x *fixture) { x.f.ClosePullRequest(x.pr.Number) },
			shows:  func(_ *fixture, r lifecycle.Reading) bool { return r.PullRequest.State == lifecycle.PullRequestClosed },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			f.SetProtection("main", protection)
			if !tc.readable {
				f.SetProtectionError(http.StatusForbidden)
			}
			f.Push("release")
			clock := fakeclock.New(f.Now()) // GitHub's time: a check suite's age counts
			a := f.adapter(t, Config{Clock: clock})
			x := &fixture{f: f, pr: open(t, f, a, 1)}
			if tc.base != "" {
				f.SetBase(x.pr.Number, tc.base)
			}
			if tc.before != nil {
				tc.before(x)
			}
			f.ComputeMergeability(x.pr.Number) // as if read meanwhile: known
			first := readOne(t, a, lifecycle.ReadNow, x.pr)
			x.first = first
			if tc.shows(x, first) {
				t.Fatalf("shown before the change: %+v %+v %+v", first.PullRequest, first.CI, first.Reviews)
			}
			version := first.Version
			tc.change(x)
			for sweep := 1; ; sweep++ {
				clock.Advance(time.Minute) // the base's policy read again
				r := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{x.pr}, []string{version})[0]
				if !r.Unchanged {
					if !tc.shows(x, r) {
						t.Fatalf("sweep %d read it in full: %+v %+v %+v; the change does not show", sweep, r.PullRequest, r.CI, r.Reviews)
					}
					if sweep != max(tc.sweeps, 1) {
						t.Errorf("seen at sweep %d, want %d", sweep, max(tc.sweeps, 1))
					}
					if r.Version == version {
						t.Errorf("the reading that shows the change has the Version of the one before")
					}
					return
				}
				if sweep >= max(tc.sweeps, 1) {
					t.Fatalf("sweep %d answered Unchanged", sweep)
				}
			}
		})
	}
}

// TestVersionDigestsTheReading: two full readings of one state carry the
// same Version; readings that show different checks, reviews or facts
// carry different ones, even where every field GitHub's probe compares is
// the same (a check re-posted with another URL, a status's new target).
func TestVersionDigestsTheReading(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	f.Status(pr.HeadSHA, "ci/jenkins", "success")
	one, two := readOne(t, a, lifecycle.ReadNow, pr), readOne(t, a, lifecycle.ReadNow, pr)
	if one.Version != two.Version {
		t.Fatalf("two readings of one state: %q and %q", one.Version, two.Version)
	}
	if len(one.Version) > 1000 {
		t.Errorf("Version of %d bytes, more than the 1,000 a Reading may carry", len(one.Version))
	}
	r := one
	r.CI = &lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "ci/jenkins", Status: lifecycle.CheckPassed, URL: "https://ci.example.com/other"}}}
	if readingSum(r) == readingSum(one) {
		t.Error("readings showing checks of different URLs have the same digest")
	}
	r = one
	r.Reviews = &lifecycle.HostReviews{Decision: lifecycle.DecisionApproved}
	if readingSum(r) == readingSum(one) {
		t.Error("readings showing different decisions have the same digest")
	}
	f.Status(pr.HeadSHA, "ci/jenkins", "success") // posted again
	if three := readOne(t, a, lifecycle.ReadNow, pr); three.Version == one.Version {
		t.Error("a status posted again: the same Version")
	}
}
