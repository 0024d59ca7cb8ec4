package lifecycle_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// consistencySeed fixes the lifecycle of TestEventsAndReadsAgree.
const consistencySeed = 1010

// lifecycleRun drives a random lifecycle of several tasks through the
// HTTP API, the scripted host and the gated ship runner.
type lifecycleRun struct {
	t        *testing.T
	e        *env
	g        *gatedHost
	rng      *rand.Rand
	reviewer string
	tasks    []string             // every task created, oldest first
	ops      map[string]bool      // ship operations not yet finished
	last     map[string]lastEvent // each task's newest event
	cursor   int64                // events read so far
	serial   int                  // makes keys and deliveries unique

	shipOutcomes map[string]int // how ship operations ended
}

// projects are the review policies of the run's tasks: the host decides,
// a reviewer must approve, or no review is needed.
var consistencyProjects = []string{"gh", "ar", "nr"}

// step takes one random step and returns its name.
func (r *lifecycleRun) step() string {
	r.serial++
	live := r.liveTasks()
	if len(live) < 6 && (len(live) < 2 || r.rng.IntN(6) == 0) {
		r.create()
		return "create"
	}
	id := live[r.rng.IntN(len(live))]
	if r.rng.IntN(10) == 0 { // now and then, a task that has ended
		id = r.tasks[r.rng.IntN(len(r.tasks))]
	}
	steps := []struct {
		name string
		do   func(id string)
	}{
		{"start", func(id string) { r.api("POST", "/tasks/"+id+"/start", r.e.Admin, nil, "") }},
		{"submit", func(id string) {
			r.api("POST", "/tasks/"+id+"/submit", r.e.Admin, apitest.SubmitBody(), fmt.Sprintf("consistency-submit-%d", r.serial))
		}},
		{"report checks", func(id string) {
			if head, ok := r.e.Task(id)["headSha"].(string); ok {
				r.api("POST", "/tasks/"+id+"/checks", r.e.Admin, map[string]any{"headSha": head,
					"checks": []map[string]any{{"name": "build", "status": r.checkStatus()}}}, "")
			}
		}},
		{"post review", func(id string) {
			outcome := []string{"approved", "approved", "changes_requested", "commented"}[r.rng.IntN(4)]
			r.api("POST", "/tasks/"+id+"/reviews", r.reviewer, map[string]any{"outcome": outcome}, "")
		}},
		{"host push", r.atHost(func(n int) lifecycle.ProviderEventKind {
			r.g.Push(n)
			return lifecycle.ProviderHeadChanged
		})},
		{"host review", r.atHost(func(n int) lifecycle.ProviderEventKind {
			outcome := []lifecycle.ReviewOutcome{lifecycle.ReviewApproved, lifecycle.ReviewChangesRequested, lifecycle.ReviewCommented}[r.rng.IntN(3)]
			r.g.AddReview(n, lifecycle.HostReview{Reviewer: "hubot", Outcome: outcome, SubmittedAt: apitest.Epoch})
			decision := []lifecycle.ReviewDecision{lifecycle.DecisionApproved, lifecycle.DecisionApproved, lifecycle.DecisionChangesRequested, lifecycle.DecisionPending}[r.rng.IntN(4)]
			r.g.SetReviewDecision(n, decision)
			return lifecycle.ProviderReviewSubmitted
		})},
		{"host CI", r.atHost(func(n int) lifecycle.ProviderEventKind {
			pr, _ := r.g.Adapter.PullRequest(r.t.Context(), webPR(n))
			r.g.SetChecks(pr.HeadSHA, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "ci", Status: lifecycle.CheckStatus(r.checkStatus())}}})
			if r.rng.IntN(2) == 0 { // as GitHub's check_suite: the commit only
				r.applyEvent(lifecycle.ProviderEvent{Kind: lifecycle.ProviderChecksChanged, HeadSHA: pr.HeadSHA})
				return ""
			}
			return lifecycle.ProviderChecksChanged
		})},
		{"host merge", r.atHost(func(n int) lifecycle.ProviderEventKind {
			r.g.MergeByHand(n)
			return lifecycle.ProviderPullRequestMerged
		})},
		{"host close", r.atHost(func(n int) lifecycle.ProviderEventKind {
			r.g.SetState(n, lifecycle.PullRequestClosed)
			return lifecycle.ProviderPullRequestClosed
		})},
		{"ship", func(id string) {
			head, _ := r.e.Task(id)["headSha"].(string)
			if head == "" {
				head = "0000000000000000000000000000000000000000"
			}
			rec := r.api("POST", "/tasks/"+id+"/ship", r.e.Admin, apitest.ShipBody("merge_only", "staging", head), fmt.Sprintf("consistency-ship-%d", r.serial))
			if rec.Code == http.StatusAccepted {
				r.ops[shipOpID(r.t, rec)] = true
			}
		}},
		{"cancel", func(id string) { r.api("POST", "/tasks/"+id+"/cancel", r.e.Admin, nil, "") }},
		{"blocker", func(id string) { r.api("POST", "/tasks/"+id+"/blocker", r.e.Admin, blockerBody(), "") }},
		{"resolve", func(id string) { r.api("POST", "/tasks/"+id+"/resolve-blocker", r.e.Admin, nil, "") }},
		{"runner progress", func(string) { r.g.release() }},
	}
	// Mostly a step that the task's status makes likely to do something;
	// now and then any step, which is mostly refused.
	name := likelySteps[r.status(id)][r.rng.IntN(len(likelySteps[r.status(id)]))]
	if r.rng.IntN(5) == 0 {
		name = steps[r.rng.IntN(len(steps))].name
	}
	for _, s := range steps {
		if s.name == name {
			s.do(id)
		}
	}
	return name
}

