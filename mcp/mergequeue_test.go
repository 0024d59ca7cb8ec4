package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// queueEnv is an env whose project web submits to local git repositories
// through the artifact adapter and ships through the lifecycle's merge
// queue, each candidate tested by check; no review is needed.
func queueEnv(t *testing.T, check func(ctx context.Context, c artifact.QueueCandidate) error) *env {
	t.Helper()
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(t.TempDir(), "repos"), QueueCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return newEnv(t, mcp.Config{}, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: a}}
		c.ArtifactAdapter = a
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
		c.MergeQueue = lifecycle.MergeQueueConfig{Enabled: true, PollInterval: time.Second}
	})
}

// ship starts, submits and ships a task through the tools, its CI
// reported passed through the API, and returns the operation's ID.
func (e *env) ship(cs *sdk.ClientSession, id string) string {
	e.t.Helper()
	e.ok(cs, "start_task", map[string]any{"taskId": id})
	sub := e.ok(cs, "submit_work", map[string]any{"taskId": id, "summary": "Fixed the redirect."})
	head := sub["data"].(map[string]any)["headSha"].(string)
	e.api.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.api.Admin, Body: map[string]any{
		"headSha": head, "checks": []map[string]any{{"name": "build", "status": "passed"}}}}, http.StatusOK)
	shipped := e.ok(cs, "ship", map[string]any{"taskId": id, "mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": head})
	return shipped["data"].(map[string]any)["operationId"].(string)
}

// driveUntil advances the fake clock a poll at a time until cond holds.
func (e *env) driveUntil(what string, cond func() bool) {
	e.t.Helper()
	testenv.WaitFor(e.t, 20*time.Second, what, func() bool {
		if cond() {
			return true
		}
		e.api.Clock.Advance(time.Second)
		return false
	})
}

