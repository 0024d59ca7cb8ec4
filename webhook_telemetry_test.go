package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// hookTel is the probe of telemetry_test.go (an SDK with a manual reader
// and a span recorder) with the webhook tests' readings.
type hookTel struct{ *probe }

// newHookTel returns a probe and the Config mutation that gives it to a
// Service, with Config.MetricIdentifiers on: these tests read each
// subscription's gauges and each receiver's measures.
func newHookTel(t *testing.T) (*hookTel, func(*lifecycle.Config)) {
	p, with := newProbe(t)
	return &hookTel{p}, func(c *lifecycle.Config) {
		with(c)
		c.MetricIdentifiers = true
	}
}

// collect returns the metrics measured so far, by name.
func (ht *hookTel) collect() map[string]metricdata.Metrics {
	ht.t.Helper()
	out := map[string]metricdata.Metrics{}
	for _, m := range ht.probe.collect() {
		out[m.Name] = m
	}
	return out
}

// has reports whether set holds every attribute of want.
func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// count returns the sum of the points of a counter, or the count of the
// points of a histogram, with the attributes of want; -1 when the
// instrument has measured nothing.
func (ht *hookTel) count(ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	m, ok := ms[name]
	if !ok {
		return -1
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes, want) {
				n += int64(p.Count)
			}
		}
	default:
		ht.t.Fatalf("%s is a %T", name, m.Data)
	}
	return n
}

// gauges returns the backlog and lag of a subscription; ok is false when
// they were not observed.
func (ht *hookTel) gauges(subID string) (backlog int64, lag float64, ok bool) {
	ht.t.Helper()
	ms := ht.collect()
	sub := attribute.String("lifecycle.subscription.id", subID)
	b, _ := ms["lifecycle.webhook.backlog"].Data.(metricdata.Gauge[int64])
	l, _ := ms["lifecycle.webhook.lag"].Data.(metricdata.Gauge[float64])
	found := 0
	for _, p := range b.DataPoints {
		if has(p.Attributes, []attribute.KeyValue{sub}) {
			backlog, found = p.Value, found+1
		}
	}
	for _, p := range l.DataPoints {
		if has(p.Attributes, []attribute.KeyValue{sub}) {
			lag, found = p.Value, found+1
		}
	}
	return backlog, lag, found == 2
}

// waitGauges waits until the subscription's gauges read backlog and lag.
func (ht *hookTel) waitGauges(subID string, backlog int64, lag float64) {
	ht.t.Helper()
	var b int64
	var l float64
	var ok bool
	apitest.WaitFor(ht.t, func() bool {
		b, l, ok = ht.gauges(subID)
		return ok && b == backlog && l == lag
	})
}

// deliverySpans returns the "webhook.deliver" spans ended so far.
func (ht *hookTel) deliverySpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ht.spans.Ended() {
		if s.Name() == "webhook.deliver" {
			out = append(out, s)
		}
	}
	return out
}

// webhookAttributeKeys are the attribute keys each webhook instrument may
// have: no other.
var webhookAttributeKeys = map[string][]attribute.Key{
	"lifecycle.webhook.delivery.attempts":      {"lifecycle.delivery.outcome", "http.response.status_class"},
	"lifecycle.webhook.delivery.duration":      {"lifecycle.delivery.outcome"},
	"http.client.request.duration":             {"http.request.method", "server.address", "http.response.status_code", "error.type", "lifecycle.peer"},
	"lifecycle.webhook.subscriptions.disabled": {},
	"lifecycle.webhook.backlog":                {"lifecycle.subscription.id"},
	"lifecycle.webhook.lag":                    {"lifecycle.subscription.id"},
	"lifecycle.outbox.replay.reads":            {"lifecycle.replay.reader"},
	"webhook.deliver": {"lifecycle.event.type", "lifecycle.subscription.id", "http.request.method", "server.address",
		"http.request.resend_count", "http.response.status_code", "error.type", "lifecycle.delivery.outcome"},
}

