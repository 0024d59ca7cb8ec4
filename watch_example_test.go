package lifecycle_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// ExampleService_WatchTask follows one task's events as they commit, the
// way package mcp feeds its resource subscriptions.
func ExampleService_WatchTask() {
	ctx := context.Background()
	store := memory.New()
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close(ctx)
	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: "WEB-1", Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/WEB-1"}})
	if err != nil {
		log.Fatal(err)
	}
	events := make(chan lifecycle.Event, 8) // the function must not block
	watch, err := svc.WatchTask(ctx, task.ID, func(e *lifecycle.Event) { events <- *e })
	if err != nil {
		log.Fatal(err)
	}
	defer watch.Stop()

	if _, err := svc.StartTask(ctx, task.ID, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}}); err != nil {
		log.Fatal(err)
	}
	e := <-events
	fmt.Println(e.Type, e.TaskVersion)
	// Output: task.updated 2
}
