package mcp_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// TestAgentCapThroughMCP: with Config.MaxInProgressPerAgent, get_task (on
// the fast path and through the SDK, whose answers are kept by revision)
// and list_tasks stop offering start once the agent is at its cap, and
// start_task is refused with reason max_in_progress_per_agent and the
// same availableActions; a task in review shows its reworkRounds.
func TestAgentCapThroughMCP(t *testing.T) {
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.MaxInProgressPerAgent = 1 })
	assigned := func(ident string) string {
		body := apitest.TaskBody(ident)
		body["assigneeAgentId"] = "agent-1"
		return e.api.CreateTask(body)["id"].(string)
	}
	first, second := assigned("MCPCAP-1"), assigned("MCPCAP-2")
	cs := e.connect(e.api.Admin, nil)
	raw := e.openRaw(e.api.Admin)
	getFast := func(id string) []string {
		t.Helper()
		e.h.SetFastPathForTest(true)
		code, _, body := raw.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":%q}}}`, id))
		if code != http.StatusOK {
			t.Fatalf("get_task on the fast path: %d %s", code, body)
		}
		return []string{map[bool]string{true: "start", false: "none"}[strings.Contains(body, `\"availableActions\":[\"start\"]`)]}
	}
	if got := strs(e.ok(cs, "get_task", map[string]any{"taskId": second})["availableActions"]); !slices.Equal(got, []string{"start"}) {
		t.Fatalf("below the cap, get_task offers %v", got)
	}
	if got := getFast(second); got[0] != "start" {
		t.Fatalf("below the cap, the fast path offers %v", got)
	}
	e.ok(cs, "start_task", map[string]any{"taskId": first, "idempotencyKey": "mcp-cap-start-1"})
	if got := e.ok(cs, "get_task", map[string]any{"taskId": second})["availableActions"].([]any); len(got) != 0 {
		t.Errorf("at the cap, get_task offers %v", got)
	}
	if got := getFast(second); got[0] != "none" {
		t.Errorf("at the cap, the fast path offers start")
	}
	for _, task := range e.ok(cs, "list_tasks", map[string]any{"status": []string{"todo"}})["tasks"].([]any) {
		if got := task.(map[string]any)["availableActions"].([]any); len(got) != 0 {
			t.Errorf("at the cap, list_tasks offers %v", got)
		}
	}
	errObj := e.fails(cs, "start_task", map[string]any{"taskId": second, "idempotencyKey": "mcp-cap-start-2"}, "conflict")
	d := errObj["details"].(map[string]any)
	if d["reason"] != "max_in_progress_per_agent" || len(d["availableActions"].([]any)) != 0 || !strings.Contains(errObj["message"].(string), "agent-1") {
		t.Errorf("start_task at the cap: %v", errObj)
	}
	task := e.ok(cs, "get_task", map[string]any{"taskId": first})["data"].(map[string]any)
	if task["reworkRounds"] != float64(0) {
		t.Errorf("reworkRounds %v, want 0", task["reworkRounds"])
	}
}
