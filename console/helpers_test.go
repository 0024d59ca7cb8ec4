package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// env is internal/apitest's Env (a Service on a fresh SQLite store with a
// fake clock, its API under /api of a host mux) with what the console's
// tests add.
type env struct{ *apitest.Env }

// newEnv builds an env; mutate adjusts the Config before New.
func newEnv(t testing.TB, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	return &env{apitest.New(t, apitest.Options{}, mutate...)}
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
	e.Start()
	return e, web
}

// shippableTask returns a task in review whose CI passed, and its head.
func (e *env) shippableTask(ident string) (id, sha string) {
	e.T.Helper()
	id = e.CreateTask(apitest.TaskBody(ident))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	sha = e.SubmitOK(id, "submit-"+ident, apitest.SubmitBody())["headSha"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}},
	}}, http.StatusOK)
	return id, sha
}

// ship asks to ship a task and returns the operation's ID.
func (e *env) ship(taskID, key string, body any) string {
	e.T.Helper()
	out := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + taskID + "/ship", Key: e.Admin, Body: body,
		Header: http.Header{"Idempotency-Key": {key}}}, http.StatusAccepted)
	return out["data"].(map[string]any)["operationId"].(string)
}

// fakeDeployer deploys everything at once, at the URL of its environment.
type fakeDeployer struct{}

func (*fakeDeployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	return lifecycle.Deployment{ID: "dep_" + req.OperationID, Environment: req.Environment, CommitSHA: req.CommitSHA,
		URL: "https://" + string(req.Environment) + ".example.com", DeployedAt: lifecycle.NewTimestamp(apitest.Epoch)}, nil
}

// errorCode returns error.code of an error body.
func errorCode(body map[string]any) string { return apitest.ErrorCode(body) }

// decode decodes a recorded JSON body.
func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	return apitest.Decode(t, rec)
}

// newConsole returns the console of e's Service, closed when the test
// ends; mutate adjusts its Config.
func (e *env) newConsole(mutate ...func(*console.Config)) *console.Console {
	e.T.Helper()
	var cfg console.Config
	for _, m := range mutate {
		m(&cfg)
	}
	con, err := console.New(e.Svc, e.Served, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(con.Close)
	return con
}

// hostAuth is a host's Authenticator that accepts nobody.
type hostAuth struct{}

func (hostAuth) Authenticate(*http.Request) (lifecycle.Principal, error) {
	return lifecycle.Principal{}, lifecycle.ErrUnauthorized
}
