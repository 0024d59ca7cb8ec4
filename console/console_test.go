package console_test

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// consoleEnv is an env whose host also mounts the console at /console/.
type consoleEnv struct {
	*env
	console http.Handler
}

// newConsoleEnv mounts the console of e's Service at /console/ of e's
// host; mutate adjusts the console's Config.
func newConsoleEnv(t *testing.T, e *env, mutate ...func(*console.Config)) *consoleEnv {
	mux := http.NewServeMux()
	mux.Handle("/api/", e.Host)
	mux.Handle("/console/", http.StripPrefix("/console", e.newConsole(mutate...)))
	e.Host = mux
	return &consoleEnv{env: e, console: mux}
}

// consoleRequest is one call to the console.
type consoleCall struct {
	method, path string
	session      *http.Cookie // nil: no cookie
	csrf         string       // sent as X-CSRF-Token when not ""
	body         any
	header       http.Header
}

// do sends r to /console + r.path, as a same-origin page would.
func (c *consoleEnv) do(r consoleCall) *httptest.ResponseRecorder {
	c.T.Helper()
	req := apitest.NewRequest(c.T, r.method, "/console"+r.path, r.body)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if r.session != nil {
		req.AddCookie(r.session)
	}
	if r.csrf != "" {
		req.Header.Set("X-CSRF-Token", r.csrf)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	c.console.ServeHTTP(rec, req)
	return rec
}

// call sends r and checks the status, returning the JSON body.
func (c *consoleEnv) call(r consoleCall, want int) map[string]any {
	c.T.Helper()
	return apitest.Answer(c.T, r.method+" /console"+r.path, c.do(r), want)
}

// signIn exchanges key for a session and returns its cookie and CSRF token.
func (c *consoleEnv) signIn(key string) (*http.Cookie, string) {
	c.T.Helper()
	rec := c.do(consoleCall{method: "POST", path: "/session", body: map[string]any{"key": key}})
	if rec.Code != http.StatusOK {
		c.T.Fatalf("sign in = %d: %s", rec.Code, rec.Body)
	}
	var out struct {
		Data struct {
			CSRFToken string `json:"csrfToken"`
		} `json:"data"`
	}
	json.Unmarshal(rec.Body.Bytes(), &out)
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == "lifecycle_console" {
			return ck, out.Data.CSRFToken
		}
	}
	c.T.Fatal("sign in set no session cookie")
	return nil, ""
}

func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t, newEnv(t))
	reader := c.KeyAs(lifecycle.Actor{ID: "ops-alice", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	revoked := c.Key(lifecycle.ScopeTasksRead)
	keys, _ := c.Svc.APIKeys(t.Context())
	if _, err := c.Svc.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"unknown key", map[string]any{"key": "lsk_" + strings.Repeat("x", 40)}, 401, "unauthorized"},
		{"malformed key", map[string]any{"key": "hunter2"}, 401, "unauthorized"},
		{"revoked key", map[string]any{"key": revoked}, 401, "unauthorized"},
		{"no key", map[string]any{}, 401, "unauthorized"},
		{"no body", nil, 400, "validation_error"},
		{"unknown member", map[string]any{"key": reader, "remember": true}, 400, "validation_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := c.do(consoleCall{method: "POST", path: "/session", body: tc.body})
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
				t.Errorf("= %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.code)
			}
			if len(rec.Result().Cookies()) != 0 {
				t.Errorf("a refused sign-in set a cookie: %v", rec.Result().Cookies())
			}
		})
	}

	rec := c.do(consoleCall{method: "POST", path: "/session", body: map[string]any{"key": reader}})
	if rec.Code != http.StatusOK {
		t.Fatalf("sign in = %d: %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	ck := cookies[0]
	if ck.Name != "lifecycle_console" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" ||
		ck.MaxAge != 8*3600 || ck.Secure || len(ck.Value) < 40 {
		t.Errorf("cookie = %+v; want lifecycle_console, HttpOnly, SameSite=Strict, Path=/console/, 8 h, not Secure over plain http", ck)
	}
	var info map[string]any
	json.Unmarshal(rec.Body.Bytes(), &info)
	data := info["data"].(map[string]any)
	csrf, _ := data["csrfToken"].(string)
	if data["actor"].(map[string]any)["id"] != "ops-alice" || cmp.Diff([]any{"events:read", "tasks:read"}, data["scopes"]) != "" ||
		len(csrf) < 40 || data["expiresAt"] != apitest.Epoch.Add(8*time.Hour).Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("session = %v", data)
	}
	if strings.Contains(rec.Body.String(), reader) || strings.Contains(c.LogText(), reader) || strings.Contains(c.LogText(), ck.Value) {
		t.Error("the key or the session token was echoed or logged")
	}

	got := c.call(consoleCall{method: "GET", path: "/session", session: ck}, http.StatusOK)["data"].(map[string]any)
	if got["csrfToken"] != csrf || got["keyId"] != data["keyId"] {
		t.Errorf("GET session = %v, want the session signed in", got)
	}
	c.call(consoleCall{method: "GET", path: "/session"}, http.StatusUnauthorized)
	c.call(consoleCall{method: "GET", path: "/session", session: &http.Cookie{Name: "lifecycle_console", Value: "forged"}}, http.StatusUnauthorized)

	// Over TLS (or with ConsoleSecureCookie) the cookie is Secure.
	req := httptest.NewRequest("POST", "/console/session", strings.NewReader(`{"key":"`+reader+`"}`))
	req.TLS = &tls.ConnectionState{}
	tlsRec := httptest.NewRecorder()
	c.console.ServeHTTP(tlsRec, req)
	if cs := tlsRec.Result().Cookies(); tlsRec.Code != 200 || len(cs) != 1 || !cs[0].Secure {
		t.Errorf("sign in over TLS = %d, cookies %+v; want a Secure cookie", tlsRec.Code, cs)
	}
}

