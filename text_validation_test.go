package lifecycle_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// Text members refuse control characters other than tab and newline, and
// invalid UTF-8, naming the member; tab and newline pass.
func TestTextMembersRefuseControlCharactersAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("TXT-1")
	task := func(k, raw string) string {
		return strings.Replace(`{"identifier":"TXT-9","title":"t","links":{"issue":"https://x.example/9"},"context":{"goal":"g"}}`, `"`+k+`":"`+map[string]string{"identifier": "TXT-9", "title": "t", "goal": "g"}[k]+`"`, `"`+k+`":"`+raw+`"`, 1)
	}
	tests := []struct {
		name, path, body, field string
		header                  http.Header
	}{
		{"NUL in identifier", "/tasks", task("identifier", `TXT\u0000-9`), "identifier", nil},
		{"ESC in title", "/tasks", task("title", `red \u001b[31m`), "title", nil},
		{"CR in title", "/tasks", task("title", `a\rb`), "title", nil},
		{"C1 in goal", "/tasks", task("goal", "next\u0085line"), "context.goal", nil},
		{"raw invalid UTF-8 in title", "/tasks", task("title", "caf\xe9"), "title", nil},
		{"lone surrogate in title", "/tasks", task("title", `\ud800x`), "title", nil},
		{"NUL in summary", "/tasks/" + id + "/submit", `{"summary":"done\u0000"}`, "summary", http.Header{"Idempotency-Key": {"text-key-01"}}},
		{"raw DEL in a title", "/tasks", task("title", "a\x7fb"), "title", nil},
		{"DEL in a label", "/tasks", strings.Replace(task("title", "t"), `"context"`, `"labels":["ok","b\u007f"],"context"`, 1), "labels[1]", nil},
		{"NUL in a key name", "/api-keys", `{"name":"n\u0000","scopes":["tasks:read"],"actor":{"id":"a","role":"agent"}}`, "name", nil},
	}
	for _, tt := range tests {
		rec := e.Do(apitest.Request{Method: "POST", Path: tt.path, Key: e.Admin, Body: tt.body, Header: tt.header})
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400: %s", tt.name, rec.Code, rec.Body)
			continue
		}
		if !hasFieldError(apitest.Decode(t, rec)["error"].(map[string]any), tt.field) {
			t.Errorf("%s: the error does not name %s: %s", tt.name, tt.field, rec.Body)
		}
	}

	// Tab, newline and other languages pass; so does a paired surrogate.
	body := task("title", `Fix\tthe\nredirect, café 日本 \ud83d\ude00`)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: body}, http.StatusCreated)

	// The text check and the other checks answer together.
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `{"identifier":"\u0000","title":7,"links":{"issue":"ftp://x"}}`})
	obj := apitest.Decode(t, rec)["error"].(map[string]any)
	for _, f := range []string{"identifier", "title", "links.issue"} {
		if !hasFieldError(obj, f) {
			t.Errorf("combined errors lack %s: %s", f, rec.Body)
		}
	}
}
