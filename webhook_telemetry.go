package lifecycle

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The telemetry of webhook deliveries (see docs/operations.md for the
// instruments): per attempt, a client span "webhook.deliver" and the
// measures lifecycle.webhook.delivery.attempts,
// lifecycle.webhook.delivery.duration and http.client.request.duration;
// lifecycle.webhook.subscriptions.disabled when a receiver's 410 disables
// a subscription; lifecycle.outbox.replay.reads when a worker reads the
// outbox from the Store; and the observable gauges lifecycle.webhook.backlog
// and lifecycle.webhook.lag of each subscription this instance delivers,
// read from what its worker keeps in memory (hookGauge).

// webhookReplayReads are the options of lifecycle.outbox.replay.reads for
// a webhook worker's reads.
var webhookReplayReads = []metric.AddOption{
	metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.replay.reader", "webhook"))),
}

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
// made of, besides the receiver's host, which is a worker's own.
type clientKey struct {
	status  int    // 0: no answer
	errType string // error.type when no answer came
}

// hookTelemetry is the dispatcher's part of the telemetry: the attribute
// sets of its measures, and its gauges while it runs.
type hookTelemetry struct {
	attempts *attrCache[attemptKey]
	outcomes *attrCache[bool]
	backlog  metric.Int64ObservableGauge
	lag      metric.Float64ObservableGauge
}

func newHookTelemetry() hookTelemetry {
	return hookTelemetry{
		attempts: newAttrCache(func(k attemptKey) []attribute.KeyValue {
			return []attribute.KeyValue{
				attribute.String("lifecycle.delivery.outcome", deliveryOutcome(k.delivered)),
				attribute.String("http.response.status_class", k.class),
			}
		}),
		outcomes: newAttrCache(func(delivered bool) []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("lifecycle.delivery.outcome", deliveryOutcome(delivered))}
		}),
	}
}

// clientAttributes returns the attributes of http.client.request.duration
// for the receiver at host, as attrCache builds them.
func clientAttributes(host string) func(clientKey) []attribute.KeyValue {
	return func(k clientKey) []attribute.KeyValue {
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", http.MethodPost),
			attribute.String("server.address", host),
			attribute.String("lifecycle.peer", "webhook"),
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

// noAnswerType names, from a bounded set, why an attempt got no answer:
// its error.type.
func noAnswerType(err error) string {
	var (
		refused *RefusedTargetError
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		alert   tls.AlertError
		record  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &refused):
		return "refused_target"
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.As(err, &certErr) || errors.As(err, &alert) || errors.As(err, &record):
		return "tls"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_reset"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "_OTHER"
}

// receiverHost returns the host name of a subscription's URL, for
// server.address: never the URL, which may hold a token.
func receiverHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// startDelivery starts the span of attempt a, "webhook.deliver", when
// tracing, and returns its context; otherwise the worker's context and a
// span that records nothing, allocating nothing.
//
// The span joins the event's trace: its parent is a remote span context
// of the event's traceId (the trace of the request that caused the
// event) and no span ID, for the event keeps no span of that trace, and
// naming one (the request's server span, say) would claim a parent that
// may have ended long before, in another process. The delivery is thus a
// root span within the request's trace, and the traceparent it sends
// makes the receiver's work its child. An event with no traceId starts a
// new trace, whatever span the worker's context may carry.
func (w *subWorker) startDelivery(a *attempt) (context.Context, trace.Span) {
	t := w.d.s.tel
	if !t.tracing() {
		return w.ctx, t.noSpan
	}
	attrs := []attribute.KeyValue{
		attribute.String("lifecycle.event.type", string(a.typ)),
		attribute.String("lifecycle.subscription.id", w.sub.ID),
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("server.address", w.host),
	}
	if a.n > 1 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", a.n-1))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
	ctx := w.ctx
	if tid, ok := eventTraceID(a.body); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, Remote: true}))
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return t.tracer.Start(ctx, "webhook.deliver", opts...)
}

// traceHeader returns what adds the W3C traceparent of span, whose
// context is ctx, to a delivery; nil when span has no valid context
// (tracing is off).
func (w *subWorker) traceHeader(ctx context.Context, span trace.Span) func(http.Header) {
	if !span.SpanContext().IsValid() {
		return nil
	}
	p := w.d.s.tel.propagator
	return func(h http.Header) { p.Inject(ctx, propagation.HeaderCarrier(h)) }
}

