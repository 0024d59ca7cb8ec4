package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// probe reads what a Service measured and traced, through the SDK's
// in-memory reader and span recorder.
type probe struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

// newProbe returns a probe and the Config change that makes a Service
// report to it.
func newProbe(t *testing.T) (*probe, func(*lifecycle.Config)) {
	p := &probe{t: t, reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	return p, func(c *lifecycle.Config) { c.MeterProvider, c.TracerProvider = mp, tp }
}

// collect returns the metrics measured so far.
func (p *probe) collect() []metricdata.Metrics {
	p.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		p.t.Fatal(err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		out = append(out, sm.Metrics...)
	}
	return out
}

// matches reports whether set has every attribute of want; a value "-"
// wants the attribute absent.
func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if v == "-" {
			if ok {
				return false
			}
			continue
		}
		if !ok || got.String() != v {
			return false
		}
	}
	return true
}

// value sums the points of the metric name whose attributes match want:
// a counter's or gauge's values, a histogram's counts.
func (p *probe) value(name string, want map[string]string) int64 {
	p.t.Helper()
	var n int64
	for _, m := range p.collect() {
		if m.Name != name {
			continue
		}
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				if matches(dp.Attributes, want) {
					n += dp.Value
				}
			}
		case metricdata.Gauge[int64]:
			for _, dp := range d.DataPoints {
				if matches(dp.Attributes, want) {
					n += dp.Value
				}
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				if matches(dp.Attributes, want) {
					n += int64(dp.Count)
				}
			}
		case metricdata.Histogram[int64]:
			for _, dp := range d.DataPoints {
				if matches(dp.Attributes, want) {
					n += int64(dp.Count)
				}
			}
		default:
			p.t.Fatalf("metric %s has data of type %T", name, m.Data)
		}
	}
	return n
}

// observed fails the test unless the metric name has a point whose
// attributes match attrs, whatever its value.
func (p *probe) observed(name string, attrs map[string]string) {
	p.t.Helper()
	for _, m := range p.collect() {
		if d, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == name {
			for _, dp := range d.DataPoints {
				if matches(dp.Attributes, attrs) {
					return
				}
			}
		}
	}
	p.t.Errorf("%s%v was not observed", name, attrs)
}

// want fails the test unless the metric name, among the points matching
// attrs, adds up to n.
func (p *probe) want(name string, attrs map[string]string, n int64) {
	p.t.Helper()
	if got := p.value(name, attrs); got != n {
		p.t.Errorf("%s%v = %d, want %d", name, attrs, got, n)
	}
}

// await waits until the metric name, among the points matching attrs,
// adds up to n.
func (p *probe) await(name string, attrs map[string]string, n int64) {
	p.t.Helper()
	testenv.WaitFor(p.t, 10*time.Second, name+" to reach its count", func() bool { return p.value(name, attrs) == n })
}

// span returns the ended span named name, failing the test when there is
// not exactly one.
func (p *probe) span(name string) sdktrace.ReadOnlySpan {
	p.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range p.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		p.t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, p.names())
	}
	return found[0]
}