// checkBounded fails the test when a webhook instrument or span has an
// attribute not in webhookAttributeKeys, or a value that holds one of
// unbounded (IDs of events, tasks and deliveries, the receiver's URL).
func (ht *hookTel) checkBounded(unbounded ...string) {
	ht.t.Helper()
	unbounded = append(unbounded, "evt_", "dlv_", "https://", "/hooks")
	check := func(what string, attrs []attribute.KeyValue) {
		ht.t.Helper()
		allowed := webhookAttributeKeys[what]
		for _, kv := range attrs {
			ok := false
			for _, k := range allowed {
				ok = ok || k == kv.Key
			}
			if !ok {
				ht.t.Errorf("%s has attribute %s=%s", what, kv.Key, kv.Value.String())
			}
			for _, u := range unbounded {
				if strings.Contains(kv.Value.String(), u) {
					ht.t.Errorf("%s has the unbounded value %s=%s", what, kv.Key, kv.Value.String())
				}
			}
		}
	}
	for name, m := range ht.collect() {
		if _, ours := webhookAttributeKeys[name]; !ours {
			continue
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes.ToSlice())
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes.ToSlice())
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes.ToSlice())
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes.ToSlice())
			}
		}
	}
	for _, s := range ht.deliverySpans() {
		check(s.Name(), s.Attributes())
		if len(s.Events()) > 0 {
			ht.t.Errorf("span %s has events %v", s.Name(), s.Events())
		}
	}
}

func attr(k, v string) attribute.KeyValue { return attribute.String(k, v) }

// A delivered attempt is counted, timed and traced: its span is a client
// span in the trace of the request that caused the event, its traceparent
// reaches the receiver, and the worker read its event from memory.
func TestWebhookTelemetryDelivered(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	ht, withTel := newHookTel(t)
	e := newHookEnv(t, rc, withTel)
	subID := e.Subscribe(subBody(rc.url("/hooks?token=tok_secret")))["id"].(string)
	// Its worker runs, and reads the broker's ring from the start.
	apitest.WaitFor(t, func() bool { w, _ := e.Svc.WebhookStateForTest(); return w == 1 })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	task := e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1"),
		Header: http.Header{"Traceparent": {"00-" + traceID + "-00f067aa0ba902b7-01"}}}, http.StatusCreated)["data"].(map[string]any)
	d := rc.next()
	if !strings.Contains(string(d.body), `"traceId":"`+traceID+`"`) {
		t.Fatalf("the event's traceId is not the request's: %s", d.body)
	}
	tp := strings.Split(d.header.Get("Traceparent"), "-")
	if len(tp) != 4 || tp[0] != "00" || tp[1] != traceID || tp[2] == "00f067aa0ba902b7" || tp[3] != "01" {
		t.Fatalf("traceparent %q, want the event's trace %s with the delivery's span", d.header.Get("Traceparent"), traceID)
	}
	e.WaitDeliveries(subID, 1)

	ms := ht.collect()
	for _, c := range []struct {
		name string
		want []attribute.KeyValue
		n    int64
	}{
		{"lifecycle.webhook.delivery.attempts", []attribute.KeyValue{attr("lifecycle.delivery.outcome", "delivered"), attr("http.response.status_class", "2xx")}, 1},
		{"lifecycle.webhook.delivery.attempts", []attribute.KeyValue{attr("lifecycle.delivery.outcome", "failed")}, 0},
		{"lifecycle.webhook.delivery.duration", []attribute.KeyValue{attr("lifecycle.delivery.outcome", "delivered")}, 1},
		{"http.client.request.duration", []attribute.KeyValue{attr("http.request.method", "POST"), attr("server.address", "127.0.0.1"),
			attribute.Int("http.response.status_code", 200), attr("lifecycle.peer", "webhook")}, 1},
		{"lifecycle.outbox.replay.reads", []attribute.KeyValue{attr("lifecycle.replay.reader", "webhook")}, -1},
	} {
		if got := ht.count(ms, c.name, c.want...); got != c.n && (c.n != -1 || got > 0) {
			t.Errorf("%s %v = %d, want %d", c.name, c.want, got, c.n)
		}
	}
	if p := ms["http.client.request.duration"].Data.(metricdata.Histogram[float64]).DataPoints; len(p) != 1 || p[0].Attributes.HasValue("error.type") {
		t.Errorf("http.client.request.duration points %v, want one with no error.type", p)
	}

	spans := ht.deliverySpans()
	if len(spans) != 1 {
		t.Fatalf("%d delivery spans, want 1", len(spans))
	}
	s := spans[0]
	if s.SpanKind() != trace.SpanKindClient || s.SpanContext().TraceID().String() != traceID ||
		s.SpanContext().SpanID().String() != tp[2] || s.Parent().SpanID().IsValid() || s.Status().Code == codes.Error {
		t.Errorf("span kind %v, context %v, parent %v, status %v; want a client span of trace %s with span %s, no parent span",
			s.SpanKind(), s.SpanContext(), s.Parent(), s.Status(), traceID, tp[2])
	}
	got := attribute.NewSet(s.Attributes()...)
	if !has(got, []attribute.KeyValue{attr("lifecycle.event.type", "task.updated"), attr("lifecycle.subscription.id", subID),
		attr("http.request.method", "POST"), attr("server.address", "127.0.0.1"), attribute.Int("http.response.status_code", 200),
		attr("lifecycle.delivery.outcome", "delivered")}) {
		t.Errorf("span attributes %v", s.Attributes())
	}
	ht.waitGauges(subID, 0, 0)
	ht.checkBounded(task["id"].(string), "tok_secret")
}