// TestConsoleHeaders: every answer of the console carries the strict
// Content-Security-Policy and the other protective headers.
func TestConsoleHeaders(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t, newEnv(t))
	ck, _ := c.signIn(c.Admin)
	for _, call := range []consoleCall{
		{method: "GET", path: "/"},
		{method: "GET", path: "/console.js"},
		{method: "GET", path: "/console.css"},
		{method: "GET", path: "/board", session: ck},
		{method: "GET", path: "/api/tasks", session: ck},
		{method: "GET", path: "/session"},
		{method: "GET", path: "/nope"},
	} {
		rec := c.do(call)
		h := rec.Header()
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s (%d): headers %v", call.path, rec.Code, h)
		}
	}
	page := c.do(consoleCall{method: "GET", path: "/"})
	if page.Code != 200 || page.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET / = %d %s", page.Code, page.Header().Get("Content-Type"))
	}
	if body := page.Body.String(); strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, "onclick") {
		t.Errorf("the page has inline script or style, which its policy refuses")
	}
	if js := c.do(consoleCall{method: "GET", path: "/console.js"}); js.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("console.js Content-Type %q", js.Header().Get("Content-Type"))
	}
	if nope := c.do(consoleCall{method: "GET", path: "/nope"}); nope.Code != 404 {
		t.Errorf("GET /nope = %d, want 404", nope.Code)
	}
}

