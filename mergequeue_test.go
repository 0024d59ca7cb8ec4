package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// newQueueEnv is an env whose tasks submit to local git repositories
// through the artifact adapter and ship through the lifecycle's merge
// queue, each candidate tested by check. The Service is started.
func newQueueEnv(t *testing.T, check func(ctx context.Context, c artifact.QueueCandidate) error, mutate ...func(*lifecycle.Config)) (*env, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(dir, "repos"), QueueCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	e := newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: a}}
		c.ArtifactAdapter = a
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
		c.MergeQueue = lifecycle.MergeQueueConfig{Enabled: true, PollInterval: time.Second}
	}}, mutate...)...)
	startService(t, e.Svc)
	return e, dir
}

// driveQueue advances the fake clock a poll at a time until every
// operation has finished, and returns them.
func (e *env) driveQueue(opIDs ...string) []lifecycle.ShipOperation {
	e.T.Helper()
	ops := make([]lifecycle.ShipOperation, len(opIDs))
	ok := testenv.WaitUntil(20*time.Second, func() bool {
		done := true
		for i, id := range opIDs {
			ops[i] = e.shipOperation(id)
			done = done && (ops[i].Status == lifecycle.ShipSucceeded || ops[i].Status == lifecycle.ShipFailed)
		}
		if !done {
			e.Clock.Advance(time.Second)
		}
		return done
	})
	if !ok {
		e.T.Fatalf("waited 20s for the queued ship operations to finish\nqueues: %v\noperations: %+v", e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK), ops)
	}
	return ops
}

// requireGit skips the test without the git CLI.
func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Require(t, testenv.Git, "")
	}
}

// treeHas reports whether a commit's tree has a task's submission.
func treeHas(t *testing.T, gitDir, sha, ident string) bool {
	t.Helper()
	out, err := exec.Command("git", "-C", gitDir, "ls-tree", "-r", "--name-only", sha).CombinedOutput()
	if err != nil {
		t.Errorf("git ls-tree %s: %v\n%s", sha, err, out)
		return false
	}
	return strings.Contains(string(out), "/"+ident+"/")
}

// Six agents ship at once into one base: every change lands through the
// queue, the base ends at a tested candidate, each operation's merge
// commit holds its change, the queue empties, and each task hears of its
// entry on the stream.
func TestMergeQueueLandsConcurrentShips(t *testing.T) {
	t.Parallel()
	requireGit(t)
	tested := make(chan string, 100)
	e, dir := newQueueEnv(t, func(_ context.Context, c artifact.QueueCandidate) error {
		tested <- c.SHA
		return nil
	})
	var opIDs, ids, idents []string
	for i := range 6 {
		ident := fmt.Sprintf("ENG-%d", i+1)
		id, sha := e.shippableTask(ident)
		op := accepted(t, e.ship(id, "queue-ship-"+ident, apitest.ShipBody("merge_only", "staging", sha)))
		opIDs, ids, idents = append(opIDs, op.OperationID), append(ids, id), append(idents, ident)
	}
	ops := e.driveQueue(opIDs...)
	repo := filepath.Join(dir, "repos", "web")
	main := git(t, repo, "rev-parse", "main")
	testedSet := map[string]bool{}
	for len(tested) > 0 {
		testedSet[<-tested] = true
	}
	if !testedSet[main] {
		t.Errorf("main is at %s, which no candidate check tested (tested: %v)", main, testedSet)
	}
	for i, op := range ops {
		if op.Status != lifecycle.ShipSucceeded || op.MergeCommitSHA == nil {
			t.Fatalf("operation of %s = %+v, want succeeded", idents[i], op)
		}
		if !treeHas(t, repo, *op.MergeCommitSHA, idents[i]) {
			t.Errorf("%s landed in %s, whose tree lacks its change", idents[i], *op.MergeCommitSHA)
		}
		if !testedSet[*op.MergeCommitSHA] {
			t.Errorf("%s landed in %s, which no check tested", idents[i], *op.MergeCommitSHA)
		}
		if e.Task(ids[i])["status"] != "done" {
			t.Errorf("%s is %v, want done", idents[i], e.Task(ids[i])["status"])
		}
		if !treeHas(t, repo, main, idents[i]) {
			t.Errorf("main lacks %s", idents[i])
		}
	}
	qs := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK)["data"].([]any)
	if len(qs) != 1 {
		t.Fatalf("queues = %v, want one", qs)
	}
	q := qs[0].(map[string]any)
	if q["base"] != "main" || q["baseSha"] != main || len(q["entries"].([]any)) != 0 {
		t.Errorf("queue after landing = %v, want main at %s and no entries", q, main)
	}
	if st := q["stats"].(map[string]any); st["landed"] != float64(6) {
		t.Errorf("stats = %v, want 6 landed", st)
	}
	var changes []string
	for _, ev := range e.EventsOf(ids[0]) {
		if ev["type"] == "task.merge_queue" {
			changes = append(changes, ev["data"].(map[string]any)["change"].(string))
		}
	}
	if len(changes) < 2 || changes[0] != "entered" || changes[len(changes)-1] != "landed" {
		t.Errorf("task.merge_queue changes of ENG-1 = %v, want entered first and landed last", changes)
	}
}

