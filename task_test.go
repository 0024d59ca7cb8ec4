package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

func TestTaskEndpointsStatusCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.createTask(apitest.TaskBody("ENG-1")).ID
	reader := e.Key(lifecycle.ScopeTasksRead)
	writer := e.Key(lifecycle.ScopeTasksWrite)
	revoked := e.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeTasksAdmin)
	keys := apitest.CallData[[]lifecycle.APIKey](e.Env, apitest.Request{Method: "GET", Path: "/api-keys", Key: e.Admin}, http.StatusOK)
	revokedID := keys[len(keys)-1].ID
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + revokedID, Key: e.Admin}, http.StatusNoContent)

	tests := []struct {
		name     string
		req      apitest.Request
		status   int
		code     string
		errField string // a field that details.fields must name
	}{
		{"get", apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: reader}, 200, "", ""},
		{"get compact", apitest.Request{Method: "GET", Path: "/tasks/" + id + "?tokenBudget=compact", Key: reader}, 200, "", ""},
		{"get bad token budget", apitest.Request{Method: "GET", Path: "/tasks/" + id + "?tokenBudget=tiny", Key: reader}, 400, "validation_error", "tokenBudget"},
		{"get no key", apitest.Request{Method: "GET", Path: "/tasks/" + id}, 401, "unauthorized", ""},
		{"get malformed key", apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: "not-a-key"}, 401, "unauthorized", ""},
		{"get unknown key", apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: "lsk_" + strings.Repeat("x", 40)}, 401, "unauthorized", ""},
		{"get revoked key", apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: revoked}, 401, "unauthorized", ""},
		{"get wrong scope", apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: writer}, 403, "insufficient_scope", ""},
		{"get unknown task", apitest.Request{Method: "GET", Path: "/tasks/tsk_doesnotexist", Key: reader}, 404, "not_found", ""},
		{"get malformed id", apitest.Request{Method: "GET", Path: "/tasks/task-1", Key: reader}, 404, "not_found", ""},
		{"put task", apitest.Request{Method: "PUT", Path: "/tasks/" + id, Key: reader}, 405, "method_not_allowed", ""},

		{"list", apitest.Request{Method: "GET", Path: "/tasks", Key: reader}, 200, "", ""},
		{"list bad status", apitest.Request{Method: "GET", Path: "/tasks?status=open", Key: reader}, 400, "validation_error", "status"},
		{"list bad limit", apitest.Request{Method: "GET", Path: "/tasks?limit=201", Key: reader}, 400, "validation_error", "limit"},
		{"list zero limit", apitest.Request{Method: "GET", Path: "/tasks?limit=0", Key: reader}, 400, "validation_error", "limit"},
		{"list text limit", apitest.Request{Method: "GET", Path: "/tasks?limit=ten", Key: reader}, 400, "validation_error", "limit"},
		{"list bad cursor", apitest.Request{Method: "GET", Path: "/tasks?cursor=%21%21", Key: reader}, 400, "validation_error", "cursor"},
		{"list no key", apitest.Request{Method: "GET", Path: "/tasks"}, 401, "unauthorized", ""},
		{"list wrong scope", apitest.Request{Method: "GET", Path: "/tasks", Key: writer}, 403, "insufficient_scope", ""},
		{"delete tasks", apitest.Request{Method: "DELETE", Path: "/tasks", Key: reader}, 405, "method_not_allowed", ""},

		{"create", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-2")}, 201, "", ""},
		{"create duplicate identifier", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")}, 409, "conflict", ""},
		{"create no key", apitest.Request{Method: "POST", Path: "/tasks", Body: apitest.TaskBody("ENG-3")}, 401, "unauthorized", ""},
		{"create wrong scope", apitest.Request{Method: "POST", Path: "/tasks", Key: writer, Body: apitest.TaskBody("ENG-3")}, 403, "insufficient_scope", ""},
		{"create malformed JSON", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `{"identifier":`}, 400, "validation_error", "body"},
		{"create empty body", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: ""}, 400, "validation_error", "body"},
		{"create array body", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `[]`}, 400, "validation_error", "body"},
		{"create trailing data", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `{"identifier":"X"} {}`}, 400, "validation_error", "body"},
		{"create unknown member", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "colour", "red")}, 400, "validation_error", "colour"},
		{"create wrong type", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "title", 7)}, 400, "validation_error", "title"},
		{"create nested wrong type", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "links", map[string]any{"issue": 1})}, 400, "validation_error", "links.issue"},
		{"create bad priority", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "priority", "urgent")}, 400, "validation_error", "priority"},
		{"create no issue link", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "links", map[string]any{})}, 400, "validation_error", "links.issue"},
		{"create relative issue link", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "links", map[string]any{"issue": "/ENG-3"})}, 400, "validation_error", "links.issue"},
		{"create too large", apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: withMember(apitest.TaskBody("ENG-3"), "description", strings.Repeat("x", 1<<20))}, 413, "payload_too_large", ""},
		{"patch tasks", apitest.Request{Method: "PATCH", Path: "/tasks", Key: e.Admin}, 405, "method_not_allowed", ""},

		{"start unknown task", apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/start", Key: writer}, 404, "not_found", ""},
		{"start no key", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start"}, 401, "unauthorized", ""},
		{"start wrong scope", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: reader}, 403, "insufficient_scope", ""},
		{"start unknown member", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: writer, Body: `{"force":true}`}, 400, "validation_error", "force"},
		{"start", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: writer}, 200, "", ""},
		{"start again", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: writer, Body: `{}`}, 409, "conflict", ""},
		{"get start", apitest.Request{Method: "GET", Path: "/tasks/" + id + "/start", Key: writer}, 405, "method_not_allowed", ""},

		{"cancel wrong scope", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: writer}, 403, "insufficient_scope", ""},
		{"cancel unknown task", apitest.Request{Method: "POST", Path: "/tasks/tsk_doesnotexist/cancel", Key: e.Admin}, 404, "not_found", ""},
		{"cancel reason too long", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin, Body: map[string]any{"reason": strings.Repeat("é", 2001)}}, 400, "validation_error", "reason"},
		{"cancel", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin, Body: map[string]any{"reason": strings.Repeat("é", 2000)}}, 200, "", ""},
		{"cancel again", apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin}, 409, "conflict", ""},

		{"unknown path", apitest.Request{Method: "GET", Path: "/nothing", Key: reader}, 404, "not_found", ""},
		{"unknown path without key", apitest.Request{Method: "GET", Path: "/nothing"}, 404, "not_found", ""},
	}
	// The cases run in order: start and cancel change the task.
	for _, tt := range tests {
		rec := e.Do(tt.req)
		apitest.Answer(t, tt.name, rec, tt.status)
		if tt.code == "" {
			continue
		}
		obj := apitest.DecodeAs[lifecycle.ErrorBody](t, rec).Error
		if obj.Code != tt.code {
			t.Errorf("%s: error.code = %q, want %q (body %s)", tt.name, obj.Code, tt.code, rec.Body)
		}
		if obj.Message == "" {
			t.Errorf("%s: error.message is empty", tt.name)
		}
		if tt.errField != "" && !namesField(obj, tt.errField) {
			t.Errorf("%s: details.fields does not name %q: %+v", tt.name, tt.errField, obj.Details)
		}
		if tt.status == http.StatusConflict && strings.Contains(tt.req.Path, "/tasks/") {
			// availableActions is left out when nil, sent (maybe as []) when not.
			if obj.Details == nil || obj.Details.AvailableActions == nil {
				t.Errorf("%s: a task conflict lacks details.availableActions: %s", tt.name, rec.Body)
			}
		}
	}
}

