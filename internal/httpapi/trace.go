package httpapi

import (
	"context"
	"net/http"

	"github.com/tasklifecycle/lifecycle/internal/oteltp"
	"go.opentelemetry.io/otel/trace"
)

// traceKey is the context key of the trace ID.
type traceKey struct{}

// ContextWithTraceID returns a context that carries a W3C trace ID (32
// lowercase hex digits), which TraceIDFrom returns.
func ContextWithTraceID(ctx context.Context, traceID string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceID)
}

// TraceIDFrom returns the context's trace ID (given by
// ContextWithTraceID, else that of the span it carries), or nil.
func TraceIDFrom(ctx context.Context) *string {
	if id, ok := ctx.Value(traceKey{}).(string); ok && id != "" {
		return &id
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		id := sc.TraceID().String()
		return &id
	}
	return nil
}

// RequestContext returns the request's context carrying the trace ID of
// its traceparent header, if it has a valid one.
func RequestContext(r *http.Request) context.Context {
	ctx := r.Context()
	if tp := r.Header.Get("traceparent"); tp != "" {
		if trace := oteltp.TraceID(tp); trace != "" {
			ctx = ContextWithTraceID(ctx, trace)
		}
	}
	return ctx
}
