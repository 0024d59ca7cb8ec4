package hostcall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall/hostcalltest"
	"github.com/tasklifecycle/lifecycle/internal/oteltp"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

var testRoutes = NewRoutes(
	Route{Method: "GET", Path: "/api/v3/repos/{owner}/{repo}/pulls/{pull_number}", Operation: "pulls.get"},
	Route{Method: "PUT", Path: "/api/v3/repos/{owner}/{repo}/pulls/{pull_number}/merge", Operation: "pulls.merge"},
	Route{Method: "GET", Path: "/api/v3/repos/{owner}/{repo}/branches/{branch}/protection", Operation: "repos.get-branch-protection"},
	Route{Method: "POST", Path: "/api/graphql", Operation: OperationGraphQL},
)

func TestRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, url, want string
	}{
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42", "pulls.get"},
		{"PUT", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42/merge", "pulls.merge"},
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42/merge", OperationOther},
		{"POST", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42", OperationOther},
		// An escaped slash stays within its segment.
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/branches/release%2F2.0/protection", "repos.get-branch-protection"},
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/branches/release/2.0/protection", OperationOther},
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/", OperationOther},
		{"GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls", OperationOther},
		{"GET", "https://ghe.example.com/repos/acme/web/pulls/42", OperationOther}, // not under the base
		{"POST", "https://ghe.example.com/api/graphql", OperationGraphQL},
		{"GET", "https://ghe.example.com/", OperationOther},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := testRoutes.spanName(tt.method, u); got != tt.want {
			t.Errorf("operation of %s %s = %q, want %q", tt.method, tt.url, got, tt.want)
		}
	}
	u, _ := url.Parse("https://ghe.example.com/x")
	if name, op := testRoutes.spanName("BREW", u); name != "HTTP other" || op != OperationOther {
		t.Errorf("spanName of an unknown method = %q, %q; want HTTP other", name, op)
	}
}

func TestNewRoutesRefusesABadTable(t *testing.T) {
	t.Parallel()
	for _, r := range []Route{
		{Method: "GET", Path: "repos/{owner}", Operation: "repos.get"},
		{Method: "GET", Path: "/repos/{owner}", Operation: "repos/get"},
		{Method: "GET", Path: "/repos/{owner}"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRoutes(%+v) did not panic", r)
				}
			}()
			NewRoutes(r)
		}()
	}
}

// answer is a RoundTripper that answers every request with status, without
// allocating, and keeps the last request.
type answer struct {
	status int
	err    error
	resp   http.Response
	last   *http.Request
}

func (a *answer) RoundTrip(req *http.Request) (*http.Response, error) {
	a.last = req
	if a.err != nil {
		return nil, a.err
	}
	a.resp.StatusCode = a.status
	a.resp.Body = http.NoBody
	a.resp.Request = req
	return &a.resp, nil
}

