package webhookdispatch

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// hookBody is an event's envelope as the Service writes it.
var hookBody = []byte(`{"id":"evt_1","type":"task.updated","occurredAt":"2026-11-21T10:00:00.000Z","sequence":1,"taskVersion":1,` +
	`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","data":{"task":{"id":"tsk_1"}}}`)

// postBench is a worker of a Dispatcher reporting to p, configured as a
// Service configures it by default, and a receiver on loopback that
// answers 204.
func postBench(tb testing.TB, p providers) *subWorker {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(srv.Close)
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	tel, err := telemetry.New(p.mp, p.tp, clock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(tel.Close)
	log := slog.New(slog.DiscardHandler)
	d := New(Config{
		Clock: clock, Log: log, Tel: tel,
		Targets:     NewTargetGuard(true, net.DefaultResolver, log),
		Concurrency: 256, ConcurrencyPerSubscription: 16, Timeout: 10 * time.Second,
		RetrySchedule: DefaultRetrySchedule(), RetryJitter: 0.1,
	})
	return newSubWorker(tb.Context(), d, lifecycletype.Subscription{ID: "sub_1", URL: srv.URL + "/hooks"}, []byte("s3cret-s3cret-s3cret"))
}

// postOne makes one first attempt through w.post.
func postOne(tb testing.TB, w *subWorker) {
	w.gauge.ReadEvents(0, 1, hookBody) // one first attempt in flight
	a := &attempt{eventID: "evt_1", seq: 1, typ: lifecycletype.EventTaskUpdated, body: hookBody, n: 1}
	w.post(a)
	if a.err != "" {
		tb.Fatal(a.err)
	}
}

// providers are the OpenTelemetry providers a test's Dispatcher reports to.
type providers struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// noopProviders returns OpenTelemetry's no-op providers.
func noopProviders() providers {
	return providers{metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()}
}

// sdkProviders returns the SDK's providers, every span sampled and
// recorded, the metrics read on demand.
func sdkProviders() providers {
	return providers{sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())))}
}

// With no-op providers the telemetry of an attempt (its span, the
// traceparent it would send, the measures and the gauge's bookkeeping)
// allocates nothing.
func TestWebhookTelemetryAllocatesNothingWithNoopProviders(t *testing.T) {
	w := postBench(t, noopProviders())
	a := &attempt{eventID: "evt_1", seq: 1, typ: lifecycletype.EventTaskUpdated, body: hookBody, n: 1, status: http.StatusNoContent}
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
		name      string
		providers func() providers
		post      func(testing.TB, *subWorker)
	}{
		{"otel=noop", noopProviders, postOne},
		{"otel=sdk", sdkProviders, postOne},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := postBench(b, c.providers())
			b.ReportAllocs()
			for b.Loop() {
				c.post(b, w)
			}
		})
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
		{&url.Error{Op: "Post", URL: "https://x", Err: &net.OpError{Op: "dial", Err: &lifecycletype.RefusedTargetError{Host: "x", Kind: "private"}}}, "refused_target"},
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
