package mcp_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// dropFirst loses the answer of the first call of a tool: the server
// handles the request in full, and the client sees its connection drop.
type dropFirst struct {
	next    http.RoundTripper
	tool    string
	dropped atomic.Bool
}

var errDropped = errors.New("connection reset (test)")

func (d *dropFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Body == nil || d.dropped.Load() {
		return d.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"tools/call"`)) || !bytes.Contains(body, []byte(`"`+d.tool+`"`)) || !d.dropped.CompareAndSwap(false, true) {
		return d.next.RoundTrip(r)
	}
	resp, err := d.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body) // the server answered in full
	resp.Body.Close()
	return nil, errDropped
}

// A client that lost the answer of a call and makes it again (here, from
// a new session, as after a reconnection) gets the first answer: the work
// is submitted once.
func TestRetriedCallAfterDroppedConnectionSubmitsOnce(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-4")
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite)
	e.ok(e.connect(key, nil), "start_task", map[string]any{"taskId": id})

	args := map[string]any{"taskId": id, "summary": "Fixed the redirect.", "pullRequest": map[string]any{"title": "Fix redirect"},
		"checks": []map[string]any{{"name": "unit", "status": "passed"}}}
	drop := &dropFirst{next: bearer{key, http.DefaultTransport}, tool: "submit_work"}
	lost := e.connectVia(drop, nil)
	if _, err := lost.CallTool(t.Context(), &sdk.CallToolParams{Name: "submit_work", Arguments: args}); err == nil {
		t.Fatal("the call whose answer was lost succeeded")
	}
	if !drop.dropped.Load() {
		t.Fatal("no answer was dropped")
	}
	retried := e.ok(e.connect(key, nil), "submit_work", args)
	subs, err := e.api.Svc.Submissions(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || e.web.Calls(memory.OpEnsure) != 1 {
		t.Fatalf("%d submissions and %d pull request openings, want 1 each", len(subs), e.web.Calls(memory.OpEnsure))
	}
	if got := retried["data"].(map[string]any)["submissionId"]; got != subs[0].SubmissionID {
		t.Errorf("the retry answered submission %v, want the first call's %s", got, subs[0].SubmissionID)
	}
	submitted := 0
	for _, ev := range e.api.EventsOf(id) {
		if strings.Contains(ev["data"].(map[string]any)["summary"].(string), "submitted for review") {
			submitted++
		}
	}
	if submitted != 1 {
		t.Errorf("%d submission events, want 1", submitted)
	}

	// The same call with a key of the caller's acts again only under a
	// new key; the same key with other arguments is refused.
	e.fails(e.connect(key, nil), "submit_work", map[string]any{"taskId": id, "summary": "Other.", "idempotencyKey": "agent-key-0001"}, "conflict")
	e.fails(e.connect(key, nil), "start_task", map[string]any{"taskId": id, "idempotencyKey": "agent-key-0002"}, "conflict") // in review
}

func TestSubscriptionsNotifyOnEachCommit(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-5")
	other := e.createTask("MCP-6")
	updated := make(chan string, 16)
	cs := e.connect(e.api.Admin, updated)
	taskURI, ciURI := "lifecycle://tasks/"+id, "lifecycle://tasks/"+id+"/ci-status"
	for _, uri := range []string{taskURI, ciURI} {
		if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: "lifecycle://tasks/tsk_missing"}); err == nil {
		t.Error("subscribing to a missing task succeeded")
	}
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: "lifecycle://tasks/" + id + "/nope"}); err == nil {
		t.Error("subscribing to an unknown resource succeeded")
	}
	if n := e.h.SubscribedTasksForTest(); n != 1 {
		t.Fatalf("%d tasks watched, want 1", n)
	}
	admin := lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}
	if _, err := e.api.Svc.StartTask(t.Context(), other, lifecycle.StartTaskParams{Actor: admin}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{Actor: admin}); err != nil {
		t.Fatal(err)
	}
	got := []string{within(t, updated, "notification"), within(t, updated, "notification")}
	slices.Sort(got)
	if want := []string{taskURI, ciURI}; !slices.Equal(got, want) {
		t.Fatalf("notified %v, want %v", got, want)
	}
	if err := cs.Unsubscribe(t.Context(), &sdk.UnsubscribeParams{URI: taskURI}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.api.Svc.RecordBlocker(t.Context(), id, lifecycle.RecordBlockerParams{Reason: "r", ActionRequired: "x"}); err != nil {
		t.Fatal(err)
	}
	if uri := within(t, updated, "notification"); uri != ciURI {
		t.Fatalf("after unsubscribing from the task, notified %s", uri)
	}
	select {
	case uri := <-updated:
		t.Fatalf("unexpected notification of %s", uri)
	default:
	}
	// A session that ends drops its subscriptions, and their watch.
	cs.Close()
	testenv.WaitFor(t, 10*time.Second, "the closed session's watch to stop", func() bool { return e.h.SubscribedTasksForTest() == 0 })
}

func TestResourcesAreTheAPIsAnswers(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-7")
	cs := e.connect(e.api.Admin, nil)
	for suffix, path := range map[string]string{"": "", "/review-feedback": "/review-feedback", "/ci-status": "/ci-status"} {
		uri := "lifecycle://tasks/" + id + suffix
		res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		c := res.Contents[0]
		var got map[string]any
		if err := json.Unmarshal([]byte(c.Text), &got); err != nil || c.URI != uri || c.MIMEType != "application/json" {
			t.Fatalf("read %s = %+v, %v", uri, c, err)
		}
		want := e.api.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + path, Key: e.api.Admin}, 200)
		if !jsonEqual(got, want) {
			t.Errorf("%s differs from GET /tasks/{id}%s:\n%v\n%v", uri, path, got, want)
		}
	}
	for _, uri := range []string{"lifecycle://tasks/tsk_missing", "lifecycle://tasks/" + id + "/other", "lifecycle://other/" + id} {
		if _, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %s succeeded", uri)
		}
	}
}

func TestWorkOnTaskPrompt(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-8")
	cs := e.connect(e.api.Admin, nil)
	res, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "work_on_task", Arguments: map[string]string{"taskId": id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 {
		t.Fatalf("%d messages, want 2", len(res.Messages))
	}
	embedded, ok := res.Messages[0].Content.(*sdk.EmbeddedResource)
	if !ok || embedded.Resource.URI != "lifecycle://tasks/"+id || !strings.Contains(embedded.Resource.Text, "MCP-8") {
		t.Errorf("first message = %+v, want the task embedded", res.Messages[0].Content)
	}
	text := res.Messages[1].Content.(*sdk.TextContent).Text
	for _, tool := range []string{"get_task", "start_task", "submit_work", "wait_for_task_change", "get_review_feedback", "get_ci_status", "ship", "record_blocker", id} {
		if !strings.Contains(text, tool) {
			t.Errorf("the loop does not mention %s", tool)
		}
	}
	if _, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "work_on_task", Arguments: map[string]string{}}); err == nil {
		t.Error("the prompt without taskId succeeded")
	}
}

// post sends one JSON-RPC message to the handler as a raw client would.
func (e *env) post(key, session string, msg string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "POST", e.srv.URL+"/mcp", strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	resp := e.post("", "", initialize)
	var body lifecycle.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no key = %d %+v (WWW-Authenticate %q), want 401 unauthorized", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}
	// A session belongs to the key that opened it.
	cs := e.connect(e.api.Admin, nil)
	other := e.api.Key(lifecycle.ScopeTasksRead)
	if resp := e.post(other, cs.ID(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another key on the session = %d, want 404 (no such session for this key)", resp.StatusCode)
	}
	// A revoked key is refused at its next request.
	key := e.api.Key(lifecycle.ScopeTasksRead)
	agent := e.connect(key, nil)
	e.ok(agent, "list_tasks", nil)
	keys, _ := e.api.Svc.APIKeys(t.Context())
	if _, err := e.api.Svc.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.CallTool(t.Context(), &sdk.CallToolParams{Name: "list_tasks"}); err == nil {
		t.Error("a revoked key's call succeeded")
	}
}

func TestWaitTimesOutAndIsLimited(t *testing.T) {
	e := newEnv(t, mcp.Config{MaxWaitsPerKey: 1})
	id := e.createTask("MCP-9")
	cs := e.connect(e.api.Admin, nil)
	waited := make(chan result, 1)
	timesOut := e.api.Clock.Now().Add(5 * time.Second)
	go func() {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "wait_for_task_change", Arguments: map[string]any{"taskId": id, "timeoutSeconds": 5}})
		if err != nil {
			t.Error(err)
			close(waited)
			return
		}
		waited <- decodeResult(t, "wait_for_task_change", res)
	}()
	if !e.api.Clock.WaitForWaiterAt(timesOut, 10*time.Second) {
		t.Fatal("the wait did not start")
	}
	// The key's one place is taken.
	e.fails(e.connect(e.api.Admin, nil), "wait_for_task_change", map[string]any{"taskId": id}, "rate_limited")
	e.api.Clock.Advance(5 * time.Second)
	got := within(t, waited, "answer of the wait")
	if got.isError || got.data["timedOut"] != true || got.data["event"] != nil {
		t.Fatalf("the wait = %s, want timedOut", got.text)
	}
	e.fails(cs, "wait_for_task_change", map[string]any{"taskId": "tsk_missing"}, "not_found")
}

// rawSession opens a session with plain requests and returns its ID.
func (e *env) rawSession(key string) string {
	e.t.Helper()
	resp := e.post(key, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		e.t.Fatalf("initialize = %d", resp.StatusCode)
	}
	io.Copy(io.Discard, resp.Body)
	if resp := e.post(key, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("initialized = %d", resp.StatusCode)
	}
	return session
}

// openStream opens a session's notification stream (its GET); lines
// receives what it reads, and is closed when it ends.
func (e *env) openStream(key, session string) <-chan string {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), "GET", e.srv.URL+"/mcp", nil)
	req.Header = http.Header{"Authorization": {"Bearer " + key}, "Accept": {"text/event-stream"}, "Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET = %v, %v", resp, err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				lines <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return lines
}

// A notification sent before the session's stream is open reaches it when
// it opens.
func TestNotificationBeforeTheStreamOpens(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-10")
	session := e.rawSession(e.api.Admin)
	if resp := e.post(e.api.Admin, session, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"lifecycle://tasks/`+id+`"}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("subscribe = %d", resp.StatusCode)
	}
	if _, err := e.api.Svc.StartTask(t.Context(), id, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}}); err != nil {
		t.Fatal(err)
	}
	lines := e.openStream(e.api.Admin, session)
	var got strings.Builder
	for !strings.Contains(got.String(), "notifications/resources/updated") {
		got.WriteString(within(t, lines, "the notification"))
	}
	if !strings.Contains(got.String(), `"uri":"lifecycle://tasks/`+id+`"`) {
		t.Errorf("the stream read %s", got.String())
	}
}

// Revoking a key ends its sessions' notification streams.
func TestRevokedKeyEndsTheStream(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	keys, _ := e.api.Svc.APIKeys(t.Context())
	lines := e.openStream(key, e.rawSession(key))
	if _, err := e.api.Svc.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-lines:
			if !open {
				return
			}
		case <-timeout:
			t.Fatal("the revoked key's stream did not end")
		}
	}
}

// The same call made again on purpose, once the task has moved on (a
// second blocker, a start and a submission for rework), acts again; its
// own retries act once.
func TestSameCallAgainActsAgain(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("MCP-11")
	cs := e.connect(e.api.Admin, nil)
	events := func() int { return len(e.api.EventsOf(id)) }
	e.ok(cs, "start_task", map[string]any{"taskId": id})
	block := map[string]any{"taskId": id, "reason": "missing_secret", "actionRequired": "Add it"}
	e.ok(cs, "record_blocker", block)
	e.ok(cs, "resolve_blocker", map[string]any{"taskId": id})
	n := events()
	if got := e.ok(cs, "record_blocker", block)["data"].(map[string]any)["status"]; got != "blocked" || events() != n+1 {
		t.Fatalf("the second blocker: status %v, %d events, want blocked and one more event", got, events()-n)
	}
	e.ok(cs, "record_blocker", block) // a retry of it
	if events() != n+1 {
		t.Fatalf("the retry of the second blocker acted: %d events, want %d", events(), n+1)
	}
	e.ok(cs, "resolve_blocker", map[string]any{"taskId": id})

	submit := map[string]any{"taskId": id, "summary": "Done.", "mode": "artifact", "checks": []any{map[string]any{"name": "unit", "status": "passed"}}}
	first := e.ok(cs, "submit_work", submit)["data"].(map[string]any)["submissionId"]
	if again := e.ok(cs, "submit_work", submit)["data"].(map[string]any)["submissionId"]; again != first {
		t.Fatalf("a retry of the submission answered %v, want %v", again, first)
	}
	e.review(id, "changes_requested")
	if got := e.ok(cs, "start_task", map[string]any{"taskId": id})["data"].(map[string]any)["status"]; got != "in_progress" {
		t.Fatalf("start_task for rework = %v, want in_progress", got)
	}
	second := e.ok(cs, "submit_work", submit)["data"].(map[string]any)["submissionId"]
	if second == first {
		t.Fatal("the resubmission after rework answered the first submission")
	}
	if again := e.ok(cs, "submit_work", submit)["data"].(map[string]any)["submissionId"]; again != second {
		t.Fatalf("a retry of the resubmission answered %v, want %v", again, second)
	}
	subs, err := e.api.Svc.Submissions(t.Context(), id)
	if err != nil || len(subs) != 2 {
		t.Fatalf("%d submissions (%v), want 2", len(subs), err)
	}
}
