package lifecycle_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// These tests cover the API a host builds on beside the HTTP API: serving
// it with another Authenticator, principals whose credentials end, keys
// authenticated from elsewhere than a header, and the reads for views.

// endingAuth authenticates "Authorization: Bearer <name>" as the session
// name, whose credential ends when end(name) is called or at expires.
type endingAuth struct {
	mu      sync.Mutex
	done    map[string]chan struct{}
	expires time.Time
	note    string
	scopes  []lifecycle.Scope
}

func (a *endingAuth) Authenticate(r *http.Request) (lifecycle.Principal, error) {
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return lifecycle.Principal{}, lifecycle.ErrUnauthorized
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done[name] == nil {
		a.done[name] = make(chan struct{})
	}
	return lifecycle.Principal{ID: "session:" + name, Actor: lifecycle.Actor{ID: name, Role: lifecycle.RoleUser}, Scopes: a.scopes,
		Done: a.done[name], ExpiresAt: a.expires, EndNote: a.note}, nil
}

func (a *endingAuth) end(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.done[name])
}

// HandlerWith serves the API to the principals of another Authenticator:
// their scopes decide, and an event stream ends, with EndNote as its last
// comment, when the principal's Done is closed or its ExpiresAt passes.
func TestHandlerWithEndsStreamsWithTheCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	auth := &endingAuth{done: map[string]chan struct{}{}, expires: apitest.Epoch.Add(time.Hour), scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead}}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", e.Svc.HandlerWith(auth)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, cancel := openStream(t, srv, "", "", nil)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a stream without credentials: %d, want 401", resp.StatusCode)
	}
	resp, cancel = openStream(t, srv, "alice", "", nil)
	defer cancel()
	resp.Body.Close()
	// GET /tasks needs tasks:read, which the principal lacks.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer alice")
	if got, err := srv.Client().Do(req); err != nil || got.StatusCode != http.StatusForbidden {
		t.Errorf("GET /tasks without tasks:read: %v %v, want 403", got.StatusCode, err)
	} else {
		got.Body.Close()
	}

	ended := func(c *sseConn, want string) {
		t.Helper()
		if b := c.next(); b != want {
			t.Fatalf("last block %q, want %q", b, want)
		}
		if err := c.ended(); !errors.Is(err, io.EOF) {
			t.Fatalf("stream ended with %v", err)
		}
	}
	t.Run("done", func(t *testing.T) {
		c := stream(t, srv, "bob", "", nil)
		auth.end("bob")
		ended(c, ": ended: the credential of this stream ended; the stream ends\n\n")
	})
	t.Run("note", func(t *testing.T) {
		auth.mu.Lock()
		auth.note = "signed out: the session of this stream\nended"
		auth.mu.Unlock()
		c := stream(t, srv, "carol", "", nil)
		auth.end("carol")
		ended(c, ": signed out: the session of this stream ended\n\n")
	})
	t.Run("expired", func(t *testing.T) {
		c := stream(t, srv, "dave", "", nil)
		e.Clock.Advance(time.Hour)
		b := c.next()
		for strings.HasPrefix(b, ": keepalive") { // the heartbeat is due too
			b = c.next()
		}
		if !strings.HasPrefix(b, ": signed out") {
			t.Fatalf("last block %q", b)
		}
		if err := c.ended(); !errors.Is(err, io.EOF) {
			t.Fatalf("stream ended with %v", err)
		}
	})
}

