package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/mcp"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// ExampleNewHandler serves a Service's lifecycle over MCP at /mcp beside
// its API, then reads a task with the tool get_task through the official
// Go SDK's client, as an agent would.
func ExampleNewHandler() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer svc.Close(ctx)
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "agent",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeEventsRead},
		Actor:  lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}})
	if err != nil {
		log.Fatal(err)
	}
	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: "WEB-1", Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/WEB-1"}})
	if err != nil {
		log.Fatal(err)
	}

	h, err := mcp.NewHandler(svc, mcp.Config{})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The agent's side: the SDK's client, with the API key on every request.
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "get_task", Arguments: map[string]any{"taskId": task.ID}})
	if err != nil {
		log.Fatal(err)
	}
	var answer struct {
		Data struct {
			Identifier string `json:"identifier"`
			Status     string `json:"status"`
		} `json:"data"`
		AvailableActions []string `json:"availableActions"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &answer); err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer.Data.Identifier, answer.Data.Status, answer.AvailableActions)
	// Output: WEB-1 todo [start]
}