// A change whose candidate fails its checks alone goes back to its agent
// with reworkReason checks_failed and the failing check; the others land.
// The queue's instruments count it all.
func TestMergeQueueSendsTheCulpritBack(t *testing.T) {
	t.Parallel()
	requireGit(t)
	var repo string
	p, withProbe := newProbe(t)
	e, dir := newQueueEnv(t, func(_ context.Context, c artifact.QueueCandidate) error {
		if treeHas(t, c.GitDir, c.SHA, "ENG-2") {
			return errors.New("ENG-2 breaks the build")
		}
		return nil
	}, withProbe)

	repo = filepath.Join(dir, "repos", "web")
	var opIDs, ids []string
	for i := range 4 {
		ident := fmt.Sprintf("ENG-%d", i+1)
		id, sha := e.shippableTask(ident)
		op := accepted(t, e.ship(id, "culprit-ship-"+ident, apitest.ShipBody("merge_only", "staging", sha)))
		opIDs, ids = append(opIDs, op.OperationID), append(ids, id)
	}
	ops := e.driveQueue(opIDs...)
	for i, op := range ops {
		if i == 1 {
			if op.Status != lifecycle.ShipFailed || op.Error == nil || op.Error.Code != "checks_failed" {
				t.Errorf("operation of the culprit = %+v, want failed checks_failed", op)
			}
			continue
		}
		if op.Status != lifecycle.ShipSucceeded {
			t.Errorf("operation %d = %+v, want succeeded", i, op)
		}
	}
	task := e.Task(ids[1])
	if task["status"] != "in_review" || !strings.Contains(fmt.Sprint(task["availableActions"]), "start") {
		t.Errorf("the culprit's task = %v %v, want in_review offering start", task["status"], task["availableActions"])
	}
	main := git(t, repo, "rev-parse", "main")
	if treeHas(t, repo, main, "ENG-2") {
		t.Error("main holds the culprit's change")
	}
	var shipped, failed map[string]any
	for _, ev := range e.EventsOf(ids[1]) {
		data := ev["data"].(map[string]any)
		switch {
		case ev["type"] == "task.shipped":
			shipped = data
		case ev["type"] == "task.merge_queue" && data["change"] == "failed" && failed == nil:
			failed = data["queue"].(map[string]any)["candidate"].(map[string]any)
		}
	}
	if failed == nil || failed["state"] != "failed" || !strings.Contains(fmt.Sprint(failed["failedChecks"]), "queue-check") {
		t.Errorf("the candidate of the culprit's first failed event = %v, want the failed one, naming queue-check", failed)
	}
	if shipped["reworkReason"] != "checks_failed" {
		t.Errorf("task.shipped of the culprit = %v, want reworkReason checks_failed", shipped)
	}
	p.want("lifecycle.merge_queue.time_in_queue", map[string]string{"lifecycle.merge_queue.outcome": "landed"}, 3)
	p.want("lifecycle.merge_queue.time_in_queue", map[string]string{"lifecycle.merge_queue.outcome": "reworked"}, 1)
	if runs, failed := p.value("lifecycle.merge_queue.ci_runs", nil), p.value("lifecycle.merge_queue.batches", map[string]string{"lifecycle.merge_queue.result": "failed"}); runs < 3 || failed < 1 {
		t.Errorf("%d CI runs, %d failed batches; want at least 3 and 1", runs, failed)
	}
	if p.value("lifecycle.merge_queue.bisection_depth", nil) < 1 {
		t.Error("no probe's bisection depth was recorded")
	}
	if probes := p.value("lifecycle.merge_queue.batches", map[string]string{"lifecycle.merge_queue.kind": "probe"}); probes < 1 {
		t.Errorf("%d probes counted, want at least 1", probes)
	}
	p.observed("lifecycle.merge_queue.depth", map[string]string{"lifecycle.merge_queue.base": "main"})
}

