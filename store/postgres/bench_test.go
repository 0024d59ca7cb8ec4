package postgres_test

// The benchmarks of this file run the same requests on SQLite and on
// PostgreSQL, side by side: the SQLite store is imported here, by the
// tests only, for the comparison.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

// benchStores are the stores compared.
var benchStores = []string{"sqlite", "postgres"}

// benchEnv is a started Service on a fresh store, with an admin key.
type benchEnv struct {
	svc   *lifecycle.Service
	h     http.Handler
	store lifecycle.Store
	admin string
}

func newBenchEnv(b *testing.B, kind string) *benchEnv {
	b.Helper()
	var store lifecycle.Store
	switch kind {
	case "sqlite":
		s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		store = s
	default:
		store = newStore(b)
	}
	host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api",
		Adapters:     []lifecycle.AdapterBinding{{Adapter: host}},
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close(context.Background()) })
	_, key, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "admin", Actor: ops,
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeEventsRead, lifecycle.ScopeShipWrite, lifecycle.ScopeTasksAdmin}})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{svc: svc, h: svc.Handler(), store: store, admin: key}
}

// createTasks creates n tasks through the Go API, from 8 goroutines, and
// returns their IDs; started tasks are started too.
func (e *benchEnv) createTasks(b *testing.B, prefix string, n int, started bool) []string {
	b.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				t, err := e.svc.CreateTask(context.Background(), lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("%s-%d", prefix, i),
					Title: "Fix the login redirect", Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/x"}, Actor: ops})
				if err == nil && started {
					_, err = e.svc.StartTask(context.Background(), t.ID, lifecycle.StartTaskParams{Actor: ops})
				}
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = t.ID
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return ids
}

// serve runs one request through the handler and checks its status.
func (e *benchEnv) serve(b *testing.B, method, path, key string, body any, want int) []byte {
	var r *http.Request
	if body != nil {
		data, _ := json.Marshal(body)
		r = httptest.NewRequest(method, path, bytes.NewReader(data))
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	r.Header.Set("Authorization", "Bearer "+e.admin)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != want {
		b.Errorf("%s %s = %d, want %d: %s", method, path, w.Code, want, w.Body)
	}
	return w.Body.Bytes()
}

// BenchmarkGetTask reads random tasks of a warm 2,000-task store through
// the handler.
func BenchmarkGetTask(b *testing.B) {
	for _, kind := range benchStores {
		b.Run(kind, func(b *testing.B) {
			e := newBenchEnv(b, kind)
			ids := e.createTasks(b, "SEED", 2000, false)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				e.serve(b, "GET", "/tasks/"+ids[(i*7919)%len(ids)], "", nil, http.StatusOK)
			}
		})
	}
}

// runParallel runs op from 16 goroutines (8 per CPU on 2 CPUs, as the
// root package's benchmarks) and reports its rate as unit/s.
func runParallel(b *testing.B, unit string, op func(i int64)) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op(n.Add(1) - 1)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
}

// BenchmarkCreateTask creates tasks through the handler from concurrent
// clients.
func BenchmarkCreateTask(b *testing.B) {
	for _, kind := range benchStores {
		b.Run(kind, func(b *testing.B) {
			e := newBenchEnv(b, kind)
			runParallel(b, "creations", func(i int64) {
				e.serve(b, "POST", "/tasks", "", map[string]any{"identifier": fmt.Sprintf("BENCH-%d", i), "title": "Fix the login redirect",
					"links": map[string]any{"issue": "https://issues.example.com/x"}, "labels": []string{"frontend"}}, http.StatusCreated)
			})
		})
	}
}

// BenchmarkSubmit submits started tasks through the handler, with the
// in-memory adapter, from concurrent clients.
func BenchmarkSubmit(b *testing.B) {
	for _, kind := range benchStores {
		b.Run(kind, func(b *testing.B) {
			e := newBenchEnv(b, kind)
			ids := e.createTasks(b, "SUB", b.N, true)
			runParallel(b, "submits", func(i int64) {
				e.serve(b, "POST", "/tasks/"+ids[i]+"/submit", fmt.Sprintf("submit-%d", i), map[string]any{"summary": "Fixed it"}, http.StatusAccepted)
			})
		})
	}
}

// BenchmarkShipAcceptance ships submitted tasks with passing checks
// through the handler, from concurrent clients; the runner works the
// operations meanwhile.
func BenchmarkShipAcceptance(b *testing.B) {
	for _, kind := range benchStores {
		b.Run(kind, func(b *testing.B) {
			e := newBenchEnv(b, kind)
			ids := e.createTasks(b, "SHP", b.N, true)
			shas := make([]string, len(ids))
			for i, id := range ids {
				sub, err := e.svc.Submit(b.Context(), id, lifecycle.SubmitParams{Summary: "Fixed", IdempotencyKey: "submit-" + id, Actor: ops})
				if err != nil {
					b.Fatal(err)
				}
				shas[i] = *sub.HeadSHA
				if _, _, err := e.svc.ReportChecks(b.Context(), id, lifecycle.ReportChecksParams{HeadSHA: shas[i],
					Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}, Actor: ops}); err != nil {
					b.Fatal(err)
				}
			}
			runParallel(b, "ships", func(i int64) {
				e.serve(b, "POST", "/tasks/"+ids[i]+"/ship", fmt.Sprintf("ship-key-%08d", i),
					map[string]any{"mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": shas[i]}, http.StatusAccepted)
			})
		})
	}
}

