// Package apitest is the test environment the tests of the root package
// (package lifecycle_test) and of package console build on: a Service on
// a fresh SQLite store with a fake clock, its API mounted under /api of a
// host mux, keys, a request helper that decodes the answer, the bodies
// the tests send, and a TLS webhook receiver.
//
// Only tests import it; the root package's own code never does.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// BaseURL is the public base URL the test Services are configured with.
const BaseURL = "https://tasks.example.com/api"

// Epoch is where the fake clock starts.
var Epoch = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Env is a Service on a fresh SQLite store with a fake clock, its API
// mounted under /api of a host mux, and a key with every scope.
type Env struct {
	T     testing.TB
	Svc   *lifecycle.Service
	Store *sqlite.Store
	// Served is the Store the Service was given: Store, or the wrapper of
	// it that a Config mutation put in its place.
	Served lifecycle.Store
	Clock  *fakeclock.Clock
	// Host serves the Service's API under /api.
	Host  http.Handler
	Admin string     // a key with every scope
	Logs  *LogBuffer // the Service's log
}

// Options adjust what New builds.
type Options struct {
	// WrapAPI, when not nil, wraps the Service's API handler before it is
	// mounted, as the root's tests check each answer against the OpenAPI
	// document.
	WrapAPI func(http.Handler) http.Handler
}

