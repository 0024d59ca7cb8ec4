package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
	"github.com/tasklifecycle/lifecycle/mcp"
)

const initializeMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// send sends a request to the Handler with the headers given in pairs and
// returns the answer's status, headers and body.
func (e *env) send(method, body string, header ...string) (int, http.Header, string) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+"/mcp", r)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		return resp.StatusCode, resp.Header, line
	}
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

// apiError decodes an error body in the API's shape, failing the test when
// the body is anything else.
func apiError(t *testing.T, what string, hdr http.Header, body string) lifecycle.ErrorObject {
	t.Helper()
	var b lifecycle.ErrorBody
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if hdr.Get("Content-Type") != "application/json" || dec.Decode(&b) != nil || b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("%s: answered %q %s, want the API's JSON error shape", what, hdr.Get("Content-Type"), body)
	}
	return b.Error
}

// postHeaders are the headers of a client's POST with key.
func postHeaders(key string, more ...string) []string {
	return append([]string{"Authorization", "Bearer " + key, "Content-Type", "application/json", "Accept", "application/json, text/event-stream"}, more...)
}

// A principal holds at most MaxSessionsPerKey sessions, and the Handler
// MaxSessions in all: past them, initialize is answered 429 rate_limited
// with Retry-After, in the API's shape. An ended session gives its place
// back.
func TestSessionLimits(t *testing.T) {
	e := newEnv(t, mcp.Config{MaxSessionsPerKey: 2, MaxSessions: 3})
	one, two := e.api.Key(lifecycle.ScopeTasksRead), e.api.Key(lifecycle.ScopeTasksRead)
	first := e.rawSession(one)
	e.rawSession(one)
	refused := func(key, what, says string) {
		t.Helper()
		status, hdr, body := e.send("POST", initializeMsg, postHeaders(key)...)
		obj := apiError(t, what, hdr, body)
		if status != http.StatusTooManyRequests || obj.Code != "rate_limited" || hdr.Get("Retry-After") == "" || !strings.Contains(obj.Message, says) {
			t.Fatalf("%s: %d %v %+v, want 429 rate_limited with Retry-After", what, status, hdr, obj)
		}
	}
	refused(one, "a third session of a key", "This API key already holds 2 MCP sessions")
	e.rawSession(two)
	refused(two, "a fourth session in all", "The server already holds 3 MCP sessions")
	// A session's requests are not initialize: they pass.
	if status, _, body := e.send("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, postHeaders(one, "Mcp-Session-Id", first, "Mcp-Protocol-Version", "2025-06-18")...); status != http.StatusOK {
		t.Fatalf("tools/list in a session at the limit = %d %s", status, body)
	}
	if status, _, _ := e.send("DELETE", "", "Authorization", "Bearer "+one, "Mcp-Session-Id", first, "Mcp-Protocol-Version", "2025-06-18"); status != http.StatusNoContent {
		t.Fatalf("DELETE = %d", status)
	}
	e.h.WaitSessionGoneForTest(first)
	e.rawSession(two)
}

// A session that makes no request after its handshake closes after
// UnusedSessionTimeout, long before SessionTimeout.
func TestUnusedSessionCloses(t *testing.T) {
	e := newEnv(t, mcp.Config{UnusedSessionTimeout: 50 * time.Millisecond})
	key := e.api.Key(lifecycle.ScopeTasksRead)
	id := e.rawSession(key)
	e.h.WaitSessionGoneForTest(id)
	if got := e.h.SessionsForTest(); got != 0 {
		t.Fatalf("%d sessions live, want 0", got)
	}
}

// Each session's notification stream (GET /mcp) counts among the key's
// event streams, with GET /task-events/stream: past MaxStreamsPerKey,
// either is refused 429 rate_limited, in the API's shape.
func TestNotificationStreamsCountWithEventStreams(t *testing.T) {
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.MaxStreamsPerKey = 2 })
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	e.openStream(key, e.rawSession(key))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the API's stream = %v, %v", resp, err)
	}
	defer resp.Body.Close()
	status, hdr, body := e.send("GET", "", "Authorization", "Bearer "+key, "Accept", "text/event-stream",
		"Mcp-Session-Id", e.rawSession(key), "Mcp-Protocol-Version", "2025-06-18")
	if obj := apiError(t, "a third stream", hdr, body); status != http.StatusTooManyRequests || obj.Code != "rate_limited" || hdr.Get("Retry-After") == "" {
		t.Fatalf("a third stream of the key = %d %+v, want 429 rate_limited", status, obj)
	}
	req, _ = http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	third, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	third.Body.Close()
	if third.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the API's stream past the key's MCP and API streams = %d, want 429", third.StatusCode)
	}
}

