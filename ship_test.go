package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// specShipFields are the members of an accepted ship operation (docs/api.md).
var specShipFields = map[string]string{
	"taskId": "string", "operationId": "string", "status": "string", "queuedAt": "string", "availableActions": "string[]",
}

// fakeDeployer records deployments; it can be made to fail.
type fakeDeployer struct {
	mu    sync.Mutex
	calls []lifecycle.DeployRequest
	fail  error
}

func (d *fakeDeployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, req)
	if d.fail != nil {
		err := d.fail
		d.fail = nil
		return lifecycle.Deployment{}, err
	}
	return lifecycle.Deployment{ID: "dep_" + req.OperationID, Environment: req.Environment, CommitSHA: req.CommitSHA,
		URL: "https://" + string(req.Environment) + ".example.com", DeployedAt: lifecycle.NewTimestamp(apitest.Epoch)}, nil
}

func (d *fakeDeployer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

// newShipEnv is a submit env with a deployer and never_require reviews,
// whose runner is started.
func newShipEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, adapters, *fakeDeployer) {
	t.Helper()
	d := &fakeDeployer{}
	e, a := newSubmitEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Deployer = d
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	}}, mutate...)...)
	startService(t, e.Svc)
	return e, a, d
}

func startService(t *testing.T, svc *lifecycle.Service) {
	t.Helper()
	apitest.StartService(t, t.Context(), svc)
}

// startServiceWith starts svc with ctx, whose values reach its background
// work, and closes it when the test ends.
func startServiceWith(t *testing.T, ctx context.Context, svc *lifecycle.Service) {
	t.Helper()
	apitest.StartService(t, ctx, svc)
}

// shippableTask returns a task in review whose CI passed, and its head.
func (e *env) shippableTask(ident string) (string, string) {
	e.T.Helper()
	id, sha := e.submittedTask(ident)
	e.reportCI(id, sha)
	return id, sha
}

// ship posts a ship request with an idempotency key.
func (e *env) ship(taskID, key string, body any) *httptest.ResponseRecorder {
	e.T.Helper()
	return e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + taskID + "/ship", Key: e.Admin, Body: body, Header: http.Header{"Idempotency-Key": {key}}})
}

// waitShip polls a ship operation until it has finished.
func (e *env) waitShip(opID string) map[string]any {
	e.T.Helper()
	var op map[string]any
	testenv.WaitFor(e.T, 10*time.Second, "ship operation "+opID+" to finish", func() bool {
		op = e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)
		st := op["data"].(map[string]any)["status"]
		return st == "succeeded" || st == "failed"
	})
	return op
}

// shipOperation reads a ship operation through the API as e's admin.
func (e *env) shipOperation(opID string) lifecycle.ShipOperation {
	e.T.Helper()
	return apitest.CallData[lifecycle.ShipOperation](e.Env, apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)
}

// waitShipOp polls a ship operation until it has finished and returns it.
func (e *env) waitShipOp(opID string) lifecycle.ShipOperation {
	e.T.Helper()
	var op lifecycle.ShipOperation
	testenv.WaitFor(e.T, 10*time.Second, "ship operation "+opID+" to finish", func() bool {
		op = e.shipOperation(opID)
		return op.Status == lifecycle.ShipSucceeded || op.Status == lifecycle.ShipFailed
	})
	return op
}

// accepted decodes the answer to an accepted ship request, failing the
// test unless it is one.
func accepted(t *testing.T, rec *httptest.ResponseRecorder) lifecycle.ShipOperation {
	t.Helper()
	apitest.Answer(t, "POST /tasks/{id}/ship", rec, http.StatusAccepted)
	return apitest.DecodeData[lifecycle.ShipOperation](t, rec)
}

// shippedData returns the data of the task.shipped events of a task.
func (e *env) shippedData(taskID string) []lifecycle.TaskShippedData {
	e.T.Helper()
	evs, err := e.Store.Events(e.T.Context(), lifecycle.EventFilter{TaskID: taskID, Limit: 10000})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []lifecycle.TaskShippedData
	for _, ev := range evs {
		if ev.Type != lifecycle.EventTaskShipped {
			continue
		}
		var data lifecycle.TaskShippedData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			e.T.Fatalf("data of event %s: %v", ev.ID, err)
		}
		out = append(out, data)
	}
	return out
}

