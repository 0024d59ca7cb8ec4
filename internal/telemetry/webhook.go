package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The telemetry of webhook deliveries: per attempt, a client span
// "webhook.deliver" and the measures lifecycle.webhook.delivery.attempts,
// lifecycle.webhook.delivery.duration and http.client.request.duration;
// and the observable gauges lifecycle.webhook.backlog and
// lifecycle.webhook.lag of the subscriptions an instance delivers.
//
// No metric names a subscription or a receiver unless the caller asks
// (SubscriptionAttrs on the gauges; Deliveries.Receiver with named on
// http.client.request.duration): metrics are often served without a key.
// The span names both: spans go only to the TracerProvider's exporter.

// statusClasses are the values of http.response.status_class, by the
// first digit of the status; "none" when no answer came.
var statusClasses = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx", "6xx", "7xx", "8xx", "9xx"}

// statusClass returns the http.response.status_class of status (0: none).
func statusClass(status int) string {
	if status < 100 || status > 999 {
		return "none"
	}
	return statusClasses[status/100]
}

// deliveryOutcome is the value of lifecycle.delivery.outcome.
func deliveryOutcome(delivered bool) string {
	if delivered {
		return "delivered"
	}
	return "failed"
}

// attemptKey is what the attributes of lifecycle.webhook.delivery.attempts
// are made of.
type attemptKey struct {
	delivered bool
	class     string // http.response.status_class
}

// clientKey is what the attributes of http.client.request.duration are
// made of, besides the receiver's host, which is a Receiver's own.
type clientKey struct {
	status  int    // 0: no answer
	errType string // error.type when no answer came
}

// Deliveries is a webhook dispatcher's part of the telemetry: the
// attribute sets of its measures, and its gauges while it runs.
type Deliveries struct {
	t        *Telemetry
	attempts *attrCache[attemptKey]
	outcomes *attrCache[bool]
	// shared is the Receiver of every receiver not named: its
	// http.client.request.duration has no server.address.
	shared *Receiver
}

// Deliveries returns the telemetry of a webhook dispatcher.
func (t *Telemetry) Deliveries() *Deliveries {
	return &Deliveries{
		t: t,
		attempts: newAttrCache(func(k attemptKey) []attribute.KeyValue {
			return []attribute.KeyValue{
				attribute.String("lifecycle.delivery.outcome", deliveryOutcome(k.delivered)),
				attribute.String("http.response.status_class", k.class),
			}
		}),
		outcomes: newAttrCache(func(delivered bool) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("lifecycle.delivery.outcome", deliveryOutcome(delivered))}
		}),
		shared: &Receiver{attrs: newAttrCache(clientAttributes(""))},
	}
}

// Receiver holds the attribute sets of http.client.request.duration for
// the deliveries to one receiver, or to all of them.
type Receiver struct {
	attrs *attrCache[clientKey]
}

// Receiver returns the attribute sets of the receiver at host: with its
// server.address when named, else those shared by every receiver.
func (d *Deliveries) Receiver(host string, named bool) *Receiver {
	if !named {
		return d.shared
	}
	return &Receiver{attrs: newAttrCache(clientAttributes(host))}
}

// clientAttributes returns the attributes of http.client.request.duration
// for the receiver at host, as attrCache builds them; with no
// server.address when host is "".
func clientAttributes(host string) func(clientKey) []attribute.KeyValue {
	return func(k clientKey) []attribute.KeyValue {
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("lifecycle.peer", "webhook"),
		}
		if host != "" {
			attrs = append(attrs, attribute.String("server.address", host))
		}
		if k.status != 0 {
			attrs = append(attrs, attribute.Int("http.response.status_code", k.status))
		}
		if t := errorType(k.status, k.errType); t != "" {
			attrs = append(attrs, attribute.String("error.type", t))
		}
		return attrs
	}
}

// errorType is the error.type of an attempt: the status when the receiver
// answered 4xx or 5xx (a client's errors, as OpenTelemetry's HTTP
// conventions say), noAnswer when it did not answer, or "".
func errorType(status int, noAnswer string) string {
	switch {
	case status >= 400:
		return strconv.Itoa(status)
	case status == 0:
		return noAnswer
	}
	return ""
}

// Delivery is an attempt at delivering an event, as its span tells it.
type Delivery struct {
	EventType      string
	SubscriptionID string
	Host           string        // the receiver's host name, never its URL
	Attempt        int           // from 1
	TraceID        trace.TraceID // the event's trace; not valid when it has none
}

