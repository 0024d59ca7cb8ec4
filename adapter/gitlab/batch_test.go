package gitlab_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// fleet is a project with many merge requests in review, on a fake clock
// that the fake GitLab and the adapter share, read as the Service reads
// them: reads carry the Version of each one's last reading.
type fleet struct {
	f     *gitlabtest.Server
	a     *gitlab.Adapter
	clock *fakeclock.Clock
	prs   []lifecycle.PullRequest
	reads []lifecycle.ReadRequest
}

// newFleet opens n merge requests, each with a passing pipeline, lets
// GitLab work out their mergeability and two minutes pass, and reads them
// all with ReadNow.
func newFleet(t testing.TB, n int, opts gitlabtest.Options, mutate ...func(*gitlab.Config)) *fleet {
	t.Helper()
	fl := &fleet{clock: fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	opts.Now = fl.clock.Now
	fl.f = gitlabtest.NewServer(t, opts)
	fl.a = newAdapter(t, fl.f, append([]func(*gitlab.Config){func(c *gitlab.Config) { c.Clock = fl.clock }}, mutate...)...)
	for i := range n {
		ident := fmt.Sprintf("ENG-%d", i+1)
		fl.f.Push("lifecycle/" + strings.ToLower(ident))
		pr, err := fl.a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: task(ident)})
		if err != nil {
			t.Fatal(err)
		}
		fl.f.Pipeline(int64(pr.Number), "success", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "test", Status: "success"})
		fl.prs = append(fl.prs, pr)
		fl.reads = append(fl.reads, lifecycle.ReadRequest{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	}
	fl.f.SettleMergeability()
	fl.clock.Advance(2 * time.Minute)
	fl.read(t, lifecycle.ReadNow)
	return fl
}

// read reads the fleet for purpose, keeps each Version as the Service
// does, and returns the readings.
func (fl *fleet) read(t testing.TB, purpose lifecycle.ReadPurpose) []lifecycle.Reading {
	t.Helper()
	got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: purpose, Reads: fl.reads})
	if err != nil {
		t.Fatalf("ReadPullRequests(%s): %v", purpose, err)
	}
	for i, r := range got {
		if r.Err != nil {
			t.Fatalf("reading %d: %v", i, r.Err)
		}
		fl.reads[i].Version = r.Version
		if !r.Unchanged {
			fl.reads[i].HeadSHA = r.PullRequest.HeadSHA
		}
	}
	return got
}

// sweep lets a minute pass and sweeps the fleet, returning the readings
// and the requests GitLab served.
func (fl *fleet) sweep(t testing.TB) ([]lifecycle.Reading, int) {
	t.Helper()
	fl.clock.Advance(time.Minute)
	before := fl.f.TotalCalls()
	got := fl.read(t, lifecycle.ReadSweep)
	return got, fl.f.TotalCalls() - before
}

// changed returns the indexes of the readings that are not Unchanged.
func changed(got []lifecycle.Reading) []int {
	var out []int
	for i, r := range got {
		if !r.Unchanged {
			out = append(out, i)
		}
	}
	return out
}

// 150 merge requests in review, nothing changing: each sweep is three
// requests (the merge requests, a hundred a list, and the pipelines
// updated since), every reading Unchanged: thirty requests over ten
// sweeps.
func TestQuietSweeps(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 150, gitlabtest.Options{})
	total := 0
	for i := range 10 {
		got, n := fl.sweep(t)
		total += n
		if c := changed(got); len(c) != 0 {
			t.Errorf("sweep %d read %d merge requests in full, want none", i+1, len(c))
		}
		if n != 3 {
			t.Errorf("sweep %d: %d requests, want 3", i+1, n)
		}
	}
	if total != 30 {
		t.Errorf("ten sweeps of 150 quiet merge requests: %d requests, want 30", total)
	}
	if got := fl.f.AllCalls(); got[gitlabtest.RouteGetMR] != 150 {
		t.Errorf("the merge requests were read %d times, want once each (before the sweeps)", got[gitlabtest.RouteGetMR])
	}
}

