// Package hostcall instruments the code-host adapters (adapter/github,
// adapter/gitlab) with OpenTelemetry, on the API only: the client span,
// traceparent, http.client.request.duration and lifecycle.host.requests of
// every HTTP call to the host (see [Telemetry.Transport]), the
// lifecycle.host.rate_limit.* gauges (see [Telemetry.ObserveRateLimits])
// and lifecycle.host.webhooks (see [Telemetry.Webhook]).
//
// Every attribute value is bounded: the host's name, the operation a
// request's path template names (never the path), the method, the status
// code, the host name and port of the API, a kind of error.
package hostcall

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tasklifecycle/lifecycle/internal/oteltp"
)

// The attribute keys of the instruments.
const (
	// KeyHost is lifecycle.host: "github" or "gitlab".
	KeyHost = attribute.Key("lifecycle.host")
	// KeyOperation is lifecycle.host.operation: the operation of a
	// request, see [Routes].
	KeyOperation = attribute.Key("lifecycle.host.operation")
	// KeyResource is lifecycle.host.resource: a rate limit's name.
	KeyResource = attribute.Key("lifecycle.host.resource")
	// KeyOutcome is lifecycle.outcome: what became of a webhook delivery.
	KeyOutcome = attribute.Key("lifecycle.outcome")

	keyMethod    = attribute.Key("http.request.method")
	keyStatus    = attribute.Key("http.response.status_code")
	keyAddress   = attribute.Key("server.address")
	keyPort      = attribute.Key("server.port")
	keyErrorType = attribute.Key("error.type")
	otherMethod  = "_OTHER"
)

