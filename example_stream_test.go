package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// ExampleService_Handler_eventStream resumes the event stream after the
// first event with Last-Event-ID, as an EventSource does after a dropped
// connection, and reads the next event's frame.
func ExampleService_Handler_eventStream() {
	store := memory.New() // a server keeps its tasks in store/sqlite or store/postgres
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	defer svc.Close(ctx) // ends the stream
	server := httptest.NewServer(svc.Handler())
	defer server.Close()

	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{
		Name: "listener", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead},
		Actor: lifecycle.Actor{ID: "dashboard", Role: lifecycle.RoleUser},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, ident := range []string{"DOCS-1", "DOCS-2"} {
		_, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
			Identifier: ident, Title: "Document the API", Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	first, err := store.Events(ctx, lifecycle.EventFilter{Limit: 1})
	if err != nil {
		log.Fatal(err)
	}

	req, _ := http.NewRequest("GET", server.URL+"/task-events/stream?eventTypes=task.updated", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Last-Event-ID", first[0].ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.Header.Get("Content-Type"), resp.Header.Get("X-Service-Resume-Mode"))
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && lines.Text() != "" {
		field, value, _ := strings.Cut(lines.Text(), ": ")
		switch field {
		case "data":
			var env struct {
				Data lifecycle.TaskUpdatedData `json:"data"`
			}
			json.Unmarshal([]byte(value), &env)
			fmt.Println("data:", env.Data.TaskIdentifier, env.Data.Status)
		case "id":
			fmt.Println("id:", strings.HasPrefix(value, "evt_"))
		default:
			fmt.Println(field+":", value)
		}
	}
	// Output:
	// text/event-stream replay_then_live
	// retry: 5000
	// id: true
	// event: task.updated
	// data: DOCS-2 todo
}
