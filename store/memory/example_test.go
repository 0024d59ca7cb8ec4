package memory_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// ExampleNew runs a Service on a Store in memory, as a test or a demo
// would, and creates a task. Nothing is kept when the program ends.
func ExampleNew() {
	store := memory.New()
	defer store.Close()

	svc, err := lifecycle.New(lifecycle.Config{
		Store:   store,
		BaseURL: "https://tasks.example.com/api",
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer svc.Close(ctx)

	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: "WEB-1",
		Title:      "Fix the login redirect",
		Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/WEB-1"},
		Actor:      lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser},
	})
	if err != nil {
		log.Fatal(err)
	}
	stored, err := store.Task(ctx, task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(stored.Identifier, stored.Status, stored.Version)
	// Output: WEB-1 todo 1
}
