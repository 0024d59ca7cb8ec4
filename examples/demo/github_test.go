package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

const testGitHubSecret = "demo-github-webhook-secret"

// The whole lifecycle of a GitHub task through the demo, over HTTP, with
// the demo pointed at a fake GitHub by -github-api-url and -github-repo:
// create, start, submit (a pull request opens at the fake), a check run
// passes and a reviewer approves at the fake, told by signed webhooks to
// POST /hooks/github, ship merge_and_deploy (merged at the expected head;
// a deployment of the merge commit created at the fake), the deploy
// system posts success and GitHub's deployment_status webhook reaches the
// demo, and the task is done.
func TestGitHubLifecycleThroughTheDemo(t *testing.T) {
	f := githubtest.NewServer(t, githubtest.Options{})
	base := startDemo(t, "-github-repo", githubtest.Owner+"/"+githubtest.Repo, "-github-api-url", f.APIURL(),
		"-github-token-file", secretFile(t, githubtest.Token), "-github-webhook-secret-file", secretFile(t, testGitHubSecret))
	c := client{t: t, base: base}
	deliveries := 0
	hook := func(event string, payload []byte) {
		t.Helper()
		deliveries++
		c.deliver("/hooks/github", githubtest.Delivery("/hooks/github", event, fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", deliveries), testGitHubSecret, payload))
	}

	task := c.do("POST", "/tasks", map[string]any{"identifier": "GH-1", "title": "Fix the login redirect",
		"links": map[string]any{"issue": "https://issues.example.com/GH-1"}, "context": map[string]any{"project": "github"}})
	id := task["id"].(string)
	c.do("POST", "/tasks/"+id+"/start", map[string]any{})
	head := f.Push("lifecycle/gh-1") // the agent pushes its branch
	sub := c.do("POST", "/tasks/"+id+"/submit", map[string]any{"summary": "Fixed the redirect."})
	pr, ok := f.PullRequest(1)
	if !ok || pr.Head != "lifecycle/gh-1" || pr.Base != "main" || pr.HeadSHA != head || pr.Closed || pr.Merged {
		t.Fatalf("pull request at GitHub = %+v (found %v), want lifecycle/gh-1 into main, open at %s; submission %v", pr, ok, head, sub)
	}

	// CI passes and octocat approves, at GitHub, whose check_run and
	// pull_request_review webhooks make the demo read both; it offers ship.
	f.CheckRun(head, "build", "success")
	hook("check_run", f.CheckRunPayload(head, "build", "success"))
	f.Review(1, "octocat", "APPROVED", head)
	hook("pull_request_review", f.ReviewPayload(1, "submitted", "octocat", "approved"))
	task = c.await("ship offered", "/tasks/"+id, func(v map[string]any) bool {
		actions, _ := v["availableActions"].([]any)
		return slices.Contains(actions, any("ship"))
	})
	if task["headSha"] != head {
		t.Fatalf("task headSha = %v, want the pull request's head %s", task["headSha"], head)
	}

	op := c.do("POST", "/tasks/"+id+"/ship", map[string]any{"mode": "merge_and_deploy", "targetEnvironment": "staging", "expectedHeadSha": head})
	opID := op["operationId"].(string)

	// The deploy system finishes the deployment of the merge commit and
	// GitHub tells the demo so.
	var merged githubtest.PullRequest
	created := testenv.WaitUntil(20*time.Second, func() bool {
		merged, _ = f.PullRequest(1)
		return merged.Merged && f.DeploymentOf(merged.MergeCommitSHA, "staging") != nil
	})
	if !created {
		t.Fatalf("no deployment of the merge commit was created at GitHub; pull request %+v", merged)
	}
	d := f.DeploymentOf(merged.MergeCommitSHA, "staging")
	f.DeploymentStatus(d.GetID(), "in_progress", "")
	f.DeploymentStatus(d.GetID(), "success", "https://staging.example.com")
	hook("deployment_status", f.DeploymentStatusPayload(d, "success", "https://staging.example.com"))

	done := c.await("ship finished", "/ship-operations/"+opID, func(v map[string]any) bool {
		return v["status"] == "succeeded" || v["status"] == "failed"
	})
	if done["status"] != "succeeded" || done["mergeCommitSha"] != merged.MergeCommitSHA {
		t.Fatalf("ship operation = %v; want succeeded with merge commit %s", done, merged.MergeCommitSHA)
	}
	if dep, _ := done["deployment"].(map[string]any); dep == nil || dep["url"] != "https://staging.example.com" {
		t.Errorf("ship operation's deployment = %v, want the environment URL GitHub was told", done["deployment"])
	}
	c.await("task done", "/tasks/"+id, func(v map[string]any) bool { return v["status"] == "done" })
	if n := f.Merges(); n != 1 {
		t.Errorf("%d merges at GitHub, want 1", n)
	}
	if n := f.Calls(githubtest.RouteCreateDeployment); n != 1 {
		t.Errorf("%d deployments created at GitHub, want 1", n)
	}
}