// taskAnswer is the answer to a task's action: the task and the actions
// it now offers.
type taskAnswer struct {
	Data             lifecycle.Task
	AvailableActions []lifecycle.Action
}

// taskPage is a page of GET /tasks.
type taskPage struct {
	Data       []lifecycle.Task
	NextCursor *string
}

// withMember returns a copy of body with member k set to v.
func withMember(body map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(body)+1)
	for key, val := range body {
		out[key] = val
	}
	out[k] = v
	return out
}

// namesField reports whether an error's details.fields names field with a
// reason.
func namesField(obj lifecycle.ErrorObject, field string) bool {
	if obj.Details == nil {
		return false
	}
	for _, f := range obj.Details.Fields {
		if f.Field == field && f.Reason != "" {
			return true
		}
	}
	return false
}

// callError sends r, fails the test unless the answer has wantStatus, and
// returns its error object.
func (e *env) callError(r apitest.Request, wantStatus int) lifecycle.ErrorObject {
	e.T.Helper()
	return apitest.CallAs[lifecycle.ErrorBody](e.Env, r, wantStatus).Error
}

// hasFieldError reports whether an error object's details.fields names field.
func hasFieldError(obj map[string]any, field string) bool {
	details, _ := obj["details"].(map[string]any)
	fields, _ := details["fields"].([]any)
	for _, f := range fields {
		if m, _ := f.(map[string]any); m["field"] == field && m["reason"] != "" {
			return true
		}
	}
	return false
}

func TestMethodNotAllowedListsAllowedMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.Do(apitest.Request{Method: "PUT", Path: "/tasks", Key: e.Admin})
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /tasks = %d, want 405", rec.Code)
	}
	if got, want := rec.Header().Get("Allow"), "GET, POST"; got != want {
		t.Errorf("Allow = %q, want %q", got, want)
	}
}

func TestValidationListsEveryField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	obj := e.callError(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: map[string]any{
		"title":    strings.Repeat("t", 301),
		"priority": "urgent",
		"labels":   []string{""},
	}}, http.StatusBadRequest)
	for _, f := range []string{"identifier", "title", "priority", "labels[0]", "links.issue"} {
		if !namesField(obj, f) {
			t.Errorf("details.fields does not name %q: %+v", f, obj.Details)
		}
	}
}

func TestWrongTypeAndMissingFieldsReportedTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	obj := e.callError(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `{"title": 7, "priority": "urgent"}`}, http.StatusBadRequest)
	if obj.Details == nil {
		t.Fatalf("error %+v has no details", obj)
	}
	var got []string
	for _, f := range obj.Details.Fields {
		got = append(got, f.Field)
	}
	if diff := cmp.Diff([]string{"title", "identifier", "priority", "links.issue"}, got); diff != "" {
		t.Errorf("details.fields (-want +got):\n%s", diff)
	}
}

func TestCreateTaskEmitsEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Clock.Advance(1234 * time.Millisecond)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1"), Header: http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}})
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /tasks = %d: %s", rec.Code, rec.Body)
	}
	var created struct{ Data lifecycle.Task }
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Header().Get("Location"), apitest.BaseURL+"/tasks/"+created.Data.ID; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	evs := e.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events after creation, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Type != lifecycle.EventTaskUpdated || ev.TaskVersion != 1 || ev.Sequence <= 0 || !strings.HasPrefix(ev.ID, "evt_") {
		t.Errorf("event = %+v, want task.updated, taskVersion 1, a sequence and an evt_ ID", ev)
	}
	if ev.TraceID == nil || *ev.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traceId = %v, want the traceparent's trace ID", ev.TraceID)
	}
	if got := ev.OccurredAt.String(); got != "2026-11-21T10:00:01.234Z" {
		t.Errorf("occurredAt = %s, want the clock's time", got)
	}
	// previousStatus null is told from previousStatus absent on the JSON
	// object; the rest is compared on the decoded data.
	var raw map[string]any
	if err := json.Unmarshal(ev.Data, &raw); err != nil {
		t.Fatal(err)
	}
	if prev, ok := raw["previousStatus"]; !ok || prev != nil {
		t.Errorf("data.previousStatus = %v (present %v), want null", prev, ok)
	}
	var data lifecycle.TaskUpdatedData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(data.Summary, "ENG-1") {
		t.Errorf("data.summary = %q, want a sentence naming the task", data.Summary)
	}
	if len(data.ChangedFields) == 0 {
		t.Errorf("changedFields of a creation is empty")
	}
	want := lifecycle.TaskUpdatedData{
		EventData: lifecycle.EventData{
			TaskID:           created.Data.ID,
			TaskIdentifier:   "ENG-1",
			Status:           lifecycle.StatusTodo,
			Summary:          data.Summary,
			AvailableActions: []lifecycle.Action{lifecycle.ActionStart},
			Links: lifecycle.EventLinks{
				Task:           apitest.BaseURL + "/tasks/" + created.Data.ID,
				ReviewFeedback: apitest.BaseURL + "/tasks/" + created.Data.ID + "/review-feedback",
			},
		},
		ChangedFields: data.ChangedFields,
		Actor:         lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser},
	}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