// shippedEvents returns the task.shipped events of a task.
func (e *env) shippedEvents(taskID string) []map[string]any {
	var out []map[string]any
	for _, ev := range e.EventsOf(taskID) {
		if ev["type"] == "task.shipped" {
			out = append(out, ev)
		}
	}
	return out
}

func TestShipMergeAndDeploy(t *testing.T) {
	t.Parallel()
	e, a, d := newShipEnv(t)
	id, sha := e.shippableTask("ENG-1")
	if got := e.task(id).AvailableActions; cmp.Diff(shipReady, got) != "" {
		t.Fatalf("actions before ship = %v", got)
	}
	rec := e.ship(id, "ship-key-001", apitest.ShipBody("merge_and_deploy", "production", strings.ToUpper(sha)))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("ship = %d: %s", rec.Code, rec.Body)
	}
	// The members and their JSON types, and the timestamps' wire form, are
	// checked on the JSON object; the values on the decoded operation.
	raw := apitest.Decode(t, rec)["data"].(map[string]any)
	if diff := cmp.Diff(specShipFields, shape(raw, specShipFields)); diff != "" {
		t.Errorf("ship operation shape (-spec +got):\n%s", diff)
	}
	data := accepted(t, rec)
	if queuedAt, _ := raw["queuedAt"].(string); data.Status != lifecycle.ShipQueued || data.TaskID != id || !idRE("shp_").MatchString(data.OperationID) || !timestampRE.MatchString(queuedAt) {
		t.Errorf("accepted operation = %v", raw)
	}
	if diff := cmp.Diff(inReview, data.AvailableActions); diff != "" {
		t.Errorf("actions while the ship is queued (-want +got):\n%s", diff)
	}
	opID := data.OperationID
	op := e.waitShipOp(opID)
	pr, _ := a.web.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1})
	want := lifecycle.ShipOperation{
		TaskID: id, OperationID: opID, Status: lifecycle.ShipSucceeded, AvailableActions: []lifecycle.Action{},
		Mode: lifecycle.ShipMergeAndDeploy, TargetEnvironment: lifecycle.EnvironmentProduction, ExpectedHeadSHA: sha,
		MergeCommitSHA: &pr.MergeCommitSHA,
		Deployment: &lifecycle.Deployment{ID: "dep_" + opID, Environment: lifecycle.EnvironmentProduction, CommitSHA: pr.MergeCommitSHA,
			URL: "https://production.example.com", DeployedAt: lifecycle.NewTimestamp(apitest.Epoch)},
		// The times are the runner's; their form is checked below.
		QueuedAt: op.QueuedAt, StartedAt: op.StartedAt, FinishedAt: op.FinishedAt,
	}
	if diff := cmp.Diff(want, op); diff != "" {
		t.Errorf("operation (-want +got):\n%s", diff)
	}
	rawOp := e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	deployedAt, _ := rawOp["deployment"].(map[string]any)["deployedAt"].(string)
	for k, v := range map[string]any{"queuedAt": rawOp["queuedAt"], "startedAt": rawOp["startedAt"], "finishedAt": rawOp["finishedAt"], "deployment.deployedAt": deployedAt} {
		if s, _ := v.(string); !timestampRE.MatchString(s) {
			t.Errorf("operation.%s = %v, want a timestamp", k, v)
		}
	}
	task := e.task(id)
	if task.Status != lifecycle.StatusDone || cmp.Diff([]lifecycle.Action{}, task.AvailableActions) != "" {
		t.Errorf("task after ship: %v %v, want done and no actions", task.Status, task.AvailableActions)
	}
	shipped := e.shippedData(id)
	if len(shipped) != 1 {
		t.Fatalf("%d task.shipped events, want 1", len(shipped))
	}
	ev := shipped[0]
	wantEv := lifecycle.TaskShippedData{
		EventData: lifecycle.EventData{TaskID: id, TaskIdentifier: "ENG-1", Status: lifecycle.StatusDone, Summary: ev.Summary, AvailableActions: []lifecycle.Action{},
			Links: lifecycle.EventLinks{Task: apitest.BaseURL + "/tasks/" + id, ShipOperation: apitest.BaseURL + "/ship-operations/" + opID}},
		ShipStatus: lifecycle.ShipSucceeded, OperationID: opID, TargetEnvironment: lifecycle.EnvironmentProduction,
	}
	if diff := cmp.Diff(wantEv, ev); diff != "" {
		t.Errorf("task.shipped data (-want +got):\n%s", diff)
	}
	if a.web.Calls(memory.OpMerge) != 1 || d.count() != 1 {
		t.Errorf("merges %d, deploys %d; want 1 and 1", a.web.Calls(memory.OpMerge), d.count())
	}
}

