package gitlab

import (
	"context"
	"fmt"
	"strconv"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// GitLab's reviewer states (GET .../merge_requests/:iid/reviewers) that
// the adapter reads.
const (
	reviewerRequestedChanges = "requested_changes"
	reviewerReviewed         = "reviewed"
)

// ReviewDecision implements [lifecycle.ReviewDecider] from the merge
// request's approvals and the states of its reviewers:
//
//   - changes_requested when a reviewer's state is requested_changes
//     (GitLab's "Request changes" review, which also takes that
//     reviewer's approval back and blocks the merge);
//   - otherwise approved when GitLab says so and no approval is left to
//     give; not_required when the merge request has no approval rules and
//     needs no approval (approvals given then still count as approved);
//   - pending otherwise.
//
// The reviews reported are, in this order: each approval (outcome
// approved, ID "approval-<user ID>"); each reviewer whose state is
// requested_changes (outcome changes_requested, ID "changes-<user ID>");
// each reviewer whose state is reviewed, that is who submitted a review
// without approving or requesting changes (outcome commented, ID
// "reviewed-<user ID>"). GitLab keeps no text with an approval or a
// reviewer's state, nor the time it was given: Body is empty (what a
// reviewer wrote is a note on the merge request, which the adapter does
// not read) and the Service records a review when it learns of it. A
// reviewer who requests changes again after a new review request keeps
// the ID of the first request: the decision follows, but no second review
// is recorded.
//
// Where the project resets approvals on push, GitLab keeps only the
// approvals of the current head: they are reported at q.HeadSHA, with an
// ID per head, so that an approval given again after a push is a new
// review.
func (a *Adapter) ReviewDecision(ctx context.Context, q lifecycle.ReviewQuery) (lifecycle.HostReviews, error) {
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.HostReviews{}, err
	}
	if err := a.checkRef(s, q.PullRequest); err != nil {
		return lifecycle.HostReviews{}, err
	}
	hr, _, err := a.reviews(ctx, s, int64(q.PullRequest.Number), q.HeadSHA, true)
	return hr, err
}

// reviews reads the approvals of merge request iid, and the states of its
// reviewers when it has any (withReviewers), into the host's review state
// of its head (see ReviewDecision), and into the facts of them a sweep
// compares with what GraphQL shows (their Approvers and States).
func (a *Adapter) reviews(ctx context.Context, s *settings, iid int64, head string, withReviewers bool) (lifecycle.HostReviews, reviewFacts, error) {
	appr, resp, err := a.client.MergeRequestApprovals.GetConfiguration(s.id, iid, gl.WithContext(ctx))
	if err != nil {
		return lifecycle.HostReviews{}, reviewFacts{}, a.fail(ctx, fmt.Sprintf("read the approvals of merge request !%d", iid), resp, err)
	}
	var reviewers []*gl.MergeRequestReviewer
	if withReviewers {
		reviewers, resp, err = a.client.MergeRequests.GetMergeRequestReviewers(s.id, iid, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.HostReviews{}, reviewFacts{}, a.fail(ctx, fmt.Sprintf("read the reviewers of merge request !%d", iid), resp, err)
		}
	}
	var hr lifecycle.HostReviews
	var f reviewFacts
	for _, rv := range reviewers {
		if rv != nil && rv.User != nil {
			f.States = append(f.States, strconv.FormatInt(rv.User.ID, 10)+":"+rv.State)
		}
	}
	for _, by := range appr.ApprovedBy {
		if by == nil || by.User == nil {
			continue
		}
		f.Approvers = append(f.Approvers, by.User.ID)
		r := lifecycle.HostReview{ID: "approval-" + strconv.FormatInt(by.User.ID, 10), Reviewer: by.User.Username, Outcome: lifecycle.ReviewApproved}
		if s.resetOnPush {
			r.ID += "-" + head
			r.CommitSHA = head
		}
		hr.Reviews = append(hr.Reviews, r)
	}
	changes := false
	for _, want := range []struct {
		state, id string
		outcome   lifecycle.ReviewOutcome
	}{
		{reviewerRequestedChanges, "changes-", lifecycle.ReviewChangesRequested},
		{reviewerReviewed, "reviewed-", lifecycle.ReviewCommented},
	} {
		for _, rv := range reviewers {
			if rv == nil || rv.User == nil || rv.State != want.state {
				continue
			}
			hr.Reviews = append(hr.Reviews, lifecycle.HostReview{ID: want.id + strconv.FormatInt(rv.User.ID, 10), Reviewer: rv.User.Username, Outcome: want.outcome})
			changes = changes || want.outcome == lifecycle.ReviewChangesRequested
		}
	}
	switch {
	case changes:
		hr.Decision = lifecycle.DecisionChangesRequested
	case appr.ApprovalsRequired == 0 && !appr.HasApprovalRules:
		hr.Decision = lifecycle.DecisionNotRequired
		if len(appr.ApprovedBy) > 0 {
			hr.Decision = lifecycle.DecisionApproved
		}
	case appr.Approved && appr.ApprovalsLeft == 0:
		hr.Decision = lifecycle.DecisionApproved
	default:
		hr.Decision = lifecycle.DecisionPending
	}
	return hr, f, nil
}
