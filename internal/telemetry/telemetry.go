// Package telemetry holds the lifecycle Service's OpenTelemetry
// instruments and tracer, built once from a MeterProvider and a
// TracerProvider. Its measures take plain values (names, codes, counts,
// durations), so that it knows nothing of the lifecycle's types; the
// instruments are listed, with their units and attributes, in
// docs/operations.md.
//
// With no-op providers each measure is a check of Enabled, and each span
// a check of Tracing, and allocates nothing.
package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/internal/oteltp"
)

// InstrumentationName names the meter and the tracer: the lifecycle's
// import path, as OpenTelemetry asks of instrumentation libraries.
const InstrumentationName = "github.com/tasklifecycle/lifecycle"

// durationBuckets are the bounds, in seconds, of the duration
// histograms: those OpenTelemetry's HTTP conventions advise, from 5 ms to
// 10 s, and longer ones for ship operations and deliveries that wait.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300, 1800}

// Clock tells the time that request durations are measured by.
type Clock interface {
	Now() time.Time
}

// Telemetry holds the instruments and the tracer. It is safe for
// concurrent use.
type Telemetry struct {
	clock  Clock // measures request durations
	tracer trace.Tracer
	// traces says whether spans are started: never with OpenTelemetry's
	// no-op TracerProvider, and with the global one only once the host
	// sets a provider that records (otel.SetTracerProvider).
	traces     oteltp.Mode
	propagator propagation.TraceContext
	noSpan     trace.Span

	requestDuration metric.Float64Histogram
	requests        *attrCache[requestKey]
	eventTypes      *attrCache[string]
	routes          *attrCache[string] // http.route, for idempotency
	authReasons     *attrCache[string]
	shipModes       *attrCache[string]
	shipEnds        *attrCache[shipEnd]
	streamEnds      *attrCache[string]
	replayReaders   *attrCache[string]
	serverSpans     *cache[serverSpanKey, []trace.SpanStartOption]
	spanRoutes      *cache[routeKey, spanRoute]

	shipStarted  metric.Int64Counter
	shipFinished metric.Int64Counter
	shipDuration metric.Float64Histogram

	deliveryAttempts      metric.Int64Counter
	deliveryDuration      metric.Float64Histogram
	clientDuration        metric.Float64Histogram
	subscriptionsDisabled metric.Int64Counter

	streamsOpen   metric.Int64UpDownCounter
	streamEvents  metric.Int64Counter
	streamsEnded  metric.Int64Counter
	streamLatency metric.Float64Histogram

	outboxEvents metric.Int64Counter
	replayReads  metric.Int64Counter

	sweepDuration metric.Float64Histogram
	sweepTasks    metric.Int64Histogram

	idempotencyReplays   metric.Int64Counter
	idempotencyConflicts metric.Int64Counter
	authFailures         metric.Int64Counter
	taskCacheLookups     metric.Int64Counter
	cacheHit, cacheMiss  metric.AddOption // lifecycle.task_cache.lookups' attributes

	queue queueInstruments

	meter metric.Meter

	mu            sync.Mutex
	registrations []metric.Registration // of observable instruments' callbacks
}

// requestKey is what http.server.request.duration's attributes are made
// of, from the request and its answer.
type requestKey struct {
	pattern string // the route's pattern as ServeMux reports it, or ""
	method  string
	status  int
	tls     bool
}