// An event with no traceId (no traceparent on its request, no span) is
// delivered in a trace of its own.
func TestWebhookTelemetryNewTrace(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	ht, withTel := newHookTel(t)
	e := newHookEnv(t, rc, withTel)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	if _, err := e.Svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "ENG-1", Title: "t",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-1"}}); err != nil {
		t.Fatal(err)
	}
	d := rc.next()
	if !strings.Contains(string(d.body), `"traceId":null`) {
		t.Fatalf("event with a traceId: %s", d.body)
	}
	e.WaitDeliveries(subID, 1)
	spans := ht.deliverySpans()
	if len(spans) != 1 || !spans[0].SpanContext().IsValid() || spans[0].Parent().IsValid() || spans[0].Parent().TraceID().IsValid() {
		t.Fatalf("spans %v, want one root span", spans)
	}
	if tp := d.header.Get("Traceparent"); !strings.Contains(tp, spans[0].SpanContext().TraceID().String()) {
		t.Errorf("traceparent %q, want the span's trace %s", tp, spans[0].SpanContext().TraceID())
	}
}

// A 500 and an attempt that gets no answer are failed attempts, with the
// status or why none came; the event is in the backlog until a retry
// delivers it, the lag growing with the clock.
func TestWebhookTelemetryFailures(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2: // no answer: the connection is closed
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	ht, withTel := newHookTel(t)
	e := newHookEnv(t, rc, withTel, noJitter)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	task := e.CreateTask(apitest.TaskBody("ENG-1"))

	rc.next()
	e.WaitDeliveries(subID, 1)
	ht.waitGauges(subID, 1, 0) // pending a retry; the clock has not moved
	e.Clock.Advance(10 * time.Second)
	rc.next()
	e.WaitDeliveries(subID, 2)
	ht.waitGauges(subID, 1, 10)

	ms := ht.collect()
	failed := attr("lifecycle.delivery.outcome", "failed")
	for _, c := range []struct {
		name string
		want []attribute.KeyValue
		n    int64
	}{
		{"lifecycle.webhook.delivery.attempts", []attribute.KeyValue{failed, attr("http.response.status_class", "5xx")}, 1},
		{"lifecycle.webhook.delivery.attempts", []attribute.KeyValue{failed, attr("http.response.status_class", "none")}, 1},
		{"lifecycle.webhook.delivery.attempts", []attribute.KeyValue{attr("lifecycle.delivery.outcome", "delivered")}, 0},
		{"lifecycle.webhook.delivery.duration", []attribute.KeyValue{failed}, 2},
		{"http.client.request.duration", []attribute.KeyValue{attribute.Int("http.response.status_code", 500), attr("error.type", "500")}, 1},
		{"http.client.request.duration", []attribute.KeyValue{attr("error.type", "connection_reset"), attr("lifecycle.peer", "webhook")}, 1},
	} {
		if got := ht.count(ms, c.name, c.want...); got != c.n {
			t.Errorf("%s %v = %d, want %d", c.name, c.want, got, c.n)
		}
	}
	for _, p := range ms["http.client.request.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		if _, answered := p.Attributes.Value("http.response.status_code"); !answered && !p.Attributes.HasValue("error.type") {
			t.Errorf("a point with neither a status nor error.type: %v", p.Attributes.ToSlice())
		}
	}
	spans := ht.deliverySpans()
	if len(spans) != 2 {
		t.Fatalf("%d delivery spans, want 2", len(spans))
	}
	for i, want := range []string{"the receiver answered 500 Internal Server Error", "no answer: connection_reset"} {
		if s := spans[i].Status(); s.Code != codes.Error || s.Description != want {
			t.Errorf("span %d status %v, want an error %q", i, s, want)
		}
	}
	if set := attribute.NewSet(spans[1].Attributes()...); !has(set, []attribute.KeyValue{attribute.Int("http.request.resend_count", 1)}) {
		v, _ := set.Value("http.request.resend_count")
		t.Errorf("the retry's span has resend_count %v, want 1", v.String())
	}

	e.Clock.Advance(time.Minute)
	rc.next()
	e.WaitDeliveries(subID, 3)
	ht.waitGauges(subID, 0, 0)
	if got := ht.count(ht.collect(), "lifecycle.webhook.delivery.attempts", attr("lifecycle.delivery.outcome", "delivered")); got != 1 {
		t.Errorf("%d delivered attempts, want 1", got)
	}
	ht.checkBounded(task["id"].(string))
}