// attempted records what came of attempt a (err is why it got no answer,
// took how long it took) in the worker's gauges, the measures of the
// attempts and a's span, which it ends. An attempt abandoned because the
// worker stopped is not measured: it is not recorded, and will be made
// again.
func (w *subWorker) attempted(ctx context.Context, span trace.Span, a *attempt, err error, took time.Duration) {
	s := w.d.s
	delivered := a.err == ""
	abandoned := a.status == 0 && w.ctx.Err() != nil
	retried := !delivered && !abandoned && a.status != http.StatusGone && a.n < s.maxAttempts()
	w.gauge.attempted(a, retried)
	var noAnswer string
	if a.status == 0 {
		noAnswer = noAnswerType(err)
	}
	if !abandoned {
		t := s.tel
		if t.deliveryAttempts.Enabled(ctx) {
			w.d.tel.attempts.add(ctx, t.deliveryAttempts, attemptKey{delivered: delivered, class: statusClass(a.status)}, 1)
		}
		if t.deliveryDuration.Enabled(ctx) {
			w.d.tel.outcomes.record(ctx, t.deliveryDuration, delivered, took.Seconds())
		}
		if t.clientDuration.Enabled(ctx) {
			w.clientAttrs.record(ctx, t.clientDuration, clientKey{status: a.status, errType: noAnswer}, took.Seconds())
		}
	}
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, attribute.String("lifecycle.delivery.outcome", deliveryOutcome(delivered)))
		if a.status != 0 {
			attrs = append(attrs, attribute.Int("http.response.status_code", a.status))
		}
		if et := errorType(a.status, noAnswer); et != "" {
			attrs = append(attrs, attribute.String("error.type", et))
		}
		span.SetAttributes(attrs...)
		switch {
		case abandoned:
			span.SetStatus(codes.Error, "abandoned: the worker stopped")
		case a.status != 0 && !delivered:
			span.SetStatus(codes.Error, a.err) // the status, and its text
		case !delivered:
			span.SetStatus(codes.Error, "no answer: "+noAnswer) // the error's text may name addresses
		}
	}
	span.End()
}

// subscriptionDisabled counts a subscription disabled by its receiver.
func (s *Service) subscriptionDisabled(ctx context.Context) {
	s.tel.subscriptionsDisabled.Add(ctx, 1)
}

// replayRead counts a read of the outbox from the Store by a webhook
// worker that fell behind the broker's ring.
func (s *Service) replayRead(ctx context.Context) {
	s.tel.replayReads.Add(ctx, 1, webhookReplayReads...)
}

// Envelope members the telemetry reads from an event's JSON: the Service
// writes them before "data" (see appendEventJSON and Event's fields), so
// the first occurrence is the member, and an occurrence within a string
// would be escaped.
var (
	traceIDMember    = []byte(`"traceId":`)
	occurredAtMember = []byte(`"occurredAt":`)
)

// eventTraceID returns the traceId of an event's envelope, when it has
// one (it may be null).
func eventTraceID(body []byte) (trace.TraceID, bool) {
	var tid trace.TraceID
	v, ok := envelopeMember(body, traceIDMember, 2*len(tid)+2)
	if !ok || v[0] != '"' || v[len(v)-1] != '"' {
		return tid, false
	}
	v = v[1 : len(v)-1]
	if _, err := hex.Decode(tid[:], v); err != nil {
		return tid, false
	}
	return tid, tid.IsValid()
}

// occurredAt returns the occurredAt of an event's envelope in Unix
// nanoseconds, or 0 when it cannot be read. It reads the Service's own
// layout (timestampLayout, in UTC) without allocating.
func occurredAt(body []byte) int64 {
	v, ok := envelopeMember(body, occurredAtMember, len(`"2006-01-02T15:04:05.000Z"`))
	if !ok || v[0] != '"' {
		return 0
	}
	v = v[1:]
	if v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' || v[19] != '.' || v[23] != 'Z' {
		return 0
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(v[0:4]), num(v[5:7]), num(v[8:10])
	hour, minute, sec, milli := num(v[11:13]), num(v[14:16]), num(v[17:19]), num(v[20:23])
	if min(year, month, day, hour, minute, sec, milli) < 0 {
		return 0
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, milli*int(time.Millisecond), time.UTC).UnixNano()
}

