package github

import (
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// TestEnterpriseServerSchema: against an older GitHub Enterprise Server,
// whose schema lacks PullRequestReview.fullDatabaseId and the rollup's
// counts by state, and serves mergeStateStatus only under the merge info
// preview, the Adapter reads: the first query is refused, the fields are
// learned from GitHub's undefinedField errors and left out from then on
// (one query more, once), reviews keep their IDs (databaseId), behind is
// seen (the preview is asked for), and a quiet sweep is one probe that
// still sees a check completing.
func TestEnterpriseServerSchema(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{MergeInfoPreview: true, OmitFields: []string{
		"PullRequestReview.fullDatabaseId",
		"StatusCheckRollupContextConnection.checkRunCountsByState",
		"StatusCheckRollupContextConnection.statusContextCountsByState",
	}})
	f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
		RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: true, Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}})
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "")
	review := f.Review(pr.Number, "alice", "APPROVED", pr.HeadSHA)

	before := f.Calls(githubtest.RouteGraphQL)
	r := readOne(t, a, lifecycle.ReadNow, pr)
	if q := f.Calls(githubtest.RouteGraphQL) - before; q != 2 {
		t.Errorf("the first reading took %d queries, want 2: refused once, then without the missing fields", q)
	}
	if r.Reviews.Decision != lifecycle.DecisionApproved || len(r.Reviews.Reviews) != 1 || r.Reviews.Reviews[0].ID != strconv.FormatInt(review, 10) {
		t.Errorf("reviews = %+v, want alice's approval with ID %d", r.Reviews, review)
	}
	if !r.CI.Pending && (len(r.CI.Checks) != 1 || r.CI.Checks[0].Status != lifecycle.CheckRunning) {
		t.Errorf("CI = %+v, want build running", r.CI)
	}
	before = f.Calls(githubtest.RouteGraphQL)
	r = readOne(t, a, lifecycle.ReadNow, pr)
	if q := f.Calls(githubtest.RouteGraphQL) - before; q != 1 {
		t.Errorf("the second reading took %d queries, want 1", q)
	}

	// A quiet sweep: one probe; a check completing in place: read.
	version := r.Version
	before = f.Calls(githubtest.RouteGraphQL)
	if s := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{version})[0]; !s.Unchanged || f.Calls(githubtest.RouteGraphQL)-before != 1 {
		t.Errorf("quiet sweep: %+v in %d queries, want Unchanged in 1", s, f.Calls(githubtest.RouteGraphQL)-before)
	}
	f.CompleteCheckRun(pr.HeadSHA, "build", "success")
	if s := readAll(t, a, lifecycle.ReadSweep, []lifecycle.PullRequest{pr}, []string{version})[0]; s.Unchanged || s.CI.Pending || s.CI.Checks[0].Status != lifecycle.CheckPassed {
		t.Errorf("sweep after build passed: %+v, want read, build passed", s)
	}

	// Behind its base: mergeStateStatus, which the preview serves.
	f.Push("main")
	readOne(t, a, lifecycle.ReadNow, pr) // GitHub works mergeability out
	if r := readOne(t, a, lifecycle.ReadNow, pr); r.PullRequest.Mergeable != lifecycle.MergeabilityBehind {
		t.Errorf("behind a base that requires branches up to date: %q", r.PullRequest.Mergeable)
	}
}

// TestEnterpriseServerLacksARequiredField: a schema without a field the
// Adapter cannot do without fails the readings with GitHub's message,
// and is not asked again and again within one reading.
func TestEnterpriseServerLacksARequiredField(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{OmitFields: []string{"PullRequest.isDraft"}})
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	before := f.Calls(githubtest.RouteGraphQL)
	_, err := a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef}}})
	if err == nil || !strings.Contains(err.Error(), "Field 'isDraft' doesn't exist on type 'PullRequest'") {
		t.Errorf("err = %v, want GitHub's undefinedField message", err)
	}
	if q := f.Calls(githubtest.RouteGraphQL) - before; q != 1 {
		t.Errorf("%d queries, want 1", q)
	}
}