// methods are HTTP's methods, which http.request.method takes as they are;
// any other is "_OTHER".
var methods = []string{"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}

// durationBounds are the bucket boundaries, in seconds, that OpenTelemetry's
// semantic conventions advise for http.client.request.duration.
var durationBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Config configures a [Telemetry].
type Config struct {
	// Host is the value of lifecycle.host: "github" or "gitlab".
	Host string
	// Scope is the instrumentation scope: the adapter's import path.
	Scope string
	// MeterProvider makes the instruments. Defaults to
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the client spans. Defaults to the global one,
	// otel.GetTracerProvider(), looked at again on every request until it
	// is set: until then, and with a noop TracerProvider, no span is
	// made.
	TracerProvider trace.TracerProvider
	// Routes maps requests to their operations.
	Routes *Routes
}

// Telemetry holds an adapter's instruments. It is safe for concurrent use.
type Telemetry struct {
	host     attribute.KeyValue
	routes   *Routes
	duration metric.Float64Histogram
	requests metric.Int64Counter
	webhooks metric.Int64Counter
	gauges   *gauges // nil until ObserveRateLimits
	mp       metric.MeterProvider
	scope    string

	tracer trace.Tracer
	// tracing says whether spans are made: always, never, or when the
	// global TracerProvider is set to one that is not noop.
	tracing oteltp.Mode

	// seen remembers the deliveries taken, to tell duplicates.
	seen deliveries

	mu   sync.RWMutex
	opts map[measureKey]measureOpts // see measures
}

// New returns the Telemetry of cfg. An instrument the MeterProvider fails
// to make is reported to otel.Handle and replaced by the no-op one the API
// returns with the error: telemetry never keeps an adapter from working.
func New(cfg Config) *Telemetry {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(cfg.Scope)
	t := &Telemetry{host: KeyHost.String(cfg.Host), routes: cfg.Routes, mp: mp, scope: cfg.Scope, opts: make(map[measureKey]measureOpts)}
	var err error
	t.duration, err = meter.Float64Histogram("http.client.request.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of HTTP client requests to the code host."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	handle(err)
	t.requests, err = meter.Int64Counter("lifecycle.host.requests",
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests sent to the code host, by operation and answer."))
	handle(err)
	t.webhooks, err = meter.Int64Counter("lifecycle.host.webhooks",
		metric.WithUnit("{delivery}"),
		metric.WithDescription("Webhook deliveries of the code host taken by the adapter's handler, by outcome."))
	handle(err)

	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if t.tracing = oteltp.ModeOf(tp); t.tracing != oteltp.Off {
		t.tracer = tp.Tracer(cfg.Scope)
	}
	return t
}

func handle(err error) {
	if err != nil {
		otel.Handle(err)
	}
}

// activeTracer returns the tracer to make spans with, or nil when none are
// made.
func (t *Telemetry) activeTracer() trace.Tracer {
	if t.tracing.Active() {
		return t.tracer
	}
	return nil
}

// Transport returns next instrumented: see [Transport.RoundTrip]. A nil
// next is http.DefaultTransport.
func (t *Telemetry) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{next: next, t: t}
}

// Transport is the instrumented http.RoundTripper of [Telemetry.Transport].
type Transport struct {
	next http.RoundTripper
	t    *Telemetry
}

// RoundTrip implements http.RoundTripper. It sends req through the next
// transport and:
//
//   - makes a client span "{METHOD} {operation}" as a child of the span of
//     req's context, with http.request.method, server.address,
//     server.port, lifecycle.host, lifecycle.host.operation, and
//     http.response.status_code or, on a failure (no answer, or a 4xx or
//     5xx), error.type and an error status;
//   - sends the W3C traceparent (and tracestate) of the span, or of the
//     context's span when no span is made, when it is valid;
//   - records http.client.request.duration (from the sending to the
//     answer's headers) and lifecycle.host.requests.
//
// With a noop or unset TracerProvider and instruments that are not
// enabled, it does nothing but pass req on (and the context's
// traceparent, when there is one).
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t := tr.t
	ctx := req.Context()
	tracer := t.activeTracer()
	timed := t.duration.Enabled(ctx)
	counted := t.requests.Enabled(ctx)
	if tracer == nil && !timed && !counted {
		if trace.SpanContextFromContext(ctx).IsValid() {
			req = inject(ctx, req)
		}
		return tr.next.RoundTrip(req)
	}

	name, operation := t.routes.spanName(req.Method, req.URL)
	method := methodOf(req.Method)
	address := req.URL.Hostname()
	var span trace.Span
	if tracer != nil {
		ctx, span = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			keyMethod.String(method),
			keyAddress.String(address),
			keyPort.Int(portOf(req.URL)),
			t.host,
			KeyOperation.String(operation),
		))
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		req = inject(ctx, req)
	}
	start := time.Now()
	resp, err := tr.next.RoundTrip(req)
	elapsed := time.Since(start).Seconds()

	var status attribute.KeyValue
	var errType string
	if err != nil {
		errType = errorType(err)
	} else {
		status = keyStatus.Int(resp.StatusCode)
	}
	if span != nil {
		switch {
		case err != nil:
			span.SetAttributes(keyErrorType.String(errType))
			span.SetStatus(codes.Error, errType)
		case resp.StatusCode >= 400:
			span.SetAttributes(status, keyErrorType.String(strconv.Itoa(resp.StatusCode)))
			span.SetStatus(codes.Error, "")
		default:
			span.SetAttributes(status)
		}
		span.End()
	}
	if timed || counted {
		key := measureKey{operation: operation, method: method, address: address, errType: errType}
		if err == nil {
			key.status = resp.StatusCode
		}
		m := t.measures(key)
		if counted {
			t.requests.Add(ctx, 1, m.requests...)
		}
		if timed {
			t.duration.Record(ctx, elapsed, m.duration...)
		}
	}
	return resp, err
}

// measureKey is what the attributes of a request's measurements are made
// of.
type measureKey struct {
	operation, method, address string
	status                     int // 0 without an answer
	errType                    string
}

// measureOpts are the options of a request's measurements, made once per
// measureKey.
type measureOpts struct {
	requests []metric.AddOption    // lifecycle.host.requests
	duration []metric.RecordOption // http.client.request.duration
}

// maxMeasures bounds the options kept: the keys are bounded (operations,
// methods, the API's host, status codes, kinds of error), and this keeps
// them so even for a host answering every status there is.
const maxMeasures = 1024

