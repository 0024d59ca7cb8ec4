package lifecycle_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// testBase is the public base URL the test Services are configured with.
const testBase = apitest.BaseURL

// epoch is the fake clock's start.
var epoch = apitest.Epoch

// env is a Service on a fresh SQLite store, mounted under /api of a host
// mux: internal/apitest's Env, under the names the root's tests use. Its
// fields are the truth (a test may swap svc or host); api lends them to
// apitest.
type env struct {
	t     *testing.T
	svc   *lifecycle.Service
	store *sqlite.Store
	clock *fakeclock.Clock
	host  http.Handler
	admin string             // a key with every scope
	logs  *apitest.LogBuffer // the Service's log; read it with logText
}

// TestMain prints, once, which tests skipped for want of a tool, and how
// to install it (see internal/testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// newEnv builds an env whose API answers are checked against the OpenAPI
// document; mutate adjusts the Config before New.
func newEnv(t *testing.T, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	a := apitest.New(t, apitest.Options{WrapAPI: func(h http.Handler) http.Handler { return validating(t, h) }}, mutate...)
	return &env{t: t, svc: a.Svc, store: a.Store, clock: a.Clock, host: a.Host, admin: a.Admin, logs: a.Logs}
}

// api is the shared Env over e's fields as they are now.
func (e *env) api() *apitest.Env {
	return &apitest.Env{T: e.t, Svc: e.svc, Store: e.store, Served: e.store, Clock: e.clock, Host: e.host, Admin: e.admin, Logs: e.logs}
}

func allScopes() []lifecycle.Scope { return apitest.AllScopes() }

// key creates an API key with the given scopes and returns its plaintext.
func (e *env) key(scopes ...lifecycle.Scope) string {
	e.t.Helper()
	return e.api().Key(scopes...)
}

// keyAs creates an API key for actor with the given scopes.
func (e *env) keyAs(actor lifecycle.Actor, scopes ...lifecycle.Scope) string {
	e.t.Helper()
	return e.api().KeyAs(actor, scopes...)
}

// request is one call to the API (see apitest.Request).
type request struct {
	method, path string
	key          string // "" sends no Authorization header
	body         any    // string and []byte are sent as they are; other values as JSON
	header       http.Header
}

// do sends r through the host mux (so the path is under /api).
func (e *env) do(r request) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.api().Do(apitest.Request{Method: r.method, Path: r.path, Key: r.key, Body: r.body, Header: r.header})
}

// call sends r, checks the status and decodes the JSON body into a map.
func (e *env) call(r request, wantStatus int) map[string]any {
	e.t.Helper()
	return e.api().Call(apitest.Request{Method: r.method, Path: r.path, Key: r.key, Body: r.body, Header: r.header}, wantStatus)
}

// errorCode returns error.code of an error body.
func errorCode(body map[string]any) string { return apitest.ErrorCode(body) }

// createTask creates a task through the API and returns its data.
func (e *env) createTask(body map[string]any) map[string]any {
	e.t.Helper()
	return e.api().CreateTask(body)
}

// taskBody is a valid POST /tasks body for identifier ident.
func taskBody(ident string) map[string]any { return apitest.TaskBody(ident) }

// events returns every event in the outbox.
func (e *env) events() []lifecycle.Event {
	e.t.Helper()
	return e.api().Events()
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
	return e.api().Submit(taskID, key, body)
}

// submitTo posts a submission of taskID with key to h, the handler of
// another Service on e's store, as e's admin.
func (e *env) submitTo(h http.Handler, taskID, key string) *httptest.ResponseRecorder {
	e.t.Helper()
	req := apitest.NewRequest(e.t, "POST", "/tasks/"+taskID+"/submit", submitBody())
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// submitOK submits and expects 202, returning the submission.
func (e *env) submitOK(taskID, key string, body any) map[string]any {
	e.t.Helper()
	return e.api().SubmitOK(taskID, key, body)
}

// task reads a task's data.
func (e *env) task(id string) map[string]any {
	e.t.Helper()
	return e.api().Task(id)
}

// eventsOf returns the events of one task, decoded.
func (e *env) eventsOf(taskID string) []map[string]any {
	e.t.Helper()
	return e.api().EventsOf(taskID)
}

// httptestRecorder is the recorder e.do returns.
type httptestRecorder = httptest.ResponseRecorder

// decode decodes a recorded JSON body.
func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	return apitest.Decode(t, rec)
}

// svcLogger returns a logger writing to the env's log.
func (e *env) svcLogger() *slog.Logger { return e.api().Logger() }

// logText returns what has been logged so far; it is safe while Services
// still log.
func (e *env) logText() string { return e.logs.String() }

// reconcile makes the Service read the host for a task now, as its
// reconciler does on a schedule.
func (e *env) reconcile(id string) {
	e.t.Helper()
	if err := e.svc.Reconcile(e.t.Context(), id); err != nil {
		e.t.Fatalf("reconcile %s: %v", id, err)
	}
}
