package console_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// newQueueEnv is a started env whose tasks submit to local git
// repositories through the artifact adapter and ship through the
// lifecycle's merge queue, each candidate tested by check (nil: passed at
// once). It skips the test without the git CLI.
func newQueueEnv(t *testing.T, check func(ctx context.Context, c artifact.QueueCandidate) error) *env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Require(t, testenv.Git, err.Error())
	}
	a, err := artifact.New(artifact.Config{Dir: filepath.Join(t.TempDir(), "repos"), QueueCheck: check})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	e := newEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: a}}
		c.ArtifactAdapter = a
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
		c.MergeQueue = lifecycle.MergeQueueConfig{Enabled: true, PollInterval: time.Second}
	})
	e.Start()
	return e
}

// blockingCheck is a QueueCheck that reports each candidate it starts on
// started and passes it when release is closed.
type blockingCheck struct {
	started chan string // the candidates' commits
	release chan struct{}
}

// newBlockingCheck returns a blockingCheck whose candidates wait.
func newBlockingCheck() *blockingCheck {
	return &blockingCheck{started: make(chan string, 64), release: make(chan struct{})}
}

func (b *blockingCheck) check(ctx context.Context, c artifact.QueueCandidate) error {
	select {
	case b.started <- c.SHA:
	default:
	}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queues reads the Service's merge queues.
func (e *env) queues() []lifecycle.MergeQueue {
	e.T.Helper()
	qs, err := e.Svc.MergeQueues(e.T.Context())
	if err != nil {
		e.T.Fatal(err)
	}
	return qs
}

// driveUntil advances the fake clock a poll at a time until cond holds,
// failing the test after 20 s.
func (e *env) driveUntil(what string, cond func() bool) {
	e.T.Helper()
	testenv.WaitFor(e.T, 20*time.Second, what, func() bool {
		if cond() {
			return true
		}
		e.Clock.Advance(time.Second)
		return false
	})
}

// shipStatus returns the status of a ship operation.
func (e *env) shipStatus(opID string) string {
	e.T.Helper()
	return e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)["status"].(string)
}

// candidateChecking reports whether a candidate of the only queue has
// the check queue-check running.
func (e *env) candidateChecking() bool {
	qs := e.queues()
	if len(qs) != 1 {
		return false
	}
	for _, c := range qs[0].Candidates {
		for _, ch := range c.Checks {
			if ch.Name == "queue-check" && ch.Status == lifecycle.CheckRunning {
				return true
			}
		}
	}
	return false
}

