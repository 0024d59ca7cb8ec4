package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// wrongTypedArray is a JSON array of n ones: far under 1 MiB for 160,000.
func wrongTypedArray(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]"
}

// A body of 160,000 wrong-typed array items is refused at once with a
// small error naming the array, on every route with an array: the scan
// stops at the first wrong item, and the request allocates a few times
// its body, where decoding the array whole (as before the body scan, which
// took seconds) allocates every item. The allocations are counted rather
// than timed, so that a loaded machine does not fail the test; it is not
// parallel, so that they are the request's own.
func TestHugeWrongTypedArraysAreRefusedAtOnce(t *testing.T) {
	e, _ := newSubmitEnv(t)
	id := e.startedTask("BIG-1")
	items := wrongTypedArray(160000)
	tests := []struct {
		name, path, body, field string
		header                  http.Header
	}{
		{"submit checks", "/tasks/" + id + "/submit", `{"summary":"s","checks":` + items + `}`, "checks", http.Header{"Idempotency-Key": {"big-key-0001"}}},
		{"reviewers", "/tasks/" + id + "/submit", `{"summary":"s","pullRequest":{"reviewers":` + items + `}}`, "pullRequest.reviewers", http.Header{"Idempotency-Key": {"big-key-0002"}}},
		{"report checks", "/tasks/" + id + "/checks", `{"headSha":"` + strings.Repeat("a", 40) + `","checks":` + items + `}`, "checks", nil},
		{"labels", "/tasks", `{"identifier":"X-1","title":"t","links":{"issue":"https://x.example/1"},"labels":` + items + `}`, "labels", nil},
		{"eventTypes", "/event-subscriptions", `{"url":"https://hooks.example.com/x","secret":"0123456789abcdef","eventTypes":` + items + `}`, "eventTypes", http.Header{"Idempotency-Key": {"big-key-0003"}}},
	}
	for _, tt := range tests {
		var rec *httptest.ResponseRecorder
		// The fewest bytes of three tries counts: a background goroutine
		// of the Service may allocate meanwhile.
		allocated := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rec = e.Do(apitest.Request{Method: "POST", Path: tt.path, Key: e.Admin, Body: tt.body, Header: tt.header})
			runtime.ReadMemStats(&after)
			allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
		}
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400: %.300s", tt.name, rec.Code, rec.Body)
			continue
		}
		if limit := uint64(12 * len(tt.body)); allocated > limit {
			t.Errorf("%s: the request allocated %d bytes, want at most %d (12 times its body)", tt.name, allocated, limit)
		}
		if rec.Body.Len() > 4096 {
			t.Errorf("%s: error body of %d bytes, want a bounded one", tt.name, rec.Body.Len())
		}
		if !hasFieldError(apitest.Decode(t, rec)["error"].(map[string]any), tt.field) {
			t.Errorf("%s: the error does not name %s: %s", tt.name, tt.field, rec.Body)
		}
	}
}

// Many invalid fields are reported up to 100, then details.truncated.
func TestFieldErrorsAreCapped(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	id := e.startedTask("CAP-1")
	checks := make([]map[string]any, 100)
	for i := range checks {
		checks[i] = map[string]any{"name": "", "status": "green"} // two errors each
	}
	body := e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin,
		Body: map[string]any{"headSha": strings.Repeat("a", 40), "checks": checks}}, http.StatusBadRequest)
	details := body["error"].(map[string]any)["details"].(map[string]any)
	if n := len(details["fields"].([]any)); n != 100 {
		t.Errorf("%d field errors listed, want 100", n)
	}
	if details["truncated"] != true {
		t.Errorf("details.truncated = %v, want true", details["truncated"])
	}

	// Under the cap, nothing says truncated.
	body = e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin,
		Body: map[string]any{"headSha": strings.Repeat("a", 40), "checks": checks[:3]}}, http.StatusBadRequest)
	details = body["error"].(map[string]any)["details"].(map[string]any)
	if _, ok := details["truncated"]; ok || len(details["fields"].([]any)) != 6 {
		t.Errorf("3 bad checks: %v", details)
	}
}