// find returns the metric named name, or fails t.
func find(t testing.TB, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	m, ok := hostcalltest.Metric(rm, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return m
}

func attrs(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

func TestTransportSpanAndMetrics(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	tel := New(Config{Host: "github", Scope: "test", MeterProvider: s.Meters, TracerProvider: s.Spans, Routes: testRoutes})
	next := &answer{status: http.StatusOK}
	tr := tel.Transport(next)

	ctx, parent := s.Spans.Tracer("caller").Start(context.Background(), "submit")
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if req.Header.Get("traceparent") != "" {
		t.Error("the caller's request was changed: it carries a traceparent")
	}
	sent := next.last.Header.Get("traceparent")
	spans := s.Recorder.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	span := spans[0]
	if span.Name() != "GET pulls.get" || span.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q of kind %s, want GET pulls.get, client", span.Name(), span.SpanKind())
	}
	if span.Parent().SpanID() != parent.SpanContext().SpanID() || span.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Error("the client span is not the child of the caller's span")
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if sent != want {
		t.Errorf("traceparent sent = %q, want %q (the client span's)", sent, want)
	}
	if got, want := attribute.NewSet(span.Attributes()...), attrs(
		keyMethod.String("GET"), keyAddress.String("ghe.example.com"), keyPort.Int(443),
		KeyHost.String("github"), KeyOperation.String("pulls.get"), keyStatus.Int(200),
	); !got.Equals(&want) {
		t.Errorf("span attributes = %v, want %v", got.Encoded(attribute.DefaultEncoder()), want.Encoded(attribute.DefaultEncoder()))
	}
	if span.Status().Code != codes.Unset {
		t.Errorf("span status = %v, want unset", span.Status())
	}

	rm := s.Collect(t)
	dur := find(t, rm, "http.client.request.duration")
	if dur.Unit != "s" {
		t.Errorf("duration unit %q, want s", dur.Unit)
	}
	h := dur.Data.(metricdata.Histogram[float64]).DataPoints
	if len(h) != 1 || h[0].Count != 1 {
		t.Fatalf("duration points = %+v, want one of count 1", h)
	}
	if want := attrs(KeyHost.String("github"), KeyOperation.String("pulls.get"), keyMethod.String("GET"),
		keyAddress.String("ghe.example.com"), keyStatus.Int(200)); !h[0].Attributes.Equals(&want) {
		t.Errorf("duration attributes = %v", h[0].Attributes.Encoded(attribute.DefaultEncoder()))
	}
	reqs := find(t, rm, "lifecycle.host.requests")
	if reqs.Unit != "{request}" {
		t.Errorf("requests unit %q", reqs.Unit)
	}
	c := reqs.Data.(metricdata.Sum[int64]).DataPoints
	if len(c) != 1 || c[0].Value != 1 {
		t.Fatalf("requests points = %+v, want one of 1", c)
	}
	if want := attrs(KeyHost.String("github"), KeyOperation.String("pulls.get"), keyStatus.Int(200)); !c[0].Attributes.Equals(&want) {
		t.Errorf("requests attributes = %v", c[0].Attributes.Encoded(attribute.DefaultEncoder()))
	}
}

func TestTransportFailures(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	tel := New(Config{Host: "gitlab", Scope: "test", MeterProvider: s.Meters, TracerProvider: s.Spans, Routes: testRoutes})
	u := "http://127.0.0.1:8080/api/v3/repos/acme/web/pulls/42/merge"

	// A 5xx answer: the span fails with the status as error.type.
	req, _ := http.NewRequest("PUT", u, nil)
	if _, err := tel.Transport(&answer{status: 502}).RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	// No answer: error.type says why, and no status is recorded.
	req, _ = http.NewRequest("PUT", u, nil)
	if _, err := tel.Transport(&answer{err: context.DeadlineExceeded}).RoundTrip(req); err == nil {
		t.Fatal("the transport's error was lost")
	}
	req, _ = http.NewRequest("PUT", u, nil)
	if _, err := tel.Transport(&answer{err: io.ErrUnexpectedEOF}).RoundTrip(req); err == nil {
		t.Fatal("the transport's error was lost")
	}
	spans := s.Recorder.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	wantErr := []string{"502", "timeout", "*errors.errorString"}
	for i, span := range spans {
		set := attribute.NewSet(span.Attributes()...)
		if v, _ := set.Value(keyErrorType); v.AsString() != wantErr[i] || span.Status().Code != codes.Error {
			t.Errorf("span %d: error.type %q status %v, want %q and an error", i, v.AsString(), span.Status(), wantErr[i])
		}
		if v, _ := set.Value(keyPort); v.AsInt64() != 8080 {
			t.Errorf("span %d: server.port %d, want 8080", i, v.AsInt64())
		}
		if _, has := set.Value(keyStatus); has != (i == 0) {
			t.Errorf("span %d: http.response.status_code present %v", i, has)
		}
		if len(span.Events()) != 0 {
			t.Errorf("span %d has events %v: an error's message may hold a URL", i, span.Events())
		}
	}
	rm := s.Collect(t)
	var noStatus int
	for _, p := range find(t, rm, "lifecycle.host.requests").Data.(metricdata.Sum[int64]).DataPoints {
		if _, has := p.Attributes.Value(keyStatus); !has {
			noStatus += int(p.Value)
		}
		if _, has := p.Attributes.Value(keyErrorType); has {
			t.Errorf("lifecycle.host.requests carries error.type: %v", p.Attributes.Encoded(attribute.DefaultEncoder()))
		}
	}
	if noStatus != 2 {
		t.Errorf("%d requests without a status, want 2", noStatus)
	}
	var types []string
	for _, p := range find(t, rm, "http.client.request.duration").Data.(metricdata.Histogram[float64]).DataPoints {
		if v, ok := p.Attributes.Value(keyErrorType); ok {
			types = append(types, v.AsString())
		}
	}
	if len(types) != 2 {
		t.Errorf("duration points with error.type: %v, want timeout and *errors.errorString", types)
	}
}

// TestTraceparentWithoutSpans checks that with no spans made, the caller's
// span context still goes on to the host, and nothing when there is none.
func TestTraceparentWithoutSpans(t *testing.T) {
	t.Parallel()
	tel := New(Config{Host: "github", Scope: "test", MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(), Routes: testRoutes})
	next := &answer{status: 200}
	req, _ := http.NewRequest("GET", "https://api.github.com/x", nil)
	tel.Transport(next).RoundTrip(req)
	if h := next.last.Header.Get("traceparent"); h != "" {
		t.Errorf("traceparent %q sent without a span context", h)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, Remote: true})
	req = req.WithContext(trace.ContextWithRemoteSpanContext(context.Background(), sc))
	tel.Transport(next).RoundTrip(req)
	if h, want := next.last.Header.Get("traceparent"), "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01"; h != want {
		t.Errorf("traceparent = %q, want the caller's %q", h, want)
	}
}