// What changes at GitLab without a webhook shows at the next sweep, which
// reads in full the merge requests concerned only: a push, a pipeline
// turning red (which does not touch its merge request), an approval, a
// reviewer requesting changes, a title made a draft, a close and a merge
// by hand. A reopened one shows at the sweep after.
func TestSweepSeesChangesWithoutWebhooks(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 20, gitlabtest.Options{ApprovalsRequired: 1})
	if _, n := fl.sweep(t); n != 2 {
		t.Fatalf("a quiet sweep: %d requests", n)
	}
	f, prs := fl.f, fl.prs
	iid := func(i int) int64 { return int64(prs[i].Number) }
	head := f.Push(prs[0].Head)
	f.SetCheck(prs[1].HeadSHA, "test", "failed", "")
	f.Approve(iid(2), "alice")
	f.SetReviewerState(iid(3), "bob", "requested_changes")
	f.SetTitle(iid(4), "Draft: "+f.MergeRequest(iid(4)).Title)
	f.Close(iid(5))
	merged := f.MergeByHand(iid(6))
	got, n := fl.sweep(t)
	if c := changed(got); fmt.Sprint(c) != "[0 1 2 3 4 5 6]" {
		t.Fatalf("sweep read %v in full, want [0 1 2 3 4 5 6]", c)
	}
	// The lists, then per merge request its reading (three requests; four
	// for the one with a reviewer; the pushed one has no pipeline of its
	// head yet), and the project's settings once a minute has passed.
	if n > 2+7*4+2 {
		t.Errorf("sweep: %d requests", n)
	}
	if r := got[0]; r.PullRequest.HeadSHA != head || r.CI == nil || !r.CI.Pending {
		t.Errorf("after a push: head %s, CI %+v; want %s, pending", r.PullRequest.HeadSHA, r.CI, head)
	}
	if r := got[1]; r.CI == nil || !hasCheck(r.CI, "test", lifecycle.CheckFailed) {
		t.Errorf("after the pipeline turned red: CI %+v, want test failed", r.CI)
	}
	if r := got[2]; r.Reviews == nil || r.Reviews.Decision != lifecycle.DecisionApproved {
		t.Errorf("after an approval: %+v", r.Reviews)
	}
	if r := got[3]; r.Reviews == nil || r.Reviews.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("after changes were requested: %+v", r.Reviews)
	}
	if r := got[4]; !r.PullRequest.Draft {
		t.Errorf("after the title became a draft's: %+v", r.PullRequest)
	}
	if r := got[5]; r.PullRequest.State != lifecycle.PullRequestClosed {
		t.Errorf("after a close: %s", r.PullRequest.State)
	}
	if r := got[6]; r.PullRequest.State != lifecycle.PullRequestMerged || r.PullRequest.MergeCommitSHA != merged {
		t.Errorf("after a merge by hand: %s as %s", r.PullRequest.State, r.PullRequest.MergeCommitSHA)
	}

	f.Reopen(iid(5))
	// The merge by hand moved main: the open merge requests into it are
	// checked again, which does not touch them. Their readings stand.
	got, _ = fl.sweep(t)
	if r := got[5]; r.Unchanged || r.PullRequest.State != lifecycle.PullRequestOpen {
		t.Errorf("after a reopen: %+v, want read open", r)
	}
	for _, i := range []int{7, 8, 19} {
		if !got[i].Unchanged {
			t.Errorf("merge request %d, unchanged but for main moving, was read in full", i)
		}
	}
}

func hasCheck(rep *lifecycle.CIReport, name string, st lifecycle.CheckStatus) bool {
	for _, c := range rep.Checks {
		if c.Name == name && c.Status == st {
			return true
		}
	}
	return false
}

// GitLab touches a merge request's updated_at through system notes at
// most once a minute: an approval 30 seconds after a push leaves it at
// the push. A sweep still sees it where it changes the merge request's
// detailed_merge_status (not_approved, with approval rules), which the
// list shows.
func TestSweepSeesChangesWithinGitLabsTouchInterval(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, gitlabtest.Options{ApprovalsRequired: 1})
	f, pr := fl.f, fl.prs[0]
	fl.clock.Advance(time.Minute)
	f.Push(pr.Head) // touches updated_at
	f.SettleMergeability()
	fl.clock.Advance(10 * time.Second)
	if r := fl.read(t, lifecycle.ReadNow)[0]; r.PullRequest.Mergeable != lifecycle.MergeabilityMergeable {
		t.Fatalf("the push read as %+v, want mergeable", r.PullRequest)
	}
	fl.clock.Advance(20 * time.Second)
	before := f.MergeRequest(int64(pr.Number)).UpdatedAt
	f.Approve(int64(pr.Number), "alice") // 30s after the push: not touched
	if after := f.MergeRequest(int64(pr.Number)).UpdatedAt; !after.Equal(before) {
		t.Fatalf("the fake touched the merge request %s after the last touch", after.Sub(before))
	}
	got, _ := fl.sweep(t)
	if got[0].Unchanged || got[0].Reviews == nil || got[0].Reviews.Decision != lifecycle.DecisionApproved {
		t.Errorf("sweep after an approval within GitLab's touch interval: %+v, want the approval read", got[0])
	}
}