// New builds the instruments of mp and the tracer of tp; clock measures
// the durations of requests.
func New(mp metric.MeterProvider, tp trace.TracerProvider, clock Clock) (*Telemetry, error) {
	t := &Telemetry{
		clock:      clock,
		tracer:     tp.Tracer(InstrumentationName),
		requests:   newAttrCache(requestAttributes),
		eventTypes: newAttrCache(oneAttr[string]("lifecycle.event.type")),
		routes: newAttrCache(func(r string) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("http.route", route(r))}
		}),
		authReasons:   newAttrCache(oneAttr[string]("lifecycle.auth.reason")),
		shipModes:     newAttrCache(oneAttr[string]("lifecycle.ship.mode")),
		shipEnds:      newAttrCache(shipEndAttributes),
		streamEnds:    newAttrCache(oneAttr[string]("lifecycle.stream.end_reason")),
		replayReaders: newAttrCache(oneAttr[string]("lifecycle.replay.reader")),
		serverSpans:   newCache(serverSpanOptions),
		spanRoutes:    newCache(spanRouteOf),
		noSpan:        tracenoop.Span{},
	}
	t.traces = oteltp.ModeOf(tp)
	m := mp.Meter(InstrumentationName)
	t.meter = m
	var b instrumentBuilder
	b.m = m
	t.requestDuration = b.histogram("http.server.request.duration", "s", "Duration of HTTP server requests.")
	t.clientDuration = b.histogram("http.client.request.duration", "s", "Duration of HTTP client requests: webhook deliveries.")
	t.shipStarted = b.counter("lifecycle.ship.started", "{operation}", "Ship operations a runner took up for the first time.")
	t.shipFinished = b.counter("lifecycle.ship.finished", "{operation}", "Ship operations finished, by outcome and failure code.")
	t.shipDuration = b.histogram("lifecycle.ship.duration", "s", "Time from a ship operation's acceptance (queued) to its end.")
	t.deliveryAttempts = b.counter("lifecycle.webhook.delivery.attempts", "{attempt}", "Webhook delivery attempts, by outcome and the receiver's status class.")
	t.deliveryDuration = b.histogram("lifecycle.webhook.delivery.duration", "s", "Duration of webhook delivery attempts.")
	t.subscriptionsDisabled = b.counter("lifecycle.webhook.subscriptions.disabled", "{subscription}", "Webhook subscriptions disabled by their receiver (410 Gone).")
	t.streamsOpen = b.upDownCounter("lifecycle.stream.open", "{stream}", "Event streams open.")
	t.streamEvents = b.counter("lifecycle.stream.events.sent", "{event}", "Events written to event streams.")
	t.streamsEnded = b.counter("lifecycle.stream.ended", "{stream}", "Event streams ended, by reason.")
	t.streamLatency = b.histogram("lifecycle.stream.latency", "s", "Time from an event's commit to its write to a stream.")
	t.outboxEvents = b.counter("lifecycle.outbox.events", "{event}", "Events committed to the outbox, by type.")
	t.replayReads = b.counter("lifecycle.outbox.replay.reads", "{read}", "Reads of the outbox to replay events, by reader.")
	t.sweepDuration = b.histogram("lifecycle.reconcile.sweep.duration", "s", "Duration of the reconciler's sweeps.")
	t.sweepTasks = b.int64Histogram("lifecycle.reconcile.sweep.tasks", "{task}", "Tasks read from code hosts per sweep.")
	t.idempotencyReplays = b.counter("lifecycle.idempotency.replays", "{request}", "Requests answered from an earlier response under the same Idempotency-Key.")
	t.idempotencyConflicts = b.counter("lifecycle.idempotency.conflicts", "{request}", "Requests refused for an Idempotency-Key in use or used with another request.")
	t.authFailures = b.counter("lifecycle.auth.failures", "{request}", "Failed authentications, by reason.")
	t.taskCacheLookups = b.counter("lifecycle.task_cache.lookups", "{lookup}", "Answers of GET /tasks/{id} looked up among those kept, by result: hit or miss.")
	t.cacheHit = metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.cache.result", "hit")))
	t.cacheMiss = metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.cache.result", "miss")))
	t.queue = newQueueInstruments(&b)
	if b.err != nil {
		return nil, b.err
	}
	// Counters whose first increment matters to an alert start at 0, so
	// that increase() sees it.
	ctx := context.Background()
	t.subscriptionsDisabled.Add(ctx, 0)
	for _, reason := range []string{"lag", "revoked", "expired", "closed", "shutdown", "failed"} {
		t.streamEnds.add(ctx, t.streamsEnded, reason, 0)
	}
	return t, nil
}

// instrumentBuilder creates instruments on one meter, keeping the first
// error.
type instrumentBuilder struct {
	m   metric.Meter
	err error
}

func (b *instrumentBuilder) keep(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

func (b *instrumentBuilder) counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.keep(err)
	return c
}

func (b *instrumentBuilder) upDownCounter(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := b.m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.keep(err)
	return c
}

func (b *instrumentBuilder) histogram(name, unit, desc string) metric.Float64Histogram {
	h, err := b.m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
	b.keep(err)
	return h
}

func (b *instrumentBuilder) int64Histogram(name, unit, desc string) metric.Int64Histogram {
	h, err := b.m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(0, 1, 10, 50, 100, 500, 1000, 5000, 10000))
	b.keep(err)
	return h
}

