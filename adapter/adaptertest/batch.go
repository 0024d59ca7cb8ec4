package adaptertest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of lifecycle.BatchReader.

var batchTests = []test{
	{name: "ReadsInOrder", fn: testBatchReadsInOrder},
	{name: "AgreesWithOneByOne", fn: testBatchAgreesWithOneByOne},
	{name: "SweepSeesPush", skip: needs("Push"), fn: testBatchSweepSeesPush},
	{name: "SweepSeesMergeByHand", skip: needs("MergeByHand"), fn: testBatchSweepSeesMergeByHand},
	{name: "SweepSeesCloseAndReopen", skip: needs("Close", "Reopen"), fn: testBatchSweepSeesCloseAndReopen},
	{name: "SweepSeesCI", skip: needs("SetCheck"), fn: testBatchSweepSeesCI},
	{name: "SweepSeesReview", skip: needs("Review"), fn: testBatchSweepSeesReview},
	{name: "ManyAtOnce", fn: testBatchManyAtOnce},
}

// batch reads q with a's BatchReader and checks the shape of the answer:
// one Reading per request, each either failed, unchanged (only for a
// sweep) or a pull request with its Version.
func batch(t *testing.T, a lifecycle.ProviderAdapter, q lifecycle.BatchQuery) []lifecycle.Reading {
	t.Helper()
	br := implements[lifecycle.BatchReader](t, a, "", false)
	got, err := br.ReadPullRequests(t.Context(), q)
	if err != nil {
		t.Fatalf("ReadPullRequests(%s, %d pull requests): %v", q.Purpose, len(q.Reads), err)
	}
	if len(got) != len(q.Reads) {
		t.Fatalf("ReadPullRequests(%s) returned %d readings for %d requests; want one each, in order", q.Purpose, len(got), len(q.Reads))
	}
	for i, r := range got {
		switch {
		case r.Err != nil:
		case r.Unchanged:
			if q.Purpose != lifecycle.ReadSweep || q.Reads[i].Version == "" {
				t.Errorf("reading %d (%s) is Unchanged for purpose %s and Version %q; only a sweep with a Version may be", i, q.Reads[i].PullRequest, q.Purpose, q.Reads[i].Version)
			}
		default:
			if r.PullRequest.PullRequestRef != q.Reads[i].PullRequest {
				t.Errorf("reading %d is of %s, want %s (readings in the order of the requests)", i, r.PullRequest.PullRequestRef, q.Reads[i].PullRequest)
			}
			checkPR(t, r.PullRequest)
		}
		if len(r.Version) > 1000 {
			t.Errorf("reading %d: Version is %d bytes, want at most 1,000", i, len(r.Version))
		}
	}
	return got
}

// readOne reads pr alone for purpose, after an earlier reading of
// Version version, and fails the test when it could not be read.
func readOne(t *testing.T, a lifecycle.ProviderAdapter, purpose lifecycle.ReadPurpose, pr lifecycle.PullRequest, version string) lifecycle.Reading {
	t.Helper()
	r := batch(t, a, lifecycle.BatchQuery{Purpose: purpose, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA, Version: version}}})[0]
	if r.Err != nil {
		t.Fatalf("reading %s: %v", pr.PullRequestRef, r.Err)
	}
	return r
}

// sweepChanged reads pr as the reconciler does after a reading of
// Version version, and fails the test when the adapter says nothing
// changed: the suite changed something at the host since.
func sweepChanged(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, version, what string) lifecycle.Reading {
	t.Helper()
	r := readOne(t, a, lifecycle.ReadSweep, pr, version)
	if r.Unchanged {
		t.Fatalf("a sweep after %s answered Unchanged; want the pull request read again", what)
	}
	return r
}