// The reading right before a merge is read in full whatever its Version,
// one request per part: the merge request once, its head pipeline's
// statuses, its approvals, its reviewers when it has any. It sees what
// changed without a webhook: CI turned red, changes requested, a draft.
func TestReadMergeIsFreshAndCheap(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 3, gitlabtest.Options{})
	f, prs := fl.f, fl.prs
	f.SetCheck(prs[0].HeadSHA, "test", "failed", "")
	f.SetReviewerState(int64(prs[1].Number), "bob", "requested_changes")
	f.SetTitle(int64(prs[2].Number), "Draft: not yet")
	fl.clock.Advance(10 * time.Second) // within the settings' minute
	ciFailed := func(r lifecycle.Reading) bool { return hasCheck(r.CI, "test", lifecycle.CheckFailed) }
	changesRequested := func(r lifecycle.Reading) bool { return r.Reviews.Decision == lifecycle.DecisionChangesRequested }
	isDraft := func(r lifecycle.Reading) bool {
		return r.PullRequest.Draft && hasCheck(r.CI, "build", lifecycle.CheckPassed)
	}
	three := map[string]int{gitlabtest.RouteGetMR: 1, gitlabtest.RouteStatuses: 1, gitlabtest.RouteApprovals: 1}
	four := map[string]int{gitlabtest.RouteGetMR: 1, gitlabtest.RouteStatuses: 1, gitlabtest.RouteApprovals: 1, gitlabtest.RouteReviewers: 1}
	for i, want := range []struct {
		check func(r lifecycle.Reading) bool
		what  string
		calls map[string]int
	}{
		{ciFailed, "CI failed", three},
		{changesRequested, "changes requested", four},
		{isDraft, "a draft", three},
	} {
		before := f.AllCalls()
		got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: fl.reads[i : i+1]})
		if err != nil {
			t.Fatal(err)
		}
		r := got[0]
		if r.Unchanged || r.Err != nil || r.CI == nil || r.Reviews == nil || !want.check(r) {
			t.Errorf("ReadMerge of %d: %+v; want %s", i, r, want.what)
		}
		after := f.AllCalls()
		for route, n := range after {
			if n-before[route] != want.calls[route] {
				t.Errorf("ReadMerge of %d: %s %d times, want %d", i, route, n-before[route], want.calls[route])
			}
		}
	}
}

// advanceWhileWaiting moves fl's clock on a second whenever something
// waits on it, until the test ends: the adapter's waits before it reads a
// merge request again.
func (fl *fleet) advanceWhileWaiting(t testing.TB) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			if fl.clock.WaitForWaiters(1, 10*time.Millisecond) {
				fl.clock.Advance(time.Second)
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}

// A reading before a merge of a merge request whose mergeability GitLab
// is still working out reads the merge request again, alone (one request,
// not a whole reading), and has the result; other readings do not.
func TestReadMergeSettlesMergeability(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 1, gitlabtest.Options{})
	fl.advanceWhileWaiting(t)
	f := fl.f
	f.SetConflicts(int64(fl.prs[0].Number), true) // GitLab checks again
	before := f.AllCalls()
	got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: fl.reads})
	if err != nil || got[0].Err != nil {
		t.Fatal(err, got[0].Err)
	}
	if m := got[0].PullRequest.Mergeable; m != lifecycle.MergeabilityConflicting {
		t.Errorf("ReadMerge while GitLab checks: %q, want conflicting, read again", m)
	}
	after := f.AllCalls()
	if n := after[gitlabtest.RouteGetMR] - before[gitlabtest.RouteGetMR]; n != 2 {
		t.Errorf("ReadMerge read the merge request %d times, want 2", n)
	}
	f.SetConflicts(int64(fl.prs[0].Number), false)
	if m := fl.read(t, lifecycle.ReadNow)[0].PullRequest.Mergeable; m != lifecycle.MergeabilityUnknown {
		t.Errorf("ReadNow while GitLab checks: %q, want unknown, not read again", m)
	}
}