// A POST /mcp whose body trickles in gets the API's 408 request_timeout
// once Config.BodyReadTimeout has passed, on a session's call as on an
// initialize, and its connection is closed.
func TestTrickledBodyTimesOut(t *testing.T) {
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	key := e.api.Key(lifecycle.ScopeTasksRead)
	for _, session := range []string{"", e.rawSession(key)} {
		conn := e.rawPOST(key, session, 100, `{"jsonrpc":`)
		if status, code := testsupport.Answered(t, conn, 10*time.Second); status != http.StatusRequestTimeout || code != "request_timeout" {
			t.Fatalf("session %q: a trickled body = %d %s, want 408 request_timeout", session, status, code)
		}
	}
}

// MCP bodies share the API's budget of bodies being read
// (Config.MaxDecodingBytes): while one body holds all of it, the next
// waits its turn and is refused 429 rate_limited.
func TestBodiesShareTheAPIBudget(t *testing.T) {
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.MaxDecodingBytes = 1 << 20 })
	key := e.api.Key(lifecycle.ScopeTasksRead)
	session := e.rawSession(key)
	e.rawPOST(key, session, 1<<20, `{"jsonrpc":`) // holds the whole budget while it trickles
	conn := e.rawPOST(key, session, len(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if obj := apiError(t, "a body while the budget is held", resp.Header, string(raw)); resp.StatusCode != http.StatusTooManyRequests || obj.Code != "rate_limited" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a body while the budget is held = %d %+v, want 429 rate_limited", resp.StatusCode, obj)
	}
}

// A browser page of another origin is refused on every method and on the
// fast path as on the SDK's, with 403 csrf_failed in the API's shape;
// same-origin pages, allowed origins and clients without Origin pass.
func TestOriginChecked(t *testing.T) {
	e := newEnv(t, mcp.Config{AllowedOrigins: []string{"https://app.example"}})
	id := e.createTask("ORIGIN-1")
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	session := e.rawSession(key)
	in := []string{"Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"}
	get := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":"` + id + `"}}}`
	refused := func(what, method, msg string, header ...string) string {
		t.Helper()
		status, hdr, body := e.send(method, msg, header...)
		if obj := apiError(t, what, hdr, body); status != http.StatusForbidden || obj.Code != "csrf_failed" {
			t.Fatalf("%s = %d %+v, want 403 csrf_failed", what, status, obj)
		}
		return body
	}
	for _, evil := range [][]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"}} {
		refused("initialize from "+evil[1], "POST", initializeMsg, postHeaders(key, evil...)...)
		refused("GET from "+evil[1], "GET", "", append([]string{"Authorization", "Bearer " + key, "Accept", "text/event-stream"}, append(in, evil...)...)...)
		refused("DELETE from "+evil[1], "DELETE", "", append([]string{"Authorization", "Bearer " + key}, append(in, evil...)...)...)
		fast := refused("a call on the fast path from "+evil[1], "POST", get, postHeaders(key, append(in, evil...)...)...)
		e.h.SetFastPathForTest(false)
		sdkAnswer := refused("a call through the SDK from "+evil[1], "POST", get, postHeaders(key, append(in, evil...)...)...)
		e.h.SetFastPathForTest(true)
		if fast != sdkAnswer {
			t.Errorf("the paths differ:\nfast: %s\nSDK:  %s", fast, sdkAnswer)
		}
	}
	for _, ok := range [][]string{nil, {"Origin", e.srv.URL}, {"Origin", "https://app.example"}, {"Sec-Fetch-Site", "same-origin"}} {
		if status, _, body := e.send("POST", get, postHeaders(key, append(in, ok...)...)...); status != http.StatusOK || !strings.Contains(body, id) {
			t.Errorf("a call with %v = %d %s, want 200", ok, status, body)
		}
	}
	if _, err := mcp.NewHandler(e.api.Svc, mcp.Config{AllowedOrigins: []string{"app.example"}}); err == nil {
		t.Error("an allowed origin without a scheme was taken")
	}
}