// New builds an Env; each mutate adjusts the Config before lifecycle.New.
func New(t testing.TB, opts Options, mutate ...func(*lifecycle.Config)) *Env {
	t.Helper()
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := fakeclock.New(Epoch)
	logs := &LogBuffer{}
	cfg := lifecycle.Config{
		Store:   store,
		BaseURL: BaseURL,
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
	api := svc.Handler()
	if opts.WrapAPI != nil {
		api = opts.WrapAPI(api)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	e := &Env{T: t, Svc: svc, Store: store, Served: cfg.Store, Clock: clock, Host: mux, Logs: logs}
	e.Admin = e.Key(AllScopes()...)
	return e
}

// AllScopes lists every scope a key can hold.
func AllScopes() []lifecycle.Scope { return lifecycle.Scopes() }

// Key creates an API key of a user with the given scopes and returns its
// plaintext.
func (e *Env) Key(scopes ...lifecycle.Scope) string {
	e.T.Helper()
	return e.KeyAs(lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}, scopes...)
}

// KeyAs creates an API key for actor with the given scopes and returns its
// plaintext.
func (e *Env) KeyAs(actor lifecycle.Actor, scopes ...lifecycle.Scope) string {
	e.T.Helper()
	_, plaintext, err := e.Svc.CreateAPIKey(e.T.Context(), lifecycle.CreateAPIKeyParams{Name: "test", Scopes: scopes, Actor: actor})
	if err != nil {
		e.T.Fatal(err)
	}
	return plaintext
}

// Request is one call to the API.
type Request struct {
	Method, Path string // Path is below /api
	Key          string // "" sends no Authorization header
	Body         any    // string and []byte are sent as they are; other values as JSON
	Header       http.Header
}

// Do sends r through the host mux (so the path is under /api) and returns
// the recorded answer.
func (e *Env) Do(r Request) *httptest.ResponseRecorder {
	e.T.Helper()
	req := NewRequest(e.T, r.Method, "/api"+r.Path, r.Body)
	if r.Key != "" {
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	e.Host.ServeHTTP(rec, req)
	return rec
}

// NewRequest is a request for a handler under test, bound to the test's
// context: body nil sends none, string and []byte are sent as they are,
// other values as JSON; a request with a body says Content-Type
// application/json.
func NewRequest(t testing.TB, method, target string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequestWithContext(t.Context(), method, target, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// Call sends r, fails the test unless the answer has wantStatus, and
// returns the answer's JSON object (nil for an empty body).
func (e *Env) Call(r Request, wantStatus int) map[string]any {
	e.T.Helper()
	return Answer(e.T, r.Method+" "+r.Path, e.Do(r), wantStatus)
}

// Answer fails t unless rec, the answer to the request what names, has
// wantStatus and, when it has a body, a JSON object with Content-Type
// application/json; it returns that object (nil for an empty body).
func Answer(t testing.TB, what string, rec *httptest.ResponseRecorder, wantStatus int) map[string]any {
	t.Helper()
	if rec.Code != wantStatus {
		t.Fatalf("%s = %d, want %d; body: %s", what, rec.Code, wantStatus, rec.Body)
	}
	if rec.Body.Len() == 0 {
		return nil
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s Content-Type = %q, want application/json", what, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s body is not a JSON object: %v\n%s", what, err, rec.Body)
	}
	return out
}

// Decode decodes a recorded JSON object, failing t when it is not one.
func Decode(t testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return out
}

// ErrorCode returns error.code of an error body ("" when it has none).
func ErrorCode(body map[string]any) string {
	obj, _ := body["error"].(map[string]any)
	code, _ := obj["code"].(string)
	return code
}

// TaskBody is a valid POST /tasks body of project "web" for identifier
// ident.
func TaskBody(ident string) map[string]any {
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

// SubmitBody is a valid submission.
func SubmitBody() map[string]any {
	return map[string]any{
		"summary": "Fixed the redirect and added a regression test.",
		"pullRequest": map[string]any{
			"title": "Fix login redirect", "body": "Keeps the query string.", "draft": false,
			"reviewers": []string{"octocat", "hubot"},
		},
		"checks": []map[string]any{{"name": "unit", "status": "passed"}, {"name": "lint", "status": "skipped"}},
		"notes":  "The old code dropped the query string.",
	}
}

// ShipBody is a ship request.
func ShipBody(mode, env, sha string) map[string]any {
	return map[string]any{"mode": mode, "targetEnvironment": env, "expectedHeadSha": sha}
}

// CreateTask creates a task through the API and returns its data.
func (e *Env) CreateTask(body map[string]any) map[string]any {
	e.T.Helper()
	return e.Call(Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: body}, http.StatusCreated)["data"].(map[string]any)
}

// Task reads a task's data through the API.
func (e *Env) Task(id string) map[string]any {
	e.T.Helper()
	return e.Call(Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
}

// Submit posts a submission with an idempotency key and returns the
// recorded answer.
func (e *Env) Submit(taskID, key string, body any) *httptest.ResponseRecorder {
	e.T.Helper()
	return e.Do(Request{Method: "POST", Path: "/tasks/" + taskID + "/submit", Key: e.Admin, Body: body,
		Header: http.Header{"Idempotency-Key": {key}}})
}

// SubmitOK submits, fails the test unless the answer is 202, and returns
// the submission.
func (e *Env) SubmitOK(taskID, key string, body any) map[string]any {
	e.T.Helper()
	rec := e.Submit(taskID, key, body)
	if rec.Code != http.StatusAccepted {
		e.T.Fatalf("submit %s = %d, want 202: %s", taskID, rec.Code, rec.Body)
	}
	return Decode(e.T, rec)["data"].(map[string]any)
}

// Events returns every event in the outbox.
func (e *Env) Events() []lifecycle.Event {
	e.T.Helper()
	evs, err := e.Store.Events(e.T.Context(), lifecycle.EventFilter{Limit: 10000})
	if err != nil {
		e.T.Fatal(err)
	}
	return evs
}

// EventsOf returns the events of one task, decoded as their JSON.
func (e *Env) EventsOf(taskID string) []map[string]any {
	e.T.Helper()
	evs, err := e.Store.Events(e.T.Context(), lifecycle.EventFilter{TaskID: taskID, Limit: 10000})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		var m map[string]any
		raw, _ := json.Marshal(ev)
		if err := json.Unmarshal(raw, &m); err != nil {
			e.T.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// Subscribe creates a webhook subscription through the API and returns its
// record.
func (e *Env) Subscribe(body map[string]any) map[string]any {
	e.T.Helper()
	out := e.Call(Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: body,
		Header: http.Header{"Idempotency-Key": {"sub-" + strconv.FormatInt(time.Now().UnixNano(), 10)}}}, http.StatusCreated)
	return out["data"].(map[string]any)
}

// SubBody is a subscription body for url with every event type, signed
// with secret.
func SubBody(url, secret string) map[string]any {
	return map[string]any{
		"url":        url,
		"eventTypes": []string{"task.updated", "task.reviewed", "task.shipped", "task.awaiting_user", "task.merge_queue", "task.ci_failed"},
		"secret":     secret,
	}
}

// Deliveries lists the delivery attempts of a subscription, newest first.
func (e *Env) Deliveries(subID string) []map[string]any {
	e.T.Helper()
	out := e.Call(Request{Method: "GET", Path: "/event-subscriptions/" + subID + "/deliveries?limit=200", Key: e.Admin}, http.StatusOK)
	var list []map[string]any
	for _, d := range out["data"].([]any) {
		list = append(list, d.(map[string]any))
	}
	return list
}

// WaitDeliveries waits until subID has n attempts recorded and returns
// them.
func (e *Env) WaitDeliveries(subID string, n int) []map[string]any {
	e.T.Helper()
	var list []map[string]any
	WaitFor(e.T, func() bool {
		list = e.Deliveries(subID)
		return len(list) >= n
	})
	return list
}

// Serve serves h on a loopback server behind lifecycle.JSONErrorListener,
// as a host program would, until the test ends, and returns its address.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Second}
	go srv.Serve(lifecycle.JSONErrorListener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// WaitFor polls cond for up to five seconds of real time, failing t when
// it does not come to hold.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 5*time.Second, "the condition", cond)
}

// Start starts e's Service and closes it when the test ends.
func (e *Env) Start() {
	e.T.Helper()
	StartService(e.T, e.T.Context(), e.Svc)
}

// StartService starts svc with ctx, whose values reach its background
// work, and closes it when the test ends.
func StartService(t testing.TB, ctx context.Context, svc *lifecycle.Service) {
	t.Helper()
	if err := svc.Start(ctx); err != nil {
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

// Logger returns a logger writing to the Env's log, for a second Service
// or a helper that should log where the Service does.
func (e *Env) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.Logs, nil))
}

// LogText returns what has been logged so far; it is safe while Services
// still log.
func (e *Env) LogText() string {
	return e.Logs.String()
}

// LogBuffer is a buffer that goroutines may write to while another reads
// it, as a Service's log or a child process's output is.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns what has been written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// UnknownKey returns a well-formed API key of no one, different for each n.
func UnknownKey(n int) string {
	return "lsk_" + strings.Repeat("q", 36) + strconv.Itoa(1000+n)
}

// Limited checks that rec is a 429 rate_limited asking to retry after
// wantRetry seconds.
func Limited(t testing.TB, what string, rec *httptest.ResponseRecorder, wantRetry int) {
	t.Helper()
	if rec.Code != http.StatusTooManyRequests || ErrorCode(Decode(t, rec)) != "rate_limited" || rec.Header().Get("Retry-After") != strconv.Itoa(wantRetry) {
		t.Errorf("%s: %d Retry-After %q %s, want 429 rate_limited after %d s", what, rec.Code, rec.Header().Get("Retry-After"), rec.Body, wantRetry)
	}
}

// CallAs sends r through e, fails the test unless the answer has
// wantStatus, Content-Type application/json and a JSON object, and returns
// that object decoded as a T: a struct naming the members the test reads,
// such as struct{ Data lifecycle.Task; AvailableActions []lifecycle.Action }.
// Members T does not name are ignored; the root's tests check the whole
// answer against the OpenAPI document.
func CallAs[T any](e *Env, r Request, wantStatus int) T {
	e.T.Helper()
	rec := e.Do(r)
	Answer(e.T, r.Method+" "+r.Path, rec, wantStatus)
	return DecodeAs[T](e.T, rec)
}

// CallData is CallAs for the data member alone: it returns the answer's
// {"data": ...} decoded as a T, such as lifecycle.Task or
// lifecycle.Submission, the types the API encodes.
func CallData[T any](e *Env, r Request, wantStatus int) T {
	e.T.Helper()
	return CallAs[Data[T]](e, r, wantStatus).Data
}

// Data is an answer {"data": ...} whose data is a T.
type Data[T any] struct {
	Data T `json:"data"`
}

// DecodeAs decodes a recorded JSON answer as a T, failing t when it does
// not decode.
func DecodeAs[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q does not decode as %T: %v", rec.Body, out, err)
	}
	return out
}

// DecodeData decodes the data member of a recorded answer {"data": ...}
// as a T, failing t when it does not decode.
func DecodeData[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	return DecodeAs[Data[T]](t, rec).Data
}