// A busy commit: the head pipeline is the newest of many at the head,
// and fails; the reading before a merge says CI failed.
func TestReadMergeOfABusyCommit(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 1, gitlabtest.Options{})
	f, pr := fl.f, fl.prs[0]
	for range 15 {
		jobs := make([]*gl.CommitStatus, 100)
		for j := range jobs {
			jobs[j] = &gl.CommitStatus{Name: fmt.Sprintf("job-%d", j), Status: "success"}
		}
		f.Pipeline(int64(pr.Number), "success", jobs...)
	}
	f.Pipeline(int64(pr.Number), "failed", &gl.CommitStatus{Name: "job-1", Status: "success"}, &gl.CommitStatus{Name: "job-2", Status: "failed"})
	got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: fl.reads})
	if err != nil {
		t.Fatal(err)
	}
	if ci := got[0].CI; ci == nil || len(ci.Checks) != 2 || !hasCheck(ci, "job-2", lifecycle.CheckFailed) {
		t.Errorf("CI of a busy commit = %+v, want the head pipeline's two checks, job-2 failed", ci)
	}
}

// A sweep reads in full what it cannot judge by its Version: none, one
// it cannot read, one of another head than the Service holds, one of
// another merge request, one whose mergeability GitLab was still working
// out.
func TestSweepReadsInFullWhatItCannotJudge(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 6, gitlabtest.Options{})
	quiet := fl.reads[5].Version
	fl.reads[0].Version = ""
	fl.reads[1].Version = "not a version of ours"
	fl.reads[2].HeadSHA = gitlabtest.NewSHA()
	fl.reads[3].Version = fl.reads[4].Version
	v, _ := url.ParseQuery(fl.reads[4].Version)
	v.Set("m", "unknown")
	fl.reads[4].Version = v.Encode()
	got, _ := fl.sweep(t)
	if c := changed(got); fmt.Sprint(c) != "[0 1 2 3 4]" {
		t.Errorf("read in full: %v, want [0 1 2 3 4]", c)
	}
	if !got[5].Unchanged || got[5].Version == quiet {
		t.Errorf("the quiet one: %+v; want Unchanged, its Version moved on from %q", got[5], quiet)
	}
}

// A merge request just opened: GitLab is working out its mergeability,
// so its reading says unknown and the next sweep reads it again, which
// finds the result (GitLab does not touch a merge request when it has).
func TestSweepRereadsUnsettledMergeability(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 1, gitlabtest.Options{})
	fl.f.SetConflicts(int64(fl.prs[0].Number), true)
	if r := fl.read(t, lifecycle.ReadNow)[0]; r.PullRequest.Mergeable != lifecycle.MergeabilityUnknown {
		t.Fatalf("read while GitLab checks: %q, want unknown", r.PullRequest.Mergeable)
	}
	got, _ := fl.sweep(t)
	if got[0].Unchanged || got[0].PullRequest.Mergeable != lifecycle.MergeabilityConflicting {
		t.Errorf("next sweep: %+v, want read in full, conflicting", got[0])
	}
	if got, _ := fl.sweep(t); !got[0].Unchanged {
		t.Errorf("the sweep after: %+v, want Unchanged", got[0])
	}
}

// More than a page changed: the lists read more pages, and only then.
func TestSweepPagesThroughManyChanges(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 130, gitlabtest.Options{})
	for _, pr := range fl.prs {
		fl.f.Push(pr.Head)
	}
	before := fl.f.AllCalls()
	got, _ := fl.sweep(t)
	if c := changed(got); len(c) != 130 {
		t.Errorf("read in full: %d, want 130", len(c))
	}
	after := fl.f.AllCalls()
	if n := after[gitlabtest.RouteListMRs] - before[gitlabtest.RouteListMRs]; n != 2 {
		t.Errorf("%d pages of merge requests, want 2", n)
	}
	if n := after[gitlabtest.RouteListPipelines] - before[gitlabtest.RouteListPipelines]; n != 1 {
		t.Errorf("%d pages of pipelines, want 1", n)
	}
}

