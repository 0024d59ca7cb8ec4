// Package hostcalltest reads what the code-host adapters' telemetry
// (internal/hostcall) records, for their tests: an SDK MeterProvider with
// a ManualReader and a TracerProvider with a SpanRecorder, both in memory.
package hostcalltest

import (
	"context"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// SDK is an SDK MeterProvider and TracerProvider (every trace sampled)
// recording into memory, shut down when the test ends.
type SDK struct {
	// Reader collects the MeterProvider's metrics.
	Reader *sdkmetric.ManualReader
	// Spans records the spans ended.
	Spans *sdktrace.TracerProvider
	// Recorder holds the spans of Spans.
	Recorder *tracetest.SpanRecorder
	// Meters is the MeterProvider.
	Meters *sdkmetric.MeterProvider
}

// New returns an SDK for t.
func New(t testing.TB) *SDK {
	s := &SDK{Reader: sdkmetric.NewManualReader(), Recorder: tracetest.NewSpanRecorder()}
	s.Meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.Reader))
	s.Spans = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(s.Recorder))
	t.Cleanup(func() {
		_ = s.Meters.Shutdown(context.Background())
		_ = s.Spans.Shutdown(context.Background())
	})
	return s
}

// Collect returns the metrics recorded so far.
func (s *SDK) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Metric returns the metric named name, and false when none was recorded.
func Metric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// Point is a data point's attributes and value: a counter's sum, a
// histogram's count, a gauge's value.
type Point struct {
	// Attrs are the point's attributes.
	Attrs attribute.Set
	// Value is its value.
	Value float64
}

// Points returns the data points of the metric named name, none when it
// was not recorded.
func Points(rm metricdata.ResourceMetrics, name string) []Point {
	m, ok := Metric(rm, name)
	if !ok {
		return nil
	}
	var out []Point
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, Point{p.Attributes, float64(p.Value)})
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, Point{p.Attributes, float64(p.Count)})
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, Point{p.Attributes, float64(p.Value)})
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, Point{p.Attributes, p.Value})
		}
	}
	return out
}

// Sum returns the sum of the values of the points of name whose
// attributes include every one of match.
func Sum(rm metricdata.ResourceMetrics, name string, match ...attribute.KeyValue) float64 {
	var n float64
	for _, p := range Points(rm, name) {
		if has(p.Attrs, match) {
			n += p.Value
		}
	}
	return n
}

func has(set attribute.Set, match []attribute.KeyValue) bool {
	for _, kv := range match {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// ClientSpans returns the spans of kind client ended.
func (s *SDK) ClientSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.Recorder.Ended() {
		if sp.SpanKind() == trace.SpanKindClient {
			out = append(out, sp)
		}
	}
	return out
}

// Bounds says which attribute keys the telemetry may record, and the
// values each may take.
type Bounds map[attribute.Key]func(attribute.Value) bool

// OneOf accepts the string values given.
func OneOf(values ...string) func(attribute.Value) bool {
	return func(v attribute.Value) bool {
		for _, s := range values {
			if v.Type() == attribute.STRING && v.AsString() == s {
				return true
			}
		}
		return false
	}
}

// AnyInt accepts any integer (a status code, a port).
func AnyInt(v attribute.Value) bool { return v.Type() == attribute.INT64 }

// idAfterSlash is a "/" followed by an ID: digits, or hex of a commit.
var idAfterSlash = regexp.MustCompile(`/([0-9]+|[0-9a-f]{7,})\b`)

// CheckBounded fails t for an attribute of the metrics or spans of s whose
// key bounds does not name or whose value it does not accept, and for any
// string value holding a "/" followed by an ID or one of forbidden (the
// repository's path, a branch, a task's identifier, the host's URL).
func (s *SDK) CheckBounded(t testing.TB, bounds Bounds, forbidden ...string) {
	t.Helper()
	check := func(where string, kv attribute.KeyValue) {
		t.Helper()
		ok, known := bounds[kv.Key]
		if !known {
			t.Errorf("%s: attribute %s=%s is not one of the bounded ones", where, kv.Key, kv.Value.String())
			return
		}
		if !ok(kv.Value) {
			t.Errorf("%s: %s=%q is not a bounded value", where, kv.Key, kv.Value.String())
		}
		if kv.Value.Type() != attribute.STRING {
			return
		}
		v := kv.Value.AsString()
		if idAfterSlash.MatchString(v) {
			t.Errorf("%s: %s=%q holds an ID after a slash", where, kv.Key, v)
		}
		for _, f := range forbidden {
			if f != "" && strings.Contains(v, f) {
				t.Errorf("%s: %s=%q holds %q", where, kv.Key, v, f)
			}
		}
	}
	for _, sm := range s.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				for _, kv := range set.ToSlice() {
					check(m.Name, kv)
				}
			}
		}
	}
	for _, sp := range s.ClientSpans() {
		for _, kv := range sp.Attributes() {
			check("span "+sp.Name(), kv)
		}
		for _, f := range forbidden {
			if f != "" && strings.Contains(sp.Name(), f) || idAfterSlash.MatchString(sp.Name()) {
				t.Errorf("span name %q is not bounded", sp.Name())
			}
		}
		if len(sp.Events()) != 0 {
			t.Errorf("span %s has events %v: an error's message may hold a URL", sp.Name(), sp.Events())
		}
	}
}