func TestStartAndCancelEvents(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.createTask(apitest.TaskBody("ENG-1")).ID
	agent := e.KeyAs(lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}, lifecycle.ScopeTasksWrite)
	e.Clock.Advance(time.Minute)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: agent})
	apitest.Answer(t, "POST /tasks/{id}/start", rec, http.StatusOK)
	started := apitest.DecodeAs[taskAnswer](t, rec)
	if got := started.Data.Status; got != lifecycle.StatusInProgress {
		t.Errorf("status after start = %v, want in_progress", got)
	}
	if diff := cmp.Diff([]lifecycle.Action{lifecycle.ActionSubmit}, started.AvailableActions); diff != "" {
		t.Errorf("availableActions after start (-want +got):\n%s", diff)
	}
	// The wire form, milliseconds and all: a Timestamp decodes any RFC 3339.
	if !strings.Contains(rec.Body.String(), `"updatedAt":"2026-11-21T10:01:00.000Z"`) {
		t.Errorf("updatedAt after start = %v, want the clock's time, 2026-11-21T10:01:00.000Z", started.Data.UpdatedAt)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin, Body: map[string]any{"reason": "duplicate"}}, http.StatusOK)

	evs := e.Events()
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3 (create, start, cancel)", len(evs))
	}
	type update struct {
		PreviousStatus *string
		ChangedFields  []string
		Status         string
		Actor          lifecycle.Actor
	}
	var got []update
	for i, ev := range evs {
		if ev.TaskVersion != int64(i+1) {
			t.Errorf("event %d taskVersion = %d, want %d", i, ev.TaskVersion, i+1)
		}
		var u update
		if err := json.Unmarshal(ev.Data, &u); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			got = append(got, u)
		}
	}
	todo, inProgress := "todo", "in_progress"
	want := []update{
		{&todo, []string{"status", "availableActions"}, "in_progress", lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}},
		{&inProgress, []string{"status", "availableActions"}, "cancelled", lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("start and cancel events (-want +got):\n%s", diff)
	}
}

func TestConflictListsAvailableActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.createTask(apitest.TaskBody("ENG-1")).ID
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/cancel", Key: e.Admin}, http.StatusOK)
	details := e.callError(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusConflict).Details
	if details == nil {
		t.Fatal("the conflict has no details")
	}
	// [] decodes as an empty list, absent or null as nil: cmp tells them apart.
	if diff := cmp.Diff([]lifecycle.Action{}, details.AvailableActions); diff != "" {
		t.Errorf("details.availableActions of a cancelled task (-want +got):\n%s", diff)
	}
	if details.Reason != "not_startable" {
		t.Errorf("details.reason = %v, want not_startable", details.Reason)
	}
}

func TestCompactTokenBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.createTask(apitest.TaskBody("ENG-1")).ID
	// The answers stay JSON objects: the test is about which members the
	// compact answer leaves out.
	std := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusOK)
	compact := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "?tokenBudget=compact", Key: e.Admin}, http.StatusOK)
	if diff := cmp.Diff(map[string]any{"tokenBudgetHint": "standard", "truncatedFields": []any{}}, std["meta"]); diff != "" {
		t.Errorf("standard meta (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"tokenBudgetHint": "compact", "truncatedFields": []any{"description", "routingReason"}}, compact["meta"]); diff != "" {
		t.Errorf("compact meta (-want +got):\n%s", diff)
	}
	data := compact["data"].(map[string]any)
	for _, f := range []string{"description", "routingReason"} {
		if _, ok := data[f]; ok {
			t.Errorf("compact data still holds %s", f)
		}
	}
	full := std["data"].(map[string]any)
	delete(full, "description")
	delete(full, "routingReason")
	if diff := cmp.Diff(full, data); diff != "" {
		t.Errorf("compact data differs from standard beyond the truncated fields (-standard +compact):\n%s", diff)
	}
}

func TestListTasksPaginationAndFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ids []string
	for i := range 7 {
		body := apitest.TaskBody("ENG-" + string(rune('A'+i)))
		if i%2 == 1 {
			body["context"] = map[string]any{"project": "api", "goal": ""}
			body["assigneeAgentId"] = "agent-api"
		}
		ids = append(ids, e.createTask(body).ID)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + ids[0] + "/start", Key: e.Admin}, http.StatusOK)

	var got []string
	path := "/tasks?limit=3"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("listing did not end")
		}
		// A nextCursor that is neither a string nor null fails to decode.
		page := apitest.CallAs[taskPage](e.Env, apitest.Request{Method: "GET", Path: path, Key: e.Admin}, http.StatusOK)
		for _, task := range page.Data {
			got = append(got, task.ID)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/tasks?limit=3&cursor=" + *page.NextCursor
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("paged listing (-want +got):\n%s", diff)
	}

	filters := []struct {
		query string
		want  []string
	}{
		{"project=api", []string{ids[1], ids[3], ids[5]}},
		{"assigneeAgentId=agent-api&status=todo", []string{ids[1], ids[3], ids[5]}},
		{"status=in_progress", []string{ids[0]}},
		{"status=in_progress,todo&project=web", []string{ids[0], ids[2], ids[4], ids[6]}},
		{"status=done", nil},
	}
	for _, f := range filters {
		page := apitest.CallAs[taskPage](e.Env, apitest.Request{Method: "GET", Path: "/tasks?" + f.query, Key: e.Admin}, http.StatusOK)
		var got []string
		for _, task := range page.Data {
			got = append(got, task.ID)
			if task.AvailableActions == nil {
				t.Errorf("%s: listed task lacks availableActions", f.query)
			}
		}
		if diff := cmp.Diff(f.want, got); diff != "" {
			t.Errorf("GET /tasks?%s (-want +got):\n%s", f.query, diff)
		}
	}
}

func TestUnknownAgentRefusedWhenDirectoryConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) {
		c.Agents = []lifecycle.Agent{{ID: "agent-web", Name: "Web Agent"}}
	})
	body := apitest.TaskBody("ENG-1")
	body["assigneeAgentId"] = "agent-unknown"
	if resp := e.callError(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: body}, http.StatusBadRequest); !namesField(resp, "assigneeAgentId") {
		t.Errorf("error does not name assigneeAgentId: %+v", resp)
	}
	body["assigneeAgentId"] = "agent-web"
	task := e.createTask(body)
	if diff := cmp.Diff(&lifecycle.Agent{ID: "agent-web", Name: "Web Agent"}, task.Assignee); diff != "" {
		t.Errorf("assignee (-want +got):\n%s", diff)
	}
	manual := lifecycle.AssignmentManualTriage
	if diff := cmp.Diff(&manual, task.AssignmentSource); diff != "" || task.RoutingConfidence != nil || task.TriageQueueID != nil {
		t.Errorf("manual assignment = source %v, confidence %v, triage %v; want manual_triage, null, null",
			task.AssignmentSource, task.RoutingConfidence, task.TriageQueueID)
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Router = failingRouter{} })
	obj := e.callError(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")}, http.StatusInternalServerError)
	if obj.Code != "internal" || obj.Message == "" || strings.Contains(obj.Message, "router down") {
		t.Errorf("internal error body = %v, want code internal, a message and no internals", obj)
	}
	if logs := e.LogText(); !strings.Contains(logs, "request failed") || !strings.Contains(logs, "router down") {
		t.Errorf("the internal error was not logged with its cause; logs:\n%s", logs)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.createTask(apitest.TaskBody("ENG-1")).ID
	e.Store.Close()
	obj := e.callError(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusServiceUnavailable)
	if obj.Code != "unavailable" || obj.Message == "" || strings.Contains(obj.Message, "sqlite") {
		t.Errorf("closed store answer = %v, want code unavailable, a message and no internals", obj)
	}
}