// Every error of the transport is in the API's JSON shape, with the
// status the transport gives (a session of another key is no session).
func TestTransportErrorsInTheAPIShape(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	key := e.api.Key(lifecycle.ScopeTasksRead)
	session := e.rawSession(key)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, c := range []struct {
		name, method, body string
		header             []string
		status             int
		code, field        string
	}{
		{"GET without a session", "GET", "", []string{"Authorization", "Bearer " + key, "Accept", "text/event-stream"}, 400, "validation_error", "Mcp-Session-Id"},
		{"DELETE without a session", "DELETE", "", []string{"Authorization", "Bearer " + key}, 400, "validation_error", "Mcp-Session-Id"},
		{"GET without Accept", "GET", "", []string{"Authorization", "Bearer " + key, "Mcp-Session-Id", session}, 400, "validation_error", "Accept"},
		{"an unknown session", "POST", list, postHeaders(key, "Mcp-Session-Id", "nope", "Mcp-Protocol-Version", "2025-06-18"), 404, "not_found", ""},
		{"another key's session", "POST", list, postHeaders(e.api.Key(lifecycle.ScopeTasksRead), "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"), 404, "not_found", ""},
		{"PUT", "PUT", list, postHeaders(key), 405, "method_not_allowed", ""},
		{"a form", "POST", list, []string{"Authorization", "Bearer " + key, "Content-Type", "text/plain", "Accept", "application/json, text/event-stream"}, 415, "validation_error", "Content-Type"},
		{"an empty body", "POST", "", postHeaders(key), 400, "validation_error", "body"},
		{"no key", "POST", initializeMsg, postHeaders("")[2:], 401, "unauthorized", ""},
	} {
		status, hdr, body := e.send(c.method, c.body, c.header...)
		obj := apiError(t, c.name, hdr, body)
		if status != c.status || obj.Code != c.code {
			t.Errorf("%s = %d %+v, want %d %s", c.name, status, obj, c.status, c.code)
		}
		if c.field != "" && (obj.Details == nil || len(obj.Details.Fields) != 1 || obj.Details.Fields[0].Field != c.field) {
			t.Errorf("%s: details %+v, want field %s", c.name, obj.Details, c.field)
		}
	}
}

// anonymous is a host's Authenticator that accepts everyone as a
// principal without an ID.
type anonymous struct{}

func (anonymous) Authenticate(*http.Request) (lifecycle.Principal, error) {
	return lifecycle.Principal{Scopes: apitest.AllScopes()}, nil
}

// A host's Authenticator that returns a principal without an ID is
// refused 401: such callers would share sessions.
func TestEmptyPrincipalRefused(t *testing.T) {
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.Authenticator = anonymous{} })
	status, hdr, body := e.send("POST", initializeMsg, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if obj := apiError(t, "an anonymous initialize", hdr, body); status != http.StatusUnauthorized || obj.Code != "unauthorized" {
		t.Fatalf("an anonymous initialize = %d %+v, want 401 unauthorized", status, obj)
	}
}