// envelopeMember returns the n bytes after the first occurrence of key in
// body.
func envelopeMember(body, key []byte, n int) ([]byte, bool) {
	i := bytes.Index(body, key)
	if i < 0 || len(body)-(i+len(key)) < n {
		return nil, false
	}
	i += len(key)
	return body[i : i+n], true
}

// maxTrackedPending is the most pending retries a worker keeps the event
// times of, for the lag: beyond it they are counted only.
const maxTrackedPending = 16 * webhookBatch

// hookGauge is what a subscription's worker keeps in memory for the
// gauges lifecycle.webhook.backlog and lifecycle.webhook.lag, so that a
// scrape reads no Store. The worker's goroutine and its attempts write
// it; the gauges' callback reads it. Times are Unix nanoseconds of
// events' occurredAt, 0 when unknown.
//
// An event not yet delivered is one after the sequence the worker has
// read through (its filters may drop some of them: the backlog counts
// them until the worker reads past them), one whose first attempt is in
// flight, or one whose delivery is pending a retry.
type hookGauge struct {
	mu sync.Mutex
	// read is the sequence the worker has read the outbox through.
	read int64
	// storeRead is the time of the last event the worker read from the
	// Store, behind the broker's ring: the unread events are younger.
	storeRead int64
	// flying counts the first attempts of the last read in flight, and
	// flyingSince is the time of the oldest of their events.
	flying      int
	flyingSince int64
	// pending holds the event times of the pending retries known, by
	// delivery ID, at most maxTrackedPending of them; pendingN counts
	// them all. oldest is the earliest time in pending, unless stale.
	pending  map[string]int64
	pendingN int
	oldest   int64
	stale    bool
	// attrs is the lifecycle.subscription.id of the measures, made at
	// the first scrape.
	attrs metric.MeasurementOption
}

// readEvents notes a read of the outbox through next, whose events evs
// the worker delivers now.
func (g *hookGauge) readEvents(next int64, evs []ringEvent) {
	var since int64
	if len(evs) > 0 {
		since = occurredAt(evs[0].body)
	}
	g.mu.Lock()
	g.read, g.flying, g.flyingSince = next, len(evs), since
	g.mu.Unlock()
}

// readStore notes that the worker read the outbox from the Store, the
// last event it read having occurred at last.
func (g *hookGauge) readStore(last time.Time) {
	g.mu.Lock()
	g.storeRead = last.UnixNano()
	g.mu.Unlock()
}

// rewound notes that the worker reads on after to: the time of the last
// event it read from the Store no longer bounds the unread ones.
func (g *hookGauge) rewound(to int64) {
	g.mu.Lock()
	g.read, g.storeRead = to, 0
	g.mu.Unlock()
}

// pendingRead notes the pending retries the worker read from the Store:
// every one of them when all is true, else the earliest due.
func (g *hookGauge) pendingRead(pending []Delivery, all bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if all {
		clear(g.pending)
		g.pendingN, g.oldest, g.stale = 0, 0, false
	}
	for i := range pending {
		p := &pending[i]
		if _, ok := g.pending[p.ID]; !ok && (all || len(g.pending) < maxTrackedPending) {
			// Beyond maxTrackedPending, one not tracked may have been
			// counted already.
			g.addLocked(p.ID, occurredAt(p.Body))
		}
	}
	g.pendingN = max(g.pendingN, len(pending))
}