// Sweeps use at most Config.SweepShare of GitLab's rate limit: once the
// rest is all that is left, a sweep fails rate-limited until the window
// resets, sending nothing, while the reading before a merge still goes.
func TestSweepsKeepToTheirShare(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 3, gitlabtest.Options{RateLimit: 20}, func(c *gitlab.Config) { c.SweepShare = 0.5 })
	fl.clock.Set(time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC)) // a new window
	q := lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: fl.reads}
	sweeps := 0
	var err error
	for range 20 {
		if _, err = fl.a.ReadPullRequests(t.Context(), q); err != nil {
			break
		}
		sweeps++
	}
	var te *lifecycle.TemporaryError
	if !errors.As(err, &te) || !te.RateLimited || te.RetryAfter != time.Minute {
		t.Fatalf("after %d sweeps: %v; want a rate-limited TemporaryError until the window resets", sweeps, err)
	}
	// Two requests a sweep; half of 20 are theirs.
	if sweeps != 5 {
		t.Errorf("%d sweeps within the share, want 5", sweeps)
	}
	sent := fl.f.TotalCalls()
	if _, err := fl.a.ReadPullRequests(t.Context(), q); !errors.As(err, &te) || fl.f.TotalCalls() != sent {
		t.Errorf("another sweep: %v, %d requests sent", err, fl.f.TotalCalls()-sent)
	}
	got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: fl.reads[:1]})
	if err != nil || got[0].Err != nil || got[0].Unchanged {
		t.Errorf("ReadMerge with the sweeps' share spent: %+v, %v; want read in full", got, err)
	}
	fl.clock.Advance(time.Minute)
	if _, err := fl.a.ReadPullRequests(t.Context(), q); err != nil {
		t.Errorf("a sweep in the next window: %v", err)
	}
}

// Readings of merge requests that do not exist, or are not the
// adapter's project's, have an Err matching ErrNotFound; a batch GitLab
// answers nothing for fails.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 1, gitlabtest.Options{})
	other := fl.reads[0]
	other.PullRequest.Owner = "elsewhere"
	missing := fl.reads[0]
	missing.PullRequest.Number = 404
	for _, purpose := range []lifecycle.ReadPurpose{lifecycle.ReadNow, lifecycle.ReadSweep} {
		got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: purpose, Reads: []lifecycle.ReadRequest{other, missing}})
		if err != nil || !errors.Is(got[0].Err, lifecycle.ErrNotFound) || !errors.Is(got[1].Err, lifecycle.ErrNotFound) {
			t.Errorf("%s: %+v, %v; want each ErrNotFound", purpose, got, err)
		}
	}
	fl.f.Inject(gitlabtest.RouteGetMR, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`})
	if _, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: fl.reads}); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("GitLab down: %v, want a temporary error", err)
	}
	fl.f.Inject(gitlabtest.RouteListPipelines, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`})
	if _, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: fl.reads}); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Errorf("a sweep whose pipelines cannot be listed: %v, want a temporary error", err)
	}
}

// A Version stays within 1,000 bytes, however long the branch: it holds
// no branch (the sweep matches pipelines by the listed merge request's).
func TestVersionOfALongBranch(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 0, gitlabtest.Options{})
	branch := strings.Repeat("deep/", 150) + "work"
	fl.f.Push(branch)
	pr := ensure(t, fl.a, lifecycle.PullRequestRequest{Task: task("ENG-1"), Head: branch})
	fl.f.SettleMergeability()
	fl.clock.Advance(2 * time.Minute)
	fl.reads = []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}
	r := fl.read(t, lifecycle.ReadNow)[0]
	if len(r.Version) > 1000 || r.Version == "" {
		t.Fatalf("Version of %d bytes", len(r.Version))
	}
	if got, _ := fl.sweep(t); !got[0].Unchanged {
		t.Errorf("quiet sweep: %+v", got[0])
	}
	fl.f.SetCheck(pr.HeadSHA, "build", "failed", "")
	if got, _ := fl.sweep(t); got[0].Unchanged || !hasCheck(got[0].CI, "build", lifecycle.CheckFailed) {
		t.Errorf("sweep after its pipeline failed: %+v", got[0])
	}
}

