package mcp_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// allTools are the tools the issue names, with the scope each needs and
// their annotations: read-only, destructive.
var allTools = map[string]struct {
	scope                 lifecycle.Scope
	readOnly, destructive bool
}{
	"list_tasks":           {lifecycle.ScopeTasksRead, true, false},
	"get_task":             {lifecycle.ScopeTasksRead, true, false},
	"start_task":           {lifecycle.ScopeTasksWrite, false, false},
	"submit_work":          {lifecycle.ScopeTasksWrite, false, false},
	"get_ci_status":        {lifecycle.ScopeTasksRead, true, false},
	"get_review_feedback":  {lifecycle.ScopeTasksRead, true, false},
	"record_blocker":       {lifecycle.ScopeTasksWrite, false, false},
	"resolve_blocker":      {lifecycle.ScopeTasksWrite, false, false},
	"ship":                 {lifecycle.ScopeShipWrite, false, true},
	"get_ship_operation":   {lifecycle.ScopeTasksRead, true, false},
	"wait_for_task_change": {lifecycle.ScopeEventsRead, true, false},

	"get_merge_queue_status": {lifecycle.ScopeTasksRead, true, false},
}

func TestListsToolsResourceTemplatesAndPrompts(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	cs := e.connect(e.api.Admin, nil)
	init := cs.InitializeResult()
	if init.ServerInfo.Name != "lifecycle" || init.Capabilities.Tools == nil || init.Capabilities.Resources == nil ||
		!init.Capabilities.Resources.Subscribe || init.Capabilities.Prompts == nil || init.Instructions == "" {
		t.Fatalf("initialize = %+v", init)
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tool := range tools.Tools {
		want, ok := allTools[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		seen[tool.Name] = true
		a := tool.Annotations
		if a == nil || a.ReadOnlyHint != want.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != want.destructive || !a.IdempotentHint {
			t.Errorf("%s annotations = %+v, want readOnly %v destructive %v idempotent", tool.Name, a, want.readOnly, want.destructive)
		}
		if len(tool.Description) < 80 || !strings.Contains(tool.Description, string(want.scope)) {
			t.Errorf("%s description %q is short or does not name its scope %s", tool.Name, tool.Description, want.scope)
		}
		for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			raw, _ := json.Marshal(schema)
			var s jsonschema.Schema
			if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
				t.Errorf("%s %s schema is not an object schema: %s", tool.Name, what, raw)
				continue
			}
			if _, err := s.Resolve(nil); err != nil {
				t.Errorf("%s %s schema does not resolve: %v", tool.Name, what, err)
			}
		}
	}
	if len(seen) != len(allTools) {
		t.Errorf("listed %d of the %d tools: %v", len(seen), len(allTools), seen)
	}
	templates, err := cs.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, rt := range templates.ResourceTemplates {
		uris = append(uris, rt.URITemplate)
		if rt.MIMEType != "application/json" || rt.Description == "" {
			t.Errorf("template %+v", rt)
		}
	}
	slices.Sort(uris)
	if want := []string{"lifecycle://tasks/{id}", "lifecycle://tasks/{id}/ci-status", "lifecycle://tasks/{id}/merge-queue", "lifecycle://tasks/{id}/review-feedback"}; !slices.Equal(uris, want) {
		t.Errorf("templates = %v, want %v", uris, want)
	}
	prompts, err := cs.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "work_on_task" || len(prompts.Prompts[0].Arguments) != 1 || !prompts.Prompts[0].Arguments[0].Required {
		t.Errorf("prompts = %+v", prompts.Prompts)
	}
}