// Revoking a key through replica A (another Service on the same Store)
// ends, within KeyCacheTTL of B's clock, B's notification stream of a
// session of the key, its wait_for_task_change and the session itself.
func TestRevocationInAnotherReplicaEndsMCP(t *testing.T) {
	e := newEnv(t, mcp.Config{}) // replica B
	look := apitest.Epoch.Add(2500 * time.Millisecond)
	if !e.api.Clock.WaitForWaiterAt(look, 5*time.Second) {
		t.Fatal("B's revocation watcher is not waiting KeyCacheTTL/2 on the clock")
	}
	a, err := lifecycle.New(lifecycle.Config{Store: e.api.Store, BaseURL: apitest.BaseURL, Clock: e.api.Clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	id := e.createTask("REVOKE-1")
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	session := e.rawSession(key)
	lines := e.openStream(key, session)
	// The wait parks on B's clock for its 60 seconds.
	waited := e.waitInBackground(key, session, id)
	if !e.api.Clock.WaitForWaiterAt(apitest.Epoch.Add(60*time.Second), 5*time.Second) {
		t.Fatal("the wait is not waiting on the clock")
	}
	keys, _ := e.api.Svc.APIKeys(t.Context())
	if _, err := a.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	e.api.Clock.Advance(5 * time.Second) // KeyCacheTTL
	e.endedByRevocation(lines, waited, session)
}

// 10,000 attempts to open a session with one key are refused past
// MaxSessionsPerKey with 429, and leave the heap in use within 32 MiB of
// where it was.
func TestSessionAttemptsMemory(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	key := e.api.Key(lifecycle.ScopeTasksRead)
	e.rawSession(key) // warm up
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	const attempts, workers = 10000, 4
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var opened, refused, other atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= attempts {
				req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/mcp", strings.NewReader(initializeMsg))
				req.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
				resp, err := client.Do(req)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						other.Add(1)
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					opened.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	after := heap()
	if opened.Load() != 15 || refused.Load() != attempts-15 || other.Load() != 0 {
		t.Fatalf("%d opened, %d refused, %d other; want 15 (16 with the first), %d refused", opened.Load(), refused.Load(), other.Load(), attempts-15)
	}
	grown := int64(after) - int64(before)
	t.Logf("heap in use %d MiB before, %d MiB after 10,000 attempts (%+d KiB); %d sessions live", before>>20, after>>20, grown>>10, e.h.SessionsForTest())
	if grown > 32<<20 {
		t.Fatalf("the heap in use grew by %d MiB, want at most 32", grown>>20)
	}
}

// revocable is a host's Authenticator of one bearer token, which the
// test revokes.
type revocable struct {
	mu      sync.Mutex
	revoked bool
}

func (a *revocable) Authenticate(r *http.Request) (lifecycle.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked || r.Header.Get("Authorization") != "Bearer host-token" {
		return lifecycle.Principal{}, fmt.Errorf("not signed in: %w", lifecycle.ErrUnauthorized)
	}
	return lifecycle.Principal{ID: "host-user", Actor: lifecycle.Actor{ID: "host-user", Role: lifecycle.RoleUser}, Scopes: apitest.AllScopes()}, nil
}

// With a host's Authenticator, credentials it no longer accepts end the
// MCP stream, wait and session they opened within KeyCacheTTL, as they
// end the API's event streams.
func TestRevokedHostCredentialEndsMCP(t *testing.T) {
	auth := &revocable{}
	e := newEnv(t, mcp.Config{}, func(c *lifecycle.Config) { c.Authenticator = auth })
	look := apitest.Epoch.Add(2500 * time.Millisecond)
	if !e.api.Clock.WaitForWaiterAt(look, 5*time.Second) {
		t.Fatal("the revocation watcher is not waiting KeyCacheTTL/2 on the clock")
	}
	task, err := e.api.Svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "HOST-1", Title: "Fix it", Description: "It is broken.", AcceptanceCriteria: []string{"it works"}, Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/HOST-1"}})
	if err != nil {
		t.Fatal(err)
	}
	const key = "host-token"
	session := e.rawSession(key)
	lines := e.openStream(key, session)
	waited := e.waitInBackground(key, session, task.ID)
	if !e.api.Clock.WaitForWaiterAt(apitest.Epoch.Add(60*time.Second), 5*time.Second) {
		t.Fatal("the wait is not waiting on the clock")
	}
	auth.mu.Lock()
	auth.revoked = true
	auth.mu.Unlock()
	e.api.Clock.Advance(5 * time.Second) // KeyCacheTTL
	e.endedByRevocation(lines, waited, session)
}

// waitInBackground calls wait_for_task_change on taskID for 60 seconds in
// session, raw, and sends what it answered (or why it failed) on the
// channel it returns.
func (e *env) waitInBackground(key, session, taskID string) <-chan string {
	waited := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.srv.URL+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"wait_for_task_change","arguments":{"taskId":"`+taskID+`","timeoutSeconds":60}}}`))
		req.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"},
			"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			waited <- err.Error()
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		waited <- string(raw)
	}()
	return waited
}

// endedByRevocation fails the test unless, within a second, the session's
// GET stream (lines) ends, its wait (waited) answers the unauthorized
// error of a revoked credential, and the session is gone.
func (e *env) endedByRevocation(lines <-chan string, waited <-chan string, session string) {
	e.t.Helper()
	deadline := time.After(time.Second)
	for streamEnded, waitEnded := false, false; !streamEnded || !waitEnded; {
		select {
		case _, open := <-lines:
			streamEnded = !open
		case got := <-waited:
			waitEnded = true
			if !strings.Contains(got, `\"code\":\"unauthorized\"`) {
				e.t.Fatalf("the wait answered %q, want the unauthorized error of its revoked credential", got)
			}
		case <-deadline:
			e.t.Fatalf("1 s after KeyCacheTTL: stream ended %v, wait ended %v", streamEnded, waitEnded)
		}
	}
	e.h.WaitSessionGoneForTest(session)
}