// measures returns the options of the measurements of key, made on first
// use, so that recording allocates no attribute set.
func (t *Telemetry) measures(key measureKey) measureOpts {
	t.mu.RLock()
	m, ok := t.opts[key]
	t.mu.RUnlock()
	if ok {
		return m
	}
	host, op := t.host, KeyOperation.String(key.operation)
	reqs := []attribute.KeyValue{host, op}
	dur := []attribute.KeyValue{host, op, keyMethod.String(key.method), keyAddress.String(key.address)}
	if key.status != 0 {
		reqs = append(reqs, keyStatus.Int(key.status))
		dur = append(dur, keyStatus.Int(key.status))
	} else {
		dur = append(dur, keyErrorType.String(key.errType))
	}
	m = measureOpts{
		requests: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(reqs...))},
		duration: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(dur...))},
	}
	t.mu.Lock()
	if len(t.opts) < maxMeasures {
		t.opts[key] = m
	}
	t.mu.Unlock()
	return m
}

// inject returns a copy of req carrying the traceparent of ctx's span.
func inject(ctx context.Context, req *http.Request) *http.Request {
	out := req.Clone(ctx)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(out.Header))
	return out
}

// methodOf returns http.request.method of a request's method.
func methodOf(m string) string {
	for _, known := range methods {
		if m == known {
			return m
		}
	}
	return otherMethod
}

// portOf returns the port a request goes to.
func portOf(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

// errorType returns error.type of a request that got no answer: "timeout",
// "canceled", or the error's Go type ("*net.OpError"), a bounded set.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return reflect.TypeOf(err).String()
}

// Outcome is what became of a webhook delivery, the value of
// lifecycle.outcome.
type Outcome string

// The outcomes of a webhook delivery.
const (
	// Accepted: the delivery was verified and its event passed on and
	// taken (or one the Service could not apply at once, which it
	// reconciles).
	Accepted Outcome = "accepted"
	// Duplicate: as Accepted, of a delivery (by ID or body) this adapter
	// accepted before; the Service ignores it.
	Duplicate Outcome = "duplicate"
	// Ignored: verified, but of an event, an action or a repository the
	// lifecycle does not follow.
	Ignored Outcome = "ignored"
	// InvalidSignature: the signature or secret token is missing or does
	// not match, or no secret is configured.
	InvalidSignature Outcome = "invalid_signature"
	// Invalid: the delivery itself is wrong: method, content type, size,
	// a body that does not arrive in time or does not parse.
	Invalid Outcome = "invalid"
	// Failed: a valid delivery not taken for a cause on this side: the
	// body budget spent, the host or the Store failing.
	Failed Outcome = "failed"
)

// Webhook counts a webhook delivery of outcome in lifecycle.host.webhooks.
func (t *Telemetry) Webhook(ctx context.Context, outcome Outcome) {
	if !t.webhooks.Enabled(ctx) {
		return
	}
	t.webhooks.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(t.host, KeyOutcome.String(string(outcome)))))
}

// Taken counts a delivery whose event was passed on and taken, identified
// by ids (its delivery ID, its body's digest; empty ones are skipped): as
// Duplicate when one of them was taken before (of the latest 4,096
// remembered), else as Accepted. Nothing is remembered while the
// counter is not enabled.
func (t *Telemetry) Taken(ctx context.Context, ids ...string) {
	if !t.webhooks.Enabled(ctx) {
		return
	}
	outcome := Accepted
	if t.seen.add(ids) {
		outcome = Duplicate
	}
	t.Webhook(ctx, outcome)
}

// maxRemembered is how many delivery IDs and digests are remembered to
// tell duplicates.
const maxRemembered = 4096

// deliveries is a bounded memory of the deliveries taken.
type deliveries struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

// add remembers ids and reports whether one of them was remembered before.
func (d *deliveries) add(ids []string) (seen bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.set == nil {
		d.set = make(map[string]struct{})
		d.ring = make([]string, maxRemembered)
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, ok := d.set[id]; ok {
			seen = true
			continue
		}
		if old := d.ring[d.next]; old != "" {
			delete(d.set, old)
		}
		d.ring[d.next] = id
		d.set[id] = struct{}{}
		d.next = (d.next + 1) % len(d.ring)
	}
	return seen
}
