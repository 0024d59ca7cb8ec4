package gitlab

import (
	"context"
	"fmt"
	"strconv"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// ReviewDecision implements [lifecycle.ReviewDecider] from the merge
// request's approvals: approved when GitLab says so and no approval is
// left to give; not_required when the merge request has no approval rules
// and needs no approval (approvals given then still count as approved);
// pending otherwise. GitLab's approvals API has no "changes requested",
// so that decision never comes from here.
//
// Each approval is a review with outcome approved; GitLab does not say
// when it was given, so the Service records it when it learns of it. Where the project
// resets approvals on push, GitLab keeps only the approvals of the current
// head: they are reported at q.HeadSHA, with an ID per head, so that an
// approval given again after a push is a new review.
func (a *Adapter) ReviewDecision(ctx context.Context, q lifecycle.ReviewQuery) (lifecycle.HostReviews, error) {
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.HostReviews{}, err
	}
	if err := a.checkRef(s, q.PullRequest); err != nil {
		return lifecycle.HostReviews{}, err
	}
	appr, resp, err := a.client.MergeRequestApprovals.GetConfiguration(s.id, int64(q.PullRequest.Number), gl.WithContext(ctx))
	if err != nil {
		return lifecycle.HostReviews{}, a.fail(ctx, fmt.Sprintf("read the approvals of merge request !%d", q.PullRequest.Number), resp, err)
	}
	var hr lifecycle.HostReviews
	for _, by := range appr.ApprovedBy {
		if by == nil || by.User == nil {
			continue
		}
		r := lifecycle.HostReview{ID: "approval-" + strconv.FormatInt(by.User.ID, 10), Reviewer: by.User.Username, Outcome: lifecycle.ReviewApproved}
		if s.resetOnPush {
			r.ID += "-" + q.HeadSHA
			r.CommitSHA = q.HeadSHA
		}
		hr.Reviews = append(hr.Reviews, r)
	}
	switch {
	case appr.ApprovalsRequired == 0 && !appr.HasApprovalRules:
		hr.Decision = lifecycle.DecisionNotRequired
		if len(hr.Reviews) > 0 {
			hr.Decision = lifecycle.DecisionApproved
		}
	case appr.Approved && appr.ApprovalsLeft == 0:
		hr.Decision = lifecycle.DecisionApproved
	default:
		hr.Decision = lifecycle.DecisionPending
	}
	return hr, nil
}