// AuthenticateKey and AuthenticateKeyHash find a key of the Service as a
// request bearing it would, with a Done closed when it is revoked; a
// malformed, unknown or revoked key, or a Service without keys of its
// own, is refused as unauthorized.
func TestAuthenticateKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	key := e.KeyAs(lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead)
	p, err := e.Svc.AuthenticateKey(ctx, key)
	if err != nil || p.Actor.ID != "ops" || len(p.Scopes) != 1 || p.Scopes[0] != lifecycle.ScopeTasksRead || p.Done == nil || !p.ExpiresAt.IsZero() {
		t.Fatalf("AuthenticateKey = %+v, %v", p, err)
	}
	byHash, err := e.Svc.AuthenticateKeyHash(ctx, lifecycle.HashAPIKey(key))
	if err != nil || byHash.ID != p.ID || byHash.Done != p.Done {
		t.Fatalf("AuthenticateKeyHash = %+v, %v; want %s with the same Done", byHash, err, p.ID)
	}
	select {
	case <-p.Done:
		t.Fatal("Done closed before the revocation")
	default:
	}
	if _, err := e.Svc.RevokeAPIKey(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done:
	default:
		t.Fatal("Done still open after the revocation")
	}
	for name, try := range map[string]func() error{
		"revoked":   func() error { _, err := e.Svc.AuthenticateKey(ctx, key); return err },
		"malformed": func() error { _, err := e.Svc.AuthenticateKey(ctx, "lsk_short"); return err },
		"unknown":   func() error { _, err := e.Svc.AuthenticateKey(ctx, "lsk_"+strings.Repeat("z", 40)); return err },
		"bad hash":  func() error { _, err := e.Svc.AuthenticateKeyHash(ctx, []byte("short")); return err },
	} {
		if err := try(); !errors.Is(err, lifecycle.ErrUnauthorized) {
			t.Errorf("%s key: %v, want ErrUnauthorized", name, err)
		}
	}
	host := newEnv(t, func(c *lifecycle.Config) { c.Authenticator = &endingAuth{done: map[string]chan struct{}{}} })
	if _, err := host.Svc.AuthenticateKey(ctx, e.Admin); !errors.Is(err, lifecycle.ErrUnauthorized) || !strings.Contains(err.Error(), "own API keys") {
		t.Errorf("AuthenticateKey with a host's Authenticator: %v", err)
	}
}

// BeginAuthentication counts failures of credentials the host checks with
// those of bearer keys: past the limit the client is refused before
// anything is read; attempts that end without failing do not count.
func TestBeginAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.AuthFailureLimit = 2 })
	req := httptest.NewRequestWithContext(t.Context(), "GET", "/", nil)
	req.RemoteAddr = "203.0.113.9:1000"
	for range 5 {
		a, err := e.Svc.BeginAuthentication(req)
		if err != nil {
			t.Fatalf("a client whose attempts all succeeded is refused: %v", err)
		}
		a.End()
	}
	for range 2 {
		a, err := e.Svc.BeginAuthentication(req)
		if err != nil {
			t.Fatal(err)
		}
		a.Fail()
		a.End()
	}
	var rl *lifecycle.RateLimitError
	if _, err := e.Svc.BeginAuthentication(req); !errors.As(err, &rl) || rl.RetryAfterSeconds != 3 {
		t.Errorf("the third attempt after two failures: %v, want a *RateLimitError after 3 s", err)
	}
	if rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin, Header: nil}); rec.Code != http.StatusOK {
		t.Errorf("another client's key: %d", rec.Code)
	}
	host := newEnv(t, func(c *lifecycle.Config) { c.Authenticator = &endingAuth{done: map[string]chan struct{}{}} })
	a, err := host.Svc.BeginAuthentication(req)
	if a != nil || err != nil {
		t.Errorf("BeginAuthentication with a host's Authenticator = %v, %v; want nothing counted", a, err)
	}
	a.Fail() // a nil attempt does nothing
	a.End()
}