// attempted notes what came of attempt a: its event is delivered, or
// given up, unless retried.
func (g *hookGauge) attempted(a *attempt, retried bool) {
	var at int64
	if retried {
		at = occurredAt(a.body)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if a.prev == nil {
		g.flying--
	} else {
		g.removeLocked(a.prev.ID)
	}
	if retried {
		g.addLocked(a.id, at)
	}
}

func (g *hookGauge) addLocked(deliveryID string, at int64) {
	g.pendingN++
	if len(g.pending) >= maxTrackedPending {
		return
	}
	if g.pending == nil {
		g.pending = make(map[string]int64)
	}
	g.pending[deliveryID] = at
	if at != 0 && (g.oldest == 0 || at < g.oldest) {
		g.oldest = at
	}
}

func (g *hookGauge) removeLocked(deliveryID string) {
	at, ok := g.pending[deliveryID]
	if !ok && g.pendingN <= len(g.pending) {
		return // not known as pending
	}
	g.pendingN--
	if ok {
		delete(g.pending, deliveryID)
		if at == g.oldest {
			g.stale = true
		}
	}
}

// gaugeState is a copy of what a hookGauge says.
type gaugeState struct {
	read, storeRead     int64
	flying, pendingN    int
	flyingSince, oldest int64
	attrs               metric.MeasurementOption
}

// state returns what g says now; subID names the subscription.
func (g *hookGauge) state(subID string) gaugeState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stale {
		g.oldest, g.stale = 0, false
		for _, at := range g.pending {
			if at != 0 && (g.oldest == 0 || at < g.oldest) {
				g.oldest = at
			}
		}
	}
	if g.attrs == nil {
		g.attrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("lifecycle.subscription.id", subID)))
	}
	st := gaugeState{read: g.read, storeRead: g.storeRead, flying: max(g.flying, 0), pendingN: g.pendingN, attrs: g.attrs}
	if st.flying > 0 {
		st.flyingSince = g.flyingSince
	}
	if g.pendingN > 0 {
		st.oldest = g.oldest
	}
	return st
}

// registerGauges registers the callback of the backlog and lag gauges of
// the subscriptions this dispatcher delivers; nil when the meter refused
// them (logged).
func (d *dispatcher) registerGauges() metric.Registration {
	m := d.s.tel.meter
	var err error
	d.tel.backlog, err = m.Int64ObservableGauge("lifecycle.webhook.backlog", metric.WithUnit("{event}"),
		metric.WithDescription("Events not yet delivered to a webhook subscription this instance delivers: unread, in flight or pending a retry."))
	if err == nil {
		d.tel.lag, err = m.Float64ObservableGauge("lifecycle.webhook.lag", metric.WithUnit("s"),
			metric.WithDescription("Age of the oldest event not yet delivered to a webhook subscription this instance delivers; 0 when none."))
	}
	var reg metric.Registration
	if err == nil {
		reg, err = m.RegisterCallback(d.observe, d.tel.backlog, d.tel.lag)
	}
	if err != nil {
		d.s.log.Error("webhooks: register the backlog and lag gauges", "err", err)
		return nil
	}
	return reg
}

// observe observes the backlog and lag of each subscription this
// dispatcher runs a worker for, from memory: the workers' hookGauge and
// the broker's ring.
func (d *dispatcher) observe(_ context.Context, o metric.Observer) error {
	workers := d.pool.Workers(nil)
	if len(workers) == 0 {
		return nil
	}
	now := d.s.clock.Now().UnixNano()
	hub := d.s.broker.hub
	head, base := hub.Position(), hub.Base()
	buf := make([]ringEvent, 0, 1)
	all := func(*ringEvent) bool { return true }
	// first returns the time of the first event in the ring after pos,
	// or 0.
	first := func(pos int64) int64 {
		evs, _, _, ok := d.s.broker.events(pos, all, buf[:0], 1)
		if !ok || len(evs) == 0 {
			return 0
		}
		return occurredAt(evs[0].body)
	}
	for _, w := range workers {
		st := w.gauge.state(w.sub.ID)
		backlog := int64(st.flying + st.pendingN)
		oldest := min0(st.flyingSince, st.oldest)
		if unread := head - st.read; unread > 0 {
			backlog += unread
			var at int64
			switch {
			case st.read >= base:
				at = first(st.read)
			case st.storeRead != 0:
				at = st.storeRead // the unread events are younger
			default:
				at = first(base) // older ones are unread too
			}
			oldest = min0(oldest, at)
		}
		lag := 0.0
		if oldest != 0 && now > oldest {
			lag = time.Duration(now - oldest).Seconds()
		}
		o.ObserveInt64(d.tel.backlog, backlog, st.attrs)
		o.ObserveFloat64(d.tel.lag, lag, st.attrs)
	}
	return nil
}

// min0 returns the lesser of a and b that is not 0, or 0.
func min0(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
