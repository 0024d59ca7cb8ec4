package webhookdispatch

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The telemetry of webhook deliveries (see docs/operations.md for the
// instruments, and internal/telemetry for how they are made): per
// attempt, a client span "webhook.deliver" and its measures;
// lifecycle.webhook.subscriptions.disabled when a receiver's 410 disables
// a subscription; lifecycle.outbox.replay.reads when a worker reads the
// outbox from the Store; and the observable gauges lifecycle.webhook.backlog
// and lifecycle.webhook.lag of the subscriptions this instance delivers,
// read from what their workers keep in memory (telemetry.Backlog).
//
// No metric names a subscription or a receiver unless
// Config.MetricIdentifiers asks for it (lifecycle.subscription.id on the
// gauges, then one series per subscription; server.address on
// http.client.request.duration): metrics are often served without a key.
// The span names both: spans go only to the TracerProvider's exporter.

// noAnswerType names, from a bounded set, why an attempt got no answer:
// its error.type.
func noAnswerType(err error) string {
	var (
		refused *lifecycletype.RefusedTargetError
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
// tracing, within the event's trace (see telemetry.Deliveries.StartDelivery),
// and returns its context; otherwise the worker's context and a span that
// records nothing, allocating nothing.
func (w *subWorker) startDelivery(a *attempt) (context.Context, trace.Span) {
	t := w.d.cfg.Tel
	if !t.Tracing() {
		return t.Start(w.ctx, "webhook.deliver")
	}
	tid, ok := telemetry.EventTraceID(a.body)
	if !ok {
		tid = trace.TraceID{} // a new trace (one that failed to decode may be half written)
	}
	return w.d.tel.StartDelivery(w.ctx, telemetry.Delivery{EventType: string(a.typ), SubscriptionID: w.sub.ID, Host: w.host,
		Attempt: a.n, TraceID: tid})
}

// traceHeader returns what adds the W3C traceparent of span, whose
// context is ctx, to a delivery; nil when span has no valid context
// (tracing is off).
func (w *subWorker) traceHeader(ctx context.Context, span trace.Span) func(http.Header) {
	return w.d.tel.TraceHeader(ctx, span)
}

// attempted records what came of attempt a (err is why it got no answer,
// took how long it took) in the worker's gauges, the measures of the
// attempts and a's span, which it ends. An attempt abandoned because the
// worker stopped is not measured: it is not recorded, and will be made
// again.
func (w *subWorker) attempted(ctx context.Context, span trace.Span, a *attempt, err error, took time.Duration) {
	delivered := a.err == ""
	abandoned := a.status == 0 && w.ctx.Err() != nil
	retried := !delivered && !abandoned && a.status != http.StatusGone && a.n < w.d.maxAttempts()
	var prevID string
	if a.prev != nil {
		prevID = a.prev.ID
	}
	w.gauge.Attempted(prevID, a.id, a.body, retried)
	var noAnswer string
	if a.status == 0 {
		noAnswer = noAnswerType(err)
	}
	w.d.tel.Attempted(ctx, span, w.receiver, telemetry.Outcome{Delivered: delivered, Abandoned: abandoned,
		Status: a.status, NoAnswer: noAnswer, Failure: a.err, Took: took})
}

// registerGauges registers the callback of the backlog and lag gauges of
// the subscriptions this dispatcher delivers; nil when the meter refused
// them (logged).
func (d *Dispatcher) registerGauges() metric.Registration {
	reg, err := d.tel.RegisterGauges(d.observe)
	if err != nil {
		d.cfg.Log.Error("webhooks: register the backlog and lag gauges", "err", err)
		return nil
	}
	return reg
}

// observe observes the backlog and lag of the subscriptions this
// dispatcher runs a worker for, from memory: the workers' Backlog and
// the broker's ring. With Config.MetricIdentifiers, those of each
// subscription, under its ID; otherwise one backlog, their sum, and one
// lag, the greatest, with no attribute.
func (d *Dispatcher) observe(o telemetry.GaugeObserver) {
	workers := d.pool.Workers(nil)
	if len(workers) == 0 {
		return
	}
	now := d.cfg.Clock.Now().UnixNano()
	hub := d.cfg.Broker.Hub()
	head, base := hub.Position(), hub.Base()
	buf := make([]broker.Event, 0, 1)
	all := func(*broker.Event) bool { return true }
	// first returns the time of the first event in the ring after pos,
	// or 0.
	first := func(pos int64) int64 {
		evs, _, _, ok := d.cfg.Broker.Events(pos, all, buf[:0], 1)
		if !ok || len(evs) == 0 {
			return 0
		}
		return telemetry.OccurredAt(evs[0].Body)
	}
	perSub := d.cfg.MetricIdentifiers
	var total int64
	var greatest time.Duration
	for _, w := range workers {
		var subID string
		if perSub {
			subID = w.sub.ID
		}
		st := w.gauge.State(subID)
		backlog := int64(st.Flying + st.PendingN)
		oldest := min0(st.FlyingSince, st.Oldest)
		if unread := head - st.Read; unread > 0 {
			backlog += unread
			var at int64
			switch {
			case st.Read >= base:
				at = first(st.Read)
			case st.StoreRead != 0:
				at = st.StoreRead // the unread events are younger
			default:
				at = first(base) // older ones are unread too
			}
			oldest = min0(oldest, at)
		}
		var lag time.Duration
		if oldest != 0 && now > oldest {
			lag = time.Duration(now - oldest)
		}
		if !perSub {
			total += backlog
			greatest = max(greatest, lag)
			continue
		}
		o.Observe(backlog, lag, st.Attrs)
	}
	if !perSub {
		o.Observe(total, greatest, nil)
	}
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