// ServeFunc, Guard, WriteJSON and DecodeBody serve a host's own routes
// with the API's errors and limits.
func TestServeFuncAndGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.BodyReadTimeout = time.Second })
	type body struct {
		Name string `json:"name"`
	}
	mux := http.NewServeMux()
	mux.Handle("POST /echo", e.Svc.ServeFunc(func(w http.ResponseWriter, r *http.Request) error {
		var b body
		if err := e.Svc.DecodeBody(w, r, &b, 64, time.Minute); err != nil {
			return err
		}
		lifecycle.WriteJSON(w, http.StatusOK, map[string]string{"name": b.Name})
		return nil
	}))
	mux.Handle("GET /missing", e.Svc.ServeFunc(func(w http.ResponseWriter, r *http.Request) error {
		return lifecycle.ErrNotFound
	}))
	mux.Handle("GET /panic", e.Svc.ServeFunc(func(w http.ResponseWriter, r *http.Request) error { panic("boom") }))
	h := e.Svc.Guard(mux)
	for _, tt := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/echo", `{"name":"<b>"}`, 200, `{"name":"<b>"}` + "\n"},
		{"POST", "/echo", `{"nom":"x"}`, 400, `"code":"validation_error"`},
		{"POST", "/echo", `{"name":"` + strings.Repeat("x", 100) + `"}`, 413, `"code":"payload_too_large"`},
		{"GET", "/missing", "", 404, `"code":"not_found"`},
		{"GET", "/panic", "", 500, `"code":"internal"`},
		{"GET", "//missing", "", 404, `"code":"not_found"`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), tt.method, tt.path, strings.NewReader(tt.body)))
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %s %s, want %d with %s", tt.method, tt.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tt.status, tt.want)
		}
	}
}

// The reads for views: a task's submissions, reviews, ship operations and
// events, the last event, and the state a task's card shows.
func TestReadsForViews(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	ctx := t.Context()
	if last, err := e.Svc.LastEventID(ctx); err != nil || last != "" {
		t.Errorf("LastEventID of an empty store = %q, %v", last, err)
	}
	id := e.startedTask("ENG-1")
	sub := e.SubmitOK(id, "submit-1", apitest.SubmitBody())
	subs, err := e.Svc.Submissions(ctx, id)
	if err != nil || len(subs) != 1 || subs[0].SubmissionID != sub["submissionId"] || subs[0].Summary == "" {
		t.Fatalf("Submissions = %+v, %v", subs, err)
	}
	if reviews, err := e.Svc.Reviews(ctx, subs[0].SubmissionID); err != nil || reviews == nil || len(reviews) != 0 {
		t.Errorf("Reviews = %v, %v; want none, as []", reviews, err)
	}
	if ops, err := e.Svc.ShipOperations(ctx, id); err != nil || ops == nil || len(ops) != 0 {
		t.Errorf("ShipOperations = %v, %v; want none, as []", ops, err)
	}
	for name, read := range map[string]func() error{
		"Submissions":    func() error { _, err := e.Svc.Submissions(ctx, "tsk_nosuchtask000000"); return err },
		"ShipOperations": func() error { _, err := e.Svc.ShipOperations(ctx, "tsk_nosuchtask000000"); return err },
	} {
		if err := read(); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("%s of an unknown task: %v, want ErrNotFound", name, err)
		}
	}
	stored := e.EventsOf(id)
	evs, err := e.Svc.TaskEvents(ctx, id, 100)
	if err != nil || len(evs) != len(stored) || len(evs) < 3 {
		t.Fatalf("TaskEvents = %d events, %v; %d stored", len(evs), err, len(stored))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].TaskVersion <= evs[i-1].TaskVersion {
			t.Errorf("events out of order: %d after %d", evs[i].TaskVersion, evs[i-1].TaskVersion)
		}
	}
	if two, err := e.Svc.TaskEvents(ctx, id, 2); err != nil || len(two) != 2 || two[0].ID != evs[0].ID {
		t.Errorf("TaskEvents with limit 2 = %v, %v", two, err)
	}
	all := e.Events()
	if last, err := e.Svc.LastEventID(ctx); err != nil || last != all[len(all)-1].ID {
		t.Errorf("LastEventID = %q, %v; want %s", last, err, all[len(all)-1].ID)
	}
	task, err := e.Svc.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ci, _, err := e.Svc.CIStatus(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	fb, _, err := e.Svc.ReviewFeedback(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.CI() != ci.Overall || task.Decision() != fb.Decision || task.Shipping() {
		t.Errorf("card state CI %s, decision %s, shipping %v; want %s, %s, false", task.CI(), task.Decision(), task.Shipping(), ci.Overall, fb.Decision)
	}
}
