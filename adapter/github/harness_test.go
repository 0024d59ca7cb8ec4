package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
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
			f := newFakeGitHub(t)
			f.autoBranch = true
			a := f.adapter(t, Config{WebhookSecret: testSecret, DeployPollInterval: 50 * time.Millisecond})
			mu <- struct{}{}
			all[a] = f
			<-mu
			return a
		},
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).push(pr.Head)
		},
		MergeByHand: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).mergeByHand(pr.Number)
		},
		Close: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).closeByHand(pr.Number)
		},
		Reopen: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			fakeOf(a).reopen(pr.Number)
		},
		SetCheck: func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck) {
			conclusion := map[lifecycle.CheckStatus]string{lifecycle.CheckPassed: "success", lifecycle.CheckFailed: "failure", lifecycle.CheckSkipped: "skipped"}[c.Status]
			fakeOf(a).checkRun(sha, c.Name, conclusion)
		},
		Review: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, r lifecycle.HostReview) {
			f := fakeOf(a)
			state := map[lifecycle.ReviewOutcome]string{lifecycle.ReviewApproved: "APPROVED", lifecycle.ReviewChangesRequested: "CHANGES_REQUESTED", lifecycle.ReviewCommented: "COMMENTED"}[r.Outcome]
			f.mu.Lock()
			head := f.pulls[pr.Number].headSHA
			f.mu.Unlock()
			f.reviewWithBody(pr.Number, r.Reviewer, state, head, r.Body)
		},
		NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer { return a.(*Adapter) },
		FinishDeployment: func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest) {
			f := fakeOf(a)
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if d := f.deploymentOf(req.CommitSHA, string(req.Environment)); d != nil {
					f.deploymentStatus(d.GetID(), "success", "https://staging.example.com")
					a.(*Adapter).ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: fmt.Sprint(d.GetID()), State: "success"})
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("no deployment of %s in %s appeared", req.CommitSHA, req.Environment)
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
			fakeOf(a).fail("PUT /pulls/{number}/merge", ghError(http.StatusMethodNotAllowed, "Base branch was modified. Review and try the merge again."))
		},
		RefuseNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) string {
			fakeOf(a).fail("PUT /pulls/{number}/merge", ghError(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
			return "Pull Request is not mergeable"
		},
	})
}

// signedDelivery returns a webhook delivery as GitHub POSTs it.
func signedDelivery(t testing.TB, event, id string, payload []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-GitHub-Hook-ID", "292430182")
	req.Header.Set("X-Hub-Signature-256", sign(payload))
	return req
}

func sign(payload []byte) string {
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(payload)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// webhookPayload returns the event name and payload GitHub sends for kind
// on pr, or nil.
func (f *fakeGitHub) webhookPayload(pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) (string, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo, sender := f.repoJSON(), f.user("octocat")
	p := f.pulls[pr.Number]
	var pull *gh.PullRequest
	if p != nil {
		pull = f.pullJSON(p)
	}
	var event string
	var v any
	switch kind {
	case lifecycle.ProviderHeadChanged:
		event, v = "pull_request", &gh.PullRequestEvent{Action: gh.String("synchronize"), Number: gh.Int(pr.Number), PullRequest: pull, Repo: repo, Sender: sender,
			Before: gh.String(newSHA()), After: gh.String(p.headSHA)}
	case lifecycle.ProviderPullRequestClosed, lifecycle.ProviderPullRequestMerged:
		pull.State = gh.String("closed")
		pull.Merged = gh.Bool(kind == lifecycle.ProviderPullRequestMerged)
		event, v = "pull_request", &gh.PullRequestEvent{Action: gh.String("closed"), Number: gh.Int(pr.Number), PullRequest: pull, Repo: repo, Sender: sender}
	case lifecycle.ProviderPullRequestReopened:
		event, v = "pull_request", &gh.PullRequestEvent{Action: gh.String("reopened"), Number: gh.Int(pr.Number), PullRequest: pull, Repo: repo, Sender: sender}
	case lifecycle.ProviderPullRequestEdited:
		event, v = "pull_request", &gh.PullRequestEvent{Action: gh.String("edited"), Number: gh.Int(pr.Number), PullRequest: pull, Repo: repo, Sender: sender,
			Changes: &gh.EditChange{Base: &gh.EditBase{Ref: &gh.EditRef{From: gh.String("develop")}, SHA: &gh.EditSHA{From: gh.String(newSHA())}}}}
	case lifecycle.ProviderReviewSubmitted, lifecycle.ProviderReviewDismissed:
		action, state := "submitted", "approved"
		if kind == lifecycle.ProviderReviewDismissed {
			action, state = "dismissed", "dismissed"
		}
		event, v = "pull_request_review", &gh.PullRequestReviewEvent{Action: gh.String(action), PullRequest: pull, Repo: repo, Sender: sender,
			Review: &gh.PullRequestReview{ID: gh.Int64(f.id()), User: sender, State: gh.String(state), CommitID: gh.String(p.headSHA), SubmittedAt: &gh.Timestamp{Time: f.now}}}
	case lifecycle.ProviderChecksChanged:
		event, v = "check_run", &gh.CheckRunEvent{Action: gh.String("completed"), Repo: repo, Sender: sender,
			CheckRun: &gh.CheckRun{ID: gh.Int64(f.id()), Name: gh.String("build"), HeadSHA: gh.String(p.headSHA), Status: gh.String("completed"), Conclusion: gh.String("success")}}
	case lifecycle.ProviderDeploymentStatus:
		id := f.id()
		event, v = "deployment_status", &gh.DeploymentStatusEvent{Repo: repo, Sender: sender,
			Deployment:       &gh.Deployment{ID: gh.Int64(id), SHA: gh.String(newSHA()), Environment: gh.String("staging")},
			DeploymentStatus: &gh.DeploymentStatus{ID: gh.Int64(f.id()), State: gh.String("success"), EnvironmentURL: gh.String("https://staging.example.com")}}
	case adaptertest.IgnoredEvent:
		event, v = "ping", &gh.PingEvent{Zen: gh.String("Design for failure."), HookID: gh.Int64(292430182), Repo: repo, Sender: sender}
	default:
		return "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return event, b
}
