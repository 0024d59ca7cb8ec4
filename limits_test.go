package lifecycle_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// assignedTask creates a task of project web assigned to agent, and
// returns its ID.
func (e *env) assignedTask(ident, agent string) string {
	e.T.Helper()
	body := apitest.TaskBody(ident)
	body["assigneeAgentId"] = agent
	return e.CreateTask(body)["id"].(string)
}

// actionsOf returns the availableActions of a task's read through the API.
func (e *env) actionsOf(id string) []string {
	e.T.Helper()
	return anyStrings(e.Task(id)["availableActions"])
}

// TestMaxInProgressPerAgent: start of a task whose assignee is at the cap
// is refused 409 max_in_progress_per_agent, naming the cap, the agent and
// its count, and no read offers it meanwhile (single reads, cached or
// not, listings, the task's events); other agents' and triage tasks are
// not capped, and a task leaving in_progress frees a place.
func TestMaxInProgressPerAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = 2 })
	a1, a2, a3 := e.assignedTask("CAP-1", "agent-1"), e.assignedTask("CAP-2", "agent-1"), e.assignedTask("CAP-3", "agent-1")
	b1 := e.assignedTask("CAP-4", "agent-2")
	triage := e.CreateTask(apitest.TaskBody("CAP-5"))["id"].(string)
	start := func(id string) *lifecycle.ConflictError {
		_, err := e.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{})
		var c *lifecycle.ConflictError
		if err != nil && !errors.As(err, &c) {
			t.Fatalf("start %s: %v", id, err)
		}
		return c
	}
	if got := e.actionsOf(a3); !slices.Equal(got, []string{"start"}) { // cached below the cap
		t.Fatalf("below the cap: %v", got)
	}
	for _, id := range []string{a1, a2} {
		if c := start(id); c != nil {
			t.Fatalf("start below the cap refused: %v", c)
		}
	}
	// a3's row did not change: the cached answer must not offer start.
	for range 2 {
		if got := e.actionsOf(a3); len(got) != 0 {
			t.Fatalf("at the cap, GET offers %v", got)
		}
	}
	list := e.Call(apitest.Request{Method: "GET", Path: "/tasks?assigneeAgentId=agent-1&status=todo", Key: e.Admin}, http.StatusOK)
	for _, item := range list["data"].([]any) {
		if got := anyStrings(item.(map[string]any)["availableActions"]); len(got) != 0 {
			t.Errorf("at the cap, the listing offers %v", got)
		}
	}
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + a3 + "/start", Key: e.Admin})
	if r := conflictReason(t, rec); r != "max_in_progress_per_agent" {
		t.Fatalf("start at the cap: reason %s", r)
	}
	for _, want := range []string{"agent-1", "has 2 tasks in progress", "(2)"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the refusal %s does not say %q", rec.Body, want)
		}
	}
	// A task created for an agent at its cap says so in its event.
	a4 := e.assignedTask("CAP-6", "agent-1")
	if _, data := newestEvent[lifecycle.TaskUpdatedData](e, a4); len(data.AvailableActions) != 0 {
		t.Errorf("the creation event of a task at the cap offers %v", data.AvailableActions)
	}
	// Other agents and triage are not capped.
	for _, id := range []string{b1, triage} {
		if c := start(id); c != nil {
			t.Errorf("start of %s refused: %v", id, c)
		}
	}
	// A blocked task is not in progress: agent-1 may start one more.
	if _, err := e.Svc.RecordBlocker(t.Context(), a1, lifecycle.RecordBlockerParams{Reason: "missing_token", ActionRequired: "add it"}); err != nil {
		t.Fatal(err)
	}
	if got := e.actionsOf(a3); !slices.Equal(got, []string{"start"}) {
		t.Fatalf("below the cap again, GET offers %v", got)
	}
	if c := start(a3); c != nil {
		t.Fatalf("start below the cap again: %v", c)
	}
	// Resolving the blocker returns a1 to in_progress: it is not a start,
	// and is not capped.
	if _, err := e.Svc.ResolveBlocker(t.Context(), a1, lifecycle.ResolveBlockerParams{}); err != nil {
		t.Fatal(err)
	}
	if c := start(a4); c == nil || c.Reason != "max_in_progress_per_agent" || !strings.Contains(c.Message, "has 3 tasks in progress") {
		t.Errorf("start over the cap = %v", c)
	}
}