// children returns the ended spans whose parent is parent.
func (p *probe) children(parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range p.spans.Ended() {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func (p *probe) names() []string {
	var out []string
	for _, s := range p.spans.Ended() {
		out = append(out, s.Name())
	}
	return out
}

// unbounded matches attribute values that would make a series per task,
// key, event or request: the lifecycle's IDs, URLs, raw paths of tasks.
var unbounded = regexp.MustCompile(`\b(tsk|key|evt|shp|sub|dlv|rev|lsk|whs)_[0-9A-Za-z]{6,}|://|/tasks/[^{]`)

// bounded fails the test when a metric's or span's attribute carries an
// unbounded value.
func (p *probe) bounded() {
	p.t.Helper()
	check := func(where string, set attribute.Set) {
		for _, kv := range set.ToSlice() {
			if unbounded.MatchString(kv.Value.String()) {
				p.t.Errorf("%s: attribute %s = %q is unbounded", where, kv.Key, kv.Value.String())
			}
		}
	}
	for _, m := range p.collect() {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				check(m.Name, dp.Attributes)
			}
		case metricdata.Gauge[int64]:
			for _, dp := range d.DataPoints {
				check(m.Name, dp.Attributes)
			}
		case metricdata.Gauge[float64]:
			for _, dp := range d.DataPoints {
				check(m.Name, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				check(m.Name, dp.Attributes)
			}
		case metricdata.Histogram[int64]:
			for _, dp := range d.DataPoints {
				check(m.Name, dp.Attributes)
			}
		}
	}
	for _, s := range p.spans.Ended() {
		check("span "+s.Name(), attribute.NewSet(s.Attributes()...))
		if unbounded.MatchString(s.Name()) {
			p.t.Errorf("span name %q is unbounded", s.Name())
		}
	}
}

const (
	requestDuration = "http.server.request.duration"
	authFailures    = "lifecycle.auth.failures"
)

func TestTelemetryRequestsAndAuthentication(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe)
	id := e.CreateTask(apitest.TaskBody("TEL-1"))["id"].(string)
	reader := e.Key(lifecycle.ScopeTasksRead)

	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id}, http.StatusUnauthorized)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: "not-a-key"}, http.StatusUnauthorized)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id, Key: "lsk_" + strings.Repeat("a", 40)}, http.StatusUnauthorized)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: reader, Body: apitest.TaskBody("TEL-2")}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "GET", Path: "/no/such/thing", Key: e.Admin}, http.StatusNotFound)

	get := map[string]string{"http.request.method": "GET", "http.route": "/tasks/{id}", "url.scheme": "http"}
	p.want(requestDuration, with(get, "http.response.status_code", "200"), 1)
	p.want(requestDuration, with(get, "http.response.status_code", "401"), 3)
	p.want(requestDuration, map[string]string{"http.route": "/tasks", "http.request.method": "POST", "http.response.status_code": "201"}, 1)
	p.want(requestDuration, map[string]string{"http.route": "/tasks", "http.response.status_code": "403"}, 1)
	p.want(requestDuration, map[string]string{"http.route": "-", "http.response.status_code": "404"}, 1)
	for _, reason := range []string{"missing", "malformed", "unknown", "insufficient_scope"} {
		p.want(authFailures, map[string]string{"lifecycle.auth.reason": reason}, 1)
	}
	p.want(authFailures, nil, 4)

	var gets int
	for _, s := range p.spans.Ended() {
		if s.Name() == "GET /tasks/{id}" {
			gets++
			if s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span kind %v, want server", s.SpanKind())
			}
		}
	}
	if gets != 4 {
		t.Errorf("%d spans GET /tasks/{id}, want 4; spans: %v", gets, p.names())
	}
	p.bounded()
}

// with returns a copy of m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for k, v := range m {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// A submit's trace: the server span continues the agent's traceparent,
// the Store's transactions are its children, and the events it commits
// carry its trace ID. The idempotency instruments count a replay and a
// conflict, the outbox the events committed.
func TestTelemetrySubmitTrace(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e, _ := newSubmitEnv(t, withProbe)
	id := e.startedTask("TEL-3")
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/submit", Key: e.Admin, Body: apitest.SubmitBody(), Header: http.Header{
		"Idempotency-Key": {"tel-submit-1"},
		"Traceparent":     {"00-" + traceID + "-" + parentID + "-01"},
	}})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("submit = %d: %s", rec.Code, rec.Body)
	}
	server := p.span("POST /tasks/{id}/submit")
	if got := server.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("server span trace %s, want the traceparent's %s", got, traceID)
	}
	if got := server.Parent().SpanID().String(); got != parentID || !server.Parent().IsRemote() {
		t.Errorf("server span parent %s (remote %v), want the traceparent's %s", got, server.Parent().IsRemote(), parentID)
	}
	if txs := p.children(server, "store.tx"); len(txs) == 0 {
		t.Errorf("no store.tx span under the submit's; spans: %v", p.names())
	}
	evs := e.Events()
	last := evs[len(evs)-1]
	if last.TaskID != id || last.TraceID == nil || *last.TraceID != traceID {
		t.Errorf("the submit's event %s of %s has traceId %v, want %s", last.Type, last.TaskID, last.TraceID, traceID)
	}

	// The same request again is a replay; the same key for another
	// request is a conflict.
	const route = "/tasks/{id}/submit"
	if rec := e.Submit(id, "tel-submit-1", apitest.SubmitBody()); rec.Code != http.StatusAccepted {
		t.Fatalf("replayed submit = %d: %s", rec.Code, rec.Body)
	}
	other := apitest.SubmitBody()
	other["summary"] = "something else"
	if rec := e.Submit(id, "tel-submit-1", other); rec.Code != http.StatusConflict {
		t.Fatalf("submit with a reused key = %d, want 409: %s", rec.Code, rec.Body)
	}
	p.want("lifecycle.idempotency.replays", map[string]string{"http.route": route}, 1)
	p.want("lifecycle.idempotency.conflicts", map[string]string{"http.route": route}, 1)
	committed := map[lifecycle.EventType]int64{}
	for _, ev := range e.Events() {
		committed[ev.Type]++
	}
	for typ, n := range committed {
		p.want("lifecycle.outbox.events", map[string]string{"lifecycle.event.type": string(typ)}, n)
	}
	p.want("lifecycle.outbox.events", nil, int64(len(e.Events())))
	p.bounded()
}