// TestConsoleQueues: GET queues lists the merge queues as the API does;
// pause and resume need ship:write and the session's CSRF token, refuse
// an unknown queue with 404 and a long reason with 400, and pause as the
// session's actor.
func TestConsoleQueues(t *testing.T) {
	t.Parallel()
	bc := newBlockingCheck()
	e := newQueueEnv(t, bc.check)
	c := newConsoleEnv(t, e)
	op := c.KeyAs(lifecycle.Actor{ID: "ops-alice", Role: lifecycle.RoleUser}, apitest.AllScopes()...)
	ck, csrf := c.signIn(op)
	readerCk, readerCSRF := c.signIn(c.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead))
	eventsCk, _ := c.signIn(c.Key(lifecycle.ScopeEventsRead))

	if got := c.call(consoleCall{method: "GET", path: "/queues", session: ck}, http.StatusOK)["data"].([]any); len(got) != 0 {
		t.Fatalf("queues before any ship = %v, want []", got)
	}

	id, sha := e.shippableTask("ENG-1")
	opID := e.ship(id, "console-queue-1", apitest.ShipBody("merge_only", "staging", sha))
	e.driveUntil("the candidate's check to run", e.candidateChecking)

	qs := c.call(consoleCall{method: "GET", path: "/queues", session: readerCk}, http.StatusOK)["data"].([]any)
	if len(qs) != 1 {
		t.Fatalf("queues = %v, want one", qs)
	}
	q := qs[0].(map[string]any)
	qid, _ := q["id"].(string)
	if qid == "" || q["repository"] == "" || q["base"] != "main" || q["paused"] != false || q["pauseReason"] != nil {
		t.Errorf("queue = %v", q)
	}
	entries := q["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("entries = %v, want ENG-1's", entries)
	}
	entry := entries[0].(map[string]any)
	if entry["taskId"] != id || entry["taskIdentifier"] != "ENG-1" || entry["position"] != float64(1) || entry["state"] != "testing" ||
		entry["priority"] != "normal" || entry["operationId"] != opID || entry["enteredAt"] == nil {
		t.Errorf("entry = %v", entry)
	}
	cands := q["candidates"].([]any)
	if len(cands) == 0 {
		t.Fatalf("no candidates: %v", q)
	}
	cand := cands[0].(map[string]any)
	checks := cand["checks"].([]any)
	if kind := cand["kind"]; kind != "chain" && kind != "leaf" || cand["state"] != "testing" || len(checks) != 1 || checks[0].(map[string]any)["name"] != "queue-check" ||
		checks[0].(map[string]any)["status"] != "running" || strings.Join(toStrings(cand["taskIds"]), ",") != id {
		t.Errorf("candidate = %v", cand)
	}
	for _, k := range []string{"landed", "ciRuns", "batches", "failedBatches", "bisections", "reworked", "flakyBatches", "failRate"} {
		if _, ok := q["stats"].(map[string]any)[k]; !ok {
			t.Errorf("stats lack %s: %v", k, q["stats"])
		}
	}
	api := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues/" + qid, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if api["id"] != q["id"] || api["base"] != q["base"] || len(api["entries"].([]any)) != 1 {
		t.Errorf("the console's queue %v differs from the API's %v", q, api)
	}

	pause, resume := "/queues/"+qid+"/pause", "/queues/"+qid+"/resume"
	for _, tc := range []struct {
		name   string
		call   consoleCall
		status int
		code   string
	}{
		{"queues without tasks:read", consoleCall{method: "GET", path: "/queues", session: eventsCk}, 403, "insufficient_scope"},
		{"queues signed out", consoleCall{method: "GET", path: "/queues"}, 401, "unauthorized"},
		{"queues from another site", consoleCall{method: "GET", path: "/queues", session: ck, header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, 403, "csrf_failed"},
		{"pause without ship:write", consoleCall{method: "POST", path: pause, session: readerCk, csrf: readerCSRF}, 403, "insufficient_scope"},
		{"resume without ship:write", consoleCall{method: "POST", path: resume, session: readerCk, csrf: readerCSRF}, 403, "insufficient_scope"},
		{"pause without the token", consoleCall{method: "POST", path: pause, session: ck, body: map[string]any{"reason": "x"}}, 403, "csrf_failed"},
		{"pause with a wrong token", consoleCall{method: "POST", path: pause, session: ck, csrf: wrongToken(csrf)}, 403, "csrf_failed"},
		{"pause with another session's token", consoleCall{method: "POST", path: pause, session: ck, csrf: readerCSRF}, 403, "csrf_failed"},
		{"pause from another origin", consoleCall{method: "POST", path: pause, session: ck, csrf: csrf, header: http.Header{"Origin": {"https://evil.example"}}}, 403, "csrf_failed"},
		{"resume without the token", consoleCall{method: "POST", path: resume, session: ck}, 403, "csrf_failed"},
		{"pause signed out", consoleCall{method: "POST", path: pause, csrf: csrf}, 401, "unauthorized"},
		{"pause an unknown queue", consoleCall{method: "POST", path: "/queues/mq_none/pause", session: ck, csrf: csrf}, 404, "not_found"},
		{"resume an unknown queue", consoleCall{method: "POST", path: "/queues/mq_none/resume", session: ck, csrf: csrf}, 404, "not_found"},
		{"pause with a long reason", consoleCall{method: "POST", path: pause, session: ck, csrf: csrf, body: map[string]any{"reason": strings.Repeat("é", 501)}}, 400, "validation_error"},
		{"pause with an unknown member", consoleCall{method: "POST", path: pause, session: ck, csrf: csrf, body: map[string]any{"why": "x"}}, 400, "validation_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out := c.call(tc.call, tc.status); errorCode(out) != tc.code {
				t.Errorf("code %s, want %s: %v", errorCode(out), tc.code, out)
			}
		})
	}
	if got := e.queues()[0]; got.Paused {
		t.Fatalf("a refused pause paused the queue: %+v", got)
	}

	// Paused as the session's actor, with the reason; nothing lands while
	// it is, though the candidate's check passes.
	paused := c.call(consoleCall{method: "POST", path: pause, session: ck, csrf: csrf, body: map[string]any{"reason": "release freeze"}}, http.StatusOK)["data"].(map[string]any)
	if paused["id"] != qid || paused["paused"] != true || paused["pauseReason"] != "paused by ops-alice: release freeze" {
		t.Errorf("paused queue = %v", paused)
	}
	listed := c.call(consoleCall{method: "GET", path: "/queues", session: ck}, http.StatusOK)["data"].([]any)[0].(map[string]any)
	if listed["paused"] != true || listed["pauseReason"] != "paused by ops-alice: release freeze" {
		t.Errorf("listed after the pause = %v", listed)
	}
	close(bc.release)
	for range 5 {
		e.Clock.Advance(time.Second)
	}
	if st := e.shipStatus(opID); st == "succeeded" {
		t.Fatal("a queue paused through the console landed a change")
	}
	resumed := c.call(consoleCall{method: "POST", path: resume, session: ck, csrf: csrf}, http.StatusOK)["data"].(map[string]any)
	if resumed["paused"] != false || resumed["pauseReason"] != nil {
		t.Errorf("resumed queue = %v", resumed)
	}
	e.driveUntil("the change to land", func() bool { return e.shipStatus(opID) == "succeeded" })
	landed := c.call(consoleCall{method: "GET", path: "/queues", session: ck}, http.StatusOK)["data"].([]any)[0].(map[string]any)
	if len(landed["entries"].([]any)) != 0 || landed["stats"].(map[string]any)["landed"] != float64(1) {
		t.Errorf("queue after landing = %v", landed)
	}

	// A pause without a body says who paused it.
	bare := c.call(consoleCall{method: "POST", path: pause, session: ck, csrf: csrf}, http.StatusOK)["data"].(map[string]any)
	if bare["pauseReason"] != "paused by ops-alice" {
		t.Errorf("pause without a reason = %v", bare["pauseReason"])
	}
	if log := c.LogText(); !strings.Contains(log, "console: paused merge queue") || !strings.Contains(log, "console: resumed merge queue") {
		t.Error("the console did not log the pause and the resume")
	}
}

// TestConsoleQueuesOff: without Config.MergeQueue the console lists no
// queues, and pausing one is 404.
func TestConsoleQueuesOff(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t, newEnv(t))
	ck, csrf := c.signIn(c.Admin)
	if got := c.call(consoleCall{method: "GET", path: "/queues", session: ck}, http.StatusOK)["data"].([]any); len(got) != 0 {
		t.Errorf("queues = %v, want []", got)
	}
	c.call(consoleCall{method: "POST", path: "/queues/mq_none/pause", session: ck, csrf: csrf, body: map[string]any{"reason": "x"}}, http.StatusNotFound)
}

// toStrings returns the strings of a decoded JSON array.
func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