// A receiver's 410 disables its subscription: counted.
func TestWebhookTelemetrySubscriptionDisabled(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	ht, withTel := newHookTel(t)
	e := newHookEnv(t, rc, withTel)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	if n := ht.count(ht.collect(), "lifecycle.webhook.subscriptions.disabled"); n > 0 {
		t.Fatalf("%d subscriptions disabled before any delivery", n)
	}
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	apitest.WaitFor(t, func() bool { return ht.count(ht.collect(), "lifecycle.webhook.subscriptions.disabled") == 1 })
	ms := ht.collect()
	if n := ht.count(ms, "lifecycle.webhook.delivery.attempts", attr("lifecycle.delivery.outcome", "failed"), attr("http.response.status_class", "4xx")); n != 1 {
		t.Errorf("%d failed 4xx attempts, want 1", n)
	}
	// The subscription's worker stopped: its gauges are no longer observed.
	apitest.WaitFor(t, func() bool { _, _, ok := ht.gauges(subID); return !ok })
	ht.checkBounded()
}

// While the receiver holds a request, its event is in flight and the
// next one unread: both are in the backlog, and the lag is the age of the
// first; once delivered, both are 0.
func TestWebhookTelemetryBacklogAndLag(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	hold := make(chan struct{})
	rc.Hold(hold)
	ht, withTel := newHookTel(t)
	e := newHookEnv(t, rc, withTel)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	apitest.WaitFor(t, func() bool { w, _ := e.Svc.WebhookStateForTest(); return w == 1 })
	ht.waitGauges(subID, 0, 0)

	e.CreateTask(apitest.TaskBody("ENG-1"))
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 1 })
	e.Clock.Advance(30 * time.Second)
	ht.waitGauges(subID, 1, 30)
	e.CreateTask(apitest.TaskBody("ENG-2"))
	e.Clock.Advance(15 * time.Second)
	ht.waitGauges(subID, 2, 45)
	if n, _ := rc.InFlight(); n != 1 {
		t.Fatalf("%d requests held, want 1", n)
	}

	close(hold)
	rc.next()
	rc.next()
	e.WaitDeliveries(subID, 2)
	ht.waitGauges(subID, 0, 0)
	ht.checkBounded()
}