// likelySteps are the steps likely to change a task of each status, some
// more than once to make them likelier.
var likelySteps = map[string][]string{
	"todo":        {"start", "start", "start", "cancel"},
	"in_progress": {"submit", "submit", "submit", "blocker"},
	"blocked":     {"resolve", "resolve", "resolve", "cancel"},
	"in_review": {"report checks", "report checks", "post review", "post review", "host CI", "host CI", "host review", "host review",
		"ship", "ship", "ship", "runner progress", "runner progress", "runner progress", "host push", "host merge", "host close", "start"},
	"done":      {"runner progress"},
	"cancelled": {"runner progress"},
}

// create creates a task of a random project.
func (r *lifecycleRun) create() {
	body := apitest.TaskBody(fmt.Sprintf("LIFE-%d", len(r.tasks)+1))
	body["context"] = map[string]any{"project": consistencyProjects[r.rng.IntN(len(consistencyProjects))], "goal": "random lifecycle"}
	r.tasks = append(r.tasks, r.e.CreateTask(body)["id"].(string))
}

// liveTasks returns the tasks neither done nor cancelled.
func (r *lifecycleRun) liveTasks() []string {
	var out []string
	for _, id := range r.tasks {
		if st := r.status(id); st != "done" && st != "cancelled" {
			out = append(out, id)
		}
	}
	return out
}

// status returns a task's status as its newest event says.
func (r *lifecycleRun) status(id string) string {
	return string(r.last[id].data.Status)
}

// commonData returns the members every event's data has.
func commonData(data any) lifecycle.EventData {
	switch d := data.(type) {
	case *lifecycle.TaskUpdatedData:
		return d.EventData
	case *lifecycle.TaskReviewedData:
		return d.EventData
	case *lifecycle.TaskShippedData:
		return d.EventData
	case *lifecycle.TaskAwaitingUserData:
		return d.EventData
	case *lifecycle.TaskCIFailedData:
		return d.EventData
	}
	return lifecycle.EventData{}
}