// wrongToken returns token with its first character changed: a token of
// the right shape that is not the session's.
func wrongToken(token string) string {
	if token[0] == 'x' {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}

// TestConsoleRefusesOtherSites: the session cookie is of no use to a page
// of another site, or to a change without the session's CSRF token.
func TestConsoleRefusesOtherSites(t *testing.T) {
	t.Parallel()
	rc := apitest.NewReceiver(t)
	e := newHookEnv(t, rc)
	c := newConsoleEnv(t, e)
	ck, csrf := c.signIn(c.Admin)
	_, otherCSRF := c.signIn(c.Admin)
	subID := e.Subscribe(subBody(rc.URL("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.Next()
	delivered := e.WaitDeliveries(subID, 1)[0]["deliveryId"].(string)
	taskID := e.CreateTask(apitest.TaskBody("ENG-2"))["id"].(string)
	rc.Next()

	for _, tc := range []struct {
		name   string
		call   consoleCall
		status int
	}{
		{"board from another site", consoleCall{method: "GET", path: "/board", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, 403},
		{"board from a sibling site", consoleCall{method: "GET", path: "/board", header: http.Header{"Sec-Fetch-Site": {"same-site"}}}, 403},
		{"API read from another site", consoleCall{method: "GET", path: "/api/tasks", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, 403},
		{"stream from another site", consoleCall{method: "GET", path: "/api/task-events/stream", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, 403},
		{"change from another origin", consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/enable", csrf: csrf,
			header: http.Header{"Origin": {"https://evil.example"}}}, 403},
		{"replay without the token", consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/replay",
			body: map[string]any{"fromSequence": 0}, header: http.Header{"Idempotency-Key": {"console-replay-1"}}}, 403},
		{"replay with another session's token", consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/replay", csrf: otherCSRF,
			body: map[string]any{"fromSequence": 0}, header: http.Header{"Idempotency-Key": {"console-replay-2"}}}, 403},
		{"retry without the token", consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/deliveries/" + delivered + "/retry"}, 403},
		{"enable with a wrong token", consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/enable", csrf: wrongToken(csrf)}, 403},
		{"cancel a task without the token", consoleCall{method: "POST", path: "/api/tasks/" + taskID + "/cancel", body: map[string]any{"reason": "no"}}, 403},
		{"cancel a task with another session's token", consoleCall{method: "POST", path: "/api/tasks/" + taskID + "/cancel", csrf: otherCSRF}, 403},
		{"start a task without the token", consoleCall{method: "POST", path: "/api/tasks/" + taskID + "/start"}, 403},
		{"resolve a blocker with a wrong token", consoleCall{method: "POST", path: "/api/tasks/" + taskID + "/resolve-blocker", csrf: wrongToken(csrf),
			body: map[string]any{"resolution": "done"}}, 403},
		{"ship without the token", consoleCall{method: "POST", path: "/api/tasks/" + taskID + "/ship",
			body: apitest.ShipBody("merge_only", "staging", strings.Repeat("a", 40)), header: http.Header{"Idempotency-Key": {"console-ship-1"}}}, 403},
		{"sign out without the token", consoleCall{method: "DELETE", path: "/session"}, 403},
		{"sign in from another site", consoleCall{method: "POST", path: "/session", body: map[string]any{"key": c.Admin},
			header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.call.session == nil && tc.call.path != "/session" || tc.call.method == "DELETE" {
				tc.call.session = ck
			}
			out := c.call(tc.call, tc.status)
			if code := errorCode(out); code != "csrf_failed" {
				t.Errorf("code %s, want csrf_failed", code)
			}
		})
	}
	rc.Quiet(100 * time.Millisecond) // nothing was replayed, retried or changed
	if st, evs := e.Task(taskID)["status"], e.EventsOf(taskID); st != "todo" || len(evs) != 1 {
		t.Errorf("ENG-2 after the refused changes: %v, with %d events, want todo with its creation's only", st, len(evs))
	}

	// The same calls from the console's own page, with the token, work.
	c.call(consoleCall{method: "GET", path: "/board", session: ck, header: http.Header{"Sec-Fetch-Site": {"none"}}}, http.StatusOK)
	c.call(consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/replay", session: ck, csrf: csrf,
		body: map[string]any{"fromSequence": 0}, header: http.Header{"Idempotency-Key": {"console-replay-3"}}}, http.StatusAccepted)
	rc.Next()
	c.call(consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/enable", session: ck, csrf: csrf}, http.StatusOK)
	e.WaitDeliveries(subID, 2)
	newest := e.Deliveries(subID)[0]["deliveryId"].(string)
	rc.SetRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	c.call(consoleCall{method: "POST", path: "/api/event-subscriptions/" + subID + "/deliveries/" + newest + "/retry", session: ck, csrf: csrf}, http.StatusConflict)
	c.call(consoleCall{method: "DELETE", path: "/session", session: ck, csrf: csrf}, http.StatusNoContent)
}

// consoleStream opens the event stream through the console on a real
// server and returns a channel closed when it ends.
func consoleStream(t *testing.T, srv *httptest.Server, ck *http.Cookie) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/console/api/task-events/stream", nil)
	req.AddCookie(ck)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream through the console = %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	return ended
}

// TestConsoleSessionEnds: revoking the key, signing out and expiry each
// end the session, and with it the event stream it opened.
func TestConsoleSessionEnds(t *testing.T) {
	t.Parallel()
	c := newConsoleEnv(t, newEnv(t))
	c.Start()
	srv := httptest.NewServer(c.console)
	t.Cleanup(srv.Close)
	wait := func(what string, ended <-chan struct{}) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("the console's stream did not end within 5s of %s", what)
		}
	}

	t.Run("revoked key", func(t *testing.T) {
		key := c.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
		keys, _ := c.Svc.APIKeys(t.Context())
		ck, _ := c.signIn(key)
		ended := consoleStream(t, srv, ck)
		if _, err := c.Svc.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
			t.Fatal(err)
		}
		wait("the revocation", ended)
		for _, path := range []string{"/session", "/board", "/api/tasks"} {
			if out := c.call(consoleCall{method: "GET", path: path, session: ck}, http.StatusUnauthorized); errorCode(out) != "unauthorized" {
				t.Errorf("GET %s after the revocation: %v", path, out)
			}
		}
	})
	t.Run("signed out", func(t *testing.T) {
		ck, csrf := c.signIn(c.Admin)
		ended := consoleStream(t, srv, ck)
		rec := c.do(consoleCall{method: "DELETE", path: "/session", session: ck, csrf: csrf})
		if rec.Code != http.StatusNoContent {
			t.Fatalf("sign out = %d %s", rec.Code, rec.Body)
		}
		if cs := rec.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Value != "" {
			t.Errorf("sign out cookies %+v, want the session cookie cleared", cs)
		}
		wait("the sign-out", ended)
		c.call(consoleCall{method: "GET", path: "/board", session: ck}, http.StatusUnauthorized)
	})
	t.Run("expired", func(t *testing.T) {
		ck, _ := c.signIn(c.Admin)
		ended := consoleStream(t, srv, ck)
		c.Clock.Advance(8*time.Hour + time.Second)
		wait("the expiry", ended)
		c.call(consoleCall{method: "GET", path: "/board", session: ck}, http.StatusUnauthorized)
	})
}

// TestConsoleNeedsTheServiceKeys: with a host's Authenticator, sign-in is
// refused, saying why.
func TestConsoleNeedsTheServiceKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Authenticator = hostAuth{} })
	c := newConsoleEnv(t, e)
	rec := c.do(consoleCall{method: "POST", path: "/session", body: map[string]any{"key": "lsk_" + strings.Repeat("a", 40)}})
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "own API keys") {
		t.Errorf("sign-in with a host's Authenticator = %d %s", rec.Code, rec.Body)
	}
}

