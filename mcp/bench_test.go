package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/mcp"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// BenchmarkGetTask reads random tasks of a warm 2,000-task SQLite store
// (the durable default), side by side: GET /tasks/{id} through the API's
// handler, and the tool get_task through the MCP handler, each request
// served in process as net/http would serve it, the MCP one in an open
// session: mcp-* on the fast path (fastpath.go, a JSON answer), mcp-*-sdk
// through the SDK's transport (JSON-RPC, SSE framing, the SDK's session
// goroutine), for comparison. cpu-ns/op
// is the process's CPU time (user and system) per request, every
// goroutine included. Target: get_task at most 2x the CPU of GET
// /tasks/{id}.
func BenchmarkGetTask(b *testing.B) {
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	_, admin, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "bench", Scopes: apitest.AllScopes(), Actor: lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 2000)
	for i := range ids {
		t, err := svc.CreateTask(b.Context(), lifecycle.CreateTaskParams{
			Identifier: fmt.Sprintf("SEED-%d", i), Title: "Fix the login redirect",
			Description:        "Users land on a 404 after login; the redirect target loses its query string.",
			AcceptanceCriteria: []string{"redirects to /home", "keeps the query string"},
			Links:              lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/SEED-%d", i)},
			Labels:             []string{"frontend"},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	h, err := mcp.NewHandler(svc, mcp.Config{})
	if err != nil {
		b.Fatal(err)
	}
	api := svc.Handler()
	pick := func(i int) string { return ids[(i*7919)%len(ids)] }

	for _, query := range []string{"", "?tokenBudget=compact"} {
		b.Run("http"+strings.ReplaceAll(query, "?tokenBudget=", "-"), func(b *testing.B) {
			reqs := make([]*http.Request, 256)
			for i := range reqs {
				reqs[i] = httptest.NewRequest("GET", "/tasks/"+pick(i)+query, nil)
				reqs[i].Header.Set("Authorization", "Bearer "+admin)
			}
			w := &sink{h: http.Header{}}
			serve := func(i int) {
				clear(w.h)
				w.status = 0
				api.ServeHTTP(w, reqs[i%len(reqs)])
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			measure(b, serve)
		})
	}
	for _, run := range []struct {
		budget string
		fast   bool
	}{{"compact", true}, {"standard", true}, {"compact", false}, {"standard", false}} {
		budget, name := run.budget, "mcp-"+run.budget
		if !run.fast {
			name += "-sdk"
		}
		b.Run(name, func(b *testing.B) {
			h.SetFastPathForTest(run.fast)
			defer h.SetFastPathForTest(true)
			session := initialize(b, h, admin)
			bodies := make([][]byte, 256)
			for i := range bodies {
				bodies[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get_task","arguments":{"taskId":%q,"tokenBudget":%q}}}`, i+10, pick(i), budget)
			}
			w := &sink{h: http.Header{}}
			rd := bytes.NewReader(nil)
			req := httptest.NewRequest("POST", "/mcp", rd)
			serve := func(i int) {
				// Request IDs must not repeat while in flight; they do not.
				rd.Reset(bodies[i%len(bodies)])
				r := req.Clone(b.Context())
				r.Body, r.ContentLength = readCloser{rd}, int64(rd.Len())
				r.Header = http.Header{"Authorization": {"Bearer " + admin}, "Content-Type": {"application/json"},
					"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}}
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK || w.n < 500 || (w.h.Get("Content-Type") == "application/json") != run.fast {
					b.Fatalf("status %d, %d bytes, %s", w.status, w.n, w.h.Get("Content-Type"))
				}
			}
			measure(b, serve)
		})
	}
}

// measure runs serve b.N times after a warm-up, reporting the CPU time
// per call beside the wall time.
func measure(b *testing.B, serve func(i int)) {
	for i := range 256 {
		serve(i)
	}
	b.ReportAllocs()
	before := cpuTime()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		serve(i)
		n++
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(n), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// initialize opens a session on h and returns its ID.
func initialize(b *testing.B, h http.Handler, key string) string {
	b.Helper()
	post := func(body, session string) *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(b.Context(), "POST", "/mcp", strings.NewReader(body))
		r.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
			r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, "")
	session := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || session == "" {
		b.Fatalf("initialize = %d %s", w.Code, w.Body)
	}
	if w := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); w.Code != http.StatusAccepted {
		b.Fatalf("initialized = %d %s", w.Code, w.Body)
	}
	return session
}

// sink is a ResponseWriter that counts and forgets.
type sink struct {
	h      http.Header
	status int
	n      int
}

func (w *sink) Header() http.Header { return w.h }
func (w *sink) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}
func (w *sink) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *sink) Flush() {}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// BenchmarkSessionAttempts sends b.N initialize requests with one API
// key to the Handler over loopback HTTP, from 4 clients at once, as a
// client that opens sessions without end would: the first
// MaxSessionsPerKey (16) open sessions, the rest are refused 429.
// heap-MiB is how much the heap in use grew over the run (after a
// collection), rss-MiB how much the process's resident memory grew.
// Target: 10,000 attempts (-benchtime 10000x) leave both within 32 MiB of
// the start.
func BenchmarkSessionAttempts(b *testing.B) {
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close(context.Background()) })
	_, key, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "bench", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := mcp.NewHandler(svc, mcp.Config{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	const clients = 4
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	b.Cleanup(client.CloseIdleConnections)
	attempt := func() int {
		req, _ := http.NewRequestWithContext(b.Context(), "POST", srv.URL, strings.NewReader(initializeMsg))
		req.Header = http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if attempt() != http.StatusOK { // warm up
		b.Fatal("the first session was refused")
	}
	heap0, rss0 := memoryInUse()
	var refused atomic.Int64
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if attempt() == http.StatusTooManyRequests {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	heap1, rss1 := memoryInUse()
	if want := int64(max(0, b.N-15)); refused.Load() != want {
		b.Fatalf("%d refused, want %d", refused.Load(), want)
	}
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/(1<<20), "heap-MiB")
	b.ReportMetric(float64(int64(rss1)-int64(rss0))/(1<<20), "rss-MiB")
}

// memoryInUse returns the heap in use, after a collection, and the resident
// memory of the process (VmRSS; 0 where /proc is not there).
func memoryInUse() (heap, rss uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	status, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.SplitSeq(string(status), "\n") {
			if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
				rss = n << 10
			}
		}
	}
	return m.HeapInuse, rss
}