func TestShipMergeOnly(t *testing.T) {
	t.Parallel()
	e, _, d := newShipEnv(t)
	id, sha := e.shippableTask("ENG-1")
	op := e.waitShipOp(accepted(t, e.ship(id, "ship-key-002", apitest.ShipBody("merge_only", "staging", sha))).OperationID)
	if op.Status != lifecycle.ShipSucceeded || op.Deployment != nil || op.MergeCommitSHA == nil || d.count() != 0 {
		t.Errorf("merge_only operation = %+v, deploys %d", op, d.count())
	}
}

func TestShipPreconditions(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Projects: map[string]lifecycle.ReviewPlan{"web": {Policy: lifecycle.PolicyAlwaysRequire}},
			Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	approve := func(id string) {
		e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite),
			Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	}
	inProgress := e.startedTask("ENG-1")
	noCI := e.startedTask("ENG-2")
	noCISub := e.submitOK(noCI, "submit-ENG-2", apitest.SubmitBody())
	if noCISub.HeadSHA == nil {
		t.Fatal("submission has no headSha")
	}
	noCISHA := *noCISub.HeadSHA
	approve(noCI)
	notApproved, notApprovedSHA := e.shippableTask("ENG-3")
	ready, readySHA := e.shippableTask("ENG-4")
	approve(ready)
	moved, movedSHA := e.shippableTask("ENG-5")
	approve(moved)
	movedPR := e.task(moved).PRNumber
	if movedPR == nil {
		t.Fatal("the moved task has no prNumber")
	}
	a.web.Push(*movedPR) // someone pushed to the branch
	e.reconcile(moved)

	tests := []struct {
		name, task string
		body       map[string]any
		reason     string
		actions    []lifecycle.Action
	}{
		{"not in review", inProgress, apitest.ShipBody("merge_only", "staging", strings.Repeat("a", 40)), "not_shippable", []lifecycle.Action{lifecycle.ActionSubmit}},
		{"CI not passed", noCI, apitest.ShipBody("merge_only", "staging", noCISHA), "ci_not_passed", inReview},
		{"review not approved", notApproved, apitest.ShipBody("merge_only", "staging", notApprovedSHA), "review_not_approved", inReview},
		{"stale SHA", ready, apitest.ShipBody("merge_only", "staging", strings.Repeat("0", 40)), "head_sha_mismatch", shipReady},
		{"head moved at the host: the new head has no CI", moved, apitest.ShipBody("merge_only", "staging", movedSHA), "ci_not_passed", inReview},
	}
	for i, tt := range tests {
		rec := e.ship(tt.task, fmt.Sprintf("precondition-%d", i), tt.body)
		if rec.Code != http.StatusConflict {
			t.Errorf("%s: %d %s, want 409", tt.name, rec.Code, rec.Body)
			continue
		}
		details := apitest.DecodeAs[lifecycle.ErrorBody](t, rec).Error.Details
		if details == nil || details.Reason != tt.reason || cmp.Diff(tt.actions, details.AvailableActions) != "" {
			t.Errorf("%s: details = %+v, want reason %s and actions %v", tt.name, details, tt.reason, tt.actions)
		}
	}
	if rec := e.ship(ready, "precondition-ok", apitest.ShipBody("merge_only", "staging", readySHA)); rec.Code != http.StatusAccepted {
		t.Errorf("ship of the ready task = %d %s", rec.Code, rec.Body)
	}
}

func TestShipAcceptanceCallsNoHost(t *testing.T) {
	t.Parallel()
	// Not started: no runner reads the pull request after the acceptance.
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	id, sha := e.shippableTask("ENG-1")
	before := a.web.TotalCalls()
	a.web.FailNext(memory.OpPullRequest, errors.New("dial tcp: refused"))
	rec := e.ship(id, "host-down-key", apitest.ShipBody("merge_only", "staging", sha))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("ship with the host down = %d %s, want 202: acceptance decides from stored facts", rec.Code, rec.Body)
	}
	if n := a.web.TotalCalls() - before; n != 0 {
		t.Errorf("acceptance made %d host calls, want 0", n)
	}
}

