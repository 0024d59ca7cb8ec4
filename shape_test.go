package lifecycle_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// specTaskFields is the Task table of docs/api.md: each member and the JSON
// types it may take. "assignee" is "object|null" by the decision recorded in
// the README (a task in triage has no assignee).
var specTaskFields = map[string]string{
	"id":                 "string",
	"identifier":         "string",
	"title":              "string",
	"description":        "string",
	"status":             "string",
	"priority":           "string",
	"updatedAt":          "string",
	"availableActions":   "string[]",
	"assignee":           "object|null",
	"assigneeAgentId":    "string|null",
	"assignmentSource":   "string|null",
	"routingDecisionId":  "string|null",
	"routingReason":      "object|null",
	"routingConfidence":  "number|null",
	"triageQueueId":      "string|null",
	"submissionId":       "string|null",
	"prUrl":              "string|null",
	"prNumber":           "integer|null",
	"branch":             "string|null",
	"baseBranch":         "string|null",
	"headSha":            "string|null",
	"acceptanceCriteria": "string[]",
	"links":              "object",
	"context":            "object",
	"blocker":            "object|null",
	"dependsOn":          "string[]",
	"waitingOn":          "string[]",
}

// Nested objects of the table.
var (
	specAssignee = map[string]string{"id": "string", "name": "string"}
	specLinks    = map[string]string{"issue": "string", "parentIssue": "string|null"}
	specContext  = map[string]string{"project": "string|null", "goal": "string"}
	specEnvelope = map[string]string{"data": "object", "availableActions": "string[]", "meta": "object"}
	specMeta     = map[string]string{"tokenBudgetHint": "string", "truncatedFields": "string[]"}
)

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return "array"
			}
		}
		return "string[]"
	}
	return "unknown"
}

// shape maps each member of obj to its spec type when the value fits it,
// or to the type it has when it does not; members the spec lacks keep theirs.
func shape(obj map[string]any, spec map[string]string) map[string]string {
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		got := jsonType(v)
		allowed := strings.Split(spec[k], "|")
		if slices.Contains(allowed, got) || (got == "integer" && slices.Contains(allowed, "number")) {
			out[k] = spec[k]
		} else {
			out[k] = got
		}
	}
	return out
}

func TestTaskShapeMatchesSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	triaged := e.CreateTask(apitest.TaskBody("ENG-1"))
	manual := apitest.TaskBody("ENG-2")
	manual["assigneeAgentId"] = "agent-web"
	manual["links"] = map[string]any{"issue": "https://issues.example.com/ENG-2", "parentIssue": "https://issues.example.com/ENG-0"}
	assigned := e.CreateTask(manual)

	for _, created := range []map[string]any{triaged, assigned} {
		body := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + created["id"].(string), Key: e.Admin}, http.StatusOK)
		if diff := cmp.Diff(specEnvelope, shape(body, specEnvelope)); diff != "" {
			t.Errorf("envelope shape (-spec +got):\n%s", diff)
		}
		data := body["data"].(map[string]any)
		if diff := cmp.Diff(specTaskFields, shape(data, specTaskFields)); diff != "" {
			t.Errorf("task shape (-spec +got):\n%s", diff)
		}
		if diff := cmp.Diff(specLinks, shape(data["links"].(map[string]any), specLinks)); diff != "" {
			t.Errorf("links shape (-spec +got):\n%s", diff)
		}
		if diff := cmp.Diff(specContext, shape(data["context"].(map[string]any), specContext)); diff != "" {
			t.Errorf("context shape (-spec +got):\n%s", diff)
		}
		if a, ok := data["assignee"].(map[string]any); ok {
			if diff := cmp.Diff(specAssignee, shape(a, specAssignee)); diff != "" {
				t.Errorf("assignee shape (-spec +got):\n%s", diff)
			}
		}
		if diff := cmp.Diff(specMeta, shape(body["meta"].(map[string]any), specMeta)); diff != "" {
			t.Errorf("meta shape (-spec +got):\n%s", diff)
		}
		if diff := cmp.Diff(data["availableActions"], body["availableActions"]); diff != "" {
			t.Errorf("top-level availableActions differ from data.availableActions:\n%s", diff)
		}
		checkFormats(t, data)
	}
}

var (
	timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	idRE        = func(prefix string) *regexp.Regexp { return regexp.MustCompile(`^` + prefix + `[A-Za-z0-9]{20,}$`) }
)

// checkFormats checks the formats the contract gives for a task's values.
func checkFormats(t *testing.T, data map[string]any) {
	t.Helper()
	if !idRE("tsk_").MatchString(data["id"].(string)) {
		t.Errorf("id %q is not tsk_ and 20+ base62 characters", data["id"])
	}
	if !timestampRE.MatchString(data["updatedAt"].(string)) {
		t.Errorf("updatedAt %q is not RFC 3339 UTC with milliseconds", data["updatedAt"])
	}
	if id, ok := data["routingDecisionId"].(string); ok && !idRE("rtd_").MatchString(id) {
		t.Errorf("routingDecisionId %q is not rtd_ and 20+ base62 characters", id)
	}
	if id, ok := data["triageQueueId"].(string); ok && !idRE("trq_").MatchString(id) {
		t.Errorf("triageQueueId %q is not trq_ and 20+ base62 characters", id)
	}
	enums := map[string][]string{
		"status":           {"todo", "in_progress", "in_review", "blocked", "done", "cancelled"},
		"priority":         {"low", "medium", "high", "critical"},
		"assignmentSource": {"deterministic_rule", "classifier", "classifier_best_effort", "manual_triage", "provider_assignee_mapping"},
	}
	for field, allowed := range enums {
		if v, ok := data[field].(string); ok && !slices.Contains(allowed, v) {
			t.Errorf("%s %q is not one of %v", field, v, allowed)
		}
	}
	for _, a := range data["availableActions"].([]any) {
		allowed := []string{"start", "submit", "ship", "view_ci_status", "view_review_feedback", "resolve_blocker"}
		if !slices.Contains(allowed, a.(string)) {
			t.Errorf("availableActions holds %q, not one of %v", a, allowed)
		}
	}
}