// checkStatus returns a random check status, mostly passed.
func (r *lifecycleRun) checkStatus() string {
	return []string{"passed", "passed", "failed", "running"}[r.rng.IntN(4)]
}

// openPR returns the number of a task's pull request when it is open at
// the host.
func (r *lifecycleRun) openPR(id string) (int, bool) {
	n, ok := r.e.Task(id)["prNumber"].(float64)
	if !ok {
		return 0, false
	}
	pr, err := r.g.Adapter.PullRequest(r.t.Context(), webPR(int(n)))
	return int(n), err == nil && pr.State == lifecycle.PullRequestOpen
}

// atHost returns a step that, when the task's pull request is open at the
// host, changes it there with change and delivers the provider event of
// the kind change returns (none when "").
func (r *lifecycleRun) atHost(change func(n int) lifecycle.ProviderEventKind) func(id string) {
	return func(id string) {
		n, ok := r.openPR(id)
		if !ok {
			return
		}
		if kind := change(n); kind != "" {
			r.applyEvent(lifecycle.ProviderEvent{Kind: kind, PullRequest: webPR(n)})
		}
	}
}

func (r *lifecycleRun) applyEvent(ev lifecycle.ProviderEvent) {
	ev.Source, ev.DeliveryID = "memory", fmt.Sprintf("delivery-%d", r.serial)
	if err := r.e.Svc.ApplyProviderEvent(r.t.Context(), ev); err != nil {
		r.t.Fatalf("apply %s: %v", ev.Kind, err)
	}
}

// api calls the API; any answer but a server error is part of the game.
func (r *lifecycleRun) api(method, path, key string, body any, idemKey string) *httptest.ResponseRecorder {
	r.t.Helper()
	req := apitest.Request{Method: method, Path: path, Key: key, Body: body}
	if idemKey != "" {
		req.Header = http.Header{"Idempotency-Key": {idemKey}}
	}
	if body == nil && method == "POST" {
		req.Body = map[string]any{}
	}
	rec := r.e.Do(req)
	if rec.Code >= 500 || rec.Code == http.StatusBadRequest {
		r.t.Fatalf("%s %s = %d %s", method, path, rec.Code, rec.Body)
	}
	return rec
}

// readEvents takes in the events committed since the last call and
// returns the tasks they are about.
func (r *lifecycleRun) readEvents() map[string]bool {
	touched := map[string]bool{}
	for {
		evs, err := r.e.Store.Events(r.t.Context(), lifecycle.EventFilter{After: r.cursor, Limit: 1000})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, ev := range evs {
			data, err := ev.DecodeData()
			if err != nil {
				r.t.Fatal(err)
			}
			r.last[ev.TaskID] = lastEvent{ev.Type, commonData(data)}
			r.cursor = ev.Sequence
			touched[ev.TaskID] = true
		}
		if len(evs) < 1000 {
			return touched
		}
	}
}

