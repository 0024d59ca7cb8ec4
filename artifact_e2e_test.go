package lifecycle_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// newArtifactEnv is an env whose every task submits to local git
// repositories through the go-git artifact adapter (live and artifact
// mode), deployed by its Deployer.
func newArtifactEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(dir, "repos")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() }) // its packers stop before dir goes
	d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a, Dir: filepath.Join(dir, "deploy")})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: a}}
		c.ArtifactAdapter = a
		c.Deployer = d
	}}, mutate...)...)
	return e, dir
}

// git runs the git CLI in a repository, skipping the test without git.
func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Require(t, testenv.Git, "")
	}
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Fifty clients send the same artifact submit with the same key: one
// submission and one commit in the repository.
func TestConcurrentSameKeyOneCommit(t *testing.T) {
	t.Parallel()
	e, dir := newArtifactEnv(t)
	id := e.startedTask("ENG-1")
	body := withMember(apitest.SubmitBody(), "mode", "artifact")
	var wg sync.WaitGroup
	codes := make([]int, 50)
	bodies := make([]string, 50)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := e.Submit(id, "one-commit-key", body)
			codes[i], bodies[i] = rec.Code, rec.Body.String()
		}()
	}
	wg.Wait()
	var accepted string
	for i, c := range codes {
		switch c {
		case http.StatusAccepted:
			if accepted != "" && bodies[i] != accepted {
				t.Errorf("two different 202 bodies:\n%s\n%s", accepted, bodies[i])
			}
			accepted = bodies[i]
		case http.StatusConflict:
		default:
			t.Errorf("answer %d: %s", c, bodies[i])
		}
	}
	if accepted == "" {
		t.Fatal("no submit was accepted")
	}
	repo := filepath.Join(dir, "repos", "web")
	if n := git(t, repo, "rev-list", "--count", "main..lifecycle/eng-1"); n != "1" {
		t.Errorf("%s commits on the task's branch, want 1", n)
	}
}

func TestUnusableBaseHintIsAValidationError(t *testing.T) {
	t.Parallel()
	e, _ := newArtifactEnv(t)
	id := e.startedTask("ENG-1")
	rec := e.Submit(id, "bad-base-key", withMember(apitest.SubmitBody(), "pullRequest", map[string]any{"base": "no-such-branch"}))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "pullRequest.base") {
		t.Errorf("submit onto a missing base = %d %s, want 400 naming pullRequest.base", rec.Code, rec.Body)
	}
}

