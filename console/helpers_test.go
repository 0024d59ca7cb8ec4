package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// testBase is the public base URL the test Services are configured with.
const testBase = "https://tasks.example.com/api"

// epoch is the fake clock's start.
var epoch = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// env is a Service on a fresh SQLite store, its API mounted under /api of
// a host mux.
type env struct {
	t     testing.TB
	svc   *lifecycle.Service
	store *sqlite.Store
	// served is the Store the Service was given: store, or a wrapper of it.
	served lifecycle.Store
	clock  *fakeclock.Clock
	host   http.Handler
	admin  string      // a key with every scope
	logs   *syncWriter // the Service's log; read it with logText
}

// newEnv builds an env; mutate adjusts the Config before New.
func newEnv(t testing.TB, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := fakeclock.New(epoch)
	logs := &syncWriter{w: new(bytes.Buffer)}
	cfg := lifecycle.Config{Store: store, BaseURL: testBase, Clock: clock, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	for _, m := range mutate {
		m(&cfg)
	}
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	e := &env{t: t, svc: svc, store: store, served: cfg.Store, clock: clock, host: mux, logs: logs}
	e.admin = e.key(allScopes()...)
	return e
}

// newSubmitEnv builds an env whose project "web" has a live in-memory
// code host, which it returns.
func newSubmitEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, *memory.Adapter) {
	t.Helper()
	web := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	return newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: web}}
	}}, mutate...)...), web
}

// newShipEnv is a submit env with a deployer and never_require reviews,
// whose runner is started.
func newShipEnv(t *testing.T) (*env, *memory.Adapter) {
	t.Helper()
	e, web := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.Deployer = &fakeDeployer{}
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	e.start()
	return e, web
}

// shippableTask returns a task in review whose CI passed, and its head.
func (e *env) shippableTask(ident string) (id, sha string) {
	e.t.Helper()
	id = e.createTask(taskBody(ident))["id"].(string)
	e.call(request{method: "POST", path: "/tasks/" + id + "/start", key: e.admin}, http.StatusOK)
	sha = e.submitOK(id, "submit-"+ident, submitBody())["headSha"].(string)
	e.call(request{method: "POST", path: "/tasks/" + id + "/checks", key: e.admin, body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}},
	}}, http.StatusOK)
	return id, sha
}

// ship asks to ship a task and returns the operation's ID.
func (e *env) ship(taskID, key string, body any) string {
	e.t.Helper()
	out := e.call(request{method: "POST", path: "/tasks/" + taskID + "/ship", key: e.admin, body: body,
		header: http.Header{"Idempotency-Key": {key}}}, http.StatusAccepted)
	return out["data"].(map[string]any)["operationId"].(string)
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

// svcLogger returns a logger writing to the env's log.
func (e *env) svcLogger() *slog.Logger { return slog.New(slog.NewTextHandler(e.logs, nil)) }

// logText returns what has been logged so far.
func (e *env) logText() string {
	e.logs.mu.Lock()
	defer e.logs.mu.Unlock()
	return e.logs.w.(*bytes.Buffer).String()
}

// start starts e's Service and closes it when the test ends.
func (e *env) start() {
	e.t.Helper()
	startService(e.t, e.svc)
}

// startService starts svc and closes it when the test ends.
func startService(t testing.TB, svc *lifecycle.Service) {
	t.Helper()
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// fakeDeployer deploys everything at once, at the URL of its environment.
type fakeDeployer struct{}

func (*fakeDeployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	return lifecycle.Deployment{ID: "dep_" + req.OperationID, Environment: req.Environment, CommitSHA: req.CommitSHA,
		URL: "https://" + string(req.Environment) + ".example.com", DeployedAt: lifecycle.NewTimestamp(epoch)}, nil
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
	body         any    // sent as JSON
	header       http.Header
}

// call sends r through the host mux (so the path is under /api),
// checks the status and returns the JSON body.
func (e *env) call(r request, wantStatus int) map[string]any {
	e.t.Helper()
	var body io.Reader
	if r.body != nil {
		raw, err := json.Marshal(r.body)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	req := httptest.NewRequestWithContext(e.t.Context(), r.method, "/api"+r.path, body)
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	e.host.ServeHTTP(rec, req)
	if rec.Code != wantStatus {
		e.t.Fatalf("%s %s = %d, want %d; body: %s", r.method, r.path, rec.Code, wantStatus, rec.Body)
	}
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			e.t.Fatalf("%s %s body is not JSON: %v\n%s", r.method, r.path, err, rec.Body)
		}
	}
	return out
}

// errorCode returns error.code of an error body.
func errorCode(body map[string]any) string {
	obj, _ := body["error"].(map[string]any)
	code, _ := obj["code"].(string)
	return code
}

// decode decodes a recorded JSON body.
func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return out
}

// createTask creates a task through the API and returns its data.
func (e *env) createTask(body map[string]any) map[string]any {
	e.t.Helper()
	return e.call(request{method: "POST", path: "/tasks", key: e.admin, body: body}, http.StatusCreated)["data"].(map[string]any)
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

// submitOK submits with an idempotency key and expects 202, returning the
// submission.
func (e *env) submitOK(taskID, key string, body any) map[string]any {
	e.t.Helper()
	return e.call(request{method: "POST", path: "/tasks/" + taskID + "/submit", key: e.admin, body: body,
		header: http.Header{"Idempotency-Key": {key}}}, http.StatusAccepted)["data"].(map[string]any)
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

// newConsole returns the console of e's Service, closed when the test
// ends; mutate adjusts its Config.
func (e *env) newConsole(mutate ...func(*console.Config)) *console.Console {
	e.t.Helper()
	var cfg console.Config
	for _, m := range mutate {
		m(&cfg)
	}
	con, err := console.New(e.svc, e.served, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(con.Close)
	return con
}

// hostAuth is a host's Authenticator that accepts nobody.
type hostAuth struct{}

func (hostAuth) Authenticate(*http.Request) (lifecycle.Principal, error) {
	return lifecycle.Principal{}, lifecycle.ErrUnauthorized
}
