package gitlab_test

import (
	"slices"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// The sequence of adaptertest's Reviews/DecisionFollowsReviews, without
// the bodies GitLab does not keep: a review without approval (reviewer
// state reviewed) is a comment and leaves the decision pending; an
// approval approves; a reviewer's "Request changes" (state
// requested_changes) makes it changes_requested, whatever approvals
// there are; every review keeps its ID from one reading to the next.
func TestReviewDecisionFollowsReviewerStates(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1"), Reviewers: []string{"alice", "bob"}})
	q := lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	type review struct {
		id, reviewer string
		outcome      lifecycle.ReviewOutcome
	}
	decide := func(step string, want lifecycle.ReviewDecision, reviews ...review) {
		t.Helper()
		hr, err := a.ReviewDecision(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var got []review
		for _, r := range hr.Reviews {
			if r.Body != "" || r.CommitSHA != "" {
				t.Errorf("%s: review %+v has a body or a commit; GitLab keeps neither here", step, r)
			}
			got = append(got, review{r.ID, r.Reviewer, r.Outcome})
		}
		if hr.Decision != want || !slices.Equal(got, reviews) {
			t.Errorf("%s: %s %+v, want %s %+v", step, hr.Decision, got, want, reviews)
		}
	}
	decide("no review yet", lifecycle.DecisionNotRequired)

	f.SetReviewerState(1, "alice", "reviewed")
	decide("alice reviewed without approving", lifecycle.DecisionNotRequired,
		review{"reviewed-1", "alice", lifecycle.ReviewCommented})

	f.Approve(1, "alice")
	decide("alice approved", lifecycle.DecisionApproved,
		review{"approval-1", "alice", lifecycle.ReviewApproved})

	f.SetReviewerState(1, "bob", "requested_changes")
	decide("bob requested changes", lifecycle.DecisionChangesRequested,
		review{"approval-1", "alice", lifecycle.ReviewApproved}, review{"changes-2", "bob", lifecycle.ReviewChangesRequested})
	decide("read again", lifecycle.DecisionChangesRequested,
		review{"approval-1", "alice", lifecycle.ReviewApproved}, review{"changes-2", "bob", lifecycle.ReviewChangesRequested})

	// Bob is asked again and approves: his request is gone.
	f.SetReviewerState(1, "bob", "unreviewed")
	f.Approve(1, "bob")
	decide("bob approved after a new request", lifecycle.DecisionApproved,
		review{"approval-1", "alice", lifecycle.ReviewApproved}, review{"approval-2", "bob", lifecycle.ReviewApproved})

	// At GitLab, requesting changes takes the reviewer's approval back.
	f.SetReviewerState(1, "alice", "requested_changes")
	decide("alice requested changes after approving", lifecycle.DecisionChangesRequested,
		review{"approval-2", "bob", lifecycle.ReviewApproved}, review{"changes-1", "alice", lifecycle.ReviewChangesRequested})
}

// With approvals required, a request for changes still wins over the
// approvals that are enough.
func TestChangesRequestedWinsOverRequiredApprovals(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{ApprovalsRequired: 1})
	a := newAdapter(t, f)
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	f.Approve(1, "alice")
	f.SetReviewerState(1, "carol", "requested_changes")
	hr, err := a.ReviewDecision(t.Context(), lifecycle.ReviewQuery{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
	if err != nil || hr.Decision != lifecycle.DecisionChangesRequested {
		t.Errorf("decision = %+v, %v; want changes_requested", hr, err)
	}
}
