// Command mcpagent is a scripted coding agent that works one task from
// todo to done over the Model Context Protocol, with the official Go SDK's
// client, against the demo's /mcp (package mcp): the loop of the prompt
// work_on_task, with the model's decisions written out. The people around
// it (who files the task, the CI that reports, the reviewer who approves)
// act through the HTTP API with the package client.
//
// With KEY and BASE set by the README's first command (the demo, whose
// code host is local git repositories: the artifact adapter):
//
//	eval "$(go run ./examples/demo -background)"
//	go run ./examples/mcpagent
//
// It files a new task on each run, gives the agent a key of its own
// (tasks:read, tasks:write, ship:write, events:read), subscribes to the
// task's resource, and prints each step, each event it waited for and
// each notification it got, until the task is shipped and done.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
)

func main() {
	base := flag.String("base", os.Getenv("BASE"), "the demo's URL, where the API is served; /mcp beside it (default $BASE)")
	keyFile := flag.String("key-file", "", "file holding an admin API key; else $KEY")
	timeout := flag.Duration("timeout", 2*time.Minute, "the most the whole run may take")
	flag.Parse()
	key := os.Getenv("KEY")
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcpagent:", err)
			os.Exit(1)
		}
		key = strings.TrimSpace(string(b))
	}
	if *base == "" || key == "" {
		fmt.Fprintln(os.Stderr, `mcpagent: set BASE and KEY, as eval "$(go run ./examples/demo -background)" does, or pass -base and -key-file`)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, strings.TrimRight(*base, "/"), key, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		os.Exit(1)
	}
}

// agent is the scripted agent's MCP session.
type agent struct {
	session  *sdk.ClientSession
	out      io.Writer
	lastSeen int64 // the sequence of the last event waited for; 0: from the task's first
}

// run files a task with adminKey and has an agent work it to done.
func run(ctx context.Context, base, adminKey string, out io.Writer) error {
	people, err := client.New(client.Config{BaseURL: base, APIKey: adminKey})
	if err != nil {
		return err
	}
	web := "web"
	ident := fmt.Sprintf("AGENT-%d", time.Now().UnixMilli())
	task, err := people.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: ident, Title: "Add a dark theme", Priority: lifecycle.PriorityMedium,
		AcceptanceCriteria: []string{"follows the OS setting"},
		Links:              lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		Context:            lifecycle.TaskContext{Project: &web, Goal: "Comfortable at night"},
		Labels:             []string{"frontend"},
	})
	if err != nil {
		return fmt.Errorf("file the task: %w", err)
	}
	fmt.Fprintf(out, "filed %s (%s)\n", task.ID, ident)
	_, agentKey, err := people.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "mcpagent " + ident,
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeShipWrite, lifecycle.ScopeEventsRead},
		Actor:  lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}})
	if err != nil {
		return fmt.Errorf("issue the agent's key: %w", err)
	}

	notified := make(chan string, 64)
	mcpClient := sdk.NewClient(&sdk.Implementation{Name: "mcpagent", Version: "1"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			select {
			case notified <- r.Params.URI:
			default:
			}
		},
	})
	session, err := mcpClient.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{agentKey, http.DefaultTransport}}}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s/mcp: %w", base, err)
	}
	defer session.Close()
	a := &agent{session: session, out: out}
	fmt.Fprintf(out, "connected to %s/mcp: %s\n", base, session.InitializeResult().ServerInfo.Name)
	if err := session.Subscribe(ctx, &sdk.SubscribeParams{URI: "lifecycle://tasks/" + task.ID}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	prompt, err := session.GetPrompt(ctx, &sdk.GetPromptParams{Name: "work_on_task", Arguments: map[string]string{"taskId": task.ID}})
	if err != nil {
		return fmt.Errorf("prompt work_on_task: %w", err)
	}
	fmt.Fprintf(out, "prompt work_on_task: %s\n", prompt.Description)

	// 1-2. Read the task; start it.
	got, err := a.call(ctx, "get_task", map[string]any{"taskId": task.ID})
	if err != nil {
		return err
	}
	if !slices.Contains(actions(got), "start") {
		return fmt.Errorf("start is not offered: %v", got["availableActions"])
	}
	if _, err := a.call(ctx, "start_task", map[string]any{"taskId": task.ID}); err != nil {
		return err
	}

	// 3. The work is done (here, nothing): submit it. The demo's code host
	// is a set of local git repositories; artifact mode records the work.
	if _, err := a.call(ctx, "submit_work", map[string]any{"taskId": task.ID, "mode": "artifact",
		"summary": "Dark theme that follows the OS setting.", "checks": []any{map[string]any{"name": "unit", "status": "passed"}}}); err != nil {
		return err
	}
	got, err = a.call(ctx, "get_task", map[string]any{"taskId": task.ID})
	if err != nil {
		return err
	}
	head, _ := got["data"].(map[string]any)["headSha"].(string)

	// The people: CI reports on the head commit, a reviewer approves.
	if _, _, err := people.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: head,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed, URL: "https://ci.example.com/1"}}}); err != nil {
		return fmt.Errorf("report CI: %w", err)
	}
	if _, _, err := people.PostReview(ctx, task.ID, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved, Body: "Looks good."}); err != nil {
		return fmt.Errorf("review: %w", err)
	}

	// 4. Watch review and CI until ship is offered: the task's events in
	// order, from its first, then live ones.
	for {
		ev, err := a.wait(ctx, task.ID)
		if err != nil {
			return err
		}
		if ev != nil && slices.Contains(actions(ev["data"].(map[string]any)), "ship") {
			break
		}
	}
	if _, err := a.call(ctx, "get_review_feedback", map[string]any{"taskId": task.ID}); err != nil {
		return err
	}
	if _, err := a.call(ctx, "get_ci_status", map[string]any{"taskId": task.ID}); err != nil {
		return err
	}

	// 5. Ship, and follow the operation to its end.
	shipped, err := a.call(ctx, "ship", map[string]any{"taskId": task.ID, "mode": "merge_and_deploy", "targetEnvironment": "staging", "expectedHeadSha": head})
	if err != nil {
		return err
	}
	opID := shipped["data"].(map[string]any)["operationId"].(string)
	for {
		ev, err := a.wait(ctx, task.ID)
		if err != nil {
			return err
		}
		if ev != nil && ev["type"] == "task.shipped" {
			break
		}
	}
	op, err := a.call(ctx, "get_ship_operation", map[string]any{"operationId": opID})
	if err != nil {
		return err
	}
	final, err := a.call(ctx, "get_task", map[string]any{"taskId": task.ID})
	if err != nil {
		return err
	}
	status := final["data"].(map[string]any)["status"]
	data := op["data"].(map[string]any)
	for len(notified) > 0 {
		fmt.Fprintf(out, "notified: %s updated\n", <-notified)
	}
	if status != "done" || data["status"] != "succeeded" {
		return fmt.Errorf("the task is %v and its ship %v: %v", status, data["status"], data["error"])
	}
	fmt.Fprintf(out, "%s is done: merged as %v, deployed to staging\n", ident, data["mergeCommitSha"])
	return nil
}

