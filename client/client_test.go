package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/client"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// TestEveryEndpoint takes a task from creation to shipped and calls every
// other endpoint on the way, then checks that every operation of the
// OpenAPI document was called through the client.
func TestEveryEndpoint(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()

	doc, err := c.OpenAPI(ctx)
	if err != nil || !strings.HasPrefix(string(doc), "openapi: 3.1") {
		t.Fatalf("OpenAPI = %.30q, %v", doc, err)
	}

	task, err := c.CreateTask(ctx, taskParams("WEB-1"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != lifecycle.StatusTodo || !slices.Equal(task.AvailableActions, []lifecycle.Action{lifecycle.ActionStart}) {
		t.Fatalf("created task: %s %v", task.Status, task.AvailableActions)
	}
	list, err := c.ListTasks(ctx, lifecycle.ListTasksParams{Statuses: []lifecycle.Status{lifecycle.StatusTodo}, Project: "web", Limit: 1})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
		t.Fatalf("ListTasks = %+v, %v", list, err)
	}
	if got, err := c.Task(ctx, task.ID); err != nil || got.Identifier != "WEB-1" {
		t.Fatalf("Task = %+v, %v", got, err)
	}
	after := taskParams("WEB-1-NEXT")
	after.DependsOn = []string{task.ID}
	next, err := c.CreateTask(ctx, after)
	if err != nil || !slices.Equal(next.WaitingOn, []string{task.ID}) {
		t.Fatalf("CreateTask with dependsOn = %+v, %v", next, err)
	}
	var waiting *client.Error
	if _, err := c.StartTask(ctx, next.ID); !errors.As(err, &waiting) || waiting.Reason != "dependency_not_done" || !errors.Is(err, lifecycle.ErrConflict) {
		t.Fatalf("StartTask of a waiting task = %#v", err)
	}
	if got, err := c.SetDependencies(ctx, next.ID, nil); err != nil || len(got.DependsOn)+len(got.WaitingOn) != 0 {
		t.Fatalf("SetDependencies(none) = %+v, %v", got, err)
	}
	if got, err := c.SetDependencies(ctx, next.ID, []string{task.ID}); err != nil || !slices.Equal(got.WaitingOn, []string{task.ID}) {
		t.Fatalf("SetDependencies = %+v, %v", got, err)
	}
	if list, err := c.ListTasks(ctx, lifecycle.ListTasksParams{Ready: true}); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
		t.Fatalf("ListTasks(ready) = %+v, %v", list, err)
	}
	if got, err := c.CompactTask(ctx, task.ID); err != nil || got.Title == "" {
		t.Fatalf("CompactTask = %+v, %v", got, err)
	}
	if task, err = c.StartTask(ctx, task.ID); err != nil || task.Status != lifecycle.StatusInProgress {
		t.Fatalf("StartTask = %s, %v", task.Status, err)
	}
	if task, err = c.RecordBlocker(ctx, task.ID, lifecycle.RecordBlockerParams{Reason: "missing_credentials",
		ActionRequired: "Add the ORDERS_DB_URL secret"}); err != nil || task.Status != lifecycle.StatusBlocked {
		t.Fatalf("RecordBlocker = %s, %v", task.Status, err)
	}
	if task, err = c.ResolveBlocker(ctx, task.ID, "secret added"); err != nil || task.Status != lifecycle.StatusInProgress {
		t.Fatalf("ResolveBlocker = %s, %v", task.Status, err)
	}

	sub, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Redirect to the page the user came from."})
	if err != nil || sub.Status != lifecycle.StatusInReview || sub.HeadSHA == nil {
		t.Fatalf("Submit = %+v, %v", sub, err)
	}
	st, acts, err := c.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed, URL: "https://ci.example.com/1"}}})
	if err != nil || st.Overall != lifecycle.CIPassed || slices.Contains(acts, lifecycle.ActionShip) {
		t.Fatalf("ReportChecks = %+v %v, %v", st, acts, err)
	}
	if st, _, err = c.CIStatus(ctx, task.ID); err != nil || st.Overall != lifecycle.CIPassed {
		t.Fatalf("CIStatus = %+v, %v", st, err)
	}
	review, acts, err := c.PostReview(ctx, task.ID, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved, Body: "Looks good."})
	if err != nil || review.Outcome != lifecycle.ReviewApproved || !slices.Contains(acts, lifecycle.ActionShip) {
		t.Fatalf("PostReview = %+v %v, %v", review, acts, err)
	}
	if fb, _, err := c.ReviewFeedback(ctx, task.ID); err != nil || fb.Decision != lifecycle.DecisionApproved || len(fb.Reviews) != 1 {
		t.Fatalf("ReviewFeedback = %+v, %v", fb, err)
	}
	op, err := c.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeAndDeploy, TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA: *sub.HeadSHA})
	if err != nil || op.Status != lifecycle.ShipQueued {
		t.Fatalf("Ship = %+v, %v", op, err)
	}
	testenv.WaitFor(t, 10*time.Second, "the ship operation to succeed", func() bool {
		if op, err = c.ShipOperation(ctx, op.OperationID); err != nil || op.Status == lifecycle.ShipFailed {
			t.Fatalf("ShipOperation = %+v, %v", op, err)
		}
		return op.Status == lifecycle.ShipSucceeded
	})
	if got, err := c.Task(ctx, next.ID); err != nil || len(got.WaitingOn) != 0 || !slices.Contains(got.AvailableActions, lifecycle.ActionStart) {
		t.Fatalf("the dependent of a shipped task = %+v, %v; want waiting on nothing, start offered", got, err)
	}

	// This server's merge queue is off: it has no queue (the queue's own
	// tests are in mergequeue_test.go).
	if qs, err := c.MergeQueues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("MergeQueues = %+v, %v", qs, err)
	}
	if _, err := c.MergeQueue(ctx, "mq_none"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("MergeQueue(mq_none): %v, want ErrNotFound", err)
	}
	if _, err := c.PauseMergeQueue(ctx, "mq_none", "release freeze"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("PauseMergeQueue(mq_none): %v, want ErrNotFound", err)
	}
	if _, err := c.ResumeMergeQueue(ctx, "mq_none"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("ResumeMergeQueue(mq_none): %v, want ErrNotFound", err)
	}

	other, err := c.CreateTask(ctx, taskParams("WEB-2"))
	if err != nil {
		t.Fatal(err)
	}
	if other, err = c.CancelTask(ctx, other.ID, "duplicate"); err != nil || other.Status != lifecycle.StatusCancelled {
		t.Fatalf("CancelTask = %s, %v", other.Status, err)
	}

	desc := "pager"
	whs, err := c.CreateSubscription(ctx, lifecycle.CreateSubscriptionParams{URL: "https://127.0.0.1:1/hooks",
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskShipped}, Secret: "a-long-random-secret", Description: &desc})
	if err != nil || whs.Status != lifecycle.SubscriptionActive {
		t.Fatalf("CreateSubscription = %+v, %v", whs, err)
	}
	if subs, err := c.ListSubscriptions(ctx, lifecycle.ListParams{}); err != nil || len(subs.Subscriptions) != 1 {
		t.Fatalf("ListSubscriptions = %+v, %v", subs, err)
	}
	if got, err := c.Subscription(ctx, whs.ID); err != nil || got.URL != whs.URL {
		t.Fatalf("Subscription = %+v, %v", got, err)
	}
	if _, err := c.Deliveries(ctx, whs.ID, lifecycle.ListParams{Limit: 10}); err != nil {
		t.Fatalf("Deliveries: %v", err)
	}
	if r, err := c.ReplaySubscription(ctx, whs.ID, lifecycle.ReplayParams{FromSequence: 0}); err != nil || r.SubscriptionID != whs.ID {
		t.Fatalf("ReplaySubscription = %+v, %v", r, err)
	}
	if got, err := c.EnableSubscription(ctx, whs.ID); err != nil || got.Status != lifecycle.SubscriptionActive {
		t.Fatalf("EnableSubscription = %+v, %v", got, err)
	}
	if _, err := c.RetryDelivery(ctx, whs.ID, "dlv_nosuchdelivery000000000"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("RetryDelivery of an unknown delivery: %v, want ErrNotFound", err)
	}
	if err := c.DeleteSubscription(ctx, whs.ID); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}

	key, plaintext, err := c.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "web agent",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}})
	if err != nil || !strings.HasPrefix(plaintext, "lsk_") {
		t.Fatalf("CreateAPIKey = %+v %q, %v", key, plaintext, err)
	}
	if keys, err := c.APIKeys(ctx); err != nil || len(keys) != 2 {
		t.Fatalf("APIKeys = %d keys, %v", len(keys), err)
	}
	if err := c.RevokeAPIKey(ctx, key.ID); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}

	if err := c.Healthz(ctx); err != nil {
		t.Fatalf("Healthz: %v", err)
	}
	if h, err := c.Ready(ctx); err != nil || h.Status != "ready" {
		t.Fatalf("Ready = %+v, %v", h, err)
	}

	stream := c.Events(ctx, client.StreamParams{TaskID: task.ID, LastEventID: s.eventIDs(t)[0]})
	defer stream.Close()
	if ev, err := stream.Next(); err != nil || ev.Type != lifecycle.EventTaskUpdated {
		t.Fatalf("Events: %+v, %v", ev, err)
	}

	called := s.calledOps()
	for _, op := range specOps {
		if called[op] == 0 {
			t.Errorf("no client call reached %s", op)
		}
	}
}