// TestNoopAddsNoAllocation checks that with noop providers, and with the
// global ones before they are set, the transport allocates nothing more
// than the transport it wraps.
func TestNoopAddsNoAllocation(t *testing.T) {
	if !oteltp.IsGlobal(otel.GetTracerProvider()) {
		t.Fatal("the global TracerProvider is set in this test binary; the test needs it unset")
	}
	for name, tel := range map[string]*Telemetry{
		"noop":   New(Config{Host: "github", Scope: "test", MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(), Routes: testRoutes}),
		"global": New(Config{Host: "github", Scope: "test", Routes: testRoutes}),
	} {
		next := &answer{status: 200}
		req, _ := http.NewRequest("GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42", nil)
		tr := tel.Transport(next)
		base := testing.AllocsPerRun(100, func() { next.RoundTrip(req) })
		got := testing.AllocsPerRun(100, func() { tr.RoundTrip(req) })
		if got != base {
			t.Errorf("%s: %v allocations per request through the transport, %v without it", name, got, base)
		}
		if tel.activeTracer() != nil {
			t.Errorf("%s: spans are made", name)
		}
	}
}

func TestWebhookOutcomes(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	tel := New(Config{Host: "gitlab", Scope: "test", MeterProvider: s.Meters, TracerProvider: s.Spans})
	ctx := context.Background()
	tel.Taken(ctx, "delivery-1", "digest-1")
	tel.Taken(ctx, "delivery-1", "digest-1") // GitHub's redelivery of one taken
	tel.Taken(ctx, "delivery-2", "digest-1") // the body replayed under another ID
	tel.Taken(ctx, "delivery-3", "")
	tel.Webhook(ctx, InvalidSignature)
	got := map[string]int64{}
	for _, p := range find(t, s.Collect(t), "lifecycle.host.webhooks").Data.(metricdata.Sum[int64]).DataPoints {
		if v, _ := p.Attributes.Value(KeyHost); v.AsString() != "gitlab" {
			t.Errorf("lifecycle.host = %q", v.AsString())
		}
		v, _ := p.Attributes.Value(KeyOutcome)
		got[v.AsString()] = p.Value
	}
	if want := map[string]int64{"accepted": 2, "duplicate": 2, "invalid_signature": 1}; !equalCounts(got, want) {
		t.Errorf("webhooks = %v, want %v", got, want)
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestDeliveriesAreBounded(t *testing.T) {
	t.Parallel()
	var d deliveries
	for i := range maxRemembered + 10 {
		if d.add([]string{"delivery-" + strconv.Itoa(i)}) {
			t.Fatalf("delivery %d seen before", i)
		}
	}
	if len(d.set) != maxRemembered {
		t.Errorf("%d remembered, want %d", len(d.set), maxRemembered)
	}
}

func TestRateLimitGauges(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	gh1 := New(Config{Host: "github", Scope: "gauges", MeterProvider: s.Meters, TracerProvider: s.Spans})
	gh2 := New(Config{Host: "github", Scope: "gauges", MeterProvider: s.Meters, TracerProvider: s.Spans})
	gl := New(Config{Host: "gitlab", Scope: "gauges", MeterProvider: s.Meters, TracerProvider: s.Spans})
	b1, b2, b3 := hostbudget.New(0.8, clock), hostbudget.New(0.8, clock), hostbudget.New(0.8, clock)
	gh1.ObserveRateLimits(b1, nil)
	gh2.ObserveRateLimits(b2, nil)
	gl.ObserveRateLimits(b3, func(r string) bool { return r == "api" })

	for _, sm := range s.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) != 0 {
				t.Errorf("%s reports %+v before any answer said anything of a limit", m.Name, g.DataPoints)
			}
		}
	}
	b1.Observe("core", hostbudget.State{Limit: 5000, Remaining: 4000, Reset: now.Add(30 * time.Minute)})
	b2.Observe("core", hostbudget.State{Limit: 5000, Remaining: 120, Reset: now.Add(10 * time.Minute)})
	b2.Observe("graphql", hostbudget.State{Limit: 5000, Remaining: 4999, Reset: now.Add(time.Hour)})
	b3.Observe("api", hostbudget.State{Limit: 2000, Remaining: 1999, Reset: now.Add(time.Minute)})
	b3.Observe("blocked", hostbudget.State{Limit: 1, Remaining: 0, Reset: now.Add(time.Minute)})

	type key struct{ host, resource string }
	read := func() (map[key]int64, map[key]float64) {
		rm := s.Collect(t)
		rem, reset := map[key]int64{}, map[key]float64{}
		for _, p := range find(t, rm, "lifecycle.host.rate_limit.remaining").Data.(metricdata.Gauge[int64]).DataPoints {
			h, _ := p.Attributes.Value(KeyHost)
			r, _ := p.Attributes.Value(KeyResource)
			if p.Attributes.Len() != 2 {
				t.Errorf("remaining attributes %v", p.Attributes.Encoded(attribute.DefaultEncoder()))
			}
			rem[key{h.AsString(), r.AsString()}] = p.Value
		}
		m := find(t, rm, "lifecycle.host.rate_limit.reset")
		if m.Unit != "s" {
			t.Errorf("reset unit %q, want s", m.Unit)
		}
		for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			h, _ := p.Attributes.Value(KeyHost)
			r, _ := p.Attributes.Value(KeyResource)
			reset[key{h.AsString(), r.AsString()}] = p.Value
		}
		return rem, reset
	}
	rem, reset := read()
	wantRem := map[key]int64{{"github", "core"}: 120, {"github", "graphql"}: 4999, {"gitlab", "api"}: 1999}
	wantReset := map[key]float64{{"github", "core"}: 600, {"github", "graphql"}: 3600, {"gitlab", "api"}: 60}
	for k, v := range wantRem {
		if rem[k] != v || reset[k] != wantReset[k] {
			t.Errorf("%v: remaining %d reset %v, want %d and %v", k, rem[k], reset[k], v, wantReset[k])
		}
	}
	if len(rem) != len(wantRem) || len(reset) != len(wantReset) {
		t.Errorf("gauges report %v and %v, want only %v", rem, reset, wantRem)
	}

	// The window of the lower core limit resets, which makes the other
	// one the lowest; GitLab's window has reset too: its limit is whole
	// again, and its reset 0, never less.
	now = now.Add(15 * time.Minute)
	rem, reset = read()
	if rem[key{"github", "core"}] != 4000 || reset[key{"github", "core"}] != 15*60 {
		t.Errorf("core after one window reset: remaining %d reset %v, want 4000 and 900", rem[key{"github", "core"}], reset[key{"github", "core"}])
	}
	if reset[key{"gitlab", "api"}] != 0 || rem[key{"gitlab", "api"}] != 2000 {
		t.Errorf("gitlab api after its reset: remaining %d reset %v, want 2000 and 0", rem[key{"gitlab", "api"}], reset[key{"gitlab", "api"}])
	}
	runtime.KeepAlive([]any{gh1, gh2, gl, b1, b2, b3})
}

