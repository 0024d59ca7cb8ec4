package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// env is a Service on a fresh SQLite store, mounted under /api of a host
// mux: internal/apitest's Env, which the root's tests use as it is
// (e.Svc, e.Admin, e.Call, ...). It is a type of this package only so
// that the root's own helpers (startedTask, and those of each test file)
// can be its methods. A test may swap e.Svc or e.Host: the Env's methods
// read its fields as they are now.
type env struct {
	*apitest.Env
}

// TestMain prints, once, which tests skipped for want of a tool, and how
// to install it (see internal/testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// newEnv builds an env whose API answers are checked against the OpenAPI
// document; mutate adjusts the Config before New.
func newEnv(t *testing.T, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	return &env{apitest.New(t, apitest.Options{WrapAPI: func(h http.Handler) http.Handler { return validating(t, h) }}, mutate...)}
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
	e.T.Helper()
	id := e.CreateTask(apitest.TaskBody(ident))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	return id
}

// submitTo posts a submission of taskID with key to h, the handler of
// another Service on e's store, as e's admin.
func (e *env) submitTo(h http.Handler, taskID, key string) *httptest.ResponseRecorder {
	e.T.Helper()
	req := apitest.NewRequest(e.T, "POST", "/tasks/"+taskID+"/submit", apitest.SubmitBody())
	req.Header.Set("Authorization", "Bearer "+e.Admin)
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// reconcile makes the Service read the host for a task now, as its
// reconciler does on a schedule.
func (e *env) reconcile(id string) {
	e.T.Helper()
	if err := e.Svc.Reconcile(e.T.Context(), id); err != nil {
		e.T.Fatalf("reconcile %s: %v", id, err)
	}
}

// createTask creates a task through the API as e's admin and returns it
// as the API's answer decoded.
func (e *env) createTask(body map[string]any) lifecycle.Task {
	e.T.Helper()
	return apitest.CallData[lifecycle.Task](e.Env, apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: body}, http.StatusCreated)
}

// task reads a task through the API as e's admin.
func (e *env) task(id string) lifecycle.Task {
	e.T.Helper()
	return apitest.CallData[lifecycle.Task](e.Env, apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusOK)
}

// submitOK submits taskID with key as e's admin, fails the test unless the
// answer is 202, and returns the submission.
func (e *env) submitOK(taskID, key string, body any) lifecycle.Submission {
	e.T.Helper()
	rec := e.Submit(taskID, key, body)
	apitest.Answer(e.T, "POST /tasks/"+taskID+"/submit", rec, http.StatusAccepted)
	return apitest.DecodeData[lifecycle.Submission](e.T, rec)
}

// reviewFeedback reads a task's review feedback through the API as e's
// admin.
func (e *env) reviewFeedback(taskID string) lifecycle.ReviewFeedback {
	e.T.Helper()
	return apitest.CallData[lifecycle.ReviewFeedback](e.Env, apitest.Request{Method: "GET", Path: "/tasks/" + taskID + "/review-feedback", Key: e.Admin}, http.StatusOK)
}

// newestEvent returns the newest event of taskID in the outbox, of one of
// types when any are given, and its data
// decoded as a T (lifecycle.TaskUpdatedData, TaskReviewedData, ...).
func newestEvent[T any](e *env, taskID string, types ...lifecycle.EventType) (lifecycle.Event, T) {
	e.T.Helper()
	evs, err := e.Store.Events(e.T.Context(), lifecycle.EventFilter{TaskID: taskID, Types: types, Limit: 10000})
	if err != nil {
		e.T.Fatal(err)
	}
	if len(evs) == 0 {
		e.T.Fatalf("task %s has no events", taskID)
	}
	ev := evs[len(evs)-1]
	var data T
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		e.T.Fatalf("data of event %s: %v", ev.ID, err)
	}
	return ev, data
}

// subscribe creates a webhook subscription through the API as e's admin
// and returns it.
func (e *env) subscribe(body map[string]any) lifecycle.Subscription {
	e.T.Helper()
	return apitest.CallData[lifecycle.Subscription](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: body,
		Header: http.Header{"Idempotency-Key": {"sub-" + strconv.FormatInt(time.Now().UnixNano(), 10)}}}, http.StatusCreated)
}

// waitDeliveries waits until subID has n delivery attempts recorded and
// returns them, newest first, as GET .../deliveries lists them.
func (e *env) waitDeliveries(subID string, n int) []lifecycle.Delivery {
	e.T.Helper()
	var list []lifecycle.Delivery
	apitest.WaitFor(e.T, func() bool {
		list = apitest.CallData[[]lifecycle.Delivery](e.Env, apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID + "/deliveries?limit=200", Key: e.Admin}, http.StatusOK)
		return len(list) >= n
	})
	return list
}