// Without a traceparent, the events of a request carry its server span's
// trace.
func TestTelemetryEventTraceIsTheRequests(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe)
	id := e.CreateTask(apitest.TaskBody("TEL-4"))["id"].(string)
	server := p.span("POST /tasks")
	evs := e.Events()
	if len(evs) != 1 || evs[0].TaskID != id {
		t.Fatalf("events %v, want one of %s", evs, id)
	}
	if want := server.SpanContext().TraceID().String(); evs[0].TraceID == nil || *evs[0].TraceID != want {
		t.Errorf("task.created traceId = %v, want the request's trace %s", evs[0].TraceID, want)
	}
}

func TestTelemetryShip(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e, _, _ := newShipEnv(t, withProbe)
	id, sha := e.shippableTask("TEL-5")
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/ship", Key: e.Admin, Body: apitest.ShipBody("merge_and_deploy", "staging", sha), Header: http.Header{
		"Idempotency-Key": {"tel-ship-1"},
		"Traceparent":     {"00-" + traceID + "-b7ad6b7169203331-01"},
	}})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("ship = %d: %s", rec.Code, rec.Body)
	}
	opID := apitest.Decode(t, rec)["data"].(map[string]any)["operationId"].(string)
	if st := e.waitShip(opID)["data"].(map[string]any)["status"]; st != "succeeded" {
		t.Fatalf("ship %s", st)
	}
	mode := map[string]string{"lifecycle.ship.mode": "merge_and_deploy"}
	p.await("lifecycle.ship.finished", with(mode, "lifecycle.ship.outcome", "succeeded"), 1)
	p.want("lifecycle.ship.started", mode, 1)
	p.want("lifecycle.ship.finished", map[string]string{"lifecycle.failure.code": "-"}, 1)
	p.want("lifecycle.ship.duration", with(mode, "lifecycle.ship.outcome", "succeeded"), 1)
	p.observed("lifecycle.ship.queue.depth", map[string]string{"lifecycle.ship.status": "queued"})
	p.observed("lifecycle.ship.queue.depth", map[string]string{"lifecycle.ship.status": "running"})
	p.want("lifecycle.ship.queue.depth", nil, 0) // the operation finished

	testenv.WaitFor(t, 10*time.Second, "the ship.run span to end", func() bool {
		for _, s := range p.spans.Ended() {
			if s.Name() == "ship.run" {
				return true
			}
		}
		return false
	})
	run := p.span("ship.run")
	if got := run.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("ship.run is in trace %s, want the ship request's %s", got, traceID)
	}
	for _, step := range []string{"ship.verify", "ship.merge", "ship.deploy"} {
		if len(p.children(run, step)) != 1 {
			t.Errorf("no %s span under ship.run; spans: %v", step, p.names())
		}
	}
	p.bounded()
}

// TestTelemetryShipQueueDepth: the gauge reads the Store's operations
// not yet finished, by status (the Service is not started: nothing takes
// them up).
func TestTelemetryShipQueueDepth(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe)
	depth := func(status string) int64 {
		return p.value("lifecycle.ship.queue.depth", map[string]string{"lifecycle.ship.status": status})
	}
	if q, r := depth("queued"), depth("running"); q != 0 || r != 0 {
		t.Fatalf("an empty queue reads queued %d, running %d", q, r)
	}
	for i, status := range []lifecycle.ShipStatus{lifecycle.ShipQueued, lifecycle.ShipQueued, lifecycle.ShipRunning, lifecycle.ShipSucceeded} {
		id := e.CreateTask(apitest.TaskBody(fmt.Sprintf("DEPTH-%d", i)))["id"].(string)
		op := lifecycle.ShipOperation{TaskID: id, OperationID: fmt.Sprintf("shp_depth%d", i), Status: status,
			QueuedAt: lifecycle.NewTimestamp(apitest.Epoch), Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
			ExpectedHeadSHA: strings.Repeat("a", 40), SubmissionMode: lifecycle.ModeAdapterManaged,
			PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: i + 1},
			Actor:       lifecycle.Actor{ID: "agent", Role: lifecycle.RoleAgent}, LeaseUntil: lifecycle.NewTimestamp(apitest.Epoch)}
		if err := e.Store.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateShipOperation(t.Context(), op) }); err != nil {
			t.Fatal(err)
		}
	}
	if q, r := depth("queued"), depth("running"); q != 2 || r != 1 {
		t.Errorf("queue depth: queued %d, running %d; want 2 and 1", q, r)
	}
}