// Headers is an http.RoundTripper that keeps the traceparent of every
// request it passes on to Next (http.DefaultTransport when nil), as the
// host receives them.
type Headers struct {
	// Next sends the requests on.
	Next http.RoundTripper

	mu     sync.Mutex
	parent []string
}

// RoundTrip implements http.RoundTripper.
func (h *Headers) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.parent = append(h.parent, req.Method+" "+req.URL.Path+" "+req.Header.Get("traceparent"))
	h.mu.Unlock()
	next := h.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}

// Take returns what was kept of the requests since the last call: "METHOD
// PATH TRACEPARENT" each.
func (h *Headers) Take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.parent
	h.parent = nil
	return out
}

// CheckRequests checks the requests an adapter sent under the caller's
// span parent (sent, as Headers.Take returns them) against what s
// recorded in rm: each counted and timed once, each a client span, a
// child of parent, whose traceparent went with the request. It returns
// the client spans.
func (s *SDK) CheckRequests(t testing.TB, rm metricdata.ResourceMetrics, sent []string, parent trace.Span) []sdktrace.ReadOnlySpan {
	t.Helper()
	total := Sum(rm, "lifecycle.host.requests")
	if timed := Sum(rm, "http.client.request.duration"); int(total) != len(sent) || timed != total {
		t.Errorf("%d requests sent, %v counted, %v timed", len(sent), total, timed)
	}
	spans := s.ClientSpans()
	if len(spans) != len(sent) {
		t.Fatalf("%d client spans for %d requests", len(spans), len(sent))
	}
	ids := map[string]bool{}
	for _, sp := range spans {
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() || sp.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %s is not a child of the caller's span", sp.Name())
		}
		ids[sp.SpanContext().SpanID().String()] = true
	}
	traceID := parent.SpanContext().TraceID().String()
	for _, r := range sent {
		parts := strings.Split(r[strings.LastIndex(r, " ")+1:], "-")
		if len(parts) != 4 || parts[1] != traceID || !ids[parts[2]] {
			t.Errorf("%s: traceparent not of a client span of the caller's trace %s", r, traceID)
		}
	}
	return spans
}

// AllocsPerCall returns the mean number of allocations of a call of f, over
// runs calls after one to warm up, on one processor, as
// testing.AllocsPerRun does but without rounding the mean down.
func AllocsPerCall(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}

// AllocSlack is how far apart two measures by AllocsPerCall of the same
// calls may be: other goroutines allocate now and then while they run,
// and under the race detector sync.Pool drops a quarter of what it is
// given at random, so that some calls find it empty and allocate. A
// transport that allocated once per call more would be a whole
// allocation apart.
const AllocSlack = 0.5

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// Discarding returns an SDK MeterProvider aggregating into a ManualReader
// that is never read, and a TracerProvider sampling every trace and
// exporting each span, as it ends, to an exporter that drops it: the
// SDK's whole cost per call, with nothing kept, for benchmarks.
func Discarding(t testing.TB) (*sdkmetric.MeterProvider, *sdktrace.TracerProvider) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(discard{}))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return mp, tp
}