func TestShipWithoutDeployerRefusedAtAcceptance(t *testing.T) {
	t.Parallel()
	e, _, _ := newShipEnv(t, func(c *lifecycle.Config) { c.Deployer = nil })
	id, sha := e.shippableTask("ENG-1")
	rec := e.ship(id, "no-deployer-1", apitest.ShipBody("merge_and_deploy", "staging", sha))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "deployer_not_configured") {
		t.Errorf("merge_and_deploy without a deployer = %d %s", rec.Code, rec.Body)
	}
	if rec := e.ship(id, "no-deployer-2", apitest.ShipBody("merge_only", "staging", sha)); rec.Code != http.StatusAccepted {
		t.Errorf("merge_only without a deployer = %d %s", rec.Code, rec.Body)
	}
}

func TestShipValidationAndAuth(t *testing.T) {
	t.Parallel()
	e, _, _ := newShipEnv(t)
	id, sha := e.shippableTask("ENG-1")
	tests := []struct {
		body   map[string]any
		fields []string
	}{
		{apitest.ShipBody("merge_only", "staging", sha[:39]), []string{"expectedHeadSha"}},
		{apitest.ShipBody("merge_only", "staging", strings.Repeat("g", 40)), []string{"expectedHeadSha"}},
		{apitest.ShipBody("merge_only", "staging", sha+"0"), []string{"expectedHeadSha"}},
		{apitest.ShipBody("squash", "qa", sha), []string{"mode", "targetEnvironment"}},
		{map[string]any{}, []string{"mode", "targetEnvironment", "expectedHeadSha"}},
	}
	for i, tt := range tests {
		resp := e.callError(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/ship", Key: e.Admin, Body: tt.body,
			Header: http.Header{"Idempotency-Key": {fmt.Sprintf("bad-ship-%d", i)}}}, http.StatusBadRequest)
		for _, f := range tt.fields {
			if !namesField(resp, f) {
				t.Errorf("case %d: details.fields lacks %s: %+v", i, f, resp)
			}
		}
	}
	good := apitest.ShipBody("merge_only", "staging", sha)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/ship", Body: good, Header: http.Header{"Idempotency-Key": {"auth-key-1"}}}, http.StatusUnauthorized)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/ship", Key: e.Key(lifecycle.ScopeTasksWrite), Body: good, Header: http.Header{"Idempotency-Key": {"auth-key-1"}}}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/ship", Key: e.Admin, Body: good, Header: http.Header{"Idempotency-Key": {"auth-key-1"}}}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/ship", Key: e.Admin, Body: good}, http.StatusBadRequest) // no key
	e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/shp_doesnotexist", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/nonsense", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/shp_doesnotexist", Key: e.Key(lifecycle.ScopeShipWrite)}, http.StatusForbidden)
}

// After a SHA mismatch a client re-reads the task and retries with a new key.
func TestShipSHAMismatchThenRetry(t *testing.T) {
	t.Parallel()
	e, _, _ := newShipEnv(t)
	id, _ := e.shippableTask("ENG-1")
	stale := strings.Repeat("1", 40)
	if rec := e.ship(id, "first-attempt", apitest.ShipBody("merge_only", "staging", stale)); rec.Code != http.StatusConflict {
		t.Fatalf("ship with a stale SHA = %d", rec.Code)
	}
	head := e.task(id).HeadSHA
	if head == nil {
		t.Fatal("the task has no headSha")
	}
	// The old key stays bound to the failed request's body; a new key is needed.
	if rec := e.ship(id, "second-attempt", apitest.ShipBody("merge_only", "staging", *head)); rec.Code != http.StatusAccepted {
		t.Fatalf("retry with the task's head = %d %s", rec.Code, rec.Body)
	}
}