// An approval or a review within a minute of the merge request's last
// touch leaves its updated_at where it was (ThrottledTouch), and, with no
// approval rules, nothing the REST API lists changes. A merge request read
// within that minute is read through GraphQL, which shows its approvals
// and reviewers' states, at each sweep until the minute (and its margin)
// is over: the approval is read at the next sweep, and the merge request
// is listed again once the minute is over.
func TestSweepSeesThrottledReviews(t *testing.T) {
	t.Parallel()
	for _, bc := range []struct {
		name   string
		change func(f *gitlabtest.Server, iid int64)
		seen   func(r lifecycle.Reading) bool
	}{
		{"approval", func(f *gitlabtest.Server, iid int64) { f.Approve(iid, "alice") },
			func(r lifecycle.Reading) bool { return r.Reviews.Decision == lifecycle.DecisionApproved }},
		{"changes requested", func(f *gitlabtest.Server, iid int64) { f.SetReviewerState(iid, "bob", "requested_changes") },
			func(r lifecycle.Reading) bool { return r.Reviews.Decision == lifecycle.DecisionChangesRequested }},
	} {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			fl := newFleet(t, 3, gitlabtest.Options{})
			f, pr, iid := fl.f, fl.prs[0], int64(fl.prs[0].Number)
			fl.clock.Advance(5 * time.Second)
			f.Push(pr.Head)
			f.SettleMergeability()
			fl.reads[0].HeadSHA = f.MergeRequest(iid).SHA
			fl.read(t, lifecycle.ReadNow) // within the minute after the push
			fl.clock.Advance(20 * time.Second)
			before := f.MergeRequest(iid).UpdatedAt
			bc.change(f, iid)
			if !f.MergeRequest(iid).UpdatedAt.Equal(before) {
				t.Fatal("the review touched the merge request within the minute")
			}
			fl.clock.Advance(3 * time.Second)
			calls := f.AllCalls()
			got := fl.read(t, lifecycle.ReadSweep)
			if got[0].Unchanged || got[0].Reviews == nil || !bc.seen(got[0]) {
				t.Errorf("the sweep after the review: %+v, want it read", got[0])
			}
			if !got[1].Unchanged || !got[2].Unchanged {
				t.Errorf("the others were read in full: %+v %+v", got[1], got[2])
			}
			after := f.AllCalls()
			for route, want := range map[string]int{gitlabtest.RouteGraphQL: 1, gitlabtest.RouteListMRs: 1, gitlabtest.RouteListPipelines: 1, gitlabtest.RouteApprovals: 1} {
				if n := after[route] - calls[route]; n != want {
					t.Errorf("%s: %d requests, want %d", route, n, want)
				}
			}
			// Within the minute: GraphQL, the list of the others, the pipelines.
			fl.clock.Advance(3 * time.Second)
			before1 := f.TotalCalls()
			if got := fl.read(t, lifecycle.ReadSweep); len(changed(got)) != 0 || f.TotalCalls()-before1 != 3 {
				t.Errorf("a quiet sweep within the minute: %v read in full, %d requests; want none, 3", changed(got), f.TotalCalls()-before1)
			}
			// Past the minute and its margin, GraphQL reads it once more;
			// then it is listed with the others.
			for _, want := range []int{3, 2} {
				if got, n := fl.sweep(t); len(changed(got)) != 0 || n != want {
					t.Errorf("a quiet sweep after the minute: %v read in full, %d requests; want none, %d", changed(got), n, want)
				}
			}
		})
	}
}

// Where GitLab's GraphQL API refuses the sweep's query (an instance that
// turned it off, a schema without a field), the sweep reads the approvals
// of a merge request read within ThrottledTouch's minute through the REST
// API once that minute is over, as it did before GraphQL, and leaves
// GraphQL alone for an hour.
func TestSweepWithoutGraphQL(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, gitlabtest.Options{})
	f, pr, iid := fl.f, fl.prs[0], int64(fl.prs[0].Number)
	f.Push(pr.Head)
	f.SettleMergeability()
	fl.reads[0].HeadSHA = f.MergeRequest(iid).SHA
	fl.read(t, lifecycle.ReadNow)
	fl.clock.Advance(20 * time.Second)
	f.Approve(iid, "alice")
	f.Inject(gitlabtest.RouteGraphQL, gitlabtest.Fault{Status: http.StatusOK, Body: `{"errors":[{"message":"Field 'approvedBy' doesn't exist on type 'MergeRequest'"}]}`})
	fl.clock.Advance(3 * time.Second)
	if got := fl.read(t, lifecycle.ReadSweep); !got[0].Unchanged {
		t.Errorf("a sweep within the minute without GraphQL: %+v, want Unchanged (the REST API shows nothing yet)", got[0])
	}
	got, _ := fl.sweep(t)
	if got[0].Unchanged || got[0].Reviews.Decision != lifecycle.DecisionApproved {
		t.Errorf("the sweep after the minute without GraphQL: %+v, want the approval read", got[0])
	}
	if n := f.Calls(gitlabtest.RouteGraphQL); n != 1 {
		t.Errorf("GraphQL asked %d times, want 1 (left alone for an hour once refused)", n)
	}
	// An hour later, GraphQL is asked again, and answers.
	fl.clock.Advance(time.Hour)
	f.Push(pr.Head)
	f.SettleMergeability()
	fl.read(t, lifecycle.ReadNow)
	fl.clock.Advance(20 * time.Second)
	f.Unapprove(iid, "alice")
	if got := fl.read(t, lifecycle.ReadSweep); got[0].Unchanged || got[0].Reviews.Decision != lifecycle.DecisionNotRequired {
		t.Errorf("a sweep an hour later, after an approval was taken back: %+v, want it read through GraphQL", got[0])
	}
	if n := f.Calls(gitlabtest.RouteGraphQL); n != 2 {
		t.Errorf("GraphQL asked %d times, want 2", n)
	}
}

