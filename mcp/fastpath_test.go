package mcp_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
	"github.com/tasklifecycle/lifecycle/mcp"
)

// rawSession is a session opened with plain HTTP requests, so that a test
// sees the bytes of each answer.
type rawSession struct {
	e       *env
	key, id string
}

// post sends a message of the session and returns the answer's status,
// Content-Type and JSON-RPC message (the data of an event stream's event).
func (s *rawSession) post(body string, header ...string) (int, string, string) {
	s.e.t.Helper()
	req, err := http.NewRequestWithContext(s.e.t.Context(), "POST", s.e.srv.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		s.e.t.Fatal(err)
	}
	req.Header = http.Header{"Authorization": {"Bearer " + s.key}, "Content-Type": {"application/json"},
		"Accept": {"application/json, text/event-stream"}}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if s.id == "" {
		s.id = resp.Header.Get("Mcp-Session-Id")
	}
	if strings.HasPrefix(ct, "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return resp.StatusCode, ct, data
			}
		}
		return resp.StatusCode, ct, ""
	}
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, ct, strings.TrimSpace(string(raw))
}

// openRaw initializes a session with key over plain HTTP.
func (e *env) openRaw(key string) *rawSession {
	e.t.Helper()
	s := &rawSession{e: e, key: key}
	if code, _, msg := s.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`); code != http.StatusOK || s.id == "" {
		e.t.Fatalf("initialize = %d %s", code, msg)
	}
	if code, _, msg := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		e.t.Fatalf("initialized = %d %s", code, msg)
	}
	return s
}

// TestFastPathAnswersAsTheSDK calls the read-only tools on the fast path
// and through the SDK's transport, and compares the answers byte for
// byte: successes, tool errors, a missing scope, an unknown task.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("FAST-1")
	e.createTask("FAST-2")
	body := apitest.TaskBody("FAST-ODD")
	body["title"] = "<b>Fix</b> & ship \u2028 \u00e9\u4e16 \"quoted\" \\ \t tab"
	odd := e.api.CreateTask(body)["id"].(string)
	all := e.openRaw(e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeEventsRead))
	noRead := e.openRaw(e.api.Key(lifecycle.ScopeEventsRead))
	call := func(n int, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, n, name, args)
	}
	cases := []struct {
		s    *rawSession
		body string
		want string // in the answer
	}{
		{all, call(10, "get_task", `{"taskId":"`+id+`"}`), `"tokenBudgetHint":"compact"`},
		{all, call(11, "get_task", `{"taskId":"`+id+`","tokenBudget":"standard"}`), `"tokenBudgetHint":"standard"`},
		{all, `{"id":"req-12","params":{"arguments":{"taskId":"` + id + `"},"name":"get_task"},"method":"tools/call","jsonrpc":"2.0"}`, `"id":"req-12"`},
		{all, call(13, "get_task", `{"taskId":"tsk_missing"}`), `not_found`},
		{all, call(14, "get_task", `{"taskId":"`+id+`","extra":1}`), `validation_error`},
		{all, call(15, "get_task", `{"taskId":"`+id+`","tokenBudget":"huge"}`), `validation_error`},
		{noRead, call(16, "get_task", `{"taskId":"`+id+`"}`), `insufficient_scope`},
		{all, call(17, "list_tasks", `{"limit":1}`), `nextCursor`},
		{all, call(18, "get_ci_status", `{"taskId":"`+id+`"}`), `"overall"`},
		{all, call(19, "get_review_feedback", `{"taskId":"`+id+`"}`), `"decision"`},
		{all, call(20, "get_ship_operation", `{"operationId":"shp_missing"}`), `not_found`},
		{all, call(23, "get_merge_queue_status", `{"taskId":"`+id+`"}`), `"inQueue":false`},
		{noRead, call(24, "get_merge_queue_status", `{"taskId":"`+id+`"}`), `insufficient_scope`},
		{all, `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"list_tasks"}}`, `"tasks"`},
		{all, call(-22, "list_tasks", `null`), `"tasks"`},
		{all, call(0, "get_task", `{"taskId":"`+odd+`","tokenBudget":"standard"}`), `\u003cb\u003e`},
	}
	for _, c := range cases {
		e.h.SetFastPathForTest(true)
		code, ct, fast := c.s.post(c.body)
		if code != http.StatusOK || ct != "application/json" {
			t.Fatalf("%s: fast path answered %d %s, want 200 application/json: %s", c.body, code, ct, fast)
		}
		e.h.SetFastPathForTest(false)
		code, ct, sdkAnswer := c.s.post(c.body)
		if code != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("%s: the SDK answered %d %s: %s", c.body, code, ct, sdkAnswer)
		}
		if fast != sdkAnswer {
			t.Errorf("%s: the answers differ:\nfast: %s\nSDK:  %s", c.body, fast, sdkAnswer)
		}
		if !strings.Contains(fast, c.want) {
			t.Errorf("%s: answer %s lacks %s", c.body, fast, c.want)
		}
	}
}

// TestFastPathLeavesTheRestToTheSDK sends what the fast path must not
// take: each is answered as the SDK answers it, as an event stream or an
// HTTP error.
func TestFastPathLeavesTheRestToTheSDK(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("FAST-3")
	key := e.api.Key(lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	s := e.openRaw(key)
	get := `{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":"` + id + `"}}}`
	for _, c := range []struct {
		name   string
		s      *rawSession
		body   string
		header []string
		status int
	}{
		{"another tool", s, `{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"wait_for_task_change","arguments":{"taskId":"` + id + `","timeoutSeconds":1,"afterSequence":0}}}`, nil, 200},
		{"another method", s, `{"jsonrpc":"2.0","id":32,"method":"tools/list"}`, nil, 200},
		{"a progress token", s, `{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":"` + id + `"},"_meta":{"progressToken":1}}}`, nil, 200},
		{"an unknown tool", s, `{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, nil, 200},
		{"a fractional ID", s, strings.Replace(get, `"id":30`, `"id":30.5`, 1), nil, 200},
		{"a notification", s, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, nil, 202},
		{"a batch", s, "[" + get + "]", nil, 400},
		{"malformed", s, get[:len(get)-1], nil, 400},
		{"no protocol version", s, get, []string{"Mcp-Protocol-Version", ""}, 200},
		{"an unknown protocol version", s, get, []string{"Mcp-Protocol-Version", "1999-01-01"}, 400},
		{"an unknown session", s, get, []string{"Mcp-Session-Id", "nope"}, 404},
		{"another key", &rawSession{e: e, key: e.api.Key(lifecycle.ScopeTasksRead), id: s.id}, get, nil, 404},
		{"Accept without event streams", s, get, []string{"Accept", "application/json"}, 400},
	} {
		code, ct, msg := c.s.post(c.body, c.header...)
		if code != c.status || ct == "application/json" && code == 200 {
			t.Errorf("%s: answered %d %s %s, want %d from the SDK", c.name, code, ct, msg, c.status)
		}
	}
	// The session still works on the fast path.
	if code, ct, msg := s.post(get); code != 200 || ct != "application/json" || !strings.Contains(msg, id) {
		t.Fatalf("get_task = %d %s %s", code, ct, msg)
	}
}

// TestFastPathEndsWithTheSession: once a session is deleted, its calls are
// the SDK's (session not found).
func TestFastPathEndsWithTheSession(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	id := e.createTask("FAST-4")
	s := e.openRaw(e.api.Key(lifecycle.ScopeTasksRead))
	req, _ := http.NewRequestWithContext(t.Context(), "DELETE", e.srv.URL+"/mcp", nil)
	req.Header = http.Header{"Authorization": {"Bearer " + s.key}, "Mcp-Session-Id": {s.id}, "Mcp-Protocol-Version": {"2025-06-18"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.h.WaitSessionGoneForTest(s.id)
	code, _, msg := s.post(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":"` + id + `"}}}`)
	if code != http.StatusNotFound {
		t.Fatalf("get_task after DELETE = %d %s, want 404", code, msg)
	}
}

// TestIdleSessionCloses: a session that sends nothing for SessionTimeout
// is closed (by the Handler, which counts the fast path's requests too),
// and its calls are then the SDK's (session not found).
func TestIdleSessionCloses(t *testing.T) {
	e := newEnv(t, mcp.Config{SessionTimeout: 50 * time.Millisecond})
	id := e.createTask("FAST-5")
	s := e.openRaw(e.api.Key(lifecycle.ScopeTasksRead))
	e.h.WaitSessionGoneForTest(s.id)
	// The SDK forgets a closed session just after its Wait returns, which
	// is when the Handler forgets it: a call in between is answered by the
	// closing session with an empty stream, so ask until the SDK has.
	var code int
	var msg string
	if !testenv.WaitUntil(5*time.Second, func() bool {
		code, _, msg = s.post(`{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":"` + id + `"}}}`)
		return code == http.StatusNotFound
	}) {
		t.Fatalf("get_task after the session timed out = %d %s, want 404", code, msg)
	}
}

// TestBodyOverTheAPILimit: a message of over 1 MiB, the API's limit of a
// request body, is refused from its Content-Length before it is read, as
// the API refuses one: 413 payload_too_large.
func TestBodyOverTheAPILimit(t *testing.T) {
	e := newEnv(t, mcp.Config{})
	s := e.openRaw(e.api.Key(lifecycle.ScopeTasksRead))
	conn := e.rawPOST(s.key, s.id, 1<<20+1, "")
	if status, code := testsupport.Answered(t, conn, 10*time.Second); status != http.StatusRequestEntityTooLarge || code != "payload_too_large" {
		t.Fatalf("a message of 1 MiB and a byte = %d %s, want 413 payload_too_large", status, code)
	}
}

// rawPOST opens a connection to the Handler and sends the head of a POST
// declaring a body of length bytes, and first of its body; the rest is
// the test's to send.
func (e *env) rawPOST(key, session string, length int, first string) net.Conn {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	head := "POST /mcp HTTP/1.1\r\nHost: " + e.srv.Listener.Addr().String() + "\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: " + strconv.Itoa(length) + "\r\n"
	if session != "" {
		head += "Mcp-Session-Id: " + session + "\r\nMcp-Protocol-Version: 2025-06-18\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"+first); err != nil {
		e.t.Fatal(err)
	}
	return conn
}
