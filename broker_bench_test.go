package lifecycle

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/id"
)

// BenchmarkStreamFanout publishes events one commit at a time to 1,000
// open streams on an in-memory Store, and reports the cost of delivering
// one event to every stream (broker read, wake-ups, ring reads, frame
// writes), without network or database. Batching is off: one commit at a
// time, each would otherwise wait for the batch window.
func BenchmarkStreamFanout(b *testing.B) {
	const streams = 1000
	s, _, _ := newMemService(b, func(c *Config) { c.MaxStreamsPerKey, c.StreamBatchWindow = streams, -1 })
	writers := make([]*countingWriter, streams)
	for i := range writers {
		writers[i] = &countingWriter{h: make(http.Header)}
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		r := httptest.NewRequestWithContext(ctx, "GET", "/task-events/stream", nil)
		go s.Handler().ServeHTTP(writers[i], r)
	}
	for _, w := range writers {
		for w.status.Load() == 0 {
			runtime.Gosched()
		}
	}
	data := []byte(`{"taskId":"tsk_bench","taskIdentifier":"BENCH-1","status":"in_progress","summary":"Task BENCH-1 started","availableActions":["submit"],"links":{"task":"https://tasks.example.com/api/tasks/tsk_bench","reviewFeedback":"https://tasks.example.com/api/tasks/tsk_bench/review-feedback"},"previousStatus":"todo","changedFields":["status"],"actor":{"id":"bench","role":"user"}}`)
	b.ResetTimer()
	for i := 1; b.Loop(); i++ {
		err := s.update(b.Context(), func(tx Tx) error {
			return tx.AppendEvent(b.Context(), &Event{ID: id.New("evt_"), Type: EventTaskUpdated, OccurredAt: s.now(), TaskVersion: 2, Data: data, TaskID: "tsk_bench"})
		})
		if err != nil {
			b.Fatal(err)
		}
		// Wait for every stream, so that none falls behind the ring.
		for _, w := range writers {
			for w.frames.Load() < int64(i) {
				runtime.Gosched()
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streams), "ns/delivery")
}

// countingWriter counts event frames and discards them.
type countingWriter struct {
	h      http.Header
	status atomic.Int32
	frames atomic.Int64
}

func (w *countingWriter) Header() http.Header    { return w.h }
func (w *countingWriter) WriteHeader(status int) { w.status.Store(int32(status)) }
func (w *countingWriter) Flush()                 {}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.frames.Add(int64(bytes.Count(p, []byte("\nid: "))))
	return len(p), nil
}
