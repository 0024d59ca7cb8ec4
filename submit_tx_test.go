package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// txCountingStore counts the durable and the relaxed transactions run
// through it.
type txCountingStore struct {
	lifecycle.Store
	relaxer          lifecycle.RelaxedUpdater
	durable, relaxed atomic.Int64
}

func (c *txCountingStore) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	c.durable.Add(1)
	return c.Store.Update(ctx, fn)
}

func (c *txCountingStore) UpdateRelaxed(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	c.relaxed.Add(1)
	return c.relaxer.UpdateRelaxed(ctx, fn)
}

// TestSubmitTransactions counts the Store transactions of a submit through
// the handler with the in-memory adapter: the key's reservation, which
// need not wait for the disk, and the one durable commit that accepts the
// submission and records the answer. A replay of the same key reads the
// record in one relaxed transaction and commits nothing durable.
func TestSubmitTransactions(t *testing.T) {
	base, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "tx.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	store := &txCountingStore{Store: base, relaxer: base}
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler),
		Adapters: []lifecycle.AdapterBinding{{Adapter: memory.New(memory.Config{})}}})
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "tx", Scopes: apitest.AllScopes(), Actor: lifecycle.Actor{ID: "tx", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	web := "web"
	task, err := svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "TX-1", Title: "Fix the login redirect",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/x"}, Context: lifecycle.TaskContext{Project: &web}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.StartTask(t.Context(), task.ID, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "tx", Role: lifecycle.RoleAgent}}); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{
		"summary": "Fixed the redirect and added a regression test.",
		"checks":  []map[string]any{{"name": "unit", "status": "passed"}},
	})
	submit := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/tasks/"+task.ID+"/submit", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+admin)
		r.Header.Set("Idempotency-Key", "tx-submit-1")
		w := httptest.NewRecorder()
		svc.Handler().ServeHTTP(w, r)
		return w
	}
	for i, want := range []struct {
		status, durable, relaxed int64
	}{{http.StatusAccepted, 1, 1}, {http.StatusAccepted, 0, 1}} {
		store.durable.Store(0)
		store.relaxed.Store(0)
		if w := submit(); int64(w.Code) != want.status {
			t.Fatalf("submit %d: status %d: %s", i+1, w.Code, w.Body)
		}
		if d, r := store.durable.Load(), store.relaxed.Load(); d != want.durable || r != want.relaxed {
			t.Errorf("submit %d: %d durable and %d relaxed transactions, want %d and %d", i+1, d, r, want.durable, want.relaxed)
		}
	}
}

// A resubmission that reuses a pull request with a host review records the
// review in the new submission, in the transaction that accepts it, and
// decides from it (the accepting transaction reads the new submission's
// reviews from the Store once it recorded some).
func TestResubmitTakesOverHostReviews(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t) // ReviewRules{}: github_rules
	id, _ := e.submittedTask("ENG-1")
	a.web.SetReviewDecision(1, lifecycle.DecisionChangesRequested)
	a.web.AddReview(1, lifecycle.HostReview{Reviewer: "octocat", Outcome: lifecycle.ReviewChangesRequested, Body: "Add a test", SubmittedAt: apitest.Epoch})
	e.hostEvent(lifecycle.ProviderReviewSubmitted, 1, "review-1")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: map[string]any{"summary": "Added the test."},
		Header: http.Header{"Idempotency-Key": {"resubmit-1"}}}, http.StatusAccepted)
	task := e.Task(id)
	fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if got := task["availableActions"]; !hasString(got, "start") {
		t.Errorf("actions after a resubmission to a pull request with changes requested = %v, want start offered", got)
	}
	reviews, _ := fb["reviews"].([]any)
	if fb["decision"] != "changes_requested" || len(reviews) != 1 || reviews[0].(map[string]any)["reviewer"].(map[string]any)["id"] != "octocat" {
		t.Errorf("review feedback of the resubmission = %v, want changes_requested with octocat's review taken over", fb)
	}
}
