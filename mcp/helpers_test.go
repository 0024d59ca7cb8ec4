package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// TestMain prints, once, which tests skipped for want of a tool.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// env is a started Service on a fresh SQLite store with a fake clock (see
// apitest), its API under /api and its MCP handler at /mcp of one
// loopback HTTP server: project web has an in-memory code host, artifact
// submissions trust their self-reported checks, and every submission
// needs an approval.
type env struct {
	t   *testing.T
	api *apitest.Env
	h   *mcp.Handler
	srv *httptest.Server
	web *memory.Adapter
}

func newEnv(t *testing.T, cfg mcp.Config, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	web := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	artifact := memory.New(memory.Config{Owner: "local", Repo: "web", CountSelfReported: true})
	a := apitest.New(t, apitest.Options{}, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: web}}
		c.ArtifactAdapter = artifact
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	}}, mutate...)...)
	a.Start()
	h, err := mcp.NewHandler(a.Svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", a.Svc.Handler()))
	mux.Handle("/mcp", h)
	srv := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(srv.Close)
	return &env{t: t, api: a, h: h, srv: srv, web: web}
}

// bearer adds an API key to every request it sends.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// connect opens a session of the SDK's client with key, closed at the
// test's end; updated, when not nil, receives the URI of each resource
// updated notification.
func (e *env) connect(key string, updated chan<- string) *sdk.ClientSession {
	e.t.Helper()
	return e.connectVia(bearer{key, http.DefaultTransport}, updated)
}

// connectVia is connect over a transport of the test's.
func (e *env) connectVia(rt http.RoundTripper, updated chan<- string) *sdk.ClientSession {
	e.t.Helper()
	opts := &sdk.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI }
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "lifecycle-test", Version: "1"}, opts)
	cs, err := client.Connect(e.t.Context(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// result is a tool's answer, decoded.
type result struct {
	isError bool
	text    string
	data    map[string]any // the structured content, or the error body
}

// call calls a tool and decodes its answer.
func (e *env) call(cs *sdk.ClientSession, name string, args map[string]any) result {
	e.t.Helper()
	res, err := cs.CallTool(e.t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	return decodeResult(e.t, name, res)
}

func decodeResult(t *testing.T, name string, res *sdk.CallToolResult) result {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents, want 1", name, len(res.Content))
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T, want text", name, res.Content[0])
	}
	out := result{isError: res.IsError, text: text.Text}
	if err := json.Unmarshal([]byte(text.Text), &out.data); err != nil {
		t.Fatalf("%s: the text is not a JSON object: %v\n%s", name, err, text.Text)
	}
	if !res.IsError {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var structured map[string]any
		if err := json.Unmarshal(raw, &structured); err != nil || !jsonEqual(structured, out.data) {
			t.Fatalf("%s: the structured content differs from the text:\n%s\n%s", name, raw, text.Text)
		}
	}
	return out
}

// ok calls a tool that must succeed and returns its structured content.
func (e *env) ok(cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	e.t.Helper()
	r := e.call(cs, name, args)
	if r.isError {
		e.t.Fatalf("%s(%v) failed: %s", name, args, r.text)
	}
	return r.data
}

// fails calls a tool that must fail with code and returns the error object.
func (e *env) fails(cs *sdk.ClientSession, name string, args map[string]any, code string) map[string]any {
	e.t.Helper()
	r := e.call(cs, name, args)
	if !r.isError {
		e.t.Fatalf("%s(%v) succeeded, want error %s: %s", name, args, code, r.text)
	}
	obj, _ := r.data["error"].(map[string]any)
	if obj == nil || obj["code"] != code {
		e.t.Fatalf("%s(%v) = %s, want error code %s", name, args, r.text, code)
	}
	return obj
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// createTask creates a task of project web through the API; it returns
// its ID.
func (e *env) createTask(ident string) string {
	e.t.Helper()
	return e.api.CreateTask(apitest.TaskBody(ident))["id"].(string)
}

// review posts a review of a task as a reviewer, through the API.
func (e *env) review(taskID, outcome string) {
	e.t.Helper()
	key := e.api.KeyAs(lifecycle.Actor{ID: "rev-1", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	e.api.Call(apitest.Request{Method: "POST", Path: "/tasks/" + taskID + "/reviews", Key: key,
		Body: map[string]any{"outcome": outcome, "body": "Reviewed: " + outcome}}, http.StatusCreated)
}

// lastSequence returns the sequence of a task's last event.
func (e *env) lastSequence(taskID string) int64 {
	e.t.Helper()
	evs, err := e.api.Svc.TaskEventsAfter(e.t.Context(), taskID, 0, 1000)
	if err != nil || len(evs) == 0 {
		e.t.Fatalf("events of %s: %v, %v", taskID, evs, err)
	}
	return evs[len(evs)-1].Sequence
}

// strs turns a decoded JSON array into strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// within fails the test unless ch receives within 10 seconds.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}

// contains reports whether s holds every one of subs.
func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