// BenchmarkAppendEvents appends one event per transaction from 16
// concurrent writers, straight to the store: the rate at which
// transactions that append events commit, which on PostgreSQL is bound by
// their serialisation on the event counter.
func BenchmarkAppendEvents(b *testing.B) {
	data := json.RawMessage(`{"taskId":"tsk_bench","status":"todo","summary":"Task B-1 created"}`)
	for _, kind := range benchStores {
		b.Run(kind, func(b *testing.B) {
			e := newBenchEnv(b, kind)
			id := e.createTasks(b, "EVT", 1, false)[0]
			runParallel(b, "events", func(i int64) {
				err := e.store.Update(context.Background(), func(tx lifecycle.Tx) error {
					ev := lifecycle.Event{ID: fmt.Sprintf("evt_bench%d", i), Type: lifecycle.EventTaskUpdated, TaskID: id,
						TaskVersion: i, OccurredAt: lifecycle.NewTimestamp(time.Now()), Data: data}
					return tx.AppendEvent(context.Background(), &ev)
				})
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// BenchmarkReplicasCreate creates tasks through the handlers of 1 or 3
// Services sharing one PostgreSQL database, from 16 concurrent clients
// spread over them.
func BenchmarkReplicasCreate(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			r := newReplicas(b, n, nil, nil)
			keys := make([]string, n)
			for i, svc := range r.svcs {
				var err error
				if _, keys[i], err = svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "admin", Actor: ops,
					Scopes: []lifecycle.Scope{lifecycle.ScopeTasksAdmin}}); err != nil {
					b.Fatal(err)
				}
			}
			handlers := make([]http.Handler, n)
			for i, svc := range r.svcs {
				handlers[i] = svc.Handler()
			}
			runParallel(b, "creations", func(i int64) {
				data, _ := json.Marshal(map[string]any{"identifier": fmt.Sprintf("BENCH-%d", i), "title": "Fix the login redirect",
					"links": map[string]any{"issue": "https://issues.example.com/x"}, "labels": []string{"frontend"}})
				req := httptest.NewRequest("POST", "/tasks", bytes.NewReader(data))
				req.Header.Set("Authorization", "Bearer "+keys[i%int64(n)])
				w := httptest.NewRecorder()
				handlers[i%int64(n)].ServeHTTP(w, req)
				if w.Code != http.StatusCreated {
					b.Errorf("create = %d: %s", w.Code, w.Body)
				}
			})
		})
	}
}

// BenchmarkCrossReplicaStream measures the time from a creation returning
// on replica B to its event's frame arriving on a stream of replica A,
// with the default configuration (notifications, a 1 s poll as backstop,
// a 10 ms stream batch window). Creations come one every 5 ms.
func BenchmarkCrossReplicaStream(b *testing.B) {
	r := newReplicas(b, 2, nil, func(c *lifecycle.Config) {
		c.EventPollInterval, c.ShipPollInterval = 0, 0 // the defaults
	})
	ctx := b.Context()
	_, key, err := r.svcs[0].CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "stream", Actor: ops, Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(r.svcs[0].Handler())
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/task-events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	arrived := make(chan [2]any, 1<<16) // task ID, time
	go func() {
		buf := make([]byte, 1<<16)
		var pending []byte
		for {
			n, err := resp.Body.Read(buf)
			at := time.Now()
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.Index(pending, []byte(`"taskId":"`))
				if i < 0 {
					break
				}
				rest := pending[i+len(`"taskId":"`):]
				j := bytes.IndexByte(rest, '"')
				if j < 0 {
					break
				}
				arrived <- [2]any{string(rest[:j]), at}
				pending = rest[j:]
			}
			if err != nil {
				close(arrived)
				return
			}
		}
	}()
	committed := make(map[string]time.Time)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t, err := r.svcs[1].CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("LAT-%d", i), Title: "t",
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/x"}, Actor: ops})
		if err != nil {
			b.Fatal(err)
		}
		committed[t.ID] = time.Now()
		// Think time between tasks: the benchmark measures the latency of
		// events one at a time, not of a burst, so this pause is the load.
		time.Sleep(5 * time.Millisecond)
	drain:
		for {
			select {
			case a := <-arrived:
				if at, ok := committed[a[0].(string)]; ok {
					lat = append(lat, max(0, a[1].(time.Time).Sub(at)))
					delete(committed, a[0].(string))
				}
			default:
				break drain
			}
		}
	}
	deadline := time.After(5 * time.Second)
	for len(committed) > 0 {
		select {
		case a := <-arrived:
			if at, ok := committed[a[0].(string)]; ok {
				lat = append(lat, max(0, a[1].(time.Time).Sub(at)))
				delete(committed, a[0].(string))
			}
		case <-deadline:
			b.Fatalf("%d events never reached the stream on A", len(committed))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
}

// BenchmarkMarkStalled is storetest.BenchmarkMarkStalled: a sweep of the
// stall watchdog over 100,000 tasks.
func BenchmarkMarkStalled(b *testing.B) {
	storetest.BenchmarkMarkStalled(b, newStore(b))
}