// A task's whole lifecycle through the tools, from todo to done.
func TestLifecycleThroughTools(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-1")
	agent := e.api.KeyAs(lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent},
		lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeShipWrite, lifecycle.ScopeEventsRead)
	cs := e.connect(agent, nil)

	list := e.ok(cs, "list_tasks", map[string]any{"status": []string{"todo"}, "limit": 5})
	tasks := list["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["id"] != id || tasks[0].(map[string]any)["description"] != nil || list["nextCursor"] != nil {
		t.Fatalf("list_tasks = %v", list)
	}
	compact := e.ok(cs, "get_task", map[string]any{"taskId": id})
	data := compact["data"].(map[string]any)
	if _, has := data["description"]; has || data["title"] != "Fix the login redirect" || data["status"] != "todo" ||
		!slices.Equal(strs(compact["availableActions"]), []string{"start"}) ||
		!jsonEqual(compact["meta"], map[string]any{"tokenBudgetHint": "compact", "truncatedFields": []string{"description", "routingReason"}}) {
		t.Fatalf("get_task (compact) = %v", compact)
	}
	// The compact answer is the API's, member for member.
	api := e.api.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "?tokenBudget=compact", Key: e.api.Admin}, 200)
	if !jsonEqual(api, compact) {
		t.Errorf("get_task differs from GET /tasks/{id}?tokenBudget=compact:\n%v\n%v", compact, api)
	}
	full := e.ok(cs, "get_task", map[string]any{"taskId": id, "tokenBudget": "standard"})
	if full["data"].(map[string]any)["description"] != "Users land on a 404 after login." {
		t.Errorf("get_task (standard) = %v", full)
	}

	started := e.ok(cs, "start_task", map[string]any{"taskId": id})
	if started["data"].(map[string]any)["status"] != "in_progress" {
		t.Fatalf("start_task = %v", started)
	}
	blocked := e.ok(cs, "record_blocker", map[string]any{"taskId": id, "reason": "missing_secret", "actionRequired": "Add THEME_URL"})
	if d := blocked["data"].(map[string]any); d["status"] != "blocked" || d["blocker"].(map[string]any)["actionRequired"] != "Add THEME_URL" ||
		!slices.Equal(strs(blocked["availableActions"]), []string{"resolve_blocker"}) {
		t.Fatalf("record_blocker = %v", blocked)
	}
	resolved := e.ok(cs, "resolve_blocker", map[string]any{"taskId": id, "resolution": "added"})
	if resolved["data"].(map[string]any)["status"] != "in_progress" {
		t.Fatalf("resolve_blocker = %v", resolved)
	}

	sub := e.ok(cs, "submit_work", map[string]any{"taskId": id, "summary": "Fixed the redirect.", "mode": "artifact",
		"checks": []map[string]any{{"name": "unit", "status": "passed"}}})
	subData := sub["data"].(map[string]any)
	if subData["status"] != "in_review" || !strings.HasPrefix(subData["submissionId"].(string), "sub_") {
		t.Fatalf("submit_work = %v", sub)
	}
	ci := e.ok(cs, "get_ci_status", map[string]any{"taskId": id})
	if ci["data"].(map[string]any)["overall"] != "passed" {
		t.Fatalf("get_ci_status = %v", ci)
	}
	fb := e.ok(cs, "get_review_feedback", map[string]any{"taskId": id})
	if fb["data"].(map[string]any)["decision"] != "pending" {
		t.Fatalf("get_review_feedback = %v", fb)
	}

	// A review that comes while the agent waits is the answer of its wait.
	after := e.lastSequence(id)
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
	// The wait's timeout is set once it watches (other waiters, such as
	// the event broker's poll, come and go on the clock).
	if !e.api.Clock.WaitForWaiterAt(timesOut, 10e9) {
		t.Fatal("the wait did not start")
	}
	e.review(id, "approved")
	ev := within(t, waited, "answer of wait_for_task_change")
	event := ev.data["event"].(map[string]any)
	if ev.isError || ev.data["timedOut"] != false || event["type"] != "task.reviewed" || event["sequence"].(float64) <= float64(after) ||
		event["data"].(map[string]any)["reviewOutcome"] != "approved" {
		t.Fatalf("wait_for_task_change = %s", ev.text)
	}
	// With afterSequence, an event already committed is answered at once.
	again := e.ok(cs, "wait_for_task_change", map[string]any{"taskId": id, "afterSequence": after})
	if again["event"].(map[string]any)["id"] != event["id"] {
		t.Fatalf("wait_for_task_change after %d = %v, want %v", after, again, event)
	}

	task := e.ok(cs, "get_task", map[string]any{"taskId": id})["data"].(map[string]any)
	head := task["headSha"].(string)
	if !slices.Contains(strs(task["availableActions"]), "ship") {
		t.Fatalf("ship is not offered after approval and passing CI: %v", task)
	}
	shipSeq := e.lastSequence(id)
	shipped := e.ok(cs, "ship", map[string]any{"taskId": id, "mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": head})
	op := shipped["data"].(map[string]any)
	opID := op["operationId"].(string)
	if op["status"] != "queued" && op["status"] != "running" && op["status"] != "succeeded" {
		t.Fatalf("ship = %v", shipped)
	}
	// Follow the task until its ship ends.
	for seq := shipSeq; ; {
		w := e.ok(cs, "wait_for_task_change", map[string]any{"taskId": id, "afterSequence": seq, "timeoutSeconds": 60})
		ev := w["event"].(map[string]any)
		seq = int64(ev["sequence"].(float64))
		if ev["type"] == "task.shipped" {
			if ev["data"].(map[string]any)["shipStatus"] != "succeeded" {
				t.Fatalf("the ship failed: %v", ev)
			}
			break
		}
	}
	final := e.ok(cs, "get_ship_operation", map[string]any{"operationId": opID})
	if final["data"].(map[string]any)["status"] != "succeeded" || final["data"].(map[string]any)["mergeCommitSha"] == nil {
		t.Fatalf("get_ship_operation = %v", final)
	}
	done := e.ok(cs, "get_task", map[string]any{"taskId": id})
	if done["data"].(map[string]any)["status"] != "done" || len(done["availableActions"].([]any)) != 0 {
		t.Fatalf("the shipped task = %v", done)
	}
}

