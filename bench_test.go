package lifecycle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// benchEnv is a Service on a SQLite store with the durable default
// (synchronous=FULL), called through Handler().ServeHTTP with no prefix.
type benchEnv struct {
	svc   *lifecycle.Service
	store *sqlite.Store
	h     http.Handler
	admin string
}

func newBenchEnv(b *testing.B, mutate ...func(*lifecycle.Config)) *benchEnv {
	b.Helper()
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mutate {
		m(&cfg)
	}
	svc, err := lifecycle.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	_, admin, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "bench", Scopes: apitest.AllScopes(), Actor: lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{svc: svc, store: store, h: svc.Handler(), admin: admin}
}

// seed creates n tasks through the Service and returns their IDs.
func (e *benchEnv) seed(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		p := lifecycle.CreateTaskParams{
			Identifier:         fmt.Sprintf("SEED-%d", i),
			Title:              "Fix the login redirect",
			Description:        "Users land on a 404 after login; the redirect target loses its query string.",
			AcceptanceCriteria: []string{"redirects to /home", "keeps the query string"},
			Links:              lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/SEED-%d", i)},
			Labels:             []string{"frontend"},
		}
		if i%3 == 0 {
			p.AssigneeAgentID = "agent-web"
		}
		t, err := e.svc.CreateTask(b.Context(), p)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	return ids
}

// BenchmarkGetTask reads random tasks of a warm 10,000-task store.
// Target: at most 20 µs and 70 allocations per request.
func BenchmarkGetTask(b *testing.B) { benchmarkGetTask(b) }

func benchmarkGetTask(b *testing.B, mutate ...func(*lifecycle.Config)) {
	e := newBenchEnv(b, mutate...)
	ids := e.seed(b, 10000)
	reqs := make([]*http.Request, 256)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/tasks/"+ids[(i*7919)%len(ids)], nil)
		reqs[i].Header.Set("Authorization", "Bearer "+e.admin)
	}
	w := &discardWriter{h: make(http.Header)}
	// Warm the caches (statements, key cache, pages).
	for _, r := range reqs {
		e.h.ServeHTTP(w, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		clear(w.h)
		w.status = 0
		e.h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// BenchmarkGetTaskTelemetry is BenchmarkGetTask with no-op providers and
// with the OpenTelemetry SDK (every span sampled, or one trace in ten, as
// many deployments do; exported in batches to a discarding exporter;
// metrics kept for a reader), side by side.
// Target: the SDK at most 5% slower; no-op adds no allocation to
// BenchmarkGetTask's.
func BenchmarkGetTaskTelemetry(b *testing.B) {
	providers := []struct {
		name string
		set  func(*lifecycle.Config)
	}{
		{"noop", func(c *lifecycle.Config) {
			c.MeterProvider, c.TracerProvider = metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()
		}},
		{"sdk", func(c *lifecycle.Config) {
			c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		}},
		{"sdk-sampled-10pct", func(c *lifecycle.Config) {
			c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		}},
	}
	for _, p := range providers {
		b.Run(p.name, func(b *testing.B) { benchmarkGetTask(b, p.set) })
	}
}

// BenchmarkCreateTask creates tasks from concurrent clients with the
// durable default. Target: at least 1,500 creations per second.
func BenchmarkCreateTask(b *testing.B) {
	e := newBenchEnv(b)
	e.seed(b, 10000)
	e.parallelRequests(b, http.StatusCreated, func(i int) *http.Request {
		body, _ := json.Marshal(map[string]any{
			"identifier": fmt.Sprintf("BENCH-%d", i+1),
			"title":      "Fix the login redirect",
			"links":      map[string]any{"issue": "https://issues.example.com/x"},
			"labels":     []string{"frontend"},
		})
		return httptest.NewRequest("POST", "/tasks", bytes.NewReader(body))
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creations/s")
}

// startedTasks creates n tasks of project web and starts them.
func (e *benchEnv) startedTasks(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	web := "web"
	for i := range ids {
		t, err := e.svc.CreateTask(b.Context(), lifecycle.CreateTaskParams{
			Identifier: fmt.Sprintf("SUB-%d", i),
			Title:      "Fix the login redirect",
			Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/x"},
			Context:    lifecycle.TaskContext{Project: &web},
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.svc.StartTask(b.Context(), t.ID, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "bench", Role: lifecycle.RoleAgent}}); err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	return ids
}

// benchSubmit submits each of b.N started tasks once, from concurrent
// clients, through the handler.
func benchSubmit(b *testing.B, e *benchEnv) {
	ids := e.startedTasks(b, b.N)
	body, _ := json.Marshal(map[string]any{
		"summary": "Fixed the redirect and added a regression test.",
		"checks":  []map[string]any{{"name": "unit", "status": "passed"}},
	})
	e.parallelRequests(b, http.StatusAccepted, func(i int) *http.Request {
		r := httptest.NewRequest("POST", "/tasks/"+ids[i]+"/submit", bytes.NewReader(body))
		r.Header.Set("Idempotency-Key", fmt.Sprintf("bench-submit-%d", i))
		return r
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// parallelRequests sends b.N requests through the handler from 8 clients
// per CPU, the i-th made by req(i) and authenticated as admin, and fails
// on any other status than want.
func (e *benchEnv) parallelRequests(b *testing.B, want int, req func(i int) *http.Request) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: make(http.Header)}
		for pb.Next() {
			r := req(int(next.Add(1) - 1))
			r.Header.Set("Authorization", "Bearer "+e.admin)
			clear(w.h)
			e.h.ServeHTTP(w, r)
			if w.status != want {
				b.Errorf("status %d, want %d", w.status, want)
				return
			}
		}
	})
}

// BenchmarkSubmit submits through the handler with an in-memory adapter:
// key reservation, pull request, review routing and the accepting
// transaction. Target: at least 1,500 submits per second.
func BenchmarkSubmit(b *testing.B) {
	adapter := memory.New(memory.Config{})
	benchSubmit(b, newBenchEnv(b, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: adapter}}
	}))
}

// BenchmarkSubmitArtifact submits through the handler with the go-git
// artifact adapter: a real commit per submission. Target: at least 200
// submits per second.
func BenchmarkSubmitArtifact(b *testing.B) {
	adapter, err := artifact.New(artifact.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { adapter.Close() }) // its packers stop before the directory goes
	benchSubmit(b, newBenchEnv(b, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: adapter}}
	}))
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