// Tracing reports whether spans are to be started: the TracerProvider is
// not a no-op one, and a global one has been set.
func (t *Telemetry) Tracing() bool {
	return t.traces.Active()
}

// Start starts a span named name under ctx's, when tracing; otherwise it
// returns ctx and a span that records nothing, allocating nothing.
func (t *Telemetry) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.Tracing() {
		return ctx, t.noSpan
	}
	return t.tracer.Start(ctx, name, opts...)
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// InTrace returns ctx within the trace traceID names (a request's, that
// a ship operation recorded), when tracing: spans started under it join
// that trace. Only the trace's ID is kept, none of its spans, and the span
// that asked may have ended long before in another process: so the parent
// is a remote span context of that trace with no span ID, and the spans
// are roots within the request's trace.
func (t *Telemetry) InTrace(ctx context.Context, traceID *string) context.Context {
	if traceID == nil || !t.Tracing() {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(*traceID)
	if err != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, Remote: true}))
}

// knownMethods are the request methods http.request.method names; any
// other is "_OTHER", as the conventions ask, so that the attribute stays
// bounded.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
	http.MethodConnect: true, http.MethodTrace: true,
}

// boundedMethod returns method, or "_OTHER" when it is not a known one.
func boundedMethod(method string) string {
	if knownMethods[method] {
		return method
	}
	return "_OTHER"
}

// route returns the route of a ServeMux pattern ("GET /tasks/{id}" is
// "/tasks/{id}"), or "" for the catch-all "/" or none.
func route(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if pattern == "/" {
		return ""
	}
	return pattern
}

// requestAttributes are the attributes of http.server.request.duration.
func requestAttributes(k requestKey) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", k.method),
		attribute.Int("http.response.status_code", k.status),
		attribute.String("url.scheme", scheme(k.tls)),
	}
	if r := route(k.pattern); r != "" {
		attrs = append(attrs, attribute.String("http.route", r))
	}
	if k.status >= 500 {
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(k.status)))
	}
	return attrs
}

// measureOpts are the options that give a measure its attributes.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// attrCache keeps the measure options of each key, built once from the
// attributes its build returns: a measure then allocates nothing. Keys
// must be bounded, as attributes are.
type attrCache[K comparable] struct {
	*cache[K, measureOpts]
}

func newAttrCache[K comparable](build func(K) []attribute.KeyValue) *attrCache[K] {
	return &attrCache[K]{newCache(func(k K) measureOpts {
		opt := metric.WithAttributeSet(attribute.NewSet(build(k)...))
		return measureOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	})}
}

func (c *attrCache[K]) record(ctx context.Context, h metric.Float64Histogram, k K, v float64) {
	h.Record(ctx, v, c.get(k).rec...)
}

// add adds n to counter with k's attributes.
func (c *attrCache[K]) add(ctx context.Context, counter metric.Int64Counter, k K, n int64) {
	counter.Add(ctx, n, c.get(k).add...)
}

