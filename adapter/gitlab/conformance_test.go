package gitlab_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
)

const hookToken = "s3cret-hook-token"

// TestConformance runs the adapter suite against the fake with every hook
// GitLab can honour. Review is left out: GitLab's approvals carry no
// comments, bodies or "changes requested", which the hook's contract
// needs; the rules of approvals are tested by TestReviewDecisionFromApprovals.
func TestConformance(t *testing.T) {
	var (
		mu    sync.Mutex
		fakes = map[lifecycle.ProviderAdapter]*fakeGitLab{}
	)
	fakeOf := func(a lifecycle.ProviderAdapter) *fakeGitLab {
		mu.Lock()
		defer mu.Unlock()
		return fakes[a]
	}
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter {
			f := newFake(t)
			a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
			mu.Lock()
			fakes[a] = f
			mu.Unlock()
			return a
		},
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return fakeOf(a).push(pr.Head)
		},
		MergeByHand: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			f := fakeOf(a)
			f.mu.Lock()
			defer f.mu.Unlock()
			mr := f.mrs[pr.Number-1]
			mr.state, mr.mergeCommit, mr.detailed = "merged", sha(), "not_open"
			f.branches[mr.target] = mr.mergeCommit
			return mr.mergeCommit
		},
		Close: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			f := fakeOf(a)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.mrs[pr.Number-1].state, f.mrs[pr.Number-1].detailed = "closed", "not_open"
		},
		Reopen: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) {
			f := fakeOf(a)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.mrs[pr.Number-1].state, f.mrs[pr.Number-1].detailed = "opened", "mergeable"
		},
		SetCheck: func(t *testing.T, a lifecycle.ProviderAdapter, sha string, c lifecycle.CICheck) {
			fakeOf(a).setCheck(t, sha, c)
		},
		CIPendingWhenAbsent: true, // no head pipeline of the head yet
		NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer {
			d, err := gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: a.(*gitlab.Adapter), PollInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		FinishDeployment: func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest) {
			f := fakeOf(a)
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if id := f.runningDeployment(string(req.Environment), req.CommitSHA); id != 0 {
					f.setDeployment(id, "success")
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			t.Errorf("no deployment of %s to %s appeared at GitLab", req.CommitSHA, req.Environment)
		},
		Deliver: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request {
			return fakeOf(a).delivery(t, pr, kind, hookToken)
		},
		WebhookTokenHeader: "X-Gitlab-Token",
		FailNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) {
			fakeOf(a).inject(mergeRoute, fault{status: http.StatusBadGateway, body: `{"message":"502 Bad Gateway"}`})
		},
		RefuseNextMerge: func(t *testing.T, a lifecycle.ProviderAdapter) string {
			fakeOf(a).inject(mergeRoute, fault{status: http.StatusMethodNotAllowed, body: `{"message":"Branch cannot be merged"}`})
			return "Branch cannot be merged"
		},
	})
}

const mergeRoute = "PUT /api/v4/projects/{pid}/merge_requests/{iid}/merge"

// setCheck makes the head pipeline of the merge request at sha report c,
// in GitLab's words, starting a pipeline when it has none of that commit.
func (f *fakeGitLab) setCheck(t *testing.T, sha string, c lifecycle.CICheck) {
	t.Helper()
	word := map[lifecycle.CheckStatus]string{lifecycle.CheckPassed: "success", lifecycle.CheckFailed: "failed",
		lifecycle.CheckRunning: "running", lifecycle.CheckSkipped: "skipped"}[c.Status]
	f.mu.Lock()
	var mr *fakeMR
	for _, m := range f.mrs {
		if m.sha == sha {
			mr = m
		}
	}
	if mr == nil {
		f.mu.Unlock()
		t.Fatalf("no merge request has head %s", sha)
	}
	p := f.pipelines[mr.headPipeline]
	f.mu.Unlock()
	if p == nil || p.sha != sha {
		p = f.pipeline(mr.iid, "running")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.statuses = append(f.statuses, &gl.CommitStatus{ID: f.nextID, SHA: sha, Ref: mr.source, Name: c.Name, Status: word, TargetURL: c.URL, PipelineID: p.id})
}

// runningDeployment returns the ID of the running deployment of sha to
// env, or 0.
func (f *fakeGitLab) runningDeployment(env, sha string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.deployments {
		if d.Environment.Name == env && d.SHA == sha && d.Status == "running" {
			return d.ID
		}
	}
	return 0
}

// delivery makes a webhook delivery of kind on pr from the recorded
// payloads of client-go's testdata, with this project's and pr's values.
func (f *fakeGitLab) delivery(t testing.TB, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind, token string) *http.Request {
	t.Helper()
	f.mu.Lock()
	head := f.mrs[pr.Number-1].sha
	f.mu.Unlock()
	var (
		event   string
		payload map[string]any
	)
	project := func(p map[string]any) {
		proj := p["project"].(map[string]any)
		proj["id"], proj["path_with_namespace"] = f.projectID, f.path
	}
	mrHook := func(action string) {
		event = "Merge Request Hook"
		payload = readJSON(t, "testdata/webhooks/merge_request.json").(map[string]any)
		project(payload)
		attrs := payload["object_attributes"].(map[string]any)
		attrs["iid"], attrs["action"], attrs["target_project_id"], attrs["source_project_id"] = pr.Number, action, f.projectID, f.projectID
		attrs["last_commit"].(map[string]any)["id"] = head
	}
	switch kind {
	case lifecycle.ProviderHeadChanged:
		mrHook("update")
		payload["object_attributes"].(map[string]any)["oldrev"] = sha()
	case lifecycle.ProviderPullRequestEdited:
		mrHook("update")
	case lifecycle.ProviderPullRequestClosed:
		mrHook("close")
	case lifecycle.ProviderPullRequestMerged:
		mrHook("merge")
	case lifecycle.ProviderPullRequestReopened:
		mrHook("reopen")
	case lifecycle.ProviderReviewSubmitted:
		mrHook("approved")
	case lifecycle.ProviderReviewDismissed:
		mrHook("unapproved")
	case lifecycle.ProviderChecksChanged:
		event = "Pipeline Hook"
		payload = readJSON(t, "testdata/webhooks/pipeline.json").(map[string]any)
		project(payload)
		payload["object_attributes"].(map[string]any)["sha"] = head
		mr := payload["merge_request"].(map[string]any)
		mr["iid"], mr["target_project_id"], mr["source_project_id"] = pr.Number, f.projectID, f.projectID
	case lifecycle.ProviderDeploymentStatus:
		event = "Deployment Hook"
		payload = readJSON(t, "testdata/webhooks/deployment.json").(map[string]any)
		project(payload)
	case adaptertest.IgnoredEvent:
		event = "Push Hook"
		payload = readJSON(t, "testdata/webhooks/push.json").(map[string]any)
	default:
		return nil
	}
	body := mustJSON(t, payload)
	req := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("X-Gitlab-Token", token)
	uuid := newUUID()
	req.Header.Set("X-Gitlab-Event-UUID", uuid)
	req.Header.Set("Idempotency-Key", uuid)
	return req
}