// Errors are the API's: code, message and, on a conflict over a task,
// the task's next steps.
func TestToolErrors(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-2")
	cs := e.connect(e.api.Admin, nil)
	conflict := e.fails(cs, "ship", map[string]any{"taskId": id, "mode": "merge_only", "targetEnvironment": "staging",
		"expectedHeadSha": strings.Repeat("a", 40)}, "conflict")
	details := conflict["details"].(map[string]any)
	if !slices.Equal(strs(details["availableActions"]), []string{"start"}) || conflict["message"] == "" {
		t.Errorf("ship of a todo task = %v, want a conflict listing start", conflict)
	}
	e.fails(cs, "get_task", map[string]any{"taskId": "tsk_missing"}, "not_found")
	e.fails(cs, "get_ship_operation", map[string]any{"operationId": "shp_missing"}, "not_found")
	bad := e.fails(cs, "get_task", map[string]any{"taskId": id, "tokenBudget": "tiny"}, "validation_error")
	if !strings.Contains(jsonString(bad), `"field":"tokenBudget"`) {
		t.Errorf("an invalid argument = %v, want the field named", bad)
	}
	e.fails(cs, "get_task", map[string]any{"taskId": id, "extra": 1}, "validation_error")
	e.fails(cs, "get_task", map[string]any{}, "validation_error")
	e.fails(cs, "wait_for_task_change", map[string]any{"taskId": id, "timeoutSeconds": 61}, "validation_error")
	e.fails(cs, "start_task", map[string]any{"taskId": id, "idempotencyKey": "short"}, "validation_error")
	e.fails(cs, "list_tasks", map[string]any{"cursor": "nope"}, "validation_error")
	// A tool that does not exist is a protocol error, as the SDK answers it.
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Error("an unknown tool succeeded")
	}
}

