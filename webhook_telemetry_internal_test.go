package lifecycle

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
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
	w.gauge.flying = 1
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
		w.gauge.flying = 1
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
		if got := occurredAt(body); got != at.UnixNano() {
			t.Errorf("occurredAt of %s = %v, want %v", body, time.Unix(0, got).UTC(), at)
		}
		if tid, ok := eventTraceID(body); !ok || tid.String() != trace {
			t.Errorf("traceId of %s = %v %v, want %s", body, tid, ok, trace)
		}
	}
	none := Event{ID: "evt_2", Type: EventTaskUpdated, OccurredAt: NewTimestamp(at), Data: json.RawMessage(`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}`)}
	body, _ := appendEventJSON(nil, &none)
	if tid, ok := eventTraceID(body); ok {
		t.Errorf("traceId of %s = %v, want none", body, tid)
	}
	for _, bad := range []string{`{}`, `{"occurredAt":"2026-11-21"}`, `{"occurredAt":"2026-11-21T10:04:05.1x3Z"}`, `{"traceId":"zz"}`,
		`{"traceId":"00000000000000000000000000000000"}`} {
		if occurredAt([]byte(bad)) != 0 {
			t.Errorf("occurredAt of %s is not 0", bad)
		}
		if _, ok := eventTraceID([]byte(bad)); ok {
			t.Errorf("%s has a traceId", bad)
		}
	}
	if n := testing.AllocsPerRun(100, func() { occurredAt(hookBody); eventTraceID(hookBody) }); n != 0 {
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

// A worker's gauge counts pending retries beyond those it tracks, and
// finds the oldest again when it is delivered.
func TestHookGaugePending(t *testing.T) {
	var g hookGauge
	body := func(sec int) []byte {
		return fmt.Appendf(nil, `{"occurredAt":"2026-11-21T10:00:%02d.000Z"}`, sec)
	}
	at := func(sec int) int64 { return time.Date(2026, 11, 21, 10, 0, sec, 0, time.UTC).UnixNano() }
	g.pendingRead([]Delivery{{ID: "dlv_a", Body: body(5)}, {ID: "dlv_b", Body: body(3)}}, true)
	if st := g.state("sub_1"); st.pendingN != 2 || st.oldest != at(3) {
		t.Fatalf("pending %d oldest %d, want 2 and %d", st.pendingN, st.oldest, at(3))
	}
	// dlv_b's retry succeeds; a first attempt fails.
	g.flying = 1
	g.attempted(&attempt{id: "dlv_c", prev: &Delivery{ID: "dlv_b"}, body: body(3)}, false)
	g.attempted(&attempt{id: "dlv_d", body: body(9)}, true)
	if st := g.state("sub_1"); st.pendingN != 2 || st.oldest != at(5) || st.flying != 0 {
		t.Fatalf("pending %d oldest %d flying %d, want 2, %d and 0", st.pendingN, st.oldest, st.flying, at(5))
	}
	// A full page: more may be pending than the worker knows of.
	page := make([]Delivery, webhookBatch)
	for i := range page {
		page[i] = Delivery{ID: fmt.Sprintf("dlv_p%d", i), Body: body(1)}
	}
	g.pendingRead(page, false)
	if st := g.state("sub_1"); st.pendingN != webhookBatch+2 || st.oldest != at(1) {
		t.Fatalf("pending %d oldest %d, want %d and %d", st.pendingN, st.oldest, webhookBatch+2, at(1))
	}
	// Every one read again, fewer than a page: exactly those.
	g.pendingRead([]Delivery{{ID: "dlv_d", Body: body(9)}}, true)
	if st := g.state("sub_1"); st.pendingN != 1 || st.oldest != at(9) {
		t.Fatalf("pending %d oldest %d, want 1 and %d", st.pendingN, st.oldest, at(9))
	}
	// Beyond maxTrackedPending, failures are counted, not tracked; the
	// delivery of one not tracked is counted too.
	g.flying = maxTrackedPending + 10
	for i := range maxTrackedPending + 10 {
		g.attempted(&attempt{id: fmt.Sprintf("dlv_x%d", i), body: body(20)}, true)
	}
	g.attempted(&attempt{id: "dlv_y", prev: &Delivery{ID: fmt.Sprintf("dlv_x%d", maxTrackedPending+5)}}, false)
	if st := g.state("sub_1"); len(g.pending) != maxTrackedPending || st.pendingN != maxTrackedPending+10 || st.oldest != at(9) {
		t.Errorf("%d tracked, %d pending, oldest %d; want %d, %d and %d", len(g.pending), st.pendingN, st.oldest,
			maxTrackedPending, maxTrackedPending+10, at(9))
	}
}