// TestConcurrentStartsAtCap: starts of one agent's tasks, all at once
// with the agent one below its cap, let exactly one through.
func TestConcurrentStartsAtCap(t *testing.T) {
	t.Parallel()
	const cap, racers = 3, 8
	e := newEnv(t, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = cap })
	for i := range cap - 1 {
		e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + e.assignedTask(fmt.Sprint("RACE-S", i), "agent-1") + "/start", Key: e.Admin}, http.StatusOK)
	}
	var ids []string
	for i := range racers {
		ids = append(ids, e.assignedTask(fmt.Sprint("RACE-", i), "agent-1"))
	}
	begin := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, capd int
	)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			_, err := e.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{})
			var c *lifecycle.ConflictError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.As(err, &c) && c.Reason == "max_in_progress_per_agent":
				capd++
			default:
				t.Errorf("start %s: %v", id, err)
			}
		}()
	}
	close(begin)
	wg.Wait()
	n, err := e.Store.CountInProgress(t.Context(), "agent-1")
	if ok != 1 || capd != racers-1 || n != cap || err != nil {
		t.Errorf("%d starts succeeded, %d refused at the cap, %d in progress (%v); want 1, %d, %d", ok, capd, n, err, racers-1, cap)
	}
}

// TestCapsAgreeWithRefusals walks tasks of two agents at random through
// start, block, resolve, submit and cancel, with a cap on each, and
// checks at each step that the single read, the listing and the refusal
// agree on what is offered.
func TestCapsAgreeWithRefusals(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = 2 })
	rng := rand.New(rand.NewPCG(34, 4))
	var ids []string
	for i := range 8 {
		ids = append(ids, e.assignedTask(fmt.Sprint("WALK-", i), []string{"agent-1", "agent-2"}[i%2]))
	}
	listed := func() map[string][]string {
		out := map[string][]string{}
		for _, item := range e.Call(apitest.Request{Method: "GET", Path: "/tasks?limit=200", Key: e.Admin}, http.StatusOK)["data"].([]any) {
			m := item.(map[string]any)
			out[m["id"].(string)] = anyStrings(m["availableActions"])
		}
		return out
	}
	type op struct {
		action string // the action it needs, or "" for cancel
		path   string
		body   any
		key    bool
	}
	ops := []op{
		{"start", "/start", nil, false},
		{"start", "/start", nil, false},
		{"submit", "/submit", apitest.SubmitBody(), true},
		{"", "/blocker", map[string]any{"reason": "missing_token", "actionRequired": "add it"}, false},
		{"resolve_blocker", "/resolve-blocker", nil, false},
		{"", "/cancel", nil, false},
	}
	capped := 0
	for step := range 120 {
		id := ids[rng.IntN(len(ids))]
		o := ops[rng.IntN(len(ops))]
		read := e.actionsOf(id)
		if l := listed()[id]; !slices.Equal(l, read) {
			t.Fatalf("step %d, %s: GET offers %v, the listing %v", step, id, read, l)
		}
		req := apitest.Request{Method: "POST", Path: "/tasks/" + id + o.path, Key: e.Admin, Body: o.body}
		if o.key {
			req.Header = http.Header{"Idempotency-Key": {fmt.Sprint("walk-key-", step)}}
		}
		rec := e.Do(req)
		accepted := rec.Code < 300
		if o.action != "" && slices.Contains(read, o.action) != accepted {
			t.Fatalf("step %d, %s: %s offered %v, answered %d %s", step, id, o.path, read, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusConflict {
			d := apitest.Decode(t, rec)["error"].(map[string]any)["details"].(map[string]any)
			if d["reason"] == "max_in_progress_per_agent" {
				capped++
			}
			if got := anyStrings(d["availableActions"]); !slices.Equal(got, read) {
				t.Fatalf("step %d, %s: %s refused (%s) with %v, the read offered %v", step, id, o.path, d["reason"], got, read)
			}
		} else if !accepted && rec.Code != http.StatusNotFound {
			t.Fatalf("step %d, %s: %s answered %d %s", step, id, o.path, rec.Code, rec.Body)
		}
	}
	if capped == 0 {
		t.Error("no start was refused at the cap: the walk tested nothing of it")
	}
	for _, agent := range []string{"agent-1", "agent-2"} {
		if n, err := e.Store.CountInProgress(t.Context(), agent); err != nil || n > 2 {
			t.Errorf("%s has %d tasks in progress (%v), over its cap", agent, n, err)
		}
	}
}

// TestFailedCIIsRework: a task in review whose CI failed offers start,
// with reworkReason ci_failed, and counts the round when started.
func TestFailedCIIsRework(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id, sha := e.submittedTask("CI-1")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "unit", "status": "failed"}},
	}}, http.StatusOK)
	task := e.Task(id)
	if got := anyStrings(task["availableActions"]); !slices.Contains(got, "start") || slices.Contains(got, "ship") {
		t.Fatalf("CI failed: %v", got)
	}
	_, data := newestEvent[lifecycle.TaskUpdatedData](e, id, lifecycle.EventTaskUpdated)
	if data.ReworkReason != lifecycle.ReworkCIFailed {
		t.Errorf("the event of the failure says reworkReason %q, want ci_failed", data.ReworkReason)
	}
	started := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if started["status"] != "in_progress" || started["reworkRounds"] != float64(1) {
		t.Errorf("rework start: status %v, reworkRounds %v", started["status"], started["reworkRounds"])
	}
}

