package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// withDeps is a POST /tasks body of project "web" that depends on deps.
func withDeps(ident string, deps ...string) map[string]any {
	body := apitest.TaskBody(ident)
	body["dependsOn"] = deps
	return body
}

// setDeps sends PUT /tasks/{id}/dependencies as e's admin.
func (e *env) setDeps(id string, deps ...string) (*lifecycle.Task, map[string]any, int) {
	e.T.Helper()
	if deps == nil {
		deps = []string{} // none: an empty array, not null
	}
	rec := e.Do(apitest.Request{Method: "PUT", Path: "/tasks/" + id + "/dependencies", Key: e.Admin,
		Body: map[string]any{"dependsOn": deps}})
	if rec.Code != http.StatusOK {
		return nil, apitest.Decode(e.T, rec), rec.Code
	}
	t := apitest.DecodeData[lifecycle.Task](e.T, rec)
	return &t, nil, rec.Code
}

// readyIDs lists GET /tasks?ready=true page by page with limit n.
func (e *env) readyIDs(query string, n int) []string {
	e.T.Helper()
	var ids []string
	cursor := ""
	for {
		path := fmt.Sprintf("/tasks?ready=true&limit=%d%s", n, query)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := e.Call(apitest.Request{Method: "GET", Path: path, Key: e.Admin}, http.StatusOK)
		for _, t := range page["data"].([]any) {
			ids = append(ids, t.(map[string]any)["id"].(string))
		}
		next, _ := page["nextCursor"].(string)
		if next == "" {
			return ids
		}
		cursor = next
	}
}

// updatedEvents returns the data of the task.updated events of a task,
// oldest first.
func (e *env) updatedEvents(id string) []lifecycle.TaskUpdatedData {
	e.T.Helper()
	var out []lifecycle.TaskUpdatedData
	for _, ev := range e.Events() {
		if ev.TaskID != id || ev.Type != lifecycle.EventTaskUpdated {
			continue
		}
		var d lifecycle.TaskUpdatedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			e.T.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// refusal returns the details.reason and message of an error answer.
func refusal(body map[string]any) (reason, message string) {
	obj, _ := body["error"].(map[string]any)
	details, _ := obj["details"].(map[string]any)
	reason, _ = details["reason"].(string)
	message, _ = obj["message"].(string)
	return reason, message
}

// badFields returns the fields a validation_error names.
func badFields(body map[string]any) []string {
	obj, _ := body["error"].(map[string]any)
	details, _ := obj["details"].(map[string]any)
	fields, _ := details["fields"].([]any)
	var out []string
	for _, f := range fields {
		out = append(out, f.(map[string]any)["field"].(string))
	}
	return out
}

// A task created with dependencies waits on them: start is neither
// offered nor accepted (dependency_not_done, naming the first dependency),
// and it is not listed as ready. When its dependency is merged at the
// host, the same transaction takes it out of waitingOn and announces the
// change; the task is then ready and starts.
func TestDependencyReleasedWhenDone(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	dep := e.createTask(apitest.TaskBody("DEP-1"))
	other := e.createTask(apitest.TaskBody("DEP-2"))
	task := e.createTask(withDeps("DEP-3", dep.ID, other.ID))
	if !slices.Equal(task.DependsOn, []string{dep.ID, other.ID}) || !slices.Equal(task.WaitingOn, []string{dep.ID, other.ID}) {
		t.Fatalf("created with dependsOn %v, waitingOn %v; want both [%s %s]", task.DependsOn, task.WaitingOn, dep.ID, other.ID)
	}
	if slices.Contains(task.AvailableActions, lifecycle.ActionStart) {
		t.Errorf("a task waiting on dependencies offers %v", task.AvailableActions)
	}
	if got := e.readyIDs("", 1); !slices.Equal(got, []string{dep.ID, other.ID}) {
		t.Errorf("ready tasks = %v, want [%s %s]", got, dep.ID, other.ID)
	}
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + task.ID + "/start", Key: e.Admin})
	body := apitest.Answer(t, "start a waiting task", rec, http.StatusConflict)
	if reason, msg := refusal(body); reason != "dependency_not_done" || !strings.Contains(msg, "DEP-1 ("+dep.ID+"), which is todo") || !strings.Contains(msg, "and 1 more") {
		t.Errorf("start refused with %s: %q; want dependency_not_done naming DEP-1, its ID and status todo", reason, msg)
	}

	// The other dependency is cancelled: the task still waits on it.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + other.ID + "/cancel", Key: e.Admin}, http.StatusOK)
	if got := e.task(task.ID); !slices.Equal(got.WaitingOn, []string{dep.ID, other.ID}) {
		t.Errorf("after a dependency was cancelled, waitingOn = %v; want both still", got.WaitingOn)
	}
	// A person takes it out.
	if _, body, code := e.setDeps(task.ID, dep.ID); code != http.StatusOK {
		t.Fatalf("PUT dependencies = %d %v", code, body)
	}

	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + dep.ID + "/start", Key: e.Admin}, http.StatusOK)
	sub := e.submitOK(dep.ID, "submit-dep-1", apitest.SubmitBody())
	a.web.SetState(sub.PRNumber, lifecycle.PullRequestMerged)
	e.reconcile(dep.ID)
	if got := e.task(dep.ID); got.Status != lifecycle.StatusDone {
		t.Fatalf("dependency is %s after its merge at the host, want done", got.Status)
	}
	after := e.task(task.ID)
	if len(after.WaitingOn) != 0 || !slices.Equal(after.DependsOn, []string{dep.ID}) || !slices.Contains(after.AvailableActions, lifecycle.ActionStart) {
		t.Errorf("after its dependency is done: dependsOn %v, waitingOn %v, actions %v; want [%s], [], start offered",
			after.DependsOn, after.WaitingOn, after.AvailableActions, dep.ID)
	}
	evs := e.updatedEvents(task.ID)
	last := evs[len(evs)-1]
	if !slices.Contains(last.ChangedFields, "waitingOn") || !slices.Contains(last.ChangedFields, "availableActions") || !strings.Contains(last.Summary, "DEP-1") {
		t.Errorf("the last task.updated of the dependent: changedFields %v, summary %q; want waitingOn and availableActions, naming DEP-1", last.ChangedFields, last.Summary)
	}
	stored, err := e.Store.Task(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var version int64
	for _, ev := range e.Events() {
		if ev.TaskID == task.ID {
			version = ev.TaskVersion
		}
	}
	if version != stored.Version {
		t.Errorf("the dependent's last event has version %d, the task %d", version, stored.Version)
	}
	if got := e.readyIDs("&project=web", 50); !slices.Equal(got, []string{task.ID}) {
		t.Errorf("ready tasks = %v, want [%s]", got, task.ID)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + task.ID + "/start", Key: e.Admin}, http.StatusOK)
}