// TestConsoleBoard: every task as a card with the state the board shows,
// the cursor to stream from, the cards of chosen tasks, and a hostile
// title kept as it is.
func TestConsoleBoard(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	c := newConsoleEnv(t, e)
	ck, _ := c.signIn(c.Admin)

	todo := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	hostile := apitest.TaskBody("ENG-2")
	hostile["title"] = `<img src=x onerror=alert(1)>`
	hostileID := e.CreateTask(hostile)["id"].(string)
	reviewing, sha := e.shippableTask("ENG-3")

	out := c.call(consoleCall{method: "GET", path: "/board", session: ck}, http.StatusOK)
	evs := e.Events()
	if out["cursor"] != evs[len(evs)-1].ID {
		t.Errorf("cursor %v, want the last event %s", out["cursor"], evs[len(evs)-1].ID)
	}
	cards := map[string]map[string]any{}
	for _, v := range out["data"].([]any) {
		card := v.(map[string]any)
		cards[card["id"].(string)] = card
	}
	if len(cards) != 3 {
		t.Fatalf("%d cards, want 3", len(cards))
	}
	if card := cards[todo]; card["status"] != "todo" || card["ci"] != "none" || card["identifier"] != "ENG-1" {
		t.Errorf("todo card %v", card)
	}
	if card := cards[hostileID]; card["title"] != `<img src=x onerror=alert(1)>` {
		t.Errorf("hostile title came back as %q", card["title"])
	}
	card := cards[reviewing]
	if card["status"] != "in_review" || card["ci"] != "passed" || card["review"] == nil || card["headSha"] != sha ||
		card["prUrl"] == nil || card["prNumber"] == nil || card["version"].(float64) < 3 {
		t.Errorf("review card %v", card)
	}
	task := e.Task(reviewing)
	if diff := cmp.Diff(task["availableActions"], card["availableActions"]); diff != "" {
		t.Errorf("card actions differ from GET's (-get +card):\n%s", diff)
	}

	some := c.call(consoleCall{method: "GET", path: "/board?id=" + todo + "&id=tsk_nosuchtask00000000000", session: ck}, http.StatusOK)["data"].([]any)
	if len(some) != 1 || some[0].(map[string]any)["id"] != todo {
		t.Errorf("board?id= gave %v, want the card of %s only", some, todo)
	}
	reader := c.Key(lifecycle.ScopeEventsRead)
	rck, _ := c.signIn(reader)
	if out := c.call(consoleCall{method: "GET", path: "/board", session: rck}, http.StatusForbidden); errorCode(out) != "insufficient_scope" {
		t.Errorf("board without tasks:read: %v", out)
	}
}

