package lifecycle_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// Every submit limit of docs/api.md at its boundary: the limit passes, one more fails.
func TestSubmitLimits(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	logins := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("reviewer%d", i)
		}
		return out
	}
	pr := func(k string, v any) map[string]any {
		return withMember(apitest.SubmitBody(), "pullRequest", map[string]any{k: v})
	}
	tests := []struct {
		name   string
		body   map[string]any
		status int
		field  string
	}{
		{"summary 2000", withMember(apitest.SubmitBody(), "summary", strings.Repeat("ä", 2000)), 202, ""},
		{"summary 2001", withMember(apitest.SubmitBody(), "summary", strings.Repeat("ä", 2001)), 400, "summary"},
		{"summary missing", withMember(apitest.SubmitBody(), "summary", ""), 400, "summary"},
		{"notes 2000", withMember(apitest.SubmitBody(), "notes", strings.Repeat("n", 2000)), 202, ""},
		{"notes 2001", withMember(apitest.SubmitBody(), "notes", strings.Repeat("n", 2001)), 400, "notes"},
		{"title 300", pr("title", strings.Repeat("t", 300)), 202, ""},
		{"title 301", pr("title", strings.Repeat("t", 301)), 400, "pullRequest.title"},
		{"body 10000", pr("body", strings.Repeat("b", 10000)), 202, ""},
		{"body 10001", pr("body", strings.Repeat("b", 10001)), 400, "pullRequest.body"},
		{"reviewers 20", pr("reviewers", logins(20)), 202, ""},
		{"reviewers 21", pr("reviewers", logins(21)), 400, "pullRequest.reviewers"},
		{"reviewer with space", pr("reviewers", []string{"a b"}), 400, "pullRequest.reviewers[0]"},
		{"bad head", pr("head", "feature..x"), 400, "pullRequest.head"},
		{"bad base", pr("base", "has space"), 400, "pullRequest.base"},
		{"draft not boolean", pr("draft", "yes"), 400, "pullRequest.draft"},
		{"bad mode", withMember(apitest.SubmitBody(), "mode", "direct"), 400, "mode"},
		{"check status", withMember(apitest.SubmitBody(), "checks", []map[string]any{{"name": "unit", "status": "green"}}), 400, "checks[0].status"},
		{"check name", withMember(apitest.SubmitBody(), "checks", []map[string]any{{"status": "passed"}}), 400, "checks[0].name"},
		{"unknown member", withMember(apitest.SubmitBody(), "force", true), 400, "force"},
		{"unknown nested member", pr("labels", []string{"x"}), 400, "labels"},
	}
	for i, tt := range tests {
		id := e.startedTask(fmt.Sprintf("LIM-%d", i))
		rec := e.Submit(id, fmt.Sprintf("limit-key-%03d", i), tt.body)
		if rec.Code != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, rec.Code, tt.status, rec.Body)
			continue
		}
		if tt.field != "" {
			body := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: tt.body,
				Header: http.Header{"Idempotency-Key": {fmt.Sprintf("limit-again-%03d", i)}}}, tt.status)
			if !hasFieldError(body["error"].(map[string]any), tt.field) {
				t.Errorf("%s: details.fields does not name %q: %v", tt.name, tt.field, body)
			}
		}
	}
}

// One response lists every invalid field, the key's included.
func TestSubmitListsEveryInvalidField(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	body := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: map[string]any{
		"summary": strings.Repeat("s", 2001), "notes": strings.Repeat("n", 2001), "mode": "x",
	}}, http.StatusBadRequest)
	obj := body["error"].(map[string]any)
	for _, f := range []string{"Idempotency-Key", "summary", "notes", "mode"} {
		if !hasFieldError(obj, f) {
			t.Errorf("details.fields lacks %q: %v", f, obj["details"])
		}
	}
}