// oneAttr returns a build function of attrCache for one string attribute.
func oneAttr[K ~string](key string) func(K) []attribute.KeyValue {
	return func(v K) []attribute.KeyValue { return []attribute.KeyValue{attribute.String(key, string(v))} }
}

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// statusWriter remembers the status of a response, for the request's
// metric and span. ResponseController reaches the writer it wraps.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the ResponseWriter w wraps, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Instrument serves r through h, with a server span (its parent the
// request's traceparent, if any) and a measure of its duration in
// http.server.request.duration, when either is on. The route is known
// once ServeMux has matched it.
func (t *Telemetry) Instrument(w http.ResponseWriter, r *http.Request, h http.Handler) {
	ctx := r.Context()
	measure := t.requestDuration.Enabled(ctx)
	tracing := t.Tracing()
	if !measure && !tracing {
		h.ServeHTTP(w, r)
		return
	}
	start := t.clock.Now()
	method := boundedMethod(r.Method)
	sw := &statusWriter{ResponseWriter: w}
	var span trace.Span
	if tracing {
		if _, ok := r.Header["Traceparent"]; ok {
			ctx = t.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		ctx, span = t.tracer.Start(ctx, method, t.serverSpans.get(serverSpanKey{method, r.TLS != nil})...)
		r = r.WithContext(ctx)
	}
	h.ServeHTTP(sw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK // nothing written, or the connection taken over by a stream
	}
	if measure {
		k := requestKey{pattern: r.Pattern, method: method, status: status, tls: r.TLS != nil}
		t.requests.record(ctx, t.requestDuration, k, t.clock.Now().Sub(start).Seconds())
	}
	if span != nil {
		statusAttr := attribute.Int("http.response.status_code", status)
		if rt := t.spanRoutes.get(routeKey{r.Pattern, method}); rt.route.Valid() {
			span.SetName(rt.name)
			span.SetAttributes(rt.route, statusAttr)
		} else {
			span.SetAttributes(statusAttr)
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
}

// serverSpanKey is what a server span's start options are made of.
type serverSpanKey struct {
	method string
	tls    bool
}

// routeKey is a matched pattern and the request's bounded method.
type routeKey struct{ pattern, method string }

// spanRoute is a server span's name and http.route attribute for a
// pattern; route is not Valid for the catch-all.
type spanRoute struct {
	name  string
	route attribute.KeyValue
}

// cache keeps values built once per bounded key: the options of spans,
// their names.
type cache[K comparable, V any] struct {
	build func(K) V
	mu    sync.RWMutex
	m     map[K]V
}

func newCache[K comparable, V any](build func(K) V) *cache[K, V] {
	return &cache[K, V]{build: build, m: make(map[K]V)}
}

func (c *cache[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = c.build(k)
	c.mu.Lock()
	c.m[k] = v
	c.mu.Unlock()
	return v
}

func serverSpanOptions(k serverSpanKey) []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", k.method), attribute.String("url.scheme", scheme(k.tls)))}
}

func spanRouteOf(k routeKey) spanRoute {
	rt := route(k.pattern)
	if rt == "" {
		return spanRoute{}
	}
	return spanRoute{name: k.method + " " + rt, route: attribute.String("http.route", rt)}
}

// shipEnd is what lifecycle.ship.finished and lifecycle.ship.duration
// tell of an operation's end.
type shipEnd struct {
	mode string
	code string // the failure code; "" when the operation succeeded
}

func shipEndAttributes(e shipEnd) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("lifecycle.ship.mode", e.mode), attribute.String("lifecycle.ship.outcome", "succeeded")}
	if e.code != "" {
		attrs[1] = attribute.String("lifecycle.ship.outcome", "failed")
		attrs = append(attrs, attribute.String("lifecycle.failure.code", e.code))
	}
	return attrs
}

// ShipStarted counts a ship operation of mode taken up for the first
// time, in lifecycle.ship.started.
func (t *Telemetry) ShipStarted(ctx context.Context, mode string) {
	t.shipModes.add(ctx, t.shipStarted, mode, 1)
}

// ShipFinished counts the end of an operation of mode, failed with code
// or succeeded (code ""), in lifecycle.ship.finished, and its time from
// acceptance to its end, took, in lifecycle.ship.duration.
func (t *Telemetry) ShipFinished(ctx context.Context, mode, code string, took time.Duration) {
	o := t.shipEnds.get(shipEnd{mode: mode, code: code})
	t.shipFinished.Add(ctx, 1, o.add...)
	t.shipDuration.Record(ctx, took.Seconds(), o.rec...)
}

// ShipQueue is the number of ship operations not yet finished, in every
// process sharing a Store.
type ShipQueue struct {
	Queued, Running int64
}

// ObserveShipQueue registers lifecycle.ship.queue.depth, read through
// count at each collection, until Close. Its errors are the meter's.
func (t *Telemetry) ObserveShipQueue(count func(ctx context.Context) (ShipQueue, error)) error {
	queued := metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.ship.status", "queued")))
	running := metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.ship.status", "running")))
	depth, err := t.meter.Int64ObservableGauge("lifecycle.ship.queue.depth", metric.WithUnit("{operation}"),
		metric.WithDescription("Ship operations not yet finished, queued or running, in every process sharing the Store."))
	if err != nil {
		return err
	}
	return t.observe(func(ctx context.Context, o metric.Observer) error {
		n, err := count(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(depth, n.Queued, queued)
		o.ObserveInt64(depth, n.Running, running)
		return nil
	}, depth)
}

// observe registers f, which observes instruments at each collection,
// until Close.
func (t *Telemetry) observe(f metric.Callback, instruments ...metric.Observable) error {
	reg, err := t.meter.RegisterCallback(f, instruments...)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.registrations = append(t.registrations, reg)
	t.mu.Unlock()
	return nil
}

// Close unregisters the callbacks of observable instruments: a closed
// Service observes nothing.
func (t *Telemetry) Close() {
	t.mu.Lock()
	regs := t.registrations
	t.registrations = nil
	t.mu.Unlock()
	for _, r := range regs {
		r.Unregister()
	}
}

// StreamOpened counts an event stream opened, in lifecycle.stream.open.
func (t *Telemetry) StreamOpened(ctx context.Context) { t.streamsOpen.Add(ctx, 1) }

// StreamClosed counts an event stream closed, in lifecycle.stream.open.
func (t *Telemetry) StreamClosed(ctx context.Context) { t.streamsOpen.Add(ctx, -1) }

// StreamEnded counts an event stream ended for reason, in
// lifecycle.stream.ended.
func (t *Telemetry) StreamEnded(ctx context.Context, reason string) {
	t.streamEnds.add(ctx, t.streamsEnded, reason, 1)
}

// Sent counts n live events written to a stream, the first of them
// committed latency ago. Replayed events count through Replayed only:
// their age is the client's resuming, not the delivery's delay.
func (t *Telemetry) Sent(ctx context.Context, n int, latency time.Duration) {
	t.streamEvents.Add(ctx, int64(n))
	t.streamLatency.Record(ctx, max(latency, 0).Seconds())
}

// Replayed counts n events replayed to a stream, in
// lifecycle.stream.events.sent, with no latency.
func (t *Telemetry) Replayed(ctx context.Context, n int) { t.streamEvents.Add(ctx, int64(n)) }

// ReplayRead counts a read of the outbox from the Store by reader
// ("stream", "webhook"), in lifecycle.outbox.replay.reads.
func (t *Telemetry) ReplayRead(ctx context.Context, reader string) {
	t.replayReaders.add(ctx, t.replayReads, reader, 1)
}

// CountingOutbox reports whether OutboxEvent measures anything, so that a
// transaction need not note the types of its events when it does not.
func (t *Telemetry) CountingOutbox(ctx context.Context) bool { return t.outboxEvents.Enabled(ctx) }

// OutboxEvent counts an event of type typ committed, in
// lifecycle.outbox.events.
func (t *Telemetry) OutboxEvent(ctx context.Context, typ string) {
	t.eventTypes.add(ctx, t.outboxEvents, typ, 1)
}

// Swept records a sweep of the reconciler that read tasks tasks and
// took took, in lifecycle.reconcile.sweep.duration and .tasks.
func (t *Telemetry) Swept(ctx context.Context, took time.Duration, tasks int) {
	t.sweepDuration.Record(ctx, took.Seconds())
	t.sweepTasks.Record(ctx, int64(tasks))
}

// IdempotencyReplay counts a request of the route pattern answered from
// an earlier response, in lifecycle.idempotency.replays.
func (t *Telemetry) IdempotencyReplay(ctx context.Context, pattern string) {
	t.routes.add(ctx, t.idempotencyReplays, pattern, 1)
}

// IdempotencyConflict counts a request of the route pattern refused for
// its Idempotency-Key, in lifecycle.idempotency.conflicts.
func (t *Telemetry) IdempotencyConflict(ctx context.Context, pattern string) {
	t.routes.add(ctx, t.idempotencyConflicts, pattern, 1)
}

// AuthFailure counts a failed authentication for reason, in
// lifecycle.auth.failures.
func (t *Telemetry) AuthFailure(ctx context.Context, reason string) {
	t.authReasons.add(ctx, t.authFailures, reason, 1)
}

// TaskCacheLookup counts a lookup among the kept answers of
// GET /tasks/{id}, a hit or a miss, in lifecycle.task_cache.lookups.
func (t *Telemetry) TaskCacheLookup(ctx context.Context, hit bool) {
	if hit {
		t.taskCacheLookups.Add(ctx, 1, t.cacheHit)
		return
	}
	t.taskCacheLookups.Add(ctx, 1, t.cacheMiss)
}

// SubscriptionDisabled counts a webhook subscription disabled by its
// receiver, in lifecycle.webhook.subscriptions.disabled.
func (t *Telemetry) SubscriptionDisabled(ctx context.Context) { t.subscriptionsDisabled.Add(ctx, 1) }