// call calls a tool, prints the step, and returns its structured answer;
// an error answer (isError) is returned as an error with its code.
func (a *agent) call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	res, err := a.session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(*sdk.TextContent); ok {
			text = t.Text
		}
	}
	var answer map[string]any
	if err := json.Unmarshal([]byte(text), &answer); err != nil {
		return nil, fmt.Errorf("%s answered %q: %w", tool, text, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s", tool, text)
	}
	fmt.Fprintf(a.out, "  %-20s %s\n", tool, summary(answer))
	return answer, nil
}

// wait waits for the task's next event after the last one seen, and
// returns it, or nil when none came in time.
func (a *agent) wait(ctx context.Context, taskID string) (map[string]any, error) {
	w, err := a.call(ctx, "wait_for_task_change", map[string]any{"taskId": taskID, "afterSequence": a.lastSeen, "timeoutSeconds": 30})
	if err != nil {
		return nil, err
	}
	ev, _ := w["event"].(map[string]any)
	if ev == nil {
		return nil, nil
	}
	a.lastSeen = int64(ev["sequence"].(float64))
	return ev, nil
}

// summary says what an answer holds, on one line.
func summary(answer map[string]any) string {
	if ev, ok := answer["event"].(map[string]any); ok {
		data, _ := ev["data"].(map[string]any)
		return fmt.Sprintf("event %v #%v: %v, next %v", ev["type"], ev["sequence"], data["summary"], data["availableActions"])
	}
	if answer["timedOut"] == true {
		return "no event in time"
	}
	data, _ := answer["data"].(map[string]any)
	var parts []string
	for _, k := range []string{"status", "overall", "decision", "operationId", "submissionId"} {
		if v, ok := data[k]; ok && v != nil {
			parts = append(parts, fmt.Sprintf("%s %v", k, v))
		}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; next %v", answer["availableActions"])
}

// actions returns the availableActions of an answer or an event's data.
func actions(v map[string]any) []string {
	var out []string
	list, _ := v["availableActions"].([]any)
	for _, a := range list {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// bearer sends an API key with every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}
