package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/client"
	memstore "github.com/tasklifecycle/lifecycle/store/memory"
)

// exampleServer runs a lifecycle server for the examples and returns its
// URL, a key with every scope, and a function that stops it.
func exampleServer() (string, string, func()) {
	store := memstore.New()
	svc, err := lifecycle.New(lifecycle.Config{
		Store:        store,
		BaseURL:      "http://example.invalid",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Adapters:     []lifecycle.AdapterBinding{{Project: "web", Adapter: memory.New(memory.Config{Owner: "acme", Repo: "web"})}},
		Deployer:     deployer{},
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	_, key, err := svc.CreateAPIKey(context.Background(), lifecycle.CreateAPIKeyParams{Name: "example", Scopes: allScopes(),
		Actor: lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	return srv.URL, key, func() {
		svc.Close(context.Background())
		srv.Close()
		store.Close()
	}
}

// exampleTask is a task of project web.
func exampleTask(ident string) lifecycle.CreateTaskParams {
	project := "web"
	return lifecycle.CreateTaskParams{
		Identifier: ident,
		Title:      "Fix the login redirect",
		Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		Context:    lifecycle.TaskContext{Project: &project},
	}
}

func ExampleNew() {
	base, key, stop := exampleServer()
	defer stop()

	c, err := client.New(client.Config{BaseURL: base, APIKey: key})
	if err != nil {
		log.Fatal(err)
	}
	page, err := c.ListTasks(context.Background(), lifecycle.ListTasksParams{Statuses: []lifecycle.Status{lifecycle.StatusTodo}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Tasks), "tasks to do")
	// Output: 0 tasks to do
}

func ExampleClient_CreateTask() {
	base, key, stop := exampleServer()
	defer stop()
	c, _ := client.New(client.Config{BaseURL: base, APIKey: key})
	ctx := context.Background()

	task, err := c.CreateTask(ctx, exampleTask("WEB-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Identifier, task.Status, task.AvailableActions)
	task, err = c.StartTask(ctx, task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Identifier, task.Status, task.AvailableActions)
	// Output:
	// WEB-1 todo [start]
	// WEB-1 in_progress [submit]
}

func ExampleClient_Submit() {
	base, key, stop := exampleServer()
	defer stop()
	c, _ := client.New(client.Config{BaseURL: base, APIKey: key})
	ctx := context.Background()
	task, _ := c.CreateTask(ctx, exampleTask("WEB-1"))
	c.StartTask(ctx, task.ID)

	// The client sends an Idempotency-Key, the same on each of its retries.
	sub, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{
		Summary:     "Redirect to the page the user came from.",
		PullRequest: lifecycle.PullRequestHints{Title: "Fix the login redirect"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sub.Status, sub.Action, sub.PRNumber, sub.AvailableActions)
	// Output: in_review created 1 [view_ci_status view_review_feedback]
}

func ExampleClient_Ship() {
	base, key, stop := exampleServer()
	defer stop()
	c, _ := client.New(client.Config{BaseURL: base, APIKey: key})
	ctx := context.Background()
	task, _ := c.CreateTask(ctx, exampleTask("WEB-1"))
	c.StartTask(ctx, task.ID)
	sub, _ := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Done."})
	c.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})

	op, err := c.Ship(ctx, task.ID, lifecycle.ShipParams{
		Mode:              lifecycle.ShipMergeAndDeploy,
		TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA:   *sub.HeadSHA,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ship", op.Status)
	// The operation runs in the background: read it again on a ticker
	// until it has finished, for as long as the context allows (or wait
	// for its task.shipped event, see ExampleClient_Events).
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for op.Status == lifecycle.ShipQueued || op.Status == lifecycle.ShipRunning {
		select {
		case <-wait.Done():
			log.Fatalf("ship operation %s still %s: %v", op.OperationID, op.Status, wait.Err())
		case <-tick.C:
		}
		if op, err = c.ShipOperation(wait, op.OperationID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("ship", op.Status, "to", op.Deployment.Environment)
	// Output:
	// ship queued
	// ship succeeded to staging
}

func ExampleClient_Events() {
	c, err := client.New(client.Config{BaseURL: "http://127.0.0.1:8080", APIKey: os.Getenv("KEY")})
	if err != nil {
		log.Fatal(err)
	}
	// Resume after the last event handled in an earlier run (kept in a
	// file, say); an empty LastEventID starts at the live tail.
	last, _ := os.ReadFile("cursor.txt")
	stream := c.Events(context.Background(), client.StreamParams{
		LastEventID: string(last),
		EventTypes:  []lifecycle.EventType{lifecycle.EventTaskUpdated, lifecycle.EventTaskShipped},
	})
	defer stream.Close()
	for {
		ev, err := stream.Next()
		var gap *client.GapError
		switch {
		case errors.As(err, &gap):
			log.Print("events may be missing; read the tasks again")
			continue
		case err != nil:
			log.Fatal(err)
		}
		fmt.Println(ev.ID, ev.Type)
		os.WriteFile("cursor.txt", []byte(stream.LastEventID()), 0o600)
	}
}

func ExampleError() {
	base, key, stop := exampleServer()
	defer stop()
	c, _ := client.New(client.Config{BaseURL: base, APIKey: key})
	ctx := context.Background()
	task, _ := c.CreateTask(ctx, exampleTask("WEB-1"))

	_, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Done."})
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Code, apiErr.Reason, apiErr.AvailableActions)
	}
	fmt.Println(errors.Is(err, lifecycle.ErrConflict))
	// Output:
	// 409 conflict not_submittable [start]
	// true
}

func ExampleWithIdempotencyKey() {
	base, key, stop := exampleServer()
	defer stop()
	c, _ := client.New(client.Config{BaseURL: base, APIKey: key})
	ctx := context.Background()
	task, _ := c.CreateTask(ctx, exampleTask("WEB-1"))
	c.StartTask(ctx, task.ID)

	// A key of your own makes the call safe across restarts of your program:
	// sending it again returns the first submission.
	ctx = client.WithIdempotencyKey(ctx, "submit-WEB-1-run-42")
	first, _ := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Done."})
	again, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Done."})
	fmt.Println(err == nil, first.SubmissionID == again.SubmissionID, again.IdempotencyKey)
	// Output: true true submit-WEB-1-run-42
}