// A query GitLab finds over its complexity limit is asked again of half
// as many merge requests, and the adapter keeps to that many: 30 merge
// requests changed within the minute, read 100, then 50 a query.
func TestSweepGraphQLOverComplexity(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 30, gitlabtest.Options{})
	for i, pr := range fl.prs {
		fl.reads[i].HeadSHA = fl.f.Push(pr.Head)
	}
	fl.f.SettleMergeability()
	fl.read(t, lifecycle.ReadNow)
	fl.clock.Advance(10 * time.Second)
	fl.f.Approve(int64(fl.prs[7].Number), "carol")
	fl.f.Inject(gitlabtest.RouteGraphQL, gitlabtest.Fault{Status: http.StatusOK,
		Body: `{"errors":[{"message":"Query has complexity of 412, which exceeds max complexity of 250"}]}`})
	fl.clock.Advance(3 * time.Second)
	got := fl.read(t, lifecycle.ReadSweep)
	if c := changed(got); fmt.Sprint(c) != "[7]" || got[7].Reviews.Decision != lifecycle.DecisionApproved {
		t.Errorf("after a query over the complexity limit: %v read in full, want [7] approved", c)
	}
	if n := fl.f.Calls(gitlabtest.RouteGraphQL); n != 2 {
		t.Errorf("GraphQL asked %d times, want 2 (refused, then of fewer)", n)
	}
}

// A push to the target branch touches no merge request into it: GitLab
// marks them unchecked. The sweep's list asks GitLab to check them again
// (with_merge_status_recheck) and leaves them as they were read; the next
// one reads in full those whose mergeability changed, a conflict, and
// nothing else.
func TestSweepSeesConflictsATargetPushMakes(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 4, gitlabtest.Options{CheckDelay: time.Second})
	fl.f.PushConflicting("main", int64(fl.prs[1].Number))
	got, n := fl.sweep(t)
	if c := changed(got); len(c) != 0 || n != 2 {
		t.Errorf("the sweep after the push: %v read in full, %d requests; want none while GitLab checks, 2 requests", c, n)
	}
	got, n = fl.sweep(t)
	if c := changed(got); fmt.Sprint(c) != "[1]" || got[1].PullRequest.Mergeable != lifecycle.MergeabilityConflicting {
		t.Fatalf("the sweep after: %v read in full (%+v); want [1], conflicting", c, got[1].PullRequest)
	}
	if n > 2+3+2 { // the lists, the reading, the project's settings once a minute
		t.Errorf("%d requests", n)
	}

	ff := newFleet(t, 2, gitlabtest.Options{MergeMethod: "ff", CheckDelay: time.Second})
	ff.f.Push("main")
	ff.sweep(t)
	if got, _ := ff.sweep(t); got[0].Unchanged || got[0].PullRequest.Mergeable != lifecycle.MergeabilityBehind {
		t.Errorf("fast-forward, the target moved on: %+v, want behind", got[0])
	}
}

// GitLab keeps its own checks (unresolved discussions, a blocking merge
// request, external status checks) on no column of the merge request:
// one passing or failing moves no updated_at. The sweep sees the
// detailed_merge_status its list shows change, and reads the merge
// request: blocked, with GitLab's reason, then mergeable again.
func TestSweepSeesGitLabsOwnChecks(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, gitlabtest.Options{})
	iid := int64(fl.prs[0].Number)
	fl.f.SetDetailedMergeStatus(iid, "discussions_not_resolved")
	got, _ := fl.sweep(t)
	if r := got[0]; r.Unchanged || r.PullRequest.Mergeable != lifecycle.MergeabilityBlocked || !strings.Contains(r.PullRequest.BlockedReason, "threads must be resolved") {
		t.Fatalf("after a blocking discussion: %+v, want blocked on it", r)
	}
	if !got[1].Unchanged {
		t.Errorf("the other was read in full")
	}
	fl.f.SetDetailedMergeStatus(iid, "")
	if got, _ := fl.sweep(t); got[0].Unchanged || got[0].PullRequest.Mergeable != lifecycle.MergeabilityMergeable {
		t.Errorf("once resolved: %+v, want mergeable", got[0])
	}
}

