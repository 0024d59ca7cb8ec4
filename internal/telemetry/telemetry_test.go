package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// wallClock is the system clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// With no-op providers, or the global ones before a host sets any, the
// instruments of the request path, the Store's transactions, the streams
// and the counters allocate nothing.
func TestNoopTelemetryAllocatesNothing(t *testing.T) { // not parallel: AllocsPerRun
	providers := map[string]func() (*Telemetry, error){
		"noop": func() (*Telemetry, error) {
			return New(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider(), wallClock{})
		},
		"unset global": func() (*Telemetry, error) {
			return New(otel.GetMeterProvider(), otel.GetTracerProvider(), wallClock{})
		},
	}
	for name, build := range providers {
		t.Run(name, func(t *testing.T) {
			tel, err := build()
			if err != nil {
				t.Fatal(err)
			}
			if tel.Tracing() {
				t.Fatal("tracing is on")
			}
			r := httptest.NewRequest("GET", "/tasks/tsk_1", nil)
			w := httptest.NewRecorder()
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
			ctx := context.Background()
			allocs := testing.AllocsPerRun(100, func() {
				tel.Instrument(w, r, h)
				_, span := tel.Start(ctx, "store.tx")
				End(span, nil)
				tel.AuthFailure(ctx, "missing")
				tel.Sent(ctx, 3, time.Millisecond)
				tel.StreamOpened(ctx)
				tel.OutboxEvent(ctx, "task.updated")
				_ = tel.InTrace(ctx, nil)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per request, want none", allocs)
			}
		})
	}
}

// The attribute sets of measures are built once per key: measuring
// again allocates nothing, with an SDK as without.
func TestAttrCacheBuildsOnce(t *testing.T) { // not parallel: AllocsPerRun
	builds := 0
	c := newAttrCache(func(k string) []attribute.KeyValue {
		builds++
		return []attribute.KeyValue{attribute.String("k", k)}
	})
	a, b := c.get("x"), c.get("x")
	if builds != 1 || &a.add[0] != &b.add[0] {
		t.Errorf("built %d times, want once, and the same options each time", builds)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.get("x") }); allocs != 0 {
		t.Errorf("get allocates %v times", allocs)
	}
}

// BenchmarkInstrument measures what the server span and the request
// duration cost a request, alone, with the SDK (sampled, batched to a
// discarding exporter) and with no-op providers.
func BenchmarkInstrument(b *testing.B) {
	providers := map[string]func() (*Telemetry, error){
		"noop": func() (*Telemetry, error) {
			return New(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider(), wallClock{})
		},
		"sdk": func() (*Telemetry, error) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			return New(mp, tp, wallClock{})
		},
	}
	for _, name := range []string{"noop", "sdk"} {
		b.Run(name, func(b *testing.B) {
			tel, err := providers[name]()
			if err != nil {
				b.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /tasks/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
			r := httptest.NewRequest("GET", "/tasks/tsk_1", nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				tel.Instrument(w, r, mux)
			}
		})
	}
}