// Pausing a queue stops it landing; resuming lands what waited. Pause
// and resume need ship:write.
func TestMergeQueuePauseAndResume(t *testing.T) {
	t.Parallel()
	requireGit(t)
	e, _ := newQueueEnv(t, nil)
	id, sha := e.shippableTask("ENG-1")
	op := accepted(t, e.ship(id, "pause-ship-1", apitest.ShipBody("merge_only", "staging", sha)))
	var qid string
	testenv.WaitFor(t, 10*time.Second, "the change to enter the queue", func() bool {
		qs := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK)["data"].([]any)
		if len(qs) == 1 {
			qid = qs[0].(map[string]any)["id"].(string)
		}
		return qid != ""
	})
	reader := e.KeyAs(lifecycle.Actor{ID: "viewer", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead)
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: reader}, http.StatusForbidden)
	q := e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: e.Admin, Body: map[string]any{"reason": "release freeze"}}, http.StatusOK)["data"].(map[string]any)
	if q["paused"] != true || !strings.Contains(fmt.Sprint(q["pauseReason"]), "release freeze") {
		t.Errorf("paused queue = %v", q)
	}
	for range 5 {
		e.Clock.Advance(time.Second)
	}
	if got := e.shipOperation(op.OperationID); got.Status == lifecycle.ShipSucceeded {
		t.Fatal("a paused queue landed a change")
	}
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/resume", Key: e.Admin}, http.StatusOK)
	if ops := e.driveQueue(op.OperationID); ops[0].Status != lifecycle.ShipSucceeded {
		t.Errorf("after resume = %+v, want succeeded", ops[0])
	}
	e.Call(apitest.Request{Method: "GET", Path: "/merge-queues/mq_none", Key: e.Admin}, http.StatusNotFound)
}

// A change sent back for failing checks comes back once its agent fixed
// it: started, submitted and shipped again, it enters the queue again,
// and lands.
func TestMergeQueueTakesTheFixBack(t *testing.T) {
	t.Parallel()
	requireGit(t)
	e, _ := newQueueEnv(t, func(_ context.Context, c artifact.QueueCandidate) error {
		out, _ := exec.Command("git", "-C", c.GitDir, "grep", "-l", "still broken", c.SHA).CombinedOutput()
		if len(out) > 0 {
			return errors.New("the build is still broken")
		}
		return nil
	})
	id := e.startedTask("ENG-1")
	body := apitest.SubmitBody()
	body["summary"] = "First try: the build is still broken."
	sha := e.SubmitOK(id, "fix-submit-1", body)["headSha"].(string)
	e.reportCI(id, sha)
	op := accepted(t, e.ship(id, "fix-ship-1", apitest.ShipBody("merge_only", "staging", sha)))
	if ops := e.driveQueue(op.OperationID); ops[0].Status != lifecycle.ShipFailed || ops[0].Error == nil || ops[0].Error.Code != "checks_failed" {
		t.Fatalf("first ship = %+v, want failed checks_failed", ops[0])
	}
	// The agent fixes it.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	body["summary"] = "Fixed the build."
	sha = e.SubmitOK(id, "fix-submit-2", body)["headSha"].(string)
	e.reportCI(id, sha)
	op = accepted(t, e.ship(id, "fix-ship-2", apitest.ShipBody("merge_only", "staging", sha)))
	if ops := e.driveQueue(op.OperationID); ops[0].Status != lifecycle.ShipSucceeded {
		t.Fatalf("second ship = %+v, want succeeded", ops[0])
	}
	var changes []string
	for _, ev := range e.EventsOf(id) {
		if ev["type"] == "task.merge_queue" {
			changes = append(changes, ev["data"].(map[string]any)["change"].(string))
		}
	}
	entered := 0
	for _, c := range changes {
		if c == "entered" {
			entered++
		}
	}
	if entered != 2 || !slices.Contains(changes, "reworked") || changes[len(changes)-1] != "landed" {
		t.Errorf("task.merge_queue changes = %v, want entered twice, reworked between, landed last", changes)
	}
	if st := e.Task(id)["status"]; st != "done" {
		t.Errorf("task is %v after the fix landed, want done", st)
	}
}