func testBatchReadsInOrder(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	first := ensure(t, a, request(1, "sub_a"))
	second := ensure(t, a, request(2, "sub_b"))
	unknown := first.PullRequestRef
	unknown.Number = 99999
	reads := []lifecycle.ReadRequest{{PullRequest: second.PullRequestRef}, {PullRequest: unknown}, {PullRequest: first.PullRequestRef}}
	for _, purpose := range []lifecycle.ReadPurpose{lifecycle.ReadNow, lifecycle.ReadSweep, lifecycle.ReadMerge} {
		got := batch(t, a, lifecycle.BatchQuery{Purpose: purpose, Reads: reads})
		if got[0].Err != nil || got[0].PullRequest.HeadSHA != second.HeadSHA {
			t.Errorf("%s: reading 0 = %+v, want pull request %s at %s", purpose, got[0], second.PullRequestRef, second.HeadSHA)
		}
		if !errors.Is(got[1].Err, lifecycle.ErrNotFound) {
			t.Errorf("%s: reading of unknown %s: Err = %v, want one matching ErrNotFound (and the others read)", purpose, unknown, got[1].Err)
		}
		if got[2].Err != nil || got[2].PullRequest.HeadSHA != first.HeadSHA {
			t.Errorf("%s: reading 2 = %+v, want pull request %s at %s", purpose, got[2], first.PullRequestRef, first.HeadSHA)
		}
	}
	if got := batch(t, a, lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep}); len(got) != 0 {
		t.Errorf("reading nothing returned %d readings", len(got))
	}
}

// A batch reading says what PullRequest, Checks and ReviewDecision say.
func testBatchAgreesWithOneByOne(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	if h.SetCheck != nil {
		h.SetCheck(t, a, pr.HeadSHA, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckPassed})
	}
	if h.Review != nil {
		h.Review(t, a, pr, lifecycle.HostReview{Reviewer: "alice", Outcome: lifecycle.ReviewApproved, Body: "LGTM"})
	}
	got := readOne(t, a, lifecycle.ReadNow, pr, "")
	one := read(t, a, pr)
	if g := got.PullRequest; g.HeadSHA != one.HeadSHA || g.State != one.State || g.Base != one.Base || g.Head != one.Head || g.URL != one.URL || g.Draft != one.Draft {
		t.Errorf("batch reading = %+v, PullRequest = %+v; want the same head, state, branches, URL and draft", g, one)
	}
	if got.Version == "" {
		t.Error("a full reading has no Version")
	}
	if ci, ok := a.(lifecycle.CIProvider); ok {
		want, _ := checks(t, ci, pr, pr.HeadSHA)
		if got.CI == nil {
			t.Fatal("the reading has no CI, but the adapter is a CIProvider")
		}
		if h.SetCheck != nil && (len(got.CI.Checks) != len(want) || got.CI.Checks[0].Status != want["build"]) {
			t.Errorf("batch CI = %+v, Checks = %v; want the same", got.CI.Checks, want)
		}
	}
	if d, ok := a.(lifecycle.ReviewDecider); ok {
		want := reviews(t, d, pr, pr.HeadSHA)
		if got.Reviews == nil {
			t.Fatal("the reading has no Reviews, but the adapter is a ReviewDecider")
		}
		if got.Reviews.Decision != want.Decision {
			t.Errorf("batch review decision = %s, ReviewDecision = %s; want the same", got.Reviews.Decision, want.Decision)
		}
	}
}

func testBatchSweepSeesPush(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	v := readOne(t, a, lifecycle.ReadNow, pr, "").Version
	if r := readOne(t, a, lifecycle.ReadSweep, pr, v); !r.Unchanged && r.PullRequest.HeadSHA != pr.HeadSHA {
		t.Errorf("a sweep with nothing changed read head %s, want %s (or Unchanged)", r.PullRequest.HeadSHA, pr.HeadSHA)
	}
	head := push(t, h, a, pr)
	if r := sweepChanged(t, a, pr, v, "a push"); r.PullRequest.HeadSHA != head {
		t.Errorf("a sweep after a push read head %s, want %s", r.PullRequest.HeadSHA, head)
	}
	if r := readOne(t, a, lifecycle.ReadMerge, pr, v); r.Unchanged || r.PullRequest.HeadSHA != head {
		t.Errorf("a reading before a merge = %+v, want head %s read in full", r, head)
	}
}

func testBatchSweepSeesMergeByHand(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	v := readOne(t, a, lifecycle.ReadNow, pr, "").Version
	sha := h.MergeByHand(t, a, pr)
	r := sweepChanged(t, a, pr, v, "a merge by hand")
	if r.PullRequest.State != lifecycle.PullRequestMerged || r.PullRequest.MergeCommitSHA != sha {
		t.Errorf("a sweep after a merge by hand read %s as %q, want merged as %s", r.PullRequest.State, r.PullRequest.MergeCommitSHA, sha)
	}
}