// TestConsoleTimeline: a task's events in version order, its submissions
// with their reviews, its CI and its ship operations, the failed one with
// its error.
func TestConsoleTimeline(t *testing.T) {
	t.Parallel()
	e, web := newShipEnv(t)
	c := newConsoleEnv(t, e)
	ck, _ := c.signIn(c.Admin)
	id, sha := e.shippableTask("ENG-1")
	web.FailNext(memory.OpMerge, errors.New("github: 502"))
	failed := e.ship(id, "timeline-ship-1", apitest.ShipBody("merge_only", "staging", sha))
	e.waitShip(failed)
	shipped := e.ship(id, "timeline-ship-2", apitest.ShipBody("merge_only", "staging", sha))
	e.waitShip(shipped)

	data := c.call(consoleCall{method: "GET", path: "/timeline/" + id, session: ck}, http.StatusOK)["data"].(map[string]any)
	if data["task"].(map[string]any)["status"] != "done" || data["card"].(map[string]any)["status"] != "done" {
		t.Errorf("task %v", data["task"])
	}
	var versions []float64
	for _, ev := range data["events"].([]any) {
		versions = append(versions, ev.(map[string]any)["taskVersion"].(float64))
	}
	stored := e.EventsOf(id)
	if len(versions) != len(stored) || len(versions) < 5 {
		t.Fatalf("%d events on the timeline, %d stored", len(versions), len(stored))
	}
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] {
			t.Errorf("events out of taskVersion order: %v", versions)
		}
	}
	subs := data["submissions"].([]any)
	if len(subs) != 1 || subs[0].(map[string]any)["summary"] == "" || subs[0].(map[string]any)["reviews"] == nil {
		t.Errorf("submissions %v", subs)
	}
	ops := data["shipOperations"].([]any)
	if len(ops) != 2 {
		t.Fatalf("ship operations %v, want 2", ops)
	}
	first, second := ops[0].(map[string]any), ops[1].(map[string]any)
	if first["operationId"] != failed || first["status"] != "failed" || first["error"].(map[string]any)["code"] != "merge_failed" ||
		second["operationId"] != shipped || second["status"] != "succeeded" {
		t.Errorf("ship operations %v", ops)
	}
	if ci := data["ci"].(map[string]any); ci["overall"] != "passed" {
		t.Errorf("ci %v", ci)
	}
	c.call(consoleCall{method: "GET", path: "/timeline/tsk_nosuchtask00000000000", session: ck}, http.StatusNotFound)
	tasksOnly, _ := c.signIn(c.Key(lifecycle.ScopeTasksRead))
	c.call(consoleCall{method: "GET", path: "/timeline/" + id, session: tasksOnly}, http.StatusForbidden)
}

// TestConsoleSignOutElsewhereEndsStreams: a session signed out through
// another Service sharing the Store ends the event stream it opened here
// at this Service's next check of revocations.
func TestConsoleSignOutElsewhereEndsStreams(t *testing.T) {
	t.Parallel()
	a := newConsoleEnv(t, newEnv(t))
	a.Start()
	cfg := lifecycle.Config{Store: a.Store, BaseURL: apitest.BaseURL, Clock: a.Clock, Logger: a.Logger(), InstanceID: "other"}
	other, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv := &env{&apitest.Env{T: t, Svc: other, Store: a.Store, Served: a.Store, Clock: a.Clock, Logs: a.Logs}}
	b := &consoleEnv{env: otherEnv, console: http.StripPrefix("/console", otherEnv.newConsole())}
	srv := httptest.NewServer(a.console)
	t.Cleanup(srv.Close)

	ck, csrf := a.signIn(a.Admin)
	ended := consoleStream(t, srv, ck)
	if rec := b.do(consoleCall{method: "DELETE", path: "/session", session: ck, csrf: csrf}); rec.Code != http.StatusNoContent {
		t.Fatalf("sign out through the other Service = %d %s", rec.Code, rec.Body)
	}
	deadline := time.After(5 * time.Second)
	for {
		a.Clock.Advance(5 * time.Second) // past the revocation check's interval
		select {
		case <-ended:
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the stream did not end after its session signed out through the other Service")
		}
	}
}