// PUT /tasks/{id}/dependencies replaces the set, announces the change once,
// and refuses what the rules forbid: each with the bad entry named.
func TestSetDependencies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.createTask(apitest.TaskBody("SET-1"))
	b := e.createTask(apitest.TaskBody("SET-2"))
	c := e.createTask(apitest.TaskBody("SET-3"))
	api := apitest.TaskBody("SET-API")
	api["context"] = map[string]any{"project": "api", "goal": "g"}
	elsewhere := e.createTask(api)

	got, body, code := e.setDeps(c.ID, b.ID)
	if code != http.StatusOK {
		t.Fatalf("PUT = %d %v", code, body)
	}
	if !slices.Equal(got.DependsOn, []string{b.ID}) || !slices.Equal(got.WaitingOn, []string{b.ID}) {
		t.Errorf("after PUT: dependsOn %v, waitingOn %v", got.DependsOn, got.WaitingOn)
	}
	n := len(e.updatedEvents(c.ID))
	if _, body, code := e.setDeps(c.ID, b.ID); code != http.StatusOK {
		t.Fatalf("PUT again = %d %v", code, body)
	}
	evs := e.updatedEvents(c.ID)
	if len(evs) != n {
		t.Errorf("the same set again emitted %d events", len(evs)-n)
	}
	if diff := cmp.Diff([]string{"availableActions", "dependsOn", "waitingOn"}, sorted(evs[n-1].ChangedFields)); diff != "" {
		t.Errorf("changedFields of the change (-want +got):\n%s", diff)
	}
	if _, body, code := e.setDeps(b.ID, a.ID); code != http.StatusOK {
		t.Fatalf("PUT b = %d %v", code, body)
	}

	for _, tt := range []struct {
		name   string
		id     string
		deps   []string
		code   int
		field  string
		reason string
		words  string
	}{
		{"itself", a.ID, []string{a.ID}, http.StatusBadRequest, "dependsOn[0]", "", ""},
		{"unknown", a.ID, []string{b.ID, "tsk_unknown"}, http.StatusBadRequest, "dependsOn[1]", "", ""},
		{"not an ID", a.ID, []string{"SET-2"}, http.StatusBadRequest, "dependsOn[0]", "", ""},
		{"twice", a.ID, []string{b.ID, b.ID}, http.StatusBadRequest, "dependsOn[1]", "", ""},
		{"another project", a.ID, []string{elsewhere.ID}, http.StatusBadRequest, "dependsOn[0]", "", ""},
		{"direct cycle", b.ID, []string{c.ID}, http.StatusConflict, "", "dependency_cycle", "SET-2 → SET-3 → SET-2"},
		{"longer cycle", a.ID, []string{c.ID}, http.StatusConflict, "", "dependency_cycle", "SET-1 → SET-3 → SET-2 → SET-1"},
		{"too many", a.ID, slices.Repeat([]string{b.ID}, 51), http.StatusBadRequest, "dependsOn", "", ""},
	} {
		_, body, code := e.setDeps(tt.id, tt.deps...)
		if code != tt.code {
			t.Errorf("%s: %d %v, want %d", tt.name, code, body, tt.code)
			continue
		}
		if tt.field != "" && !slices.Contains(badFields(body), tt.field) {
			t.Errorf("%s: fields %v, want %s", tt.name, badFields(body), tt.field)
		}
		if reason, msg := refusal(body); tt.reason != "" && (reason != tt.reason || !strings.Contains(msg, tt.words)) {
			t.Errorf("%s: %s %q; want %s naming %s", tt.name, reason, msg, tt.reason, tt.words)
		}
	}
	// Nothing refused changed anything.
	if got := e.task(a.ID); len(got.DependsOn) != 0 {
		t.Errorf("refused PUTs left dependsOn %v", got.DependsOn)
	}

	// Removing every dependency makes the task ready.
	if got, body, code := e.setDeps(c.ID); code != http.StatusOK || len(got.WaitingOn) != 0 || !slices.Contains(got.AvailableActions, lifecycle.ActionStart) {
		t.Errorf("PUT [] = %d %v %+v", code, body, got)
	}

	// Creation checks the same rules, and a task needs tasks:admin to
	// change its dependencies.
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withDeps("SET-4", a.ID, elsewhere.ID)})
	body = apitest.Answer(t, "create with a dependency of another project", rec, http.StatusBadRequest)
	if !slices.Contains(badFields(body), "dependsOn[1]") {
		t.Errorf("fields %v, want dependsOn[1]", badFields(body))
	}
	writer := e.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite)
	rec = e.Do(apitest.Request{Method: "PUT", Path: "/tasks/" + a.ID + "/dependencies", Key: writer, Body: map[string]any{"dependsOn": []string{}}})
	apitest.Answer(t, "PUT without tasks:admin", rec, http.StatusForbidden)
	if _, body, code := e.setDeps(b.ID, a.ID); code != http.StatusOK {
		t.Fatalf("PUT b = %d %v", code, body)
	}
	rec = e.Do(apitest.Request{Method: "PUT", Path: "/tasks/" + b.ID + "/dependencies", Key: e.Admin, Body: map[string]any{}})
	apitest.Answer(t, "PUT without dependsOn", rec, http.StatusOK)
	if got := apitest.DecodeData[lifecycle.Task](t, rec); len(got.DependsOn) != 0 {
		t.Errorf("PUT {} left dependsOn %v, want none", got.DependsOn)
	}
	rec = e.Do(apitest.Request{Method: "PUT", Path: "/tasks/tsk_unknown/dependencies", Key: e.Admin, Body: map[string]any{"dependsOn": []string{}}})
	apitest.Answer(t, "PUT on an unknown task", rec, http.StatusNotFound)
	for _, v := range []string{"yes", "1", "TRUE", ""} {
		rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks?ready=" + v, Key: e.Admin})
		if body := apitest.Answer(t, "ready="+v, rec, http.StatusBadRequest); !slices.Contains(badFields(body), "ready") {
			t.Errorf("ready=%s: fields %v, want ready", v, badFields(body))
		}
	}
	all := apitest.CallData[[]lifecycle.Task](e.Env, apitest.Request{Method: "GET", Path: "/tasks?limit=200", Key: e.Admin}, http.StatusOK)
	for _, v := range []string{"false"} { // as leaving it out, and as MCP's ready: false
		got := apitest.CallData[[]lifecycle.Task](e.Env, apitest.Request{Method: "GET", Path: "/tasks?limit=200&ready=" + v, Key: e.Admin}, http.StatusOK)
		if len(got) != len(all) {
			t.Errorf("ready=%s listed %d tasks, want all %d", v, len(got), len(all))
		}
	}
}

// sorted returns a sorted copy of ss.
func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}