// TestMaxReworkRounds: a task that needs rework again once it used its
// rounds is blocked for a person in the transaction of the review that
// asked (blocker max_rework_rounds, task.awaiting_user); resolving it
// returns the task to review with as many rounds again.
func TestMaxReworkRounds(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.MaxReworkRounds = 1
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	})
	reviewer := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	requestChanges := func(id string) map[string]any {
		return e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "changes_requested"}}, http.StatusCreated)
	}
	id, _ := e.submittedTask("ROUND-1")
	requestChanges(id)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	e.SubmitOK(id, "round-submit-2", apitest.SubmitBody())
	requestChanges(id)
	task := e.Task(id)
	b, _ := task["blocker"].(map[string]any)
	if task["status"] != "blocked" || task["reworkRounds"] != float64(1) || b == nil || b["reason"] != "max_rework_rounds" ||
		!strings.Contains(b["actionRequired"].(string), "changes_requested") || b["resumeInstructions"] == "" {
		t.Fatalf("after a second request for changes: status %v, reworkRounds %v, blocker %v", task["status"], task["reworkRounds"], b)
	}
	if got := anyStrings(task["availableActions"]); !slices.Equal(got, []string{"resolve_blocker"}) {
		t.Errorf("blocked at the cap: %v", got)
	}
	ev, data := newestEvent[lifecycle.TaskAwaitingUserData](e, id)
	if ev.Type != lifecycle.EventTaskAwaitingUser || data.Blocker.Reason != "max_rework_rounds" || data.Actor.ID != "system" {
		t.Errorf("newest event %s: %+v", ev.Type, data)
	}
	if r := conflictReason(t, e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin})); r != "not_startable" {
		t.Errorf("start while blocked: %s", r)
	}
	resolved := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: e.Admin, Body: map[string]any{"resolution": "one more try"}}, http.StatusOK)["data"].(map[string]any)
	if resolved["status"] != "in_review" || !slices.Contains(anyStrings(resolved["availableActions"]), "start") {
		t.Fatalf("resolved: %v, %v", resolved["status"], resolved["availableActions"])
	}
	started := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if started["reworkRounds"] != float64(2) {
		t.Errorf("a granted round: reworkRounds %v, want 2", started["reworkRounds"])
	}
}

// TestMaxReworkRoundsRefusesStart: a task that already needed rework when
// it reached its cap (the cap was lowered) is refused start 409
// max_rework_rounds, and not offered it.
func TestMaxReworkRoundsRefusesStart(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) { c.MaxReworkRounds = 2 })
	id, sha := e.submittedTask("ROUND-2")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "unit", "status": "failed"}},
	}}, http.StatusOK)
	if err := e.Store.Update(t.Context(), func(tx lifecycle.Tx) error {
		task, err := tx.Task(t.Context(), id)
		if err != nil {
			return err
		}
		task.ReworkRounds = 2
		return tx.UpdateTask(t.Context(), task)
	}); err != nil {
		t.Fatal(err)
	}
	if got := e.actionsOf(id); slices.Contains(got, "start") {
		t.Errorf("rounds used: offered %v", got)
	}
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin})
	if r := conflictReason(t, rec); r != "max_rework_rounds" || !strings.Contains(rec.Body.String(), "used its 2 rework rounds") {
		t.Errorf("start beyond the cap: %s %s", r, rec.Body)
	}
}

