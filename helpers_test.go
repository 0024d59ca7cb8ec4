package lifecycle_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// testBase is the public base URL the test Services are configured with.
const testBase = "https://tasks.example.com/api"

// epoch is the fake clock's start.
var epoch = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// env is a Service on a fresh SQLite store, mounted under /api of a host mux.
type env struct {
	t     *testing.T
	svc   *lifecycle.Service
	store *sqlite.Store
	clock *fakeclock.Clock
	host  http.Handler
	admin string      // a key with every scope
	logs  *syncWriter // the Service's log; read it with logText
}

// TestMain prints, once, which tests skipped for want of a tool, and how
// to install it (see internal/testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// newEnv builds an env; mutate adjusts the Config before New.
func newEnv(t *testing.T, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := fakeclock.New(epoch)
	logs := &syncWriter{w: new(bytes.Buffer)}
	cfg := lifecycle.Config{
		Store:   store,
		BaseURL: testBase,
		Clock:   clock,
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", validating(t, svc.Handler())))
	e := &env{t: t, svc: svc, store: store, clock: clock, host: mux, logs: logs}
	e.admin = e.key(allScopes()...)
	return e
}

func allScopes() []lifecycle.Scope {
	return []lifecycle.Scope{
		lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeShipWrite, lifecycle.ScopeEventsRead,
		lifecycle.ScopeWebhooksRead, lifecycle.ScopeWebhooksWrite, lifecycle.ScopeTasksAdmin, lifecycle.ScopeReviewsWrite,
		lifecycle.ScopeCIWrite, lifecycle.ScopeKeysAdmin,
	}
}

// syncWriter makes a buffer safe for concurrent log writes.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// key creates an API key with the given scopes and returns its plaintext.
func (e *env) key(scopes ...lifecycle.Scope) string {
	return e.keyAs(lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}, scopes...)
}

// keyAs creates an API key for actor with the given scopes.
func (e *env) keyAs(actor lifecycle.Actor, scopes ...lifecycle.Scope) string {
	e.t.Helper()
	_, plaintext, err := e.svc.CreateAPIKey(e.t.Context(), lifecycle.CreateAPIKeyParams{Name: "test", Scopes: scopes, Actor: actor})
	if err != nil {
		e.t.Fatal(err)
	}
	return plaintext
}

// request is one call to the API.
type request struct {
	method, path string
	key          string // "" sends no Authorization header
	body         any    // string and []byte are sent as they are; other values as JSON
	header       http.Header
}

// do sends r through the host mux (so the path is under /api).
func (e *env) do(r request) *httptest.ResponseRecorder {
	e.t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	req := httptest.NewRequestWithContext(e.t.Context(), r.method, "/api"+r.path, body)
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	e.host.ServeHTTP(rec, req)
	return rec
}