func testBatchSweepSeesCloseAndReopen(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	pr := ensure(t, a, request(1, "sub_a"))
	v := readOne(t, a, lifecycle.ReadNow, pr, "").Version
	h.Close(t, a, pr)
	r := sweepChanged(t, a, pr, v, "a close")
	if r.PullRequest.State != lifecycle.PullRequestClosed {
		t.Errorf("a sweep after a close read %s, want closed", r.PullRequest.State)
	}
	h.Reopen(t, a, pr)
	if r := sweepChanged(t, a, pr, r.Version, "a reopen"); r.PullRequest.State != lifecycle.PullRequestOpen {
		t.Errorf("a sweep after a reopen read %s, want open", r.PullRequest.State)
	}
}

func testBatchSweepSeesCI(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	implements[lifecycle.CIProvider](t, a, "SetCheck", true)
	pr := ensure(t, a, request(1, "sub_a"))
	h.SetCheck(t, a, pr.HeadSHA, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckRunning})
	v := readOne(t, a, lifecycle.ReadNow, pr, "").Version
	for _, st := range []lifecycle.CheckStatus{lifecycle.CheckFailed, lifecycle.CheckPassed} {
		h.SetCheck(t, a, pr.HeadSHA, lifecycle.CICheck{Name: "build", Status: st})
		r := sweepChanged(t, a, pr, v, fmt.Sprintf("a check turned %s", st))
		if r.CI == nil || len(r.CI.Checks) != 1 || r.CI.Checks[0].Status != st {
			t.Fatalf("a sweep after a check turned %s read CI %+v", st, r.CI)
		}
		v = r.Version
	}
}

func testBatchSweepSeesReview(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	implements[lifecycle.ReviewDecider](t, a, "Review", true)
	pr := ensure(t, a, request(1, "sub_a"))
	v := readOne(t, a, lifecycle.ReadNow, pr, "").Version
	h.Review(t, a, pr, lifecycle.HostReview{Reviewer: "bob", Outcome: lifecycle.ReviewChangesRequested, Body: "Please add a test."})
	r := sweepChanged(t, a, pr, v, "a review requested changes")
	if r.Reviews == nil || r.Reviews.Decision != lifecycle.DecisionChangesRequested {
		t.Fatalf("a sweep after changes were requested read reviews %+v, want changes_requested", r.Reviews)
	}
	h.Review(t, a, pr, lifecycle.HostReview{Reviewer: "bob", Outcome: lifecycle.ReviewApproved, Body: "Thanks."})
	if r := sweepChanged(t, a, pr, r.Version, "an approval"); r.Reviews == nil || r.Reviews.Decision == lifecycle.DecisionChangesRequested {
		t.Fatalf("a sweep after the reviewer approved read reviews %+v, want changes_requested no more", r.Reviews)
	}
}

// A batch holds more pull requests than one host request may: an
// adapter splits it.
func testBatchManyAtOnce(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	const n = 260
	prs := make([]lifecycle.PullRequest, n)
	reads := make([]lifecycle.ReadRequest, n)
	for i := range prs {
		prs[i] = ensure(t, a, request(i+1, fmt.Sprintf("sub_%d", i)))
		reads[i] = lifecycle.ReadRequest{PullRequest: prs[i].PullRequestRef, HeadSHA: prs[i].HeadSHA}
	}
	got := batch(t, a, lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: reads})
	for i, r := range got {
		if r.Err != nil || r.PullRequest.HeadSHA != prs[i].HeadSHA {
			t.Fatalf("reading %d of %d = %+v, want %s at %s", i, n, r, prs[i].PullRequestRef, prs[i].HeadSHA)
		}
		reads[i].Version = r.Version
	}
	for i, r := range batch(t, a, lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: reads}) {
		if r.Err != nil || (!r.Unchanged && r.PullRequest.HeadSHA != prs[i].HeadSHA) {
			t.Fatalf("sweep reading %d of %d = %+v, want Unchanged or %s at %s", i, n, r, prs[i].PullRequestRef, prs[i].HeadSHA)
		}
	}
}
