package adaptertest

import (
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of lifecycle.ReviewDecider.

var reviewTests = []test{
	{name: "NoReviewsYet", fn: testNoReviewsYet},
	{name: "DecisionFollowsReviews", skip: needs("Review"), fn: testDecisionFollowsReviews},
	{name: "StaleApprovals", skip: needs("Review", "Push"), fn: testStaleApprovals},
}

// reviews returns the host's review state of pr at head, after checking
// every review is well formed and IDs are unique.
func reviews(t *testing.T, d lifecycle.ReviewDecider, pr lifecycle.PullRequest, head string) lifecycle.HostReviews {
	t.Helper()
	hr, err := d.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: head})
	if err != nil {
		t.Fatalf("ReviewDecision(%s at %s): %v", pr.PullRequestRef, head, err)
	}
	switch hr.Decision {
	case lifecycle.DecisionApproved, lifecycle.DecisionChangesRequested, lifecycle.DecisionPending, lifecycle.DecisionNotRequired:
	default:
		t.Errorf("ReviewDecision: Decision %q is not a review decision", hr.Decision)
	}
	ids := make(map[string]bool)
	for _, r := range hr.Reviews {
		if r.ID == "" || ids[r.ID] {
			t.Errorf("review %+v has an empty or repeated ID", r)
		}
		ids[r.ID] = true
		if r.Reviewer == "" || !r.Outcome.Valid() {
			t.Errorf("review %+v lacks a reviewer or a valid outcome", r)
		}
		if r.CommitSHA != "" && !shaRE.MatchString(r.CommitSHA) {
			t.Errorf("review %s: CommitSHA %q is not 40 lowercase hex digits", r.ID, r.CommitSHA)
		}
	}
	return hr
}

// wantReviews checks that got are the reviews want (reviewer, outcome,
// body), oldest first, each made at head (or at no named commit).
func wantReviews(t *testing.T, got []lifecycle.HostReview, head string, want ...lifecycle.HostReview) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("ReviewDecision reported %d reviews %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Reviewer != w.Reviewer || g.Outcome != w.Outcome || g.Body != w.Body {
			t.Errorf("review %d = %s %s %q, want %s %s %q (oldest first)", i, g.Reviewer, g.Outcome, g.Body, w.Reviewer, w.Outcome, w.Body)
		}
		if g.CommitSHA != "" && g.CommitSHA != head {
			t.Errorf("review %d: CommitSHA %s, want the head it was made at, %s", i, g.CommitSHA, head)
		}
	}
}

func testNoReviewsYet(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	d := implements[lifecycle.ReviewDecider](t, a, "Review", h.Review != nil)
	pr := ensure(t, a, request(1, "sub_a"))
	hr := reviews(t, d, pr, pr.HeadSHA)
	if len(hr.Reviews) != 0 || hr.Decision == lifecycle.DecisionApproved || hr.Decision == lifecycle.DecisionChangesRequested {
		t.Errorf("ReviewDecision of a new pull request = %+v, want no reviews and no decision reached", hr)
	}
}

func testDecisionFollowsReviews(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	d := implements[lifecycle.ReviewDecider](t, a, "Review", h.Review != nil)
	pr := ensure(t, a, request(1, "sub_a"))
	comment := lifecycle.HostReview{Reviewer: "alice", Outcome: lifecycle.ReviewCommented, Body: "Why the redirect?"}
	approve := lifecycle.HostReview{Reviewer: "alice", Outcome: lifecycle.ReviewApproved, Body: "LGTM"}
	changes := lifecycle.HostReview{Reviewer: "bob", Outcome: lifecycle.ReviewChangesRequested, Body: "Please add a test."}

	h.Review(t, a, pr, comment)
	hr := reviews(t, d, pr, pr.HeadSHA)
	wantReviews(t, hr.Reviews, pr.HeadSHA, comment)
	if hr.Decision != lifecycle.DecisionPending {
		t.Errorf("after a comment Decision = %q, want pending", hr.Decision)
	}

	h.Review(t, a, pr, approve)
	hr = reviews(t, d, pr, pr.HeadSHA)
	wantReviews(t, hr.Reviews, pr.HeadSHA, comment, approve)
	if hr.Decision != lifecycle.DecisionApproved {
		t.Errorf("after an approval Decision = %q, want approved", hr.Decision)
	}
	ids := []string{hr.Reviews[0].ID, hr.Reviews[1].ID}

	h.Review(t, a, pr, changes)
	hr = reviews(t, d, pr, pr.HeadSHA)
	wantReviews(t, hr.Reviews, pr.HeadSHA, comment, approve, changes)
	if hr.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("after changes were requested Decision = %q, want changes_requested", hr.Decision)
	}
	again := reviews(t, d, pr, pr.HeadSHA)
	wantReviews(t, again.Reviews, pr.HeadSHA, comment, approve, changes)
	for i, r := range hr.Reviews {
		if r.ID != again.Reviews[i].ID {
			t.Errorf("review %d was reported as %s, then as %s: IDs must be stable", i, r.ID, again.Reviews[i].ID)
		}
		if i < len(ids) && r.ID != ids[i] {
			t.Errorf("review %d was reported as %s, earlier as %s: IDs must be stable", i, r.ID, ids[i])
		}
	}
}

func testStaleApprovals(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	d := implements[lifecycle.ReviewDecider](t, a, "Review", h.Review != nil)
	pr := ensure(t, a, request(1, "sub_a"))
	h.Review(t, a, pr, lifecycle.HostReview{Reviewer: "alice", Outcome: lifecycle.ReviewApproved, Body: "LGTM"})
	if hr := reviews(t, d, pr, pr.HeadSHA); hr.Decision != lifecycle.DecisionApproved {
		t.Fatalf("after an approval Decision = %q, want approved", hr.Decision)
	}
	head := push(t, h, a, pr)
	now := read(t, a, pr)
	hr := reviews(t, d, now, head)
	if !now.DismissesStaleReviews {
		if hr.Decision != lifecycle.DecisionApproved {
			t.Errorf("after a push to a pull request that keeps approvals (DismissesStaleReviews false) Decision = %q, want approved", hr.Decision)
		}
		return
	}
	if hr.Decision == lifecycle.DecisionApproved {
		t.Errorf("after a push to a pull request that dismisses stale approvals Decision = approved, want the approval no longer counted")
	}
	for _, r := range hr.Reviews {
		if r.Outcome == lifecycle.ReviewApproved && r.CommitSHA == head {
			t.Errorf("the approval %s made before the push is reported at the new head %s", r.ID, head)
		}
	}
}
