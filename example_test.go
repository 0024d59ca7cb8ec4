package lifecycle_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// ExampleNew builds a Service on a SQLite store and creates a task through
// the Go API.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "lifecycle-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	router, err := lifecycle.NewRulesRouter(lifecycle.RulesRouterConfig{Rules: []lifecycle.RoutingRule{
		{Name: "frontend", Labels: []string{"frontend"}, Agent: lifecycle.Agent{ID: "agent-web", Name: "Web Agent"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	svc, err := lifecycle.New(lifecycle.Config{
		Store:   store,
		BaseURL: "https://tasks.example.com/api",
		Router:  router,
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
		Labels:     []string{"frontend"},
		Actor:      lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status, *task.AssigneeAgentID, *task.AssignmentSource, task.AvailableActions)
	// Output: todo agent-web deterministic_rule [start]
}

// ExampleService_Handler mounts the API under /api of a host's ServeMux and
// reads a task over HTTP with an API key.
func ExampleService_Handler() {
	dir, _ := os.MkdirTemp("", "lifecycle-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	server := httptest.NewServer(mux)
	defer server.Close()

	ctx := context.Background()
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{
		Name:   "reader",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead},
		Actor:  lifecycle.Actor{ID: "dashboard", Role: lifecycle.RoleUser},
	})
	if err != nil {
		log.Fatal(err)
	}
	task, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: "DOCS-1",
		Title:      "Document the API",
		Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/DOCS-1"},
	})
	if err != nil {
		log.Fatal(err)
	}

	req, _ := http.NewRequest("GET", server.URL+"/api/tasks/"+task.ID+"?tokenBudget=compact", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
		AvailableActions []string `json:"availableActions"`
		Meta             struct {
			TokenBudgetHint string   `json:"tokenBudgetHint"`
			TruncatedFields []string `json:"truncatedFields"`
		} `json:"meta"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, body.Data.Status, body.AvailableActions, body.Meta.TokenBudgetHint, body.Meta.TruncatedFields)
	// Output: 200 OK todo [start] compact [description routingReason]
}

// ExampleService_Ship takes a task from creation to shipped with the Go
// API, on an in-memory code host: submit, report CI, approve, ship, and wait
// for the durable ship operation to finish.
func ExampleService_Ship() {
	dir, _ := os.MkdirTemp("", "lifecycle-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	svc, err := lifecycle.New(lifecycle.Config{
		Store:        store,
		BaseURL:      "https://tasks.example.com/api",
		Adapters:     []lifecycle.AdapterBinding{{Adapter: host}},
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}},
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil { // the ship runner
		log.Fatal(err)
	}
	defer svc.Close(ctx)

	agent := lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}
	task, _ := svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: "WEB-1", Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/WEB-1"}})
	svc.StartTask(ctx, task.ID, lifecycle.StartTaskParams{Actor: agent})
	sub, err := svc.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Redirect keeps the query string", Actor: agent})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("submitted:", sub.Action, "pull request", sub.PRNumber, sub.AvailableActions)

	svc.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	_, actions, _ := svc.PostReview(ctx, task.ID, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved,
		Reviewer: lifecycle.Actor{ID: "reviewer", Role: lifecycle.RoleReviewer}})
	fmt.Println("approved:", actions)

	op, err := svc.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly,
		TargetEnvironment: lifecycle.EnvironmentProduction, ExpectedHeadSHA: *sub.HeadSHA})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ship:", op.Status)
	// The operation runs in the background: read it again on a ticker
	// until it has finished, for as long as the context allows. (Over
	// HTTP, a client waits for the task.shipped event on the event stream
	// instead.)
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
		if op, err = svc.ShipOperation(wait, op.OperationID); err != nil {
			log.Fatal(err)
		}
	}
	done, _ := svc.Task(ctx, task.ID)
	fmt.Println("ship:", op.Status, "task:", done.Status, done.AvailableActions)
	// Output:
	// submitted: created pull request 1 [view_ci_status view_review_feedback]
	// approved: [ship view_ci_status view_review_feedback]
	// ship: queued
	// ship: succeeded task: done []
}

// ExampleVerifyWebhookRequest is the heart of a webhook receiver: check
// the signature over the raw body before parsing it, and deduplicate on
// the event ID, which stays the same across retries.
func ExampleVerifyWebhookRequest() {
	const secret = "a-long-random-secret"
	seen := map[string]bool{} // a real receiver bounds this
	receive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := lifecycle.VerifyWebhookRequest(r, secret, 0)
		if errors.Is(err, lifecycle.ErrInvalidSignature) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if id := r.Header.Get(lifecycle.HeaderEventID); !seen[id] {
			seen[id] = true
			fmt.Printf("%s %s\n", r.Header.Get(lifecycle.HeaderEventType), body)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	// A delivery as the Service sends it, signed with the secret.
	body := `{"id":"evt_1","type":"task.updated"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	for _, signature := range []string{"sha256=" + hex.EncodeToString(mac.Sum(nil)), "sha256=00"} {
		r := httptest.NewRequest("POST", "/hooks", strings.NewReader(body))
		r.Header.Set(lifecycle.HeaderEventID, "evt_1")
		r.Header.Set(lifecycle.HeaderEventType, "task.updated")
		r.Header.Set(lifecycle.HeaderSignature, signature)
		w := httptest.NewRecorder()
		receive.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// task.updated {"id":"evt_1","type":"task.updated"}
	// 204
	// 401
}