// TestCapAgreesAcrossParts: the events the other parts of the agent's
// loop append agree with a read under Config.MaxInProgressPerAgent: the
// task.updated that releases a dependent whose agent is at its cap, and
// the task.stalled of a task sent back for rework while its agent is at
// its cap, offer start only as GET does. A person's change of a stalled
// task's dependencies is not its activity.
func TestCapAgreesAcrossParts(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t, stallAfter, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = 1 })
	eventActions := func(id string) []lifecycle.Action { t.Helper(); return eventActionsOf(t, e, id) }

	// Released at the cap: the agent has a task in progress.
	dep := e.startedTask("AGR-1")
	waiting := e.createTask(withDeps("AGR-2", dep))
	body := apitest.TaskBody("AGR-3")
	body["assigneeAgentId"] = "agent-1"
	body["dependsOn"] = []string{dep}
	capped := e.CreateTask(body)["id"].(string)
	busy := e.assignedTask("AGR-4", "agent-1")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + busy + "/start", Key: e.Admin}, http.StatusOK)
	sub := e.submitOK(dep, "submit-agr-1", apitest.SubmitBody())
	a.web.SetState(sub.PRNumber, lifecycle.PullRequestMerged)
	e.reconcile(dep)
	if got, want := eventActions(capped), e.task(capped).AvailableActions; !slices.Equal(got, want) || slices.Contains(got, lifecycle.ActionStart) {
		t.Errorf("released at the cap: the event offers %v, GET %v; want the same, without start", got, want)
	}
	if got := e.task(waiting.ID).AvailableActions; !slices.Contains(got, lifecycle.ActionStart) {
		t.Errorf("released with no assignee: %v, want start", got)
	}

	// Stalled at the cap: a rework task (CI failed) of an agent at its cap.
	rework, sha := e.submittedTask("AGR-5")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + rework + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "unit", "status": "failed"}},
	}}, http.StatusOK)
	if err := e.Store.Update(t.Context(), func(tx lifecycle.Tx) error { // assigned to agent-1, as routing would
		task, err := tx.Task(t.Context(), rework)
		if err != nil {
			return err
		}
		agent := "agent-1"
		task.AssigneeAgentID = &agent
		return tx.UpdateTask(t.Context(), task)
	}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(31 * time.Minute)
	e.sweep(2) // busy (in progress) and rework (in review)
	if got, want := eventActions(rework), e.task(rework).AvailableActions; !slices.Equal(got, want) || slices.Contains(got, lifecycle.ActionStart) {
		t.Errorf("stalled at the cap: task.stalled offers %v, GET %v; want the same, without start", got, want)
	}

	// A person sets the dependencies of a stalled task: it stays stalled.
	if _, body, code := e.setDeps(busy, waiting.ID); code != http.StatusOK {
		t.Fatalf("PUT dependencies = %d %v", code, body)
	}
	if e.task(busy).Stalled == nil {
		t.Error("setting a stalled task's dependencies cleared its stall mark")
	}
}

// TestCapCountsThroughASubmission: under the cap, a resubmission whose
// facts leave the task in need of rework (its pull request still
// conflicts) offers start, below the cap, in its event as in a read.
func TestCapCountsThroughASubmission(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = 2 })
	id := e.assignedTask("SUBCAP-1", "agent-1")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	sub := e.submitOK(id, "subcap-1", apitest.SubmitBody())
	a.web.SetMergeable(sub.PRNumber, lifecycle.MergeabilityConflicting)
	e.reconcile(id)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK) // rework
	e.submitOK(id, "subcap-2", apitest.SubmitBody())
	task := e.task(id)
	if !slices.Contains(task.AvailableActions, lifecycle.ActionStart) {
		t.Errorf("resubmitted, still conflicting, agent below its cap: %v, want start", task.AvailableActions)
	}
	if got := eventActionsOf(t, e, id); !slices.Equal(got, task.AvailableActions) {
		t.Errorf("the resubmission's event offers %v, GET %v", got, task.AvailableActions)
	}
}

// eventActionsOf returns the availableActions of the newest event of id.
func eventActionsOf(t *testing.T, e *env, id string) []lifecycle.Action {
	t.Helper()
	evs, err := e.Store.Events(t.Context(), lifecycle.EventFilter{TaskID: id, Limit: 10000})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %d, %v", id, len(evs), err)
	}
	var data struct {
		AvailableActions []lifecycle.Action `json:"availableActions"`
	}
	if err := json.Unmarshal(evs[len(evs)-1].Data, &data); err != nil {
		t.Fatal(err)
	}
	return data.AvailableActions
}
