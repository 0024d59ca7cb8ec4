package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// inspector is the MCP Inspector's CLI, pinned in testdata/inspector.
var inspector = testenv.Tool{Name: "mcp/testdata/inspector/node_modules", Install: "npm ci --prefix mcp/testdata/inspector"}

// inspectorBin returns the Inspector's launcher, or skips t.
func inspectorBin(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Require(t, testenv.Node, err.Error())
	}
	bin, err := filepath.Abs("testdata/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Require(t, inspector, err.Error())
	}
	return bin
}

// runInspector runs the Inspector's CLI against the env's handler with
// key, with args after the server's URL, and returns its JSON answer.
func (e *env) runInspector(bin, key string, args ...string) map[string]any {
	e.t.Helper()
	return e.runInspectorExit(bin, key, 0, args...)
}

// runInspectorExit is runInspector for a run that exits with code: the
// CLI exits 5 when a tool answers isError.
func (e *env) runInspectorExit(bin, key string, code int, args ...string) map[string]any {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	argv := append([]string{bin, "--cli", e.srv.URL + "/mcp", "--transport", "http",
		"--header", "Authorization: Bearer " + key, "--format", "json", "--quiet"}, args...)
	cmd := exec.CommandContext(ctx, "node", argv...)
	home := e.t.TempDir() // the Inspector keeps a catalog under $HOME
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if code != 0 && errors.As(err, &exit) && exit.ExitCode() == code {
		err = nil
	} else if err == nil && code != 0 {
		e.t.Fatalf("inspector %v exited 0, want %d\nstdout: %s", args, code, stdout.String())
	}
	if err != nil {
		e.t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	var out struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Result == nil {
		e.t.Fatalf("inspector %v: the answer is not a JSON object with a result: %v\n%s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return out.Result
}

// An independent client, the MCP Inspector's CLI (TypeScript, on the
// official TypeScript SDK), lists the tools with its strict schema checks
// and calls them; it validates each structured answer against the tool's
// output schema.
func TestInspectorConformance(t *testing.T) {
	bin := inspectorBin(t)
	// Each run of the Inspector's CLI opens a session of its own and ends
	// without deleting it: more runs than the default sessions of a key.
	e := newEnv(t, mcp.Config{MaxSessionsPerKey: 100})
	id := e.createTask("INSPECT-1")
	key := e.api.Admin

	tools := e.runInspector(bin, key, "--method", "tools/list", "--strict")
	var names []string
	list, ok := tools["tools"].([]any)
	if !ok {
		t.Fatalf("tools/list = %v", tools)
	}
	for _, tool := range list {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	var want []string
	for name := range allTools {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the inspector lists %v, want %v", names, want)
	}

	callOK := func(tool string, args any) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(args)
		res := e.runInspector(bin, key, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", string(raw))
		if res["isError"] == true || res["structuredContent"] == nil {
			t.Fatalf("the inspector's %s(%s) = %v", tool, raw, res)
		}
		return res["structuredContent"].(map[string]any)
	}
	callOK("list_tasks", map[string]any{"limit": 5})
	callOK("get_task", map[string]any{"taskId": id})
	callOK("get_task", map[string]any{"taskId": id, "tokenBudget": "standard"})
	callOK("start_task", map[string]any{"taskId": id})
	callOK("record_blocker", map[string]any{"taskId": id, "reason": "missing_secret", "actionRequired": "Add it"})
	callOK("resolve_blocker", map[string]any{"taskId": id})
	sub := callOK("submit_work", map[string]any{"taskId": id, "summary": "Done.", "mode": "artifact", "checks": []any{map[string]any{"name": "unit", "status": "passed"}}})
	if sub["data"].(map[string]any)["status"] != "in_review" {
		t.Fatalf("submit_work = %v", sub)
	}
	callOK("get_ci_status", map[string]any{"taskId": id})
	callOK("get_review_feedback", map[string]any{"taskId": id})
	seq := e.lastSequence(id)
	e.review(id, "approved")
	waited := callOK("wait_for_task_change", map[string]any{"taskId": id, "afterSequence": seq, "timeoutSeconds": 5})
	if waited["event"].(map[string]any)["type"] != "task.reviewed" {
		t.Fatalf("wait_for_task_change = %v", waited)
	}
	head := e.api.Task(id)["headSha"].(string)
	shipped := callOK("ship", map[string]any{"taskId": id, "mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": head})
	callOK("get_ship_operation", map[string]any{"operationId": shipped["data"].(map[string]any)["operationId"]})
	callOK("get_merge_queue_status", map[string]any{"taskId": id})

	// An error is a tool result the model reads, not a protocol failure.
	raw, _ := json.Marshal(map[string]any{"taskId": "tsk_missing"})
	if res := e.runInspectorExit(bin, key, 5, "--method", "tools/call", "--tool-name", "get_task", "--tool-args-json", string(raw)); res["isError"] != true {
		t.Errorf("the inspector's get_task of a missing task = %v, want isError", res)
	}
	reader := e.api.Key(lifecycle.ScopeTasksRead)
	raw, _ = json.Marshal(map[string]any{"taskId": id})
	if res := e.runInspectorExit(bin, reader, 5, "--method", "tools/call", "--tool-name", "start_task", "--tool-args-json", string(raw)); res["isError"] != true {
		t.Errorf("start_task without tasks:write = %v, want isError", res)
	}

	templates := e.runInspector(bin, key, "--method", "resources/templates/list")
	if n := len(templates["resourceTemplates"].([]any)); n != 4 {
		t.Errorf("the inspector lists %d resource templates, want 4", n)
	}
	read := e.runInspector(bin, key, "--method", "resources/read", "--uri", "lifecycle://tasks/"+id)
	if contents := read["contents"].([]any); len(contents) != 1 {
		t.Errorf("resources/read = %v", read)
	}
	prompts := e.runInspector(bin, key, "--method", "prompts/list")
	if p := prompts["prompts"].([]any); len(p) != 1 || p[0].(map[string]any)["name"] != "work_on_task" {
		t.Errorf("prompts/list = %v", prompts)
	}
	got := e.runInspector(bin, key, "--method", "prompts/get", "--prompt-name", "work_on_task", "--prompt-args", "taskId="+id)
	if m := got["messages"].([]any); len(m) != 2 {
		t.Errorf("prompts/get = %v", got)
	}
}