func TestShipIdempotency(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t)
	id, sha := e.shippableTask("ENG-1")
	first := e.ship(id, "ship-once-key", apitest.ShipBody("merge_only", "staging", sha))
	again := e.ship(id, "ship-once-key", apitest.ShipBody("merge_only", "staging", sha))
	if again.Code != http.StatusAccepted || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Errorf("replay = %d %q %s", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
	if rec := e.ship(id, "ship-once-key", apitest.ShipBody("merge_only", "production", sha)); rec.Code != http.StatusConflict {
		t.Errorf("same key, other body = %d", rec.Code)
	}
	e.waitShipOp(accepted(t, first).OperationID)
	if n := a.web.Calls(memory.OpMerge); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
}

func TestSecondShipRefusedWhileShipping(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	base := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	e, _, _ := newShipEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: &gatedMerge{Adapter: base, gate: gate}, CI: base}}
	})
	id, sha := e.shippableTask("ENG-1")
	first := e.ship(id, "concurrent-ship-1", apitest.ShipBody("merge_only", "staging", sha))
	second := e.ship(id, "concurrent-ship-2", apitest.ShipBody("merge_only", "staging", sha))
	close(gate)
	if first.Code != http.StatusAccepted {
		t.Fatalf("first ship = %d", first.Code)
	}
	if second.Code != http.StatusConflict || !strings.Contains(second.Body.String(), "ship_in_progress") {
		t.Errorf("second ship while the first runs = %d %s, want 409 ship_in_progress", second.Code, second.Body)
	}
	e.waitShipOp(accepted(t, first).OperationID)
	if n := base.Calls(memory.OpMerge); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
}

// gatedMerge holds merges until its gate opens.
type gatedMerge struct {
	*memory.Adapter
	gate chan struct{}
}

func (g *gatedMerge) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return lifecycle.MergeResult{}, ctx.Err()
	}
	return g.Adapter.Merge(ctx, req)
}

func TestCancelRefusedWhileShipQueued(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	base := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	e, _, _ := newShipEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: &gatedMerge{Adapter: base, gate: gate}, CI: base}}
	})
	id, sha := e.shippableTask("ENG-1")
	first := e.ship(id, "queued-ship-1", apitest.ShipBody("merge_only", "staging", sha))
	resp := apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin}, http.StatusConflict)
	if d := resp.Error.Details; d == nil || d.Reason != "ship_in_progress" {
		t.Errorf("cancel during ship: %+v", d)
	}
	close(gate)
	if op := e.waitShipOp(accepted(t, first).OperationID); op.Status != lifecycle.ShipSucceeded {
		t.Errorf("operation = %+v", op)
	}
}

func TestShipFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		breakIt  func(a adapters, d *fakeDeployer)
		mode     string
		code     string
		mergeSHA bool
	}{
		{"merge fails", func(a adapters, d *fakeDeployer) { a.web.FailNext(memory.OpMerge, errors.New("github: 502")) }, "merge_only", "merge_failed", false},
		{"host unreachable from the runner", func(a adapters, d *fakeDeployer) {
			a.web.FailNext(memory.OpPullRequest, errors.New("github: dial tcp: refused"))
		}, "merge_only", "merge_failed", false},
		{"deploy fails", func(a adapters, d *fakeDeployer) { d.fail = errors.New("kubectl: forbidden") }, "merge_and_deploy", "deploy_failed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, a, d := newShipEnv(t)
			id, sha := e.shippableTask("ENG-1")
			tt.breakIt(a, d)
			rec := e.ship(id, "faulty-ship-1", apitest.ShipBody(tt.mode, "staging", sha))
			op := e.waitShipOp(accepted(t, rec).OperationID)
			if op.Status != lifecycle.ShipFailed || op.Error == nil || op.Error.Code != tt.code || (op.MergeCommitSHA != nil) != tt.mergeSHA {
				t.Fatalf("operation = %+v (error %+v), want failed with %s, merge commit recorded %v", op, op.Error, tt.code, tt.mergeSHA)
			}
			if msg := op.Error.Message; msg == "" || strings.Contains(msg, "kubectl") || strings.Contains(msg, "github") {
				t.Errorf("the error message is empty or leaks the cause: %q", msg)
			}
			task := e.task(id)
			if task.Status != lifecycle.StatusInReview || cmp.Diff(shipReady, task.AvailableActions) != "" {
				t.Errorf("task after a failed ship: %v %v", task.Status, task.AvailableActions)
			}
			shipped := e.shippedData(id)
			if len(shipped) != 1 || shipped[0].ShipStatus != lifecycle.ShipFailed || shipped[0].Status != lifecycle.StatusInReview {
				t.Fatalf("shipped events = %+v, want one failed", shipped)
			}
			// Shipping again (a new key) succeeds; a merge that happened is not repeated.
			rec = e.ship(id, "faulty-ship-2", apitest.ShipBody(tt.mode, "staging", sha))
			op = e.waitShipOp(accepted(t, rec).OperationID)
			if op.Status != lifecycle.ShipSucceeded {
				t.Fatalf("retry = %+v", op)
			}
			pr, _ := a.web.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1})
			if pr.State != lifecycle.PullRequestMerged || op.MergeCommitSHA == nil || *op.MergeCommitSHA != pr.MergeCommitSHA {
				t.Errorf("pull request %s with %s, operation merge %v", pr.State, pr.MergeCommitSHA, op.MergeCommitSHA)
			}
			if n := len(e.shippedEvents(id)); n != 2 {
				t.Errorf("%d task.shipped events for 2 finished operations", n)
			}
		})
	}
}