// TestConsoleTaskActions: the console's API takes an operator's changes
// to a task as the API does, for the session's key and its scopes: a
// cancel needs tasks:admin, a refusal is the API's 409 with its reason,
// message and next steps, and each change is the API's event.
func TestConsoleTaskActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newConsoleEnv(t, e)
	admin, adminCSRF := c.signIn(c.Admin)
	writer, writerCSRF := c.signIn(c.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite))
	todo := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	blocked := e.CreateTask(apitest.TaskBody("ENG-2"))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + blocked + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + blocked + "/blocker", Key: e.Admin,
		Body: map[string]any{"reason": "needs_decision", "actionRequired": "Pick a colour."}}, http.StatusOK)
	key := func(n string) http.Header { return http.Header{"Idempotency-Key": {"console-action-" + n}} }

	// Without tasks:admin, no cancel; with tasks:write, the blocker is
	// resolved, its resolution kept in the event.
	out := c.call(consoleCall{method: "POST", path: "/api/tasks/" + todo + "/cancel", session: writer, csrf: writerCSRF, header: key("1")}, http.StatusForbidden)
	if errorCode(out) != "insufficient_scope" {
		t.Errorf("cancel without tasks:admin: %v", out)
	}
	out = c.call(consoleCall{method: "POST", path: "/api/tasks/" + blocked + "/resolve-blocker", session: writer, csrf: writerCSRF, header: key("2"),
		body: map[string]any{"resolution": "Blue, as agreed."}}, http.StatusOK)
	if data := out["data"].(map[string]any); data["status"] != "in_progress" || data["blocker"] != nil {
		t.Errorf("resolved task %v", data)
	}
	evs := e.EventsOf(blocked)
	if last := evs[len(evs)-1]; last["type"] != "task.updated" || !strings.Contains(last["data"].(map[string]any)["summary"].(string), "Blue, as agreed.") {
		t.Errorf("the resolve's event %v", last)
	}

	// The admin cancels; a second cancel is the API's 409, with its
	// reason, message and next steps.
	out = c.call(consoleCall{method: "POST", path: "/api/tasks/" + todo + "/cancel", session: admin, csrf: adminCSRF, header: key("3"),
		body: map[string]any{"reason": "Not needed."}}, http.StatusOK)
	if out["data"].(map[string]any)["status"] != "cancelled" {
		t.Errorf("cancelled task %v", out["data"])
	}
	evs = e.EventsOf(todo)
	if last := evs[len(evs)-1]; last["type"] != "task.updated" || last["data"].(map[string]any)["status"] != "cancelled" {
		t.Errorf("the cancel's event %v", last)
	}
	out = c.call(consoleCall{method: "POST", path: "/api/tasks/" + todo + "/cancel", session: admin, csrf: adminCSRF, header: key("4")}, http.StatusConflict)
	e409 := out["error"].(map[string]any)
	details := e409["details"].(map[string]any)
	if e409["code"] != "conflict" || details["reason"] != "not_cancellable" || !strings.Contains(e409["message"].(string), "cannot be cancelled") ||
		details["availableActions"] == nil {
		t.Errorf("a second cancel: %v", out)
	}
	// A rework is offered only after changes were requested.
	out = c.call(consoleCall{method: "POST", path: "/api/tasks/" + blocked + "/start", session: writer, csrf: writerCSRF, header: key("5")}, http.StatusConflict)
	if out["error"].(map[string]any)["details"].(map[string]any)["reason"] != "not_startable" {
		t.Errorf("a start in progress: %v", out)
	}
}

// TestConsoleBoardHighlights: each card carries the task's stalled and
// waitingOn members as GET /tasks/{id} serves them, and null and [] where
// the Service serves none.
func TestConsoleBoardHighlights(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newConsoleEnv(t, e)
	ck, _ := c.signIn(c.Admin)
	ids := []string{e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string), e.CreateTask(apitest.TaskBody("ENG-2"))["id"].(string)}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + ids[1] + "/start", Key: e.Admin}, http.StatusOK)
	cards := c.call(consoleCall{method: "GET", path: "/board", session: ck}, http.StatusOK)["data"].([]any)
	if len(cards) != len(ids) {
		t.Fatalf("%d cards, want %d", len(cards), len(ids))
	}
	for _, v := range cards {
		card := v.(map[string]any)
		task := e.Task(card["id"].(string))
		stalled, waiting := task["stalled"], task["waitingOn"]
		if waiting == nil {
			waiting = []any{}
		}
		if got, ok := card["stalled"]; !ok || !cmp.Equal(got, stalled) {
			t.Errorf("card %s: stalled %v (present: %t), want %v", card["identifier"], got, ok, stalled)
		}
		if got := card["waitingOn"]; !cmp.Equal(got, waiting) {
			t.Errorf("card %s: waitingOn %v, want %v", card["identifier"], got, waiting)
		}
	}
}
