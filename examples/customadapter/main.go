// Command customadapter shows how a Go team plugs its own code host into
// lifecycle: InboxAdapter (inbox.go) keeps pull requests as JSON files, and
// this program runs one task through it with the Go API, then prints the
// pull request file it made.
//
//	go run ./examples/customadapter
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "lifecycle-customadapter")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	inbox, err := NewInboxAdapter(filepath.Join(dir, "inbox"))
	if err != nil {
		log.Fatal(err)
	}
	svc, err := lifecycle.New(lifecycle.Config{
		Store:    store,
		BaseURL:  "http://localhost:8080",
		Adapters: []lifecycle.AdapterBinding{{Adapter: inbox}}, // live for every project
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	agent := lifecycle.Actor{ID: "agent-docs", Role: lifecycle.RoleAgent}
	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: "DOCS-1", Title: "Explain the webhook signature",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/DOCS-1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := svc.StartTask(ctx, task.ID, lifecycle.StartTaskParams{Actor: agent}); err != nil {
		log.Fatal(err)
	}
	sub, err := svc.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Wrote docs/webhooks.md", Actor: agent})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("submission %s: pull request #%d (%s) at %s\n", sub.SubmissionID, sub.PRNumber, sub.Action, sub.PRURL)
	b, err := os.ReadFile(filepath.Join(dir, "inbox", "1.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", b)
}