// dyingAdapter plays a process that dies in Merge: before the host merged
// (beforeHost) or after it did.
type dyingAdapter struct {
	*memory.Adapter
	afterHost bool
	entered   chan struct{}
	once      sync.Once
}

func (d *dyingAdapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	if d.afterHost {
		if _, err := d.Adapter.Merge(ctx, req); err != nil {
			return lifecycle.MergeResult{}, err
		}
	}
	d.once.Do(func() { close(d.entered) })
	<-ctx.Done() // the process is gone; only its shutdown ends the call
	return lifecycle.MergeResult{}, ctx.Err()
}

// The runner is stopped mid-operation and a new Service on the same
// database finishes it: one merge at the host, one task.shipped event.
func TestShipResumesAfterTheRunnerDies(t *testing.T) {
	t.Parallel()
	for _, afterHost := range []bool{false, true} {
		t.Run(fmt.Sprintf("host merged %v", afterHost), func(t *testing.T) {
			t.Parallel()
			host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
			dying := &dyingAdapter{Adapter: host, afterHost: afterHost, entered: make(chan struct{})}
			e := newEnv(t, func(c *lifecycle.Config) {
				c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: dying, CI: host}}
				c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
				c.ProviderTimeout = time.Hour
				c.ShipLease = time.Minute
			})
			if err := e.Svc.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			id, sha := e.shippableTask("ENG-1")
			opID := accepted(t, e.ship(id, "dying-ship-1", apitest.ShipBody("merge_only", "staging", sha))).OperationID
			<-dying.entered
			// The process dies: its runner stops mid-operation.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.Svc.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if st := e.shipOperation(opID).Status; st != lifecycle.ShipRunning {
				t.Fatalf("operation after the crash = %v, want running", st)
			}
			// A new process on the same database, with a healthy adapter.
			next, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger(),
				Adapters:     []lifecycle.AdapterBinding{{Project: "web", Adapter: host}},
				ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
				ShipLease:    time.Minute, ShipPollInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			startService(t, next)
			e.Clock.Advance(time.Minute + time.Second) // the dead runner's lease ends; the poll fires
			apitest.WaitFor(t, func() bool {
				e.Clock.Advance(time.Second)
				op, err := e.Store.ShipOperation(t.Context(), opID)
				return err == nil && op.Status == lifecycle.ShipSucceeded
			})
			pr, _ := host.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1})
			merges := host.Calls(memory.OpMerge)
			// Before the host merged: the new runner merges (one call).
			// After: it recognises the merge and does not call Merge at all.
			if pr.State != lifecycle.PullRequestMerged || merges != 1 {
				t.Errorf("pull request %s after %d successful merge calls at the host, want merged once", pr.State, merges)
			}
			op, _ := e.Store.ShipOperation(t.Context(), opID)
			if op.Attempts != 2 || op.MergeCommitSHA == nil || *op.MergeCommitSHA != pr.MergeCommitSHA {
				t.Errorf("operation: attempts %d, merge %v; want 2 and %s", op.Attempts, op.MergeCommitSHA, pr.MergeCommitSHA)
			}
			if n := len(e.shippedEvents(id)); n != 1 {
				t.Errorf("%d task.shipped events, want 1", n)
			}
		})
	}
}