// StartDelivery starts the span of an attempt, "webhook.deliver", when
// tracing, and returns its context; otherwise ctx and a span that records
// nothing, allocating nothing.
//
// The span joins the event's trace: its parent is a remote span context
// of a.TraceID (the trace of the request that caused the event) and no
// span ID, for the event keeps no span of that trace, and naming one (the
// request's server span, say) would claim a parent that may have ended
// long before, in another process. The delivery is thus a root span
// within the request's trace, and the traceparent it sends makes the
// receiver's work its child. An event with no trace starts a new trace,
// whatever span ctx may carry.
func (d *Deliveries) StartDelivery(ctx context.Context, a Delivery) (context.Context, trace.Span) {
	t := d.t
	if !t.Tracing() {
		return ctx, t.noSpan
	}
	attrs := []attribute.KeyValue{
		attribute.String("lifecycle.event.type", a.EventType),
		attribute.String("lifecycle.subscription.id", a.SubscriptionID),
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("server.address", a.Host),
	}
	if a.Attempt > 1 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", a.Attempt-1))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
	if a.TraceID.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: a.TraceID, Remote: true}))
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return t.tracer.Start(ctx, "webhook.deliver", opts...)
}

// TraceHeader returns what adds the W3C traceparent of span, whose
// context is ctx, to a delivery; nil when span has no valid context
// (tracing is off).
func (d *Deliveries) TraceHeader(ctx context.Context, span trace.Span) func(http.Header) {
	if !span.SpanContext().IsValid() {
		return nil
	}
	p := d.t.propagator
	return func(h http.Header) { p.Inject(ctx, propagation.HeaderCarrier(h)) }
}

// Outcome is what came of an attempt.
type Outcome struct {
	Delivered bool
	// Abandoned says the attempt got no answer because its worker
	// stopped: it is not measured, as it will be made again.
	Abandoned bool
	Status    int    // the receiver's HTTP status, or 0
	NoAnswer  string // why no answer came, a bounded name (error.type), when Status is 0
	Failure   string // why it failed, when not delivered and answered
	Took      time.Duration
}

// Attempted measures an attempt to the receiver r, unless abandoned, and
// ends its span with what came of it.
func (d *Deliveries) Attempted(ctx context.Context, span trace.Span, r *Receiver, o Outcome) {
	if !o.Abandoned {
		t := d.t
		if t.deliveryAttempts.Enabled(ctx) {
			d.attempts.add(ctx, t.deliveryAttempts, attemptKey{delivered: o.Delivered, class: statusClass(o.Status)}, 1)
		}
		if t.deliveryDuration.Enabled(ctx) {
			d.outcomes.record(ctx, t.deliveryDuration, o.Delivered, o.Took.Seconds())
		}
		if t.clientDuration.Enabled(ctx) {
			r.attrs.record(ctx, t.clientDuration, clientKey{status: o.Status, errType: o.NoAnswer}, o.Took.Seconds())
		}
	}
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, attribute.String("lifecycle.delivery.outcome", deliveryOutcome(o.Delivered)))
		if o.Status != 0 {
			attrs = append(attrs, attribute.Int("http.response.status_code", o.Status))
		}
		if et := errorType(o.Status, o.NoAnswer); et != "" {
			attrs = append(attrs, attribute.String("error.type", et))
		}
		span.SetAttributes(attrs...)
		switch {
		case o.Abandoned:
			span.SetStatus(codes.Error, "abandoned: the worker stopped")
		case o.Status != 0 && !o.Delivered:
			span.SetStatus(codes.Error, o.Failure) // the status, and its text
		case !o.Delivered:
			span.SetStatus(codes.Error, "no answer: "+o.NoAnswer) // the error's text may name addresses
		}
	}
	span.End()
}

// SubscriptionAttrs returns the attributes that name a subscription on
// the gauges, for GaugeObserver.Observe.
func SubscriptionAttrs(subID string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.subscription.id", subID)))
}

// GaugeObserver observes the webhook gauges at one collection.
type GaugeObserver struct {
	o       metric.Observer
	backlog metric.Int64ObservableGauge
	lag     metric.Float64ObservableGauge
}

// Observe observes backlog events not yet delivered, the oldest of them
// lag old; of the subscription attrs names (SubscriptionAttrs), or of
// every subscription when attrs is nil.
func (g GaugeObserver) Observe(backlog int64, lag time.Duration, attrs metric.MeasurementOption) {
	if attrs == nil {
		g.o.ObserveInt64(g.backlog, backlog)
		g.o.ObserveFloat64(g.lag, lag.Seconds())
		return
	}
	g.o.ObserveInt64(g.backlog, backlog, attrs)
	g.o.ObserveFloat64(g.lag, lag.Seconds(), attrs)
}

// RegisterGauges registers lifecycle.webhook.backlog and
// lifecycle.webhook.lag, observed by observe at each collection until the
// registration is unregistered.
func (d *Deliveries) RegisterGauges(observe func(GaugeObserver)) (metric.Registration, error) {
	m := d.t.meter
	backlog, err := m.Int64ObservableGauge("lifecycle.webhook.backlog", metric.WithUnit("{event}"),
		metric.WithDescription("Events not yet delivered to the webhook subscriptions this instance delivers (each, with lifecycle.subscription.id): unread, in flight or pending a retry."))
	if err != nil {
		return nil, err
	}
	lag, err := m.Float64ObservableGauge("lifecycle.webhook.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest event not yet delivered to the webhook subscriptions this instance delivers (each, with lifecycle.subscription.id); 0 when none."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observe(GaugeObserver{o: o, backlog: backlog, lag: lag})
		return nil
	}, backlog, lag)
}