// Each tool needs the scope of its endpoint; a missing one is a tool
// error that names it.
func TestScopes(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-3")
	reader := e.connect(e.api.Key(lifecycle.ScopeTasksRead), nil)
	e.ok(reader, "get_task", map[string]any{"taskId": id})
	e.ok(reader, "list_tasks", nil)
	for name, want := range allTools {
		if want.scope == lifecycle.ScopeTasksRead {
			continue
		}
		args := map[string]any{"taskId": id}
		switch name {
		case "submit_work":
			args["summary"] = "x"
		case "record_blocker":
			args["reason"], args["actionRequired"] = "r", "x"
		case "ship":
			args["mode"], args["targetEnvironment"], args["expectedHeadSha"] = "merge_only", "staging", strings.Repeat("a", 40)
		}
		got := e.fails(reader, name, args, "insufficient_scope")
		if !strings.Contains(got["message"].(string), string(want.scope)) {
			t.Errorf("%s without %s = %v, want the scope named", name, want.scope, got)
		}
	}
	if e.api.Task(id)["status"] != "todo" {
		t.Error("a refused call changed the task")
	}
	// Reading needs tasks:read, subscribing events:read.
	none := e.connect(e.api.Key(lifecycle.ScopeEventsRead), nil)
	e.fails(none, "get_task", map[string]any{"taskId": id}, "insufficient_scope")
	if _, err := none.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "lifecycle://tasks/" + id}); err == nil || !contains(err.Error(), "insufficient_scope", "tasks:read") {
		t.Errorf("reading without tasks:read = %v", err)
	}
	if err := reader.Subscribe(t.Context(), &sdk.SubscribeParams{URI: "lifecycle://tasks/" + id}); err == nil || !contains(err.Error(), "insufficient_scope", "events:read") {
		t.Errorf("subscribing without events:read = %v", err)
	}
}

func jsonString(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// A task that waits on a dependency: list_tasks with ready leaves it out,
// start_task is refused with the reason and the dependency named, and
// once the dependency is taken out the task is listed and starts.
func TestDependenciesThroughTools(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	first := e.createTask("MCP-DEP-1")
	body := apitest.TaskBody("MCP-DEP-2")
	body["dependsOn"] = []string{first}
	second := e.api.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.api.Admin, Body: body}, 201)["data"].(map[string]any)["id"].(string)
	agent := e.api.KeyAs(lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}, lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite)
	cs := e.connect(agent, nil)

	ids := func(list map[string]any) []string {
		var out []string
		for _, task := range list["tasks"].([]any) {
			out = append(out, task.(map[string]any)["id"].(string))
		}
		return out
	}
	if got := ids(e.ok(cs, "list_tasks", map[string]any{"ready": true})); !slices.Equal(got, []string{first}) {
		t.Errorf("list_tasks ready = %v, want [%s]", got, first)
	}
	if got := ids(e.ok(cs, "list_tasks", map[string]any{})); !slices.Equal(got, []string{first, second}) {
		t.Errorf("list_tasks = %v, want both", got)
	}
	task := e.ok(cs, "get_task", map[string]any{"taskId": second})["data"].(map[string]any)
	if !slices.Equal(strs(task["waitingOn"]), []string{first}) || !slices.Equal(strs(task["dependsOn"]), []string{first}) {
		t.Errorf("get_task: dependsOn %v, waitingOn %v; want [%s]", task["dependsOn"], task["waitingOn"], first)
	}
	refused := e.fails(cs, "start_task", map[string]any{"taskId": second}, "conflict")
	details := refused["details"].(map[string]any)
	if msg, _ := refused["message"].(string); details["reason"] != "dependency_not_done" || !strings.Contains(msg, "MCP-DEP-1") || !strings.Contains(msg, "todo") {
		t.Errorf("start_task of a waiting task = %v, want dependency_not_done naming MCP-DEP-1 and its status", refused)
	}
	e.api.Call(apitest.Request{Method: "PUT", Path: "/tasks/" + second + "/dependencies", Key: e.api.Admin, Body: map[string]any{"dependsOn": []string{}}}, 200)
	if got := ids(e.ok(cs, "list_tasks", map[string]any{"ready": true})); !slices.Equal(got, []string{first, second}) {
		t.Errorf("list_tasks ready after the dependency went = %v, want both", got)
	}
	if started := e.ok(cs, "start_task", map[string]any{"taskId": second}); started["data"].(map[string]any)["status"] != "in_progress" {
		t.Errorf("start_task = %v", started)
	}
}
