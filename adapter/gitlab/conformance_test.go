package gitlab_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

const hookToken = "s3cret-hook-token"

// TestConformance runs the adapter suite against the fake with every hook
// GitLab can honour.
//
// Review makes GitLab reviews: an approval, a reviewer's "Request
// changes" (reviewer state requested_changes) or a review without either
// (state reviewed). GitLab keeps no text with any of them (a review's
// summary is a separate note), so the hook drops r.Body, and
// Reviews/DecisionFollowsReviews, which wants each review's body back, is
// skipped at its first review, a comment whose only content is its text;
// the same sequence (comment, approval, changes requested, stable IDs) is
// tested without bodies by TestReviewDecisionFollowsReviewerStates.
// Reviews/StaleApprovals runs.
//
// GitLab makes a review known through a system note, whose touch of the
// merge request ThrottledTouch drops within a minute of the last one: a
// sweep sees it once that minute is over (TestSweepSeesThrottledReviews).
// Review lets GitLab's clock, and only GitLab's, move on a minute and a
// few seconds first, as a person's review after the agent's push does.
func TestConformance(t *testing.T) {
	var (
		mu    sync.Mutex
		fakes = map[lifecycle.ProviderAdapter]*gitlabtest.Server{}
		ahead = map[lifecycle.ProviderAdapter]*atomic.Int64{} // how far GitLab's clock is ahead
	)
	fakeOf := func(a lifecycle.ProviderAdapter) *gitlabtest.Server {
		mu.Lock()
		defer mu.Unlock()
		return fakes[a]
	}
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter {
			// The suite opens merge requests without pushing first.
			skew := new(atomic.Int64)
			f := gitlabtest.NewServer(t, gitlabtest.Options{AutoBranch: true, Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
			a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
			mu.Lock()
			fakes[a], ahead[a] = f, skew
			mu.Unlock()
			return a
		},
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).Push(pr.Head)
		},
		MergeByHand: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).MergeByHand(int64(pr.Number))
		},
		Close: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).Close(int64(pr.Number))
		},
		Reopen: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).Reopen(int64(pr.Number))
		},
		SetCheck: func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck) {
			word := map[lifecycle.CheckStatus]string{lifecycle.CheckPassed: "success", lifecycle.CheckFailed: "failed",
				lifecycle.CheckRunning: "running", lifecycle.CheckSkipped: "skipped"}[c.Status]
			fakeOf(a).SetCheck(sha, c.Name, word, c.URL)
		},
		CIPendingWhenAbsent: true,
		Review: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, r lifecycle.HostReview) {
			f, iid := fakeOf(a), int64(pr.Number)
			mu.Lock()
			ahead[a].Add(int64(time.Minute + 11*time.Second))
			mu.Unlock()
			switch r.Outcome {
			case lifecycle.ReviewApproved:
				f.Approve(iid, r.Reviewer)
			case lifecycle.ReviewChangesRequested:
				f.SetReviewerState(iid, r.Reviewer, "requested_changes")
			case lifecycle.ReviewCommented:
				if r.Body != "" {
					t.Skip("GitLab keeps no text with a review: a comment is a note, which the adapter does not report; see TestReviewDecisionFollowsReviewerStates")
				}
				f.SetReviewerState(iid, r.Reviewer, "reviewed")
			}
		}, // no head pipeline of the head yet
		NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer {
			d, err := gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: a.(*gitlab.Adapter), PollInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		FinishDeployment: func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest) {
			f := fakeOf(a)
			var id int64
			waitUntil(t, 5*time.Second, fmt.Sprintf("a deployment of %s to %s at GitLab", req.CommitSHA, req.Environment), func() bool {
				id = f.RunningDeployment(string(req.Environment), req.CommitSHA)
				return id != 0
			})
			f.SetDeployment(id, "success")
		},
		Deliver: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request {
			return delivery(fakeOf(a), pr, kind, hookToken)
		},
		WebhookTokenHeader: "X-Gitlab-Token",
		FailNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) {
			fakeOf(a).Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`})
		},
		RefuseNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) string {
			// GitLab has worked out that it can merge, and refuses anyway
			// (a merge that failed while being made).
			fakeOf(a).SettleMergeability()
			fakeOf(a).Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusMethodNotAllowed, Body: `{"message":"Branch cannot be merged"}`})
			return "Branch cannot be merged"
		},
	})
}

// delivery makes a webhook delivery of kind on pr from the recorded
// payloads, with this project's and pr's values.
func delivery(f *gitlabtest.Server, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind, token string) *http.Request {
	iid := int64(pr.Number)
	switch kind {
	case lifecycle.ProviderHeadChanged:
		return f.MergeRequestHook(iid, "update", true, token)
	case lifecycle.ProviderPullRequestEdited:
		return f.MergeRequestHook(iid, "update", false, token)
	case lifecycle.ProviderPullRequestClosed:
		return f.MergeRequestHook(iid, "close", false, token)
	case lifecycle.ProviderPullRequestMerged:
		return f.MergeRequestHook(iid, "merge", false, token)
	case lifecycle.ProviderPullRequestReopened:
		return f.MergeRequestHook(iid, "reopen", false, token)
	case lifecycle.ProviderReviewSubmitted:
		return f.MergeRequestHook(iid, "approved", false, token)
	case lifecycle.ProviderReviewDismissed:
		return f.MergeRequestHook(iid, "unapproved", false, token)
	case lifecycle.ProviderChecksChanged:
		head := f.MergeRequest(iid).SHA
		return f.Delivery(gitlabtest.EventPipeline, token, func(p map[string]any) {
			p["object_attributes"].(map[string]any)["sha"] = head
			mr := p["merge_request"].(map[string]any)
			mr["iid"], mr["target_project_id"], mr["source_project_id"] = iid, gitlabtest.ProjectID, gitlabtest.ProjectID
		})
	case lifecycle.ProviderDeploymentStatus:
		return f.Delivery(gitlabtest.EventDeployment, token, nil)
	case adaptertest.IgnoredEvent:
		return f.Delivery(gitlabtest.EventPush, token, nil)
	}
	return nil
}