// call sends r, checks the status and decodes the JSON body into a map.
func (e *env) call(r request, wantStatus int) map[string]any {
	e.t.Helper()
	rec := e.do(r)
	if rec.Code != wantStatus {
		e.t.Fatalf("%s %s = %d, want %d; body: %s", r.method, r.path, rec.Code, wantStatus, rec.Body)
	}
	if rec.Body.Len() == 0 {
		return nil
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("%s %s Content-Type = %q, want application/json", r.method, r.path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		e.t.Fatalf("%s %s body is not a JSON object: %v\n%s", r.method, r.path, err, rec.Body)
	}
	return out
}

// errorCode returns error.code of an error body.
func errorCode(body map[string]any) string {
	obj, _ := body["error"].(map[string]any)
	code, _ := obj["code"].(string)
	return code
}

// createTask creates a task through the API and returns its data.
func (e *env) createTask(body map[string]any) map[string]any {
	e.t.Helper()
	out := e.call(request{method: "POST", path: "/tasks", key: e.admin, body: body}, http.StatusCreated)
	return out["data"].(map[string]any)
}

// taskBody is a valid POST /tasks body for identifier ident.
func taskBody(ident string) map[string]any {
	return map[string]any{
		"identifier":         ident,
		"title":              "Fix the login redirect",
		"description":        "Users land on a 404 after login.",
		"priority":           "high",
		"acceptanceCriteria": []string{"redirects to /home"},
		"links":              map[string]any{"issue": "https://issues.example.com/" + ident, "parentIssue": nil},
		"context":            map[string]any{"project": "web", "goal": "login works"},
		"labels":             []string{"frontend"},
	}
}

// events returns every event in the outbox.
func (e *env) events() []lifecycle.Event {
	e.t.Helper()
	evs, err := e.store.Events(e.t.Context(), lifecycle.EventFilter{Limit: 10000})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// adapters are the in-memory code hosts of a submit env: web is live for
// project "web"; artifact records artifact-mode submissions and trusts
// self-reported checks, as the go-git artifact adapter does.
type adapters struct {
	web, artifact *memory.Adapter
}

// newSubmitEnv builds an env whose project "web" has a live adapter.
func newSubmitEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, adapters) {
	t.Helper()
	a := adapters{
		web:      memory.New(memory.Config{Owner: "acme", Repo: "web"}),
		artifact: memory.New(memory.Config{Owner: "local", Repo: "web", CountSelfReported: true}),
	}
	e := newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: a.web}}
		c.ArtifactAdapter = a.artifact
	}}, mutate...)...)
	return e, a
}

// startedTask creates a task of project web and starts it.
func (e *env) startedTask(ident string) string {
	e.t.Helper()
	id := e.createTask(taskBody(ident))["id"].(string)
	e.call(request{method: "POST", path: "/tasks/" + id + "/start", key: e.admin}, http.StatusOK)
	return id
}

// submit posts a submission with an idempotency key.
func (e *env) submit(taskID, key string, body any) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(request{method: "POST", path: "/tasks/" + taskID + "/submit", key: e.admin, body: body,
		header: http.Header{"Idempotency-Key": {key}}})
}

// submitOK submits and expects 202, returning the submission.
func (e *env) submitOK(taskID, key string, body any) map[string]any {
	e.t.Helper()
	rec := e.submit(taskID, key, body)
	if rec.Code != http.StatusAccepted {
		e.t.Fatalf("submit %s = %d, want 202: %s", taskID, rec.Code, rec.Body)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		e.t.Fatal(err)
	}
	return out["data"].(map[string]any)
}

// task reads a task's data.
func (e *env) task(id string) map[string]any {
	e.t.Helper()
	return e.call(request{method: "GET", path: "/tasks/" + id, key: e.admin}, http.StatusOK)["data"].(map[string]any)
}

// eventsOf returns the events of one task, decoded.
func (e *env) eventsOf(taskID string) []map[string]any {
	e.t.Helper()
	evs, err := e.store.Events(e.t.Context(), lifecycle.EventFilter{TaskID: taskID, Limit: 10000})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		var m map[string]any
		raw, _ := json.Marshal(ev)
		if err := json.Unmarshal(raw, &m); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// httptestRecorder is the recorder e.do returns.
type httptestRecorder = httptest.ResponseRecorder

// decode decodes a recorded JSON body.
func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return out
}

// svcLogger returns a logger writing to the env's log.
func (e *env) svcLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.logs, nil))
}

// logText returns what has been logged so far; it is safe while Services
// still log.
func (e *env) logText() string {
	e.logs.mu.Lock()
	defer e.logs.mu.Unlock()
	return e.logs.w.(*bytes.Buffer).String()
}

// reconcile makes the Service read the host for a task now, as its
// reconciler does on a schedule.
func (e *env) reconcile(id string) {
	e.t.Helper()
	if err := e.svc.Reconcile(e.t.Context(), id); err != nil {
		e.t.Fatalf("reconcile %s: %v", id, err)
	}
}