// A failed ship is counted with its failure code.
func TestTelemetryShipFailed(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e, a, _ := newShipEnv(t, withProbe)
	id, sha := e.shippableTask("TEL-6")
	a.web.SetHeadSHA(1, strings.Repeat("b", 40)) // pushed without a webhook: the runner's reading finds it
	rec := e.ship(id, "tel-ship-2", apitest.ShipBody("merge_only", "staging", sha))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("ship = %d: %s", rec.Code, rec.Body)
	}
	opID := apitest.Decode(t, rec)["data"].(map[string]any)["operationId"].(string)
	op := e.waitShip(opID)["data"].(map[string]any)
	code := op["error"].(map[string]any)["code"].(string)
	p.await("lifecycle.ship.finished", map[string]string{"lifecycle.ship.outcome": "failed", "lifecycle.failure.code": code}, 1)
}

func TestTelemetryStream(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe, func(c *lifecycle.Config) { c.StreamLagLimit = 1 })
	startService(t, e.Svc)
	srv := e.serve()
	first := e.CreateTask(apitest.TaskBody("TEL-7"))["id"].(string)
	cursor := e.Events()[0].ID

	live := stream(t, srv, e.Admin, "", nil)
	p.await("lifecycle.stream.open", nil, 1)
	e.CreateTask(apitest.TaskBody("TEL-8"))
	live.event()
	p.await("lifecycle.stream.events.sent", nil, 1)
	p.want("lifecycle.stream.latency", nil, 1)
	e.CreateTask(apitest.TaskBody("TEL-9")) // the ring keeps one event: a replay from the first reads the Store
	live.event()

	replay := stream(t, srv, e.Admin, "cursor="+cursor, nil)
	if ev := replay.event(); ev.TaskID == first {
		t.Fatalf("replay after %s sent the cursor's own event", cursor)
	}
	p.await("lifecycle.stream.open", nil, 2)
	if p.value("lifecycle.outbox.replay.reads", map[string]string{"lifecycle.replay.reader": "stream"}) == 0 {
		t.Error("a replay read the outbox without counting it")
	}
	live.close()
	replay.close()
	p.await("lifecycle.stream.open", nil, 0)
	p.await("lifecycle.stream.ended", map[string]string{"lifecycle.stream.end_reason": "closed"}, 2)
	p.bounded()
}

// A key revoked while its stream is open ends the stream as revoked.
func TestTelemetryStreamRevoked(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e := newEnv(t, withProbe)
	startService(t, e.Svc)
	srv := e.serve()
	k, key, err := e.Svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "streamer", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead},
		Actor: lifecycle.Actor{ID: "streamer", Role: lifecycle.RoleAgent}})
	if err != nil {
		t.Fatal(err)
	}
	s := stream(t, srv, key, "", nil)
	p.await("lifecycle.stream.open", nil, 1)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + k.ID, Key: e.Admin}, http.StatusNoContent)
	s.ended()
	p.await("lifecycle.stream.ended", map[string]string{"lifecycle.stream.end_reason": "revoked"}, 1)
}

// A sweep that reads tasks is measured, with the tasks it read.
func TestTelemetrySweep(t *testing.T) {
	t.Parallel()
	p, withProbe := newProbe(t)
	e, host := newFleetEnv(t, withProbe)
	var ids []string
	for i := range 3 {
		id, _ := e.greenTask(host, "TEL-SWEEP-"+string(rune('A'+i)), i+1)
		ids = append(ids, id)
	}
	e.nextBeat(func() bool { return e.swept(ids...) })
	p.await("lifecycle.reconcile.sweep.duration", nil, 1)
	var read int64
	for _, m := range p.collect() {
		if m.Name == "lifecycle.reconcile.sweep.tasks" {
			for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
				read += dp.Sum
			}
		}
	}
	if read != 3 {
		t.Errorf("lifecycle.reconcile.sweep.tasks summed %d, want 3", read)
	}
}