// A worker behind the broker's ring reads the outbox from the Store:
// counted as a webhook's replay read. Reads from memory are not.
func TestWebhookTelemetryCatchUpRead(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	ht, withTel := newHookTel(t)
	e := newEnv(t, rc.trust, withTel)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	// Committed before the Service starts: its broker's ring begins after
	// them.
	e.CreateTask(apitest.TaskBody("ENG-1"))
	e.CreateTask(apitest.TaskBody("ENG-2"))
	webhook := attr("lifecycle.replay.reader", "webhook")
	if n := ht.count(ht.collect(), "lifecycle.outbox.replay.reads", webhook); n > 0 {
		t.Fatalf("%d replay reads before the start", n)
	}
	e.Start()
	rc.next()
	rc.next()
	e.WaitDeliveries(subID, 2)
	reads := ht.count(ht.collect(), "lifecycle.outbox.replay.reads", webhook)
	if reads < 1 {
		t.Fatalf("%d webhook replay reads after catching up, want at least 1", reads)
	}
	// Caught up: the next event comes from the ring.
	e.CreateTask(apitest.TaskBody("ENG-3"))
	rc.next()
	e.WaitDeliveries(subID, 3)
	if n := ht.count(ht.collect(), "lifecycle.outbox.replay.reads", webhook); n != reads {
		t.Errorf("%d webhook replay reads, want still %d: the event came from memory", n, reads)
	}
	ht.waitGauges(subID, 0, 0)
	ht.checkBounded()
}

// readsGate blocks the Store's reads of events and deliveries while its
// gate is closed.
type readsGate struct {
	*sqlite.Store
	gate atomic.Pointer[chan struct{}]
}

func (g *readsGate) wait(ctx context.Context) {
	if c := g.gate.Load(); c != nil {
		select {
		case <-*c:
		case <-ctx.Done():
		}
	}
}

func (g *readsGate) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	g.wait(ctx)
	return g.Store.Events(ctx, f)
}

func (g *readsGate) EventBounds(ctx context.Context) (lifecycle.EventBounds, error) {
	g.wait(ctx)
	return g.Store.EventBounds(ctx)
}

func (g *readsGate) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	g.wait(ctx)
	return g.Store.Deliveries(ctx, f)
}

// A scrape of the gauges of 100 subscriptions with a backlog reads
// memory only (the Store's reads are blocked meanwhile).
func TestWebhookTelemetryScrapeOf100Subscriptions(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	hold := make(chan struct{})
	defer close(hold)
	rc.Hold(hold)
	ht, withTel := newHookTel(t)
	rg := &readsGate{}
	e := newEnv(t, rc.trust, withTel, func(c *lifecycle.Config) {
		rg.Store = c.Store.(*sqlite.Store)
		c.Store = rg
		c.WebhookClaimBatch = 100
		c.WebhookConcurrencyPerSubscription = 1
	})
	for i := range 100 {
		if _, err := e.Svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{URL: rc.url(fmt.Sprintf("/hooks/%d", i)),
			EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated}, Secret: hookSecret}); err != nil {
			t.Fatal(err)
		}
	}
	e.Start()
	apitest.WaitFor(t, func() bool { w, _ := e.Svc.WebhookStateForTest(); return w == 100 })
	for i := range 20 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
	}
	e.Clock.Advance(time.Minute)
	backlogs := func() []int64 {
		var out []int64
		for _, p := range ht.collect()["lifecycle.webhook.backlog"].Data.(metricdata.Gauge[int64]).DataPoints {
			out = append(out, p.Value)
		}
		return out
	}
	apitest.WaitFor(t, func() bool {
		n, _ := rc.InFlight()
		b := backlogs()
		return n == 100 && len(b) == 100 && slices.Max(b) == 20 && slices.Min(b) == 20
	})

	gate := make(chan struct{})
	defer close(gate)
	rg.gate.Store(&gate)
	// A scrape that read the Store would wait at the gate until its
	// context ends, and then fail with it: a scrape that succeeds read
	// memory only. (How long a scrape takes is a benchmark's business:
	// internal/cmd/metricsbench.)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var rm metricdata.ResourceMetrics
	start := time.Now()
	if err := ht.reader.Collect(ctx, &rm); err != nil {
		t.Fatalf("a scrape of 100 subscriptions: %v (did it read the Store?)", err)
	}
	t.Logf("a scrape of 100 subscriptions took %s", time.Since(start))
	lags := 0
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "lifecycle.webhook.lag" {
			continue
		}
		for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			lags++
			if p.Value != 60 {
				t.Errorf("lag %v, want 60", p.Value)
			}
		}
	}
	if lags != 100 {
		t.Errorf("%d lags observed, want 100", lags)
	}
}