// TestErrorsAreTyped checks that error answers come back as *client.Error
// with their code, message and details, and match lifecycle's sentinels.
func TestErrorsAreTyped(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()

	_, err := c.Task(ctx, "tsk_nope")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "not_found" || !errors.Is(err, lifecycle.ErrNotFound) {
		t.Fatalf("Task(tsk_nope) = %#v", err)
	}

	_, err = c.CreateTask(ctx, lifecycle.CreateTaskParams{Title: strings.Repeat("x", 301)})
	if !errors.As(err, &apiErr) || apiErr.Code != "validation_error" || len(apiErr.Fields) < 3 || !errors.Is(err, lifecycle.ErrValidation) {
		t.Fatalf("CreateTask(invalid) = %#v", err)
	}

	task, err := c.CreateTask(ctx, taskParams("WEB-1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "too early"})
	if !errors.As(err, &apiErr) || apiErr.Code != "conflict" || apiErr.Reason != "not_submittable" ||
		!slices.Equal(apiErr.AvailableActions, []lifecycle.Action{lifecycle.ActionStart}) || !errors.Is(err, lifecycle.ErrConflict) {
		t.Fatalf("Submit(todo) = %#v", err)
	}

	reader := s.client(t, "lsk_0123456789abcdefghijklmnopqrstuvwxyz")
	if _, err := reader.ListTasks(ctx, lifecycle.ListTasksParams{}); !errors.Is(err, lifecycle.ErrUnauthorized) {
		t.Fatalf("ListTasks with an unknown key = %v", err)
	}
}

// TestRetryExecutesOnce loses the answer to a submit after the server has
// done the work: the client retries with the same Idempotency-Key and gets
// the first answer replayed, and the code host was asked once.
func TestRetryExecutesOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	ctx := t.Context()
	task, _ := c.CreateTask(ctx, taskParams("WEB-1"))
	if _, err := c.StartTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}

	var lost atomic.Int32
	s.setHook(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.HasSuffix(r.URL.Path, "/submit") && lost.Add(1) == 1 {
			next.ServeHTTP(httptest.NewRecorder(), r) // the work is done...
			panic(http.ErrAbortHandler)               // ...and the answer lost
		}
		next.ServeHTTP(w, r)
	})
	sub, err := c.Submit(ctx, task.ID, lifecycle.SubmitParams{Summary: "Done."})
	if err != nil {
		t.Fatalf("Submit after a lost answer: %v", err)
	}
	keys := s.idempotencyKeys("/tasks/" + task.ID + "/submit")
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("Idempotency-Keys sent: %q, want the same key twice", keys)
	}
	if sub.IdempotencyKey != keys[0] {
		t.Fatalf("submission key %q, sent %q", sub.IdempotencyKey, keys[0])
	}
	if n := s.adapter.Calls(memory.OpEnsure); n != 1 {
		t.Fatalf("the code host was asked %d times to open the pull request, want 1", n)
	}

	// A 503 with Retry-After before any work: retried, the ship executes once.
	if _, _, err := c.ReportChecks(ctx, task.ID, lifecycle.ReportChecksParams{HeadSHA: *sub.HeadSHA,
		Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PostReview(ctx, task.ID, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved}); err != nil {
		t.Fatal(err)
	}
	var busy atomic.Int32
	s.setHook(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.HasSuffix(r.URL.Path, "/ship") && busy.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"code":"unavailable","message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
	op, err := c.Ship(client.WithIdempotencyKey(ctx, "ship-WEB-1-attempt-1"), task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly,
		TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: *sub.HeadSHA})
	if err != nil {
		t.Fatalf("Ship after two 503s: %v", err)
	}
	if keys := s.idempotencyKeys("/tasks/" + task.ID + "/ship"); len(keys) != 3 || keys[0] != "ship-WEB-1-attempt-1" || keys[2] != keys[0] {
		t.Fatalf("ship keys: %q", keys)
	}
	testenv.WaitFor(t, 10*time.Second, "the ship operation to succeed", func() bool {
		if op, err = c.ShipOperation(ctx, op.OperationID); err != nil {
			t.Fatal(err)
		}
		return op.Status == lifecycle.ShipSucceeded
	})
	if n := s.adapter.Calls(memory.OpMerge); n != 1 {
		t.Fatalf("merged %d times, want 1", n)
	}
}