// TestRateLimitGaugesForgetBudgets checks that a budget no longer in use
// is dropped from the gauges, and that the gauges of a MeterProvider no
// adapter uses are unregistered.
func TestRateLimitGaugesForgetBudgets(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	tel := New(Config{Host: "github", Scope: "forget", MeterProvider: s.Meters, TracerProvider: s.Spans})
	observeDropped(tel)
	kept := hostbudget.New(0.8, time.Now)
	kept.Observe("core", hostbudget.State{Limit: 5000, Remaining: 4321, Reset: time.Now().Add(time.Hour)})
	tel.ObserveRateLimits(kept, nil)
	runtime.GC()
	points := find(t, s.Collect(t), "lifecycle.host.rate_limit.remaining").Data.(metricdata.Gauge[int64]).DataPoints
	if len(points) != 1 || points[0].Value != 4321 {
		t.Errorf("remaining = %+v, want only the budget in use (4321)", points)
	}
	g := tel.gauges
	g.mu.Lock()
	n := len(g.watched)
	g.mu.Unlock()
	if n != 1 {
		t.Errorf("%d budgets watched, want 1", n)
	}
	runtime.KeepAlive(kept)
}

//go:noinline
func observeDropped(tel *Telemetry) {
	b := hostbudget.New(0.8, time.Now)
	b.Observe("core", hostbudget.State{Limit: 5000, Remaining: 1, Reset: time.Now().Add(time.Hour)})
	tel.ObserveRateLimits(b, nil)
}