// The whole lifecycle on local git: submit (created, then existing after
// rework), CI from self-reported checks, approval, merge and deploy.
func TestArtifactLifecycleEndToEnd(t *testing.T) {
	t.Parallel()
	e, dir := newArtifactEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	})
	startService(t, e.Svc)
	id := e.startedTask("ENG-1")
	first := e.SubmitOK(id, "e2e-submit-1", apitest.SubmitBody())
	if first["action"] != "created" || first["owner"] != "local" || first["repo"] != "web" || first["ciProvider"] != "artifact" {
		t.Errorf("first submission = %v", first)
	}
	reviewer := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "changes_requested"}}, http.StatusCreated)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	second := e.SubmitOK(id, "e2e-submit-2", apitest.SubmitBody())
	if second["action"] != "existing" || second["prNumber"] != first["prNumber"] || second["headSha"] == first["headSha"] {
		t.Errorf("resubmission = %v", second)
	}
	resp := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	// The artifact CI trusts the self-reported checks (unit passed).
	if !strings.Contains(strings.Join(anyStrings(resp["availableActions"]), ","), "ship") {
		t.Fatalf("actions after approval = %v, want ship", resp["availableActions"])
	}
	head := second["headSha"].(string)
	opID := apitest.Decode(t, e.ship(id, "e2e-ship-1", apitest.ShipBody("merge_and_deploy", "staging", head)))["data"].(map[string]any)["operationId"].(string)
	op := e.waitShip(opID)["data"].(map[string]any)
	if op["status"] != "succeeded" {
		t.Fatalf("ship = %v", op)
	}
	repo := filepath.Join(dir, "repos", "web")
	merge := op["mergeCommitSha"].(string)
	if got := git(t, repo, "rev-parse", "main"); got != merge {
		t.Errorf("main is at %s, want the merge commit %s", got, merge)
	}
	if parents := strings.Fields(git(t, repo, "show", "-s", "--format=%P", merge)); len(parents) != 2 || parents[1] != head {
		t.Errorf("merge commit parents %v, want the base tip and %s", parents, head)
	}
	deployed := op["deployment"].(map[string]any)
	path := strings.TrimPrefix(deployed["url"].(string), "file://")
	// 26: the first two hexadecimal digits of the SHA-256 of "ENG-1".
	if _, err := os.Stat(filepath.Join(path, ".lifecycle", "26", "ENG-1", "submission.md")); err != nil {
		t.Errorf("the deployed tree lacks the submission: %v", err)
	}
	if e.Task(id)["status"] != "done" {
		t.Errorf("task not done")
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// A commit pushed with git to a task's branch, outside the Service, is
// learned by the reconciler: the task's headSha moves, task.updated says
// so, a ship at the old head is refused, and the agent's resubmission
// reuses the pull request at the new head.
func TestArtifactPushPickedUpByReconciler(t *testing.T) {
	t.Parallel()
	e, dir := newArtifactEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
		c.ProviderTimeout = 5 * time.Second
		c.ReconcileInterval = 10 * time.Second
	})
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Svc.Close(context.Background()) })
	id := e.startedTask("ENG-1")
	body := withMember(apitest.SubmitBody(), "mode", "artifact")
	first := e.SubmitOK(id, "push-submit-1", body)
	old := first["headSha"].(string)
	if acts := e.Task(id)["availableActions"]; !slices.Contains(acts.([]any), any("ship")) {
		t.Fatalf("actions after submit = %v, want ship (self-reported checks passed, no review needed)", acts)
	}

	// A person pushes a commit to the branch with git.
	repo := filepath.Join(dir, "repos", "web")
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, dir, "clone", "-q", "-b", "lifecycle/eng-1", repo, clone)
	if err := os.WriteFile(filepath.Join(clone, "NOTES.md"), []byte("Also handle a missing referrer.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, clone, "add", "NOTES.md")
	git(t, clone, "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-qm", "Handle a missing referrer")
	git(t, clone, "push", "-q", "origin", "lifecycle/eng-1")
	pushed := git(t, clone, "rev-parse", "HEAD")

	// The reconciler reads the host once the task is due: within one interval.
	testenv.WaitFor(t, 10*time.Second, "headSha to be the pushed "+pushed, func() bool {
		if e.Task(id)["headSha"] == pushed {
			return true
		}
		e.Clock.Advance(time.Second) // the reconciler's poll
		return false
	})
	evs := e.EventsOf(id)
	last := evs[len(evs)-1]["data"].(map[string]any)
	if evs[len(evs)-1]["type"] != "task.updated" || !slices.Contains(last["changedFields"].([]any), any("headSha")) {
		t.Errorf("last event = %v %v, want task.updated naming headSha", evs[len(evs)-1]["type"], last["changedFields"])
	}
	// The new head has no checks yet: no ship, and the old head is refused.
	if acts := e.Task(id)["availableActions"]; slices.Contains(acts.([]any), any("ship")) {
		t.Errorf("actions at the new head = %v, want no ship before its CI", acts)
	}
	if rec := e.ship(id, "push-ship-old", apitest.ShipBody("merge_only", "staging", old)); rec.Code != http.StatusConflict {
		t.Errorf("ship at the old head = %d %s, want 409", rec.Code, rec.Body)
	}
	// CI reports on the new head: ship at the new head is accepted.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": pushed, "checks": []map[string]any{{"name": "build", "status": "passed"}},
	}}, http.StatusOK)
	if rec := e.ship(id, "push-ship-new", apitest.ShipBody("merge_only", "staging", pushed)); rec.Code != http.StatusAccepted {
		t.Fatalf("ship at the new head = %d %s, want 202", rec.Code, rec.Body)
	}
}