// A job of a running pipeline finishing leaves the pipeline running, its
// updated_at where it was: a merge request whose head pipeline runs is
// read in full at each sweep, and the job's state is read.
func TestSweepFollowsTheJobsOfARunningPipeline(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, gitlabtest.Options{})
	f, iid := fl.f, int64(fl.prs[0].Number)
	id := f.Pipeline(iid, "", &gl.CommitStatus{Name: "build", Status: "running"}, &gl.CommitStatus{Name: "test", Status: "running"})
	if got, _ := fl.sweep(t); got[0].Unchanged || !hasCheck(got[0].CI, "build", lifecycle.CheckRunning) {
		t.Fatalf("after a new pipeline: %+v", got[0])
	}
	updated := f.PipelineUpdatedAt(id)
	f.SetCheck(fl.prs[0].HeadSHA, "build", "success", "")
	if !f.PipelineUpdatedAt(id).Equal(updated) {
		t.Fatal("the pipeline's updated_at moved")
	}
	if got, _ := fl.sweep(t); got[0].Unchanged || !hasCheck(got[0].CI, "build", lifecycle.CheckPassed) || !got[1].Unchanged {
		t.Errorf("after a job passed in the running pipeline: %+v, want build passed", got[0])
	}
	f.SetCheck(fl.prs[0].HeadSHA, "test", "success", "")
	fl.sweep(t) // the pipeline passed: read in full
	if got, _ := fl.sweep(t); !got[0].Unchanged {
		t.Errorf("a finished pipeline, nothing changing: %+v, want Unchanged", got[0])
	}
}

// Merge requests opened over the last minute, each read when it was
// submitted and quiet since: each is within ThrottledTouch's minute of
// its last change at its reading, and is read through GraphQL (a
// hundred a request) until that minute is over, then listed; sweeps three
// seconds apart stay within 20 requests, and read no approvals.
func TestSweepsOfRecentMergeRequests(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 0, gitlabtest.Options{MergeabilityAtOnce: true})
	for i := range 150 {
		ident := fmt.Sprintf("NEW-%d", i)
		fl.f.Push("lifecycle/" + strings.ToLower(ident))
		pr := ensure(t, fl.a, lifecycle.PullRequestRequest{Task: task(ident)})
		fl.f.Pipeline(int64(pr.Number), "success", &gl.CommitStatus{Name: "build", Status: "success"})
		fl.reads = append(fl.reads, lifecycle.ReadRequest{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
		fl.prs = append(fl.prs, pr)
		got, err := fl.a.ReadPullRequests(t.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: fl.reads[i:]})
		if err != nil || got[0].Err != nil {
			t.Fatal(err, got[0].Err)
		}
		fl.reads[i].Version = got[0].Version
		fl.clock.Advance(400 * time.Millisecond) // 150 over a minute
	}
	most := 0
	before := fl.f.AllCalls()
	for range 40 { // two minutes
		fl.clock.Advance(3 * time.Second)
		calls := fl.f.TotalCalls()
		got := fl.read(t, lifecycle.ReadSweep)
		if c := changed(got); len(c) != 0 {
			t.Fatalf("%d read in full", len(c))
		}
		most = max(most, fl.f.TotalCalls()-calls)
	}
	if most > 20 {
		t.Errorf("a sweep of 150 recent merge requests made %d requests, want at most 20", most)
	}
	after := fl.f.AllCalls()
	if n := after[gitlabtest.RouteApprovals] - before[gitlabtest.RouteApprovals]; n != 0 {
		t.Errorf("forty sweeps read %d approvals, want none", n)
	}
	if n := after[gitlabtest.RouteGraphQL] - before[gitlabtest.RouteGraphQL]; n == 0 || n > 80 {
		t.Errorf("forty sweeps made %d GraphQL requests, want some, at most two a sweep", n)
	}
	// Past every minute, they are all listed, and GraphQL is not asked.
	calls := fl.f.AllCalls()
	fl.clock.Advance(3 * time.Second)
	fl.read(t, lifecycle.ReadSweep)
	if n := fl.f.AllCalls()[gitlabtest.RouteGraphQL] - calls[gitlabtest.RouteGraphQL]; n != 0 {
		t.Errorf("a sweep past every minute made %d GraphQL requests", n)
	}
}