// Too deep a body is refused without being decoded.
func TestDeepBodiesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: `{"labels":` + deep + `}`})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "levels deep") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// blockingBody is a request body that yields a few bytes and then blocks
// until released.
type blockingBody struct {
	first   []byte
	release chan struct{}
	blocked chan struct{} // when not nil, closed once the reader has read first and waits for release
	once    sync.Once
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	if b.blocked != nil {
		b.once.Do(func() { close(b.blocked) })
	}
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

func (b *blockingBody) Close() error { return nil }

// Bodies being decoded at once are bounded: past Config.MaxDecodingBytes a
// request waits briefly, then gets 429 with Retry-After.
func TestDecodingBudgetRefusesWith429(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.MaxDecodingBytes = 1 << 20 })
	hold := &blockingBody{first: []byte(`{"identifier":`), release: make(chan struct{}), blocked: make(chan struct{})}
	first := httptest.NewRequestWithContext(t.Context(), "POST", "/api/tasks", nil)
	first.Body, first.ContentLength = hold, 1<<20
	first.Header.Set("Authorization", "Bearer "+e.Admin)
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		e.Host.ServeHTTP(rec, first)
		done <- rec.Code
	}()
	<-hold.blocked // the first request is being decoded: it holds the budget

	start := time.Now()
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("BUD-1")})
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || apitest.ErrorCode(apitest.Decode(t, rec)) != "rate_limited" {
		t.Fatalf("second body: %d Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("refused after %s, want after about 2 s of waiting", d)
	}
	close(hold.release)
	<-done
	// The budget is free again.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("BUD-2")}, http.StatusCreated)
}

// A request whose client went away does no work and logs no failure.
func TestAbandonedRequestDoesNoWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	raw, _ := json.Marshal(apitest.TaskBody("GONE-1"))
	req := httptest.NewRequestWithContext(ctx, "POST", "/api/tasks", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+e.Admin)
	cancel()
	e.Host.ServeHTTP(httptest.NewRecorder(), req)
	if n := len(e.Events()); n != 0 {
		t.Errorf("%d events after an abandoned creation", n)
	}
	if strings.Contains(e.LogText(), "request failed") {
		t.Errorf("an abandoned request was logged as a failure:\n%s", e.LogText())
	}
}