func TestErrorType(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		context.Canceled:         "canceled",
		context.DeadlineExceeded: "timeout",
		&url.Error{Op: "Get", URL: "https://api.github.com/repos/acme/web", Err: context.DeadlineExceeded}: "timeout",
		errors.New("boom"): "*errors.errorString",
		&url.Error{Op: "Get", URL: "https://api.github.com/repos/acme/web", Err: io.EOF}: "*url.Error",
	} {
		if got := errorType(err); got != want {
			t.Errorf("errorType(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestRateLimitGaugesUnregister checks that the gauges' callback is
// unregistered, and the MeterProvider let go of, once no Telemetry of it
// is in use.
func TestRateLimitGaugesUnregister(t *testing.T) {
	t.Parallel()
	s := hostcalltest.New(t)
	b := hostbudget.New(0.8, time.Now)
	b.Observe("core", hostbudget.State{Limit: 5000, Remaining: 1, Reset: time.Now().Add(time.Hour)})
	key := gaugeKey{s.Meters, "unregister"}
	observeWithDroppedTelemetry(s, b)
	registered := func() bool {
		registry.mu.Lock()
		defer registry.mu.Unlock()
		_, ok := registry.m[key]
		return ok
	}
	if !registered() {
		t.Fatal("the gauges were not registered")
	}
	testenv.WaitFor(t, 10*time.Second, "the gauges of no Telemetry in use to be unregistered", func() bool {
		runtime.GC()
		return !registered()
	})
	for _, sm := range s.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) != 0 {
				t.Errorf("%s still reports %+v", m.Name, g.DataPoints)
			}
		}
	}
	runtime.KeepAlive(b)
}

//go:noinline
func observeWithDroppedTelemetry(s *hostcalltest.SDK, b *hostbudget.Budget) {
	New(Config{Host: "github", Scope: "unregister", MeterProvider: s.Meters, TracerProvider: s.Spans}).ObserveRateLimits(b, nil)
}

// BenchmarkTransport is the transport alone over one that answers at once
// without allocating: what the instrumentation costs a request, with noop
// providers, with the global ones unset, and with the SDK's (every trace
// sampled, each span exported to an exporter that drops it, under a
// caller's span).
func BenchmarkTransport(b *testing.B) {
	mp, tp := hostcalltest.Discarding(b)
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"noop", Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()}},
		{"global", Config{}},
		{"sdk", Config{MeterProvider: mp, TracerProvider: tp}},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.Host, c.cfg.Scope, c.cfg.Routes = "github", "bench", testRoutes
			tr := New(c.cfg).Transport(&answer{status: 200})
			ctx := context.Background()
			if c.name == "sdk" {
				var span trace.Span
				ctx, span = tp.Tracer("bench").Start(ctx, "submit")
				defer span.End()
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://ghe.example.com/api/v3/repos/acme/web/pulls/42", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