// get_merge_queue_status follows a change through the merge queue: while
// it is tested, its queue, entry and candidate, and the queue's pause;
// once it landed, its succeeded ship; once the queue sent a change back,
// its failed ship with reworkReason checks_failed, the failed check and
// start offered. It needs tasks:read, and an unknown task is not_found.
func TestMergeQueueStatus(t *testing.T) {
	underTest := make(chan string, 100)
	gate := make(chan struct{}) // closed: candidates' checks end
	var failing atomic.Bool
	e := queueEnv(t, func(ctx context.Context, c artifact.QueueCandidate) error {
		select {
		case underTest <- c.SHA:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		if failing.Load() {
			return errors.New("the build broke")
		}
		return nil
	})
	agent := e.api.KeyAs(lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent},
		lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeShipWrite, lifecycle.ScopeEventsRead)
	updated := make(chan string, 1000)
	cs := e.connect(agent, updated)
	status := func(id string) map[string]any {
		t.Helper()
		return e.ok(cs, "get_merge_queue_status", map[string]any{"taskId": id})
	}

	// Before its ship, a task is in no queue and was never shipped.
	idle := e.createTask("MQ-0")
	if st := status(idle); st["inQueue"] != false || st["queue"] != nil || st["entry"] != nil || st["lastShipOperation"] != nil || st["reworkReason"] != nil {
		t.Errorf("the status of a task never shipped = %v", st)
	}

	id := e.createTask("MQ-1")
	queueURI := "lifecycle://tasks/" + id + "/merge-queue"
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: queueURI}); err != nil {
		t.Fatal(err)
	}
	opID := e.ship(cs, id)
	var candidate string
	e.driveUntil("a candidate of MQ-1 under test", func() bool {
		select {
		case candidate = <-underTest:
			return true
		default:
			return false
		}
	})
	st := status(id)
	queue, _ := st["queue"].(map[string]any)
	entry, _ := st["entry"].(map[string]any)
	cand, _ := st["candidate"].(map[string]any)
	if st["inQueue"] != true || queue == nil || entry == nil || cand == nil || st["lastShipOperation"] != nil {
		t.Fatalf("the status of a change under test = %v", st)
	}
	if queue["base"] != "main" || queue["repository"] != "local/web" || queue["paused"] != false || queue["pauseReason"] != nil || queue["entries"] != float64(1) {
		t.Errorf("queue = %v", queue)
	}
	if entry["taskId"] != id || entry["operationId"] != opID || entry["position"] != float64(1) || entry["state"] != "testing" ||
		entry["candidateId"] != cand["id"] || entry["enteredAt"] == nil {
		t.Errorf("entry = %v, want MQ-1's, first, testing in candidate %v", entry, cand["id"])
	}
	if cand["sha"] != candidate {
		t.Errorf("candidate = %v, want the one under test, %s", cand, candidate)
	}
	if slices.Contains(strs(st["availableActions"]), "start") {
		t.Errorf("a shipping task offers %v", st["availableActions"])
	}
	// The resource is the tool's answer, and its subscribers hear of the
	// task's events.
	if uri := within(t, updated, "a notification of "+queueURI); uri != queueURI {
		t.Errorf("notified %s, want %s", uri, queueURI)
	}
	res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: queueURI})
	if err != nil {
		t.Fatalf("read %s: %v", queueURI, err)
	}
	var read map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &read); err != nil || read["inQueue"] != true ||
		!jsonEqual(read["queue"].(map[string]any)["id"], queue["id"]) || !jsonEqual(read["entry"].(map[string]any)["operationId"], opID) {
		t.Errorf("read %s = %s, %v; want get_merge_queue_status's answer", queueURI, res.Contents[0].Text, err)
	}

	qid := queue["id"].(string)
	e.api.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: e.api.Admin, Body: map[string]any{"reason": "release freeze"}}, http.StatusOK)
	if q := status(id)["queue"].(map[string]any); q["paused"] != true || !strings.Contains(q["pauseReason"].(string), "release freeze") {
		t.Errorf("the queue after a pause = %v", q)
	}
	// A wait without afterSequence answers the queue's next change of
	// the task, though such an event does not change the task.
	waited := make(chan result, 1)
	timesOut := e.api.Clock.Now().Add(60 * time.Second)
	go func() {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "wait_for_task_change", Arguments: map[string]any{"taskId": id, "timeoutSeconds": 60}})
		if err != nil {
			t.Error(err)
			close(waited)
			return
		}
		waited <- decodeResult(t, "wait_for_task_change", res)
	}()
	if !e.api.Clock.WaitForWaiterAt(timesOut, 10e9) {
		t.Fatal("the wait did not start")
	}
	e.api.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/resume", Key: e.api.Admin}, http.StatusOK)
	var w result
	select {
	case w = <-waited:
	case <-time.After(10 * time.Second): // no answer: end the wait, which fails below
		e.api.Clock.Advance(61 * time.Second)
		w = <-waited
	}
	if ev, _ := w.data["event"].(map[string]any); w.isError || ev == nil || ev["type"] != "task.merge_queue" {
		t.Errorf("wait_for_task_change while the queue resumes = %s, want a task.merge_queue event", w.text)
	}

	close(gate)
	var landed map[string]any
	e.driveUntil("MQ-1 to land", func() bool {
		landed = status(id)
		op, _ := landed["lastShipOperation"].(map[string]any)
		return op != nil && (op["status"] == "succeeded" || op["status"] == "failed")
	})
	if op := landed["lastShipOperation"].(map[string]any); landed["inQueue"] != false || op["operationId"] != opID || op["status"] != "succeeded" ||
		op["mergeCommitSha"] == nil || landed["reworkReason"] != nil || landed["rework"] != nil {
		t.Errorf("the status of a change that landed = %v", landed)
	}

	failing.Store(true)
	id2 := e.createTask("MQ-2")
	opID2 := e.ship(cs, id2)
	var back map[string]any
	e.driveUntil("MQ-2 to be sent back", func() bool {
		back = status(id2)
		op, _ := back["lastShipOperation"].(map[string]any)
		return op != nil && (op["status"] == "succeeded" || op["status"] == "failed")
	})
	op := back["lastShipOperation"].(map[string]any)
	if back["inQueue"] != false || op["operationId"] != opID2 || op["status"] != "failed" || op["error"].(map[string]any)["code"] != "checks_failed" {
		t.Fatalf("the status of a change sent back = %v", back)
	}
	rework, _ := back["rework"].(map[string]any)
	if back["reworkReason"] != "checks_failed" || rework == nil || rework["reason"] != "checks_failed" || rework["candidateSha"] == "" ||
		!strings.Contains(jsonText(rework["checks"]), `"status":"failed"`) {
		t.Errorf("reworkReason %v, rework %v; want checks_failed with the failed check", back["reworkReason"], rework)
	}
	if !slices.Contains(strs(back["availableActions"]), "start") || !jsonEqual(op["availableActions"], back["availableActions"]) {
		t.Errorf("availableActions = %v (operation's %v), want start offered", back["availableActions"], op["availableActions"])
	}

	e.fails(cs, "get_merge_queue_status", map[string]any{"taskId": "tsk_missing"}, "not_found")
	e.fails(cs, "get_merge_queue_status", map[string]any{}, "validation_error")
	reader := e.connect(e.api.Key(lifecycle.ScopeEventsRead), nil)
	e.fails(reader, "get_merge_queue_status", map[string]any{"taskId": id}, "insufficient_scope")
}

// jsonText encodes v as JSON.
func jsonText(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
