package lifecycle

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/internal/telemetry"
)

// hookBody is an event's envelope as the Service writes it.
var hookBody = []byte(`{"id":"evt_1","type":"task.updated","occurredAt":"2026-11-21T10:00:00.000Z","sequence":1,"taskVersion":1,` +
	`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","data":{"task":{"id":"tsk_1"}}}`)

// postBench is a worker of a Service with the given providers, and a
// receiver on loopback that answers 204.
func postBench(tb testing.TB, mutate func(*Config)) *subWorker {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(srv.Close)
	s, _, _ := newMemService(tb, func(c *Config) {
		c.AllowPrivateWebhookTargets = true
		mutate(c)
	})
	return newSubWorker(tb.Context(), s.webhooks, Subscription{ID: "sub_1", URL: srv.URL + "/hooks"}, []byte("s3cret-s3cret-s3cret"))
}

// postOne makes one first attempt through w.post.
func postOne(tb testing.TB, w *subWorker) {
	w.gauge.ReadEvents(0, 1, hookBody) // one first attempt in flight
	a := &attempt{eventID: "evt_1", seq: 1, typ: EventTaskUpdated, body: hookBody, n: 1}
	w.post(a)
	if a.err != "" {
		tb.Fatal(a.err)
	}
}

// noopProviders gives a Service OpenTelemetry's no-op providers.
func noopProviders(c *Config) {
	c.MeterProvider, c.TracerProvider = metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()
}

// sdkProviders gives a Service the SDK's providers, every span sampled
// and recorded, the metrics read on demand.
func sdkProviders(c *Config) {
	c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())))
}

// With no-op providers the telemetry of an attempt (its span, the
// traceparent it would send, the measures and the gauge's bookkeeping)
// allocates nothing.
func TestWebhookTelemetryAllocatesNothingWithNoopProviders(t *testing.T) {
	w := postBench(t, noopProviders)
	a := &attempt{eventID: "evt_1", seq: 1, typ: EventTaskUpdated, body: hookBody, n: 1, status: http.StatusNoContent}
	n := testing.AllocsPerRun(200, func() {
		w.gauge.ReadEvents(0, 1, hookBody)
		ctx, span := w.startDelivery(a)
		_ = w.traceHeader(ctx, span)
		w.attempted(ctx, span, a, nil, time.Millisecond)
	})
	if n != 0 {
		t.Errorf("an attempt's telemetry allocates %.0f times with no-op providers", n)
	}
}

// BenchmarkWebhookPost makes one attempt to a receiver on loopback, with
// no-op and SDK providers.
func BenchmarkWebhookPost(b *testing.B) {
	for _, c := range []struct {
		name   string
		mutate func(*Config)
		post   func(testing.TB, *subWorker)
	}{
		{"otel=noop", noopProviders, postOne},
		{"otel=sdk", sdkProviders, postOne},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := postBench(b, c.mutate)
			b.ReportAllocs()
			for b.Loop() {
				c.post(b, w)
			}
		})
	}
}

// The envelope's occurredAt and traceId are read as the Service writes
// them, and not from within the data.
func TestEnvelopeMembers(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123*int(time.Millisecond), time.UTC)
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, e := range []Event{
		{ID: "evt_1", Type: EventTaskUpdated, OccurredAt: NewTimestamp(at), Sequence: 7, TraceID: &trace,
			Data: json.RawMessage(`{"note":"\"traceId\":\"00000000000000000000000000000001\""}`)},
		{ID: "evt_\u00e9", Type: EventTaskUpdated, OccurredAt: NewTimestamp(at), Sequence: 7, TraceID: &trace, Data: json.RawMessage(`{ "a": 1 }`)},
	} {
		body, err := appendEventJSON(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if got := telemetry.OccurredAt(body); got != at.UnixNano() {
			t.Errorf("occurredAt of %s = %v, want %v", body, time.Unix(0, got).UTC(), at)
		}
		if tid, ok := telemetry.EventTraceID(body); !ok || tid.String() != trace {
			t.Errorf("traceId of %s = %v %v, want %s", body, tid, ok, trace)
		}
	}
	none := Event{ID: "evt_2", Type: EventTaskUpdated, OccurredAt: NewTimestamp(at), Data: json.RawMessage(`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}`)}
	body, _ := appendEventJSON(nil, &none)
	if tid, ok := telemetry.EventTraceID(body); ok {
		t.Errorf("traceId of %s = %v, want none", body, tid)
	}
	for _, bad := range []string{`{}`, `{"occurredAt":"2026-11-21"}`, `{"occurredAt":"2026-11-21T10:04:05.1x3Z"}`, `{"traceId":"zz"}`,
		`{"traceId":"00000000000000000000000000000000"}`} {
		if telemetry.OccurredAt([]byte(bad)) != 0 {
			t.Errorf("occurredAt of %s is not 0", bad)
		}
		if _, ok := telemetry.EventTraceID([]byte(bad)); ok {
			t.Errorf("%s has a traceId", bad)
		}
	}
	if n := testing.AllocsPerRun(100, func() { telemetry.OccurredAt(hookBody); telemetry.EventTraceID(hookBody) }); n != 0 {
		t.Errorf("reading the envelope allocates %.0f times", n)
	}
}

// Why no answer came is named from a bounded set.
func TestNoAnswerType(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Post", URL: "https://x", Err: context.DeadlineExceeded}, "timeout"},
		{context.Canceled, "canceled"},
		{&url.Error{Op: "Post", URL: "https://x", Err: &net.OpError{Op: "dial", Err: &RefusedTargetError{Host: "x", Kind: "private"}}}, "refused_target"},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x"}}, "dns"},
		{&tls.CertificateVerificationError{Err: errors.New("unknown authority")}, "tls"},
		{tls.AlertError(40), "tls"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "connection_refused"},
		{&url.Error{Op: "Post", URL: "https://x", Err: io.EOF}, "connection_reset"},
		{errors.New("something else"), "_OTHER"},
	} {
		if got := noAnswerType(c.err); got != c.want {
			t.Errorf("noAnswerType(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