// A Content-Length over 1 MiB is refused before any byte of the body is
// read.
func TestOversizedContentLengthRefusedBeforeReading(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := &blockingBody{release: make(chan struct{})} // never sends a byte
	defer close(body.release)
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/api/tasks", nil)
	req.Body, req.ContentLength = body, 100000000
	req.Header.Set("Authorization", "Bearer "+e.Admin)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { e.Host.ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("a 100 MB Content-Length was not refused before reading")
	}
	if rec.Code != http.StatusRequestEntityTooLarge || apitest.ErrorCode(apitest.Decode(t, rec)) != "payload_too_large" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// rawExchange sends raw bytes on a new connection and reads one response.
func rawExchange(t *testing.T, addr, raw string, wait time.Duration) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response within %s: %v", wait, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// A body that trickles in gets 408 once Config.BodyReadTimeout has passed.
func TestSlowBodyGets408(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	// Mounted without the OpenAPI check, which would read the body first.
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", e.Svc.Handler()))
	addr := apitest.Serve(t, mux)
	start := time.Now()
	resp, body := rawExchange(t, addr, "POST /api/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.Admin+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"identifier\"", 5*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"request_timeout"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %s", d)
	}
}

// Every answer net/http would write by itself to a malformed request comes
// in the API's JSON error shape, and paths are never redirected.
func TestMalformedRequestsGetJSONErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := apitest.Serve(t, e.Svc.Handler()) // at the root, as the demo serves it
	tests := []struct {
		name, raw string
		status    int
		code      string
	}{
		{"NUL in a header", "GET /tasks HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, "validation_error"},
		{"DEL in Idempotency-Key", "POST /tasks/tsk_1/submit HTTP/1.1\r\nHost: x\r\nIdempotency-Key: abc\x7fdefgh\r\nContent-Length: 0\r\n\r\n", 400, "validation_error"},
		{"control character in the path", "GET /tasks/\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "validation_error"},
		{"no Host", "GET /tasks HTTP/1.1\r\n\r\n", 400, "validation_error"},
		{"unsupported transfer encoding", "POST /tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not_implemented"},
		{"unknown expectation", "POST /tasks HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nContent-Length: 2\r\n\r\n{}", 417, "validation_error"},
		{"headers too large", "GET /tasks HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+4096) + "\r\n\r\n", 431, "payload_too_large"},
		{"path needing cleaning", "GET //tasks HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not_found"},
		{"dot segment", "GET /tasks/../tasks HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not_found"},
	}
	for _, tt := range tests {
		resp, body := rawExchange(t, addr, tt.raw, 5*time.Second)
		var got lifecycle.ErrorBody
		if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &got) != nil || got.Error.Code != tt.code || got.Error.Message == "" {
			t.Errorf("%s: %d %s %q", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// The handler alone (without the listener) answers paths needing cleaning
// with a JSON 404, not a redirect.
func TestPathCleaningIsNotARedirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	svc := httptest.NewServer(e.Svc.Handler())
	defer svc.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"//tasks", "/tasks/./x", "/tasks/x/../y", "/a/b/.."} {
		req, _ := http.NewRequest("GET", svc.URL+p, nil)
		req.URL.Opaque = p // sent as it is
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
}

// panicky is an Authenticator that panics.
type panicky struct{}

func (panicky) Authenticate(*http.Request) (lifecycle.Principal, error) { panic("boom") }

// A handler that panics answers a JSON 500 and logs the panic, instead of
// dropping the connection.
func TestPanicIsAJSON500(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Authenticator = panicky{} })
	rec := e.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: "x"})
	if rec.Code != http.StatusInternalServerError || apitest.ErrorCode(apitest.Decode(t, rec)) != "internal" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(e.LogText(), "panicked") || strings.Contains(rec.Body.String(), "boom") {
		t.Errorf("the panic is not logged, or leaks: %s", rec.Body)
	}
}

// serveLoopback serves svc's API under /api/ on a loopback server, without
// the OpenAPI check (which would read bodies first), and returns its
// address.
func serveLoopback(t testing.TB, svc *lifecycle.Service) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	return apitest.Serve(t, mux)
}

// A body that stalls gets 408 once Config.BodyReadTimeout has passed, and
// its connection is then closed, not held open while net/http waits for
// the rest of the body to discard it.
func TestSlowBodyConnectionIsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	addr := serveLoopback(t, e.Svc)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /api/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+e.Admin+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"identifier\"")
	if status, code := testsupport.Answered(t, conn, 5*time.Second); status != http.StatusRequestTimeout || code != "request_timeout" {
		t.Fatalf("%d %s", status, code)
	}
}

// A request answered before its body is read (a bad key, an unknown path)
// does not leave its connection to a client that declared a small body
// and stalls: the server, which here sets no ReadTimeout, closes it.
func TestUnreadBodyDoesNotHoldTheConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := serveLoopback(t, e.Svc)
	for _, head := range []string{
		"POST /api/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer lsk_wrongwrongwrongwrongwrongwrongwrong00\r\n",
		"POST /api/no-such-thing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.Admin + "\r\n",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, head+"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"identifier\"")
		if status, _ := testsupport.Answered(t, conn, 5*time.Second); status != http.StatusUnauthorized && status != http.StatusNotFound {
			t.Errorf("%q: answered %d", head, status)
		}
	}
}