// listTasks returns every task as GET /tasks lists it.
func (r *lifecycleRun) listTasks() []map[string]any {
	var out []map[string]any
	cursor := ""
	for {
		page := r.e.Call(apitest.Request{Method: "GET", Path: "/tasks?limit=200&cursor=" + cursor, Key: r.e.Admin}, http.StatusOK)
		for _, t := range page["data"].([]any) {
			out = append(out, t.(map[string]any))
		}
		next, _ := page["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// check fails the test unless task, as read by read, has the status and
// actions of its newest event.
func (r *lifecycleRun) check(step int, name, read string, task map[string]any) {
	r.t.Helper()
	id := task["id"].(string)
	last, ok := r.last[id]
	if !ok {
		r.t.Fatalf("step %d (%s): task %s has no event", step, name, id)
	}
	if !sameActions(task["availableActions"], toAny(last.data.AvailableActions)) || string(last.data.Status) != task["status"] {
		r.t.Fatalf("step %d (%s, seed %d): task %s: newest event (%s) says %s %v; %s says %v %v", step, name, consistencySeed, id,
			last.typ, last.data.Status, last.data.AvailableActions, read, task["status"], task["availableActions"])
	}
}

// lastEvent is what the check needs of a task's newest event.
type lastEvent struct {
	typ  lifecycle.EventType
	data lifecycle.EventData
}

// settle waits for the runner to park and forgets finished operations.
func (r *lifecycleRun) settle() {
	ops := make([]string, 0, len(r.ops))
	for id := range r.ops {
		ops = append(ops, id)
	}
	r.e.settleRunner(r.g, ops)
	for _, id := range ops {
		op, err := r.e.Store.ShipOperation(r.t.Context(), id)
		if err != nil {
			r.t.Fatal(err)
		}
		switch {
		case op.Status == lifecycle.ShipSucceeded:
			r.shipOutcomes["succeeded"]++
		case op.Status == lifecycle.ShipFailed:
			r.shipOutcomes[op.Error.Code]++
		default:
			continue
		}
		delete(r.ops, id)
	}
}

// A random lifecycle of 1,200 steps over several tasks, mixing every
// client call, host change and runner step: after each step, every task's
// newest event offers the actions GET /tasks/{id} offers, in the status
// GET says.
func TestEventsAndReadsAgree(t *testing.T) {
	t.Parallel()
	e, g := newGatedEnv(t, func(c *lifecycle.Config) {
		c.ReviewRouter = lifecycle.ReviewRules{Projects: map[string]lifecycle.ReviewPlan{
			"gh": {Policy: lifecycle.PolicyGitHubRules},
			"ar": {Policy: lifecycle.PolicyAlwaysRequire},
			"nr": {Policy: lifecycle.PolicyNeverRequire},
		}}
	})
	r := &lifecycleRun{t: t, e: e, g: g, rng: rand.New(rand.NewPCG(consistencySeed, 0)),
		reviewer: e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite),
		ops:      map[string]bool{}, last: map[string]lastEvent{}, shipOutcomes: map[string]int{}}
	counts := map[string]int{}
	statuses := map[string]bool{}
	changing := 0 // steps that emitted an event
	const steps = 1200
	for i := range steps {
		name := r.step()
		counts[name]++
		r.settle()
		touched := r.readEvents()
		if len(touched) > 0 {
			changing++
		}
		// Every task still going, and every task this step touched, as
		// GET /tasks/{id} reads it. A task that has ended offers nothing
		// and has no event to go with a change: every 20 steps, every task
		// as GET /tasks lists it, so that a change without an event shows.
		for _, id := range r.tasks {
			if st := r.status(id); touched[id] || (st != "done" && st != "cancelled") {
				task := e.Task(id)
				r.check(i, name, "GET /tasks/{id}", task)
				statuses[task["status"].(string)] = true
			}
		}
		if i%20 == 19 || i == steps-1 {
			listed := r.listTasks()
			if len(listed) != len(r.tasks) {
				t.Fatalf("step %d: GET /tasks lists %d tasks, want %d", i, len(listed), len(r.tasks))
			}
			for _, task := range listed {
				r.check(i, name, "GET /tasks", task)
			}
		}
	}
	t.Logf("%d tasks; %d steps changed a task; steps %v; statuses seen %v; ship outcomes %v", len(r.tasks), changing, counts, statuses, r.shipOutcomes)
	if changing < steps/2 {
		t.Errorf("only %d of %d steps changed a task; the walk idles", changing, steps)
	}
	for _, st := range []string{"todo", "in_progress", "in_review", "blocked", "done", "cancelled"} {
		if !statuses[st] {
			t.Errorf("no task was ever %s: the random walk misses part of the lifecycle", st)
		}
	}
}

// toAny turns actions into what a decoded JSON array holds.
func toAny(acts []lifecycle.Action) []any {
	out := make([]any, len(acts))
	for i, a := range acts {
		out[i] = string(a)
	}
	return out
}
