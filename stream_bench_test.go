package lifecycle_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// BenchmarkStreamReplay replays 20,000 stored events (SQLite, with the data
// of a real task.updated event) from a cursor through Handler().ServeHTTP
// into a writer that counts the frames. Target: more than 100,000 events
// per second (see BENCHMARKS.md for the loopback figure with 1,000,000).
func BenchmarkStreamReplay(b *testing.B) {
	const events = 20000
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	actor := lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}
	_, key, err := svc.CreateAPIKey(b.Context(), lifecycle.CreateAPIKeyParams{Name: "bench", Scopes: apitest.AllScopes(), Actor: actor})
	if err != nil {
		b.Fatal(err)
	}
	created, err := svc.CreateTask(b.Context(), lifecycle.CreateTaskParams{
		Identifier: "BENCH-1", Title: "Fix the login redirect", Actor: actor,
		Description: "Users land on a 404 after login; the redirect target loses its query string.",
		Links:       lifecycle.TaskLinks{Issue: "https://issues.example.com/BENCH-1"}, Labels: []string{"frontend"},
	})
	if err != nil {
		b.Fatal(err)
	}
	task := created.ID
	if _, err := svc.StartTask(b.Context(), task, lifecycle.StartTaskParams{Actor: actor}); err != nil {
		b.Fatal(err)
	}
	first, err := store.Events(b.Context(), lifecycle.EventFilter{Limit: 2})
	if err != nil || len(first) != 2 {
		b.Fatalf("events: %v", err)
	}
	var batch []*lifecycle.Event
	for range events {
		batch = append(batch, &lifecycle.Event{ID: id.New("evt_"), Type: lifecycle.EventTaskUpdated, OccurredAt: first[1].OccurredAt,
			TaskVersion: 2, Data: first[1].Data, TaskID: task})
		if len(batch) == 5000 {
			if err := svc.AppendEventsForTest(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// The replay starts after the second event: exactly the seeded ones.
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		w := &frameCounter{h: make(http.Header), want: events, done: cancel}
		r := httptest.NewRequestWithContext(ctx, "GET", "/task-events/stream?cursor="+first[1].ID, nil)
		r.Header.Set("Authorization", "Bearer "+key)
		svc.Handler().ServeHTTP(w, r)
		if w.frames.Load() != events {
			b.Fatalf("replayed %d events, want %d", w.frames.Load(), events)
		}
	}
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
}

// frameCounter is a ResponseWriter that counts event frames and calls done
// once it has want of them.
type frameCounter struct {
	h      http.Header
	want   int64
	frames atomic.Int64
	done   func()
}

func (w *frameCounter) Header() http.Header { return w.h }
func (w *frameCounter) WriteHeader(int)     {}
func (w *frameCounter) Flush()              {}

func (w *frameCounter) Write(p []byte) (int, error) {
	if n := w.frames.Add(int64(bytes.Count(p, []byte("\nid: ")))); n >= w.want {
		w.done()
	}
	return len(p), nil
}
