package github

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

const testSecret = "it's-a-secret-to-everybody"

// fakes maps the adapters of the conformance suite to their fakes.
type fakes map[*Adapter]*fakeGitHub

func TestConformance(t *testing.T) {
	var mu = make(chan struct{}, 1)
	all := fakes{}
	fakeOf := func(a lifecycle.ProviderAdapter) *fakeGitHub {
		mu <- struct{}{}
		defer func() { <-mu }()
		return all[a.(*Adapter)]
	}
	var deliveries atomic.Int64
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter {
			f := newFakeGitHubWith(t, githubtest.Options{AutoBranch: true})
			// One approving review required, as a team that lets GitHub's
			// rules decide sets it (an unprotected branch requires none).
			f.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1}})
			a := f.adapter(t, Config{WebhookSecret: testSecret, DeployPollInterval: 50 * time.Millisecond})
			mu <- struct{}{}
			all[a] = f
			<-mu
			return a
		},
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).Push(pr.Head)
		},
		MergeByHand: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).MergeByHand(pr.Number)
		},
		Close: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).ClosePullRequest(pr.Number)
		},
		Reopen: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).Reopen(pr.Number)
		},
		SetCheck: func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck) {
			conclusion := map[lifecycle.CheckStatus]string{lifecycle.CheckPassed: "success", lifecycle.CheckFailed: "failure", lifecycle.CheckSkipped: "skipped"}[c.Status]
			fakeOf(a).CheckRun(sha, c.Name, conclusion)
		},
		Review: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, r lifecycle.HostReview) {
			f := fakeOf(a)
			state := map[lifecycle.ReviewOutcome]string{lifecycle.ReviewApproved: "APPROVED", lifecycle.ReviewChangesRequested: "CHANGES_REQUESTED", lifecycle.ReviewCommented: "COMMENTED"}[r.Outcome]
			f.ReviewWithBody(pr.Number, r.Reviewer, state, f.pull(t, pr.Number).HeadSHA, r.Body)
		},
		NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer { return a.(*Adapter) },
		FinishDeployment: func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest) {
			f := fakeOf(a)
			waitUntil(t, 5*time.Second, fmt.Sprintf("a deployment of %s in %s", req.CommitSHA, req.Environment), func() bool {
				return f.DeploymentOf(req.CommitSHA, string(req.Environment)) != nil
			})
			d := f.DeploymentOf(req.CommitSHA, string(req.Environment))
			f.DeploymentStatus(d.GetID(), "success", "https://staging.example.com")
			a.(*Adapter).ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: fmt.Sprint(d.GetID()), State: "success"})
		},
		Deliver: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request {
			f := fakeOf(a)
			event, payload := f.webhookPayload(pr, kind)
			if payload == nil {
				return nil
			}
			return signedDelivery(t, event, fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", deliveries.Add(1)), payload)
		},
		WebhookSignatureHeader: "X-Hub-Signature-256",
		FailNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) {
			fakeOf(a).Inject("PUT /pulls/{number}/merge", githubtest.Error(http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again."))
		},
		RefuseNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) string {
			// A refusal for the base's rules; "Pull Request is not
			// mergeable" is final only for a reason the pull request read
			// again shows (see TestMergeWhileMergeabilityIsComputed).
			const msg = "At least 1 approving review is required by reviewers with write access."
			fakeOf(a).Inject("PUT /pulls/{number}/merge", githubtest.Error(http.StatusMethodNotAllowed, msg))
			return msg
		},
	})
}

// signedDelivery returns a webhook delivery as GitHub POSTs it, signed
// with testSecret.
func signedDelivery(t testing.TB, event, id string, payload []byte) *http.Request {
	return githubtest.Delivery("/hooks/github", event, id, testSecret, payload)
}

// webhookPayload returns the event name and payload GitHub sends for kind
// on pr, or nil.
func (f *fakeGitHub) webhookPayload(pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) (string, []byte) {
	switch kind {
	case lifecycle.ProviderHeadChanged:
		return "pull_request", f.PullRequestPayload(pr.Number, "synchronize")
	case lifecycle.ProviderPullRequestClosed, lifecycle.ProviderPullRequestMerged:
		// Closed, merged or not as kind says, whatever the fake holds.
		var v map[string]any
		if err := json.Unmarshal(f.PullRequestPayload(pr.Number, "closed"), &v); err != nil {
			panic(err)
		}
		pull := v["pull_request"].(map[string]any)
		pull["state"], pull["merged"] = "closed", kind == lifecycle.ProviderPullRequestMerged
		b, _ := json.Marshal(v)
		return "pull_request", b
	case lifecycle.ProviderPullRequestReopened:
		return "pull_request", f.PullRequestPayload(pr.Number, "reopened")
	case lifecycle.ProviderPullRequestEdited:
		return "pull_request", f.PullRequestPayload(pr.Number, "edited")
	case lifecycle.ProviderReviewSubmitted:
		return "pull_request_review", f.ReviewPayload(pr.Number, "submitted", "octocat", "approved")
	case lifecycle.ProviderReviewDismissed:
		return "pull_request_review", f.ReviewPayload(pr.Number, "dismissed", "octocat", "dismissed")
	case lifecycle.ProviderChecksChanged:
		p, _ := f.PullRequest(pr.Number)
		return "check_run", f.CheckRunPayload(p.HeadSHA, "build", "success")
	case lifecycle.ProviderDeploymentStatus:
		d := &gh.Deployment{ID: gh.Int64(time.Now().UnixNano() % 1e9), SHA: gh.String(githubtest.NewSHA()), Environment: gh.String("staging")}
		return "deployment_status", f.DeploymentStatusPayload(d, "success", "https://staging.example.com")
	case adaptertest.IgnoredEvent:
		return "ping", f.PingPayload()
	}
	return "", nil
}

// waitUntil polls cond until it holds, failing t with what after timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}