// TestNonIdempotentCallsAreNotRetried checks that a call without an
// Idempotency-Key is sent once, whatever the answer.
func TestNonIdempotentCallsAreNotRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client(t, s.admin)
	var calls atomic.Int32
	s.setHook(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	_, err := c.CreateTask(t.Context(), taskParams("WEB-1"))
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("CreateTask = %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("CreateTask sent %d times, want once", n)
	}
	calls.Store(0)
	if _, err := c.ListTasks(t.Context(), lifecycle.ListTasksParams{}); err == nil {
		t.Fatal("ListTasks succeeded against a failing server")
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("ListTasks sent %d times, want 1 + 4 retries", n)
	}
}

// TestNewChecksConfig checks the messages of a bad Config.
func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []client.Config{
		{APIKey: "lsk_x"},
		{BaseURL: "127.0.0.1:8080", APIKey: "lsk_x"},
		{BaseURL: "http://127.0.0.1:8080"},
		{BaseURL: "http://127.0.0.1:8080", APIKey: "lsk_x", MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		if _, err := client.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// TestBaseURLWithPrefix checks that paths are joined under a mount prefix.
func TestBaseURLWithPrefix(t *testing.T) {
	t.Parallel()
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.EscapedPath()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":{"id":"tsk_a"},"availableActions":[]}`))
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL + "/api/lifecycle/", APIKey: "lsk_x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Task(context.Background(), "tsk_a/../x"); err != nil {
		t.Fatal(err)
	}
	if got != "/api/lifecycle/tasks/tsk_a%2F..%2Fx" {
		t.Fatalf("path %q", got)
	}
}

// TestRetryWhileInProgress checks that a 409 request_in_progress is
// retried with the same key, and another conflict is not.
func TestRetryWhileInProgress(t *testing.T) {
	t.Parallel()
	var keys []string
	reason := "request_in_progress"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		w.Header().Set("Content-Type", "application/json")
		if len(keys) == 1 {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"conflict","message":"busy","details":{"reason":"` + reason + `"}}}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"data":{"operationId":"shp_a","status":"queued"},"availableActions":[]}`))
	}))
	defer srv.Close()
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "lsk_x", MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.Ship(t.Context(), "tsk_a", lifecycle.ShipParams{})
	if err != nil || op.OperationID != "shp_a" || len(keys) != 2 || keys[0] != keys[1] || keys[0] == "" {
		t.Fatalf("Ship = %+v, %v; keys %q", op, err, keys)
	}

	keys, reason = nil, "idempotency_key_reused"
	_, err = c.Ship(t.Context(), "tsk_a", lifecycle.ShipParams{})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Reason != reason || len(keys) != 1 {
		t.Fatalf("Ship after a reused key = %v, %d requests", err, len(keys))
	}
}
