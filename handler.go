package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/jsonscan"
	"github.com/tasklifecycle/lifecycle/internal/oteltp"
	"go.opentelemetry.io/otel/trace"
)

// maxBodyBytes is the largest request body accepted (1 MiB); larger ones
// get 413 payload_too_large.
const maxBodyBytes = 1 << 20

// apiHandler serves one route for an authenticated principal. It returns an
// error instead of writing one, so that errors are mapped in one place.
type apiHandler func(w http.ResponseWriter, r *http.Request, p *Principal) error

// HandlerWith returns the HTTP handler of the whole API, like
// [Service.Handler], authenticating its requests with auth instead of the
// Service's Authenticator: a host serves the API to a second kind of
// client this way (the operator console, package console, serves it to
// its signed-in sessions). The principals auth returns act as any other:
// their scopes decide, their Done and ExpiresAt end their event streams.
// Each call builds a new handler: build it once.
func (s *Service) HandlerWith(auth Authenticator) http.Handler {
	return s.routes(auth)
}

// ServeFunc returns a handler that runs h as the API runs its routes:
// within [Config.RequestTimeout], with the error h
// returns (if any) written in the API's error envelope, its status and
// code from the one table that maps errors (see [ErrorBody]): a failure
// of the Store that may pass, or running out of time, is 503
// store_unavailable with Retry-After; a *ValidationError is 400 with every
// field; an error matching ErrUnauthorized is 401; and so on. A host
// serves pages of its own beside the API this way, with the API's errors,
// and wraps them in [Service.Guard].
func (s *Service) ServeFunc(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, s.cfg.RequestTimeout, func(r *http.Request) error { return h(w, r) })
	})
}

// WriteError writes err as the API answers it: the error envelope, with
// the status and code of the one table that maps errors (see
// [ErrorBody]), Retry-After for a rate limit or a Store that may come
// back, and a log line for a failure on the Service's side; nothing when
// r's client went away. A host that answers outside [Service.ServeFunc]
// (package mcp) writes its errors this way.
func (s *Service) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeError(w, r, err)
}

// WriteJSON writes v as the JSON body of a response with status, as the
// API writes its own: one line, without HTML escaping, with
// Content-Type application/json and Content-Length.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	writeJSON(w, status, v)
}

// routes builds the API's ServeMux, authenticating requests with auth:
// the Service's Authenticator for Handler, another for HandlerWith.
func (s *Service) routes(auth Authenticator) http.Handler {
	mux := http.NewServeMux()
	depth := 0 // the most segments of a route, which bounds mountHint's work
	handle := func(pattern string, scope Scope, h apiHandler) {
		depth = max(depth, strings.Count(pattern, "/"))
		mux.Handle(pattern, s.authorize(auth, scope, h, s.cfg.RequestTimeout))
	}
	// handleLong serves a route whose requests last as long as their
	// client stays: the event stream.
	handleLong := func(pattern string, scope Scope, h apiHandler) {
		depth = max(depth, strings.Count(pattern, "/"))
		mux.Handle(pattern, s.authorize(auth, scope, h, 0))
	}

	handle("GET /tasks", ScopeTasksRead, s.handleListTasks)
	handle("POST /tasks", ScopeTasksAdmin, s.handleCreateTask)
	handle("GET /tasks/{id}", ScopeTasksRead, s.handleGetTask)
	handle("POST /tasks/{id}/start", ScopeTasksWrite, s.handleStartTask)
	handle("POST /tasks/{id}/cancel", ScopeTasksAdmin, s.handleCancelTask)
	handle("POST /tasks/{id}/submit", ScopeTasksWrite, s.handleSubmit)
	handle("POST /tasks/{id}/reviews", ScopeReviewsWrite, s.handlePostReview)
	handle("GET /tasks/{id}/review-feedback", ScopeTasksRead, s.handleReviewFeedback)
	handle("POST /tasks/{id}/checks", ScopeCIWrite, s.handleReportChecks)
	handle("GET /tasks/{id}/ci-status", ScopeTasksRead, s.handleCIStatus)
	handle("POST /tasks/{id}/ship", ScopeShipWrite, s.handleShip)
	handle("GET /ship-operations/{operationId}", ScopeTasksRead, s.handleGetShipOperation)
	handle("POST /tasks/{id}/blocker", ScopeTasksWrite, s.handleRecordBlocker)
	handle("POST /tasks/{id}/resolve-blocker", ScopeTasksWrite, s.handleResolveBlocker)

	handleLong("GET /task-events/stream", ScopeEventsRead, s.handleStream)

	handle("POST /event-subscriptions", ScopeWebhooksWrite, s.handleCreateSubscription)
	handle("GET /event-subscriptions", ScopeWebhooksRead, s.handleListSubscriptions)
	handle("GET /event-subscriptions/{id}", ScopeWebhooksRead, s.handleGetSubscription)
	handle("DELETE /event-subscriptions/{id}", ScopeWebhooksWrite, s.handleDeleteSubscription)
	handle("GET /event-subscriptions/{id}/deliveries", ScopeWebhooksRead, s.handleListDeliveries)
	handle("POST /event-subscriptions/{id}/replay", ScopeWebhooksWrite, s.handleReplay)
	handle("POST /event-subscriptions/{id}/deliveries/{deliveryId}/retry", ScopeWebhooksWrite, s.handleRetryDelivery)
	handle("POST /event-subscriptions/{id}/enable", ScopeWebhooksWrite, s.handleEnableSubscription)

	handle("POST /api-keys", ScopeKeysAdmin, s.handleCreateAPIKey)
	handle("GET /api-keys", ScopeKeysAdmin, s.handleListAPIKeys)
	handle("DELETE /api-keys/{id}", ScopeKeysAdmin, s.handleRevokeAPIKey)

	mux.HandleFunc("GET /openapi.yaml", handleOpenAPI)
	mux.HandleFunc("GET /healthz", handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)

	mux.Handle("/", s.unrouted(mux, depth))
	return s.guard(mux)
}

// authorize authenticates the request with auth, checks that the
// principal holds scope, and runs h within timeout (none when 0), writing
// whatever error comes back.
func (s *Service) authorize(auth Authenticator, scope Scope, h apiHandler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, timeout, func(r *http.Request) error {
			p, err := s.authenticate(auth, r)
			if err != nil {
				return err
			}
			if !p.Has(scope) {
				s.tel.AuthFailure(r.Context(), "insufficient_scope")
				return fmt.Errorf("this operation needs an API key with scope %s: %w", scope, ErrInsufficientScope)
			}
			return h(w, r, &p)
		})
	})
}

// serve runs h on r within timeout (none when 0) and writes the error it
// returns, if any: a failure of the Store that may pass, or running out
// of time, as 503 store_unavailable (see storeFailure).
func (s *Service) serve(w http.ResponseWriter, r *http.Request, timeout time.Duration, h func(r *http.Request) error) {
	ctx := contextWithService(r.Context(), s) // for readBody
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := h(r.WithContext(ctx)); err != nil {
		s.writeError(w, r, s.storeFailure(ctx, r.Context(), err))
	}
}

// storeFailure returns err wrapped with ErrUnavailable when it is a
// failure of the Store that may pass (see [FailureClassifier]), or when
// the request ran out of its time (ctx is done, asked, the client's, is
// not): the Store, or the database behind it, did not answer in time.
// Any other error is returned as it is, a code host's failure
// (ErrProvider) among them, whatever network error it wraps.
func (s *Service) storeFailure(ctx, asked context.Context, err error) error {
	switch {
	case errors.Is(err, ErrUnavailable) || errors.Is(err, ErrProvider):
		return err
	case ctx.Err() != nil && asked.Err() == nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("the request did not finish within %s: %w", s.cfg.RequestTimeout, ErrUnavailable)
	}
	if c := s.caps.classifier; c != nil && c.Unavailable(err) {
		return fmt.Errorf("%w: %w", err, ErrUnavailable)
	}
	return err
}

// errMethodNotAllowed answers a known path asked with an unsupported method.
var errMethodNotAllowed = errors.New("method not allowed")

// unrouted answers requests no route matched: 405 when the path exists
// under another method, 404 otherwise (see mountHint for depth).
func (s *Service) unrouted(mux *http.ServeMux, depth int) http.Handler {
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range methods {
			if strings.Count(r.URL.Path, "/") > depth {
				break // no route has that many segments, under any method
			}
			if _, pattern := mux.Handler(probe(r, m, r.URL.Path)); pattern != "/" && pattern != "" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			s.writeError(w, r, fmt.Errorf("%s is not allowed on %s; use %s: %w", r.Method, r.URL.Path, strings.Join(allowed, " or "), errMethodNotAllowed))
			return
		}
		s.writeError(w, r, fmt.Errorf("no such endpoint: %s %s%s: %w", r.Method, r.URL.Path, mountHint(mux, depth, r), ErrNotFound))
	})
}

// errorMapping is the one table from errors to HTTP statuses and codes.
// The first entry the error matches wins; anything else is 500 internal.
// ErrProvider comes first: a provider's failure is a 502 whatever its
// cause wraps (an adapter's ErrNotFound is not the caller's 404).
var errorMapping = []struct {
	err     error
	status  int
	code    string
	message string // when set, said instead of the error's own text
}{
	{ErrProvider, http.StatusBadGateway, "provider_error", ""},
	{ErrValidation, http.StatusBadRequest, "validation_error", ""},
	{ErrUnauthorized, http.StatusUnauthorized, "unauthorized", ""},
	{ErrInsufficientScope, http.StatusForbidden, "insufficient_scope", ""},
	{ErrCSRF, http.StatusForbidden, "csrf_failed", ""},
	{ErrNotFound, http.StatusNotFound, "not_found", ""},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", ""},
	{ErrConflict, http.StatusConflict, "conflict", ""},
	{ErrCursorExpired, http.StatusGone, "cursor_expired", ""},
	{ErrPayloadTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", ""},
	{ErrRequestTimeout, http.StatusRequestTimeout, "request_timeout", ""},
	{ErrRateLimited, http.StatusTooManyRequests, "rate_limited", ""},
	{ErrClosed, http.StatusServiceUnavailable, "unavailable", "The service is shutting down; retry shortly."},
	{ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable", "The service's store is unavailable; retry shortly, with the same Idempotency-Key where the endpoint takes one. The request was not acknowledged, but a change the store was saving as it failed may have been made."},
}

// storeRetryAfter is the Retry-After of a 503 store_unavailable, in
// seconds.
const storeRetryAfter = "2"

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject describes an error: a stable code, a human message and,
// where there is something to say, details.
type ErrorObject struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Details *ErrorDetails `json:"details,omitempty"`
}

// ErrorDetails carries the specifics of an error.
type ErrorDetails struct {
	// Fields lists every invalid field of a validation_error, up to 100.
	Fields []FieldError `json:"fields,omitempty"`
	// Truncated says that more fields were invalid than Fields lists.
	Truncated bool `json:"truncated,omitempty"`
	// Reason is the machine-readable cause of a conflict.
	Reason string `json:"reason,omitempty"`
	// AvailableActions lists the task's next steps on a conflict over a
	// task; it is present, possibly empty, on every such conflict.
	AvailableActions []Action `json:"availableActions,omitzero"`
}

// errorResponse maps err to a status and body.
func errorResponse(err error) (int, ErrorBody) {
	for _, m := range errorMapping {
		if !errors.Is(err, m.err) {
			continue
		}
		obj := ErrorObject{Code: m.code, Message: m.message}
		if obj.Message == "" {
			obj.Message = publicMessage(err)
		}
		var (
			ve *ValidationError
			ce *ConflictError
			pe *ProviderError
			rl *RateLimitError
		)
		switch {
		case errors.As(err, &pe):
			obj.Message = "The code host failed to " + pe.Op + "; the request changed nothing and can be retried."
		case errors.As(err, &ve):
			obj.Message = "The request is invalid; error.details.fields lists every problem."
			obj.Details = &ErrorDetails{Fields: ve.Fields, Truncated: ve.Truncated}
			if len(ve.Fields) > maxFieldErrors {
				obj.Details.Fields, obj.Details.Truncated = ve.Fields[:maxFieldErrors], true
			}
		case errors.As(err, &ce):
			obj.Message = ce.Message
			if ce.Reason != "" || ce.AvailableActions != nil {
				obj.Details = &ErrorDetails{Reason: ce.Reason, AvailableActions: ce.AvailableActions}
			}
		case errors.As(err, &rl):
			obj.Message = rl.Message + "."
		}
		return m.status, ErrorBody{Error: obj}
	}
	return http.StatusInternalServerError, ErrorBody{Error: ErrorObject{
		Code:    "internal",
		Message: "The server failed to handle the request; it has been logged.",
	}}
}

// publicMessage turns an error built by this package into a sentence for
// clients: the wrapped sentinel's text is dropped and the first letter raised.
func publicMessage(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i > 0 {
		msg = msg[:i]
	}
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// writeError writes err as an error response and logs what is not the
// client's fault.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The client went away (or the server is closing the connection):
		// nobody reads an answer, and nothing failed on our side.
		s.log.DebugContext(r.Context(), "request abandoned by its client", "method", r.Method, "path", r.URL.Path)
		return
	}
	status, body := errorResponse(err)
	switch {
	case status == http.StatusServiceUnavailable:
		s.log.WarnContext(r.Context(), "request refused: the service is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case status >= 500:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var rl *RateLimitError
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(rl.RetryAfterSeconds))
	case errors.Is(err, ErrUnavailable):
		w.Header().Set("Retry-After", storeRetryAfter)
	}
	writeJSON(w, status, body)
}

// writeJSON writes v as the JSON body of a response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeRaw(w, status, encodeJSON(v))
}

// writeData writes v as the data member of the body, {"data": v}, the
// envelope of every answer with one resource.
func writeData[T any](w http.ResponseWriter, status int, v T) {
	writeJSON(w, status, struct {
		Data T `json:"data"`
	}{v})
}

// encodeJSON encodes v as one line of JSON without HTML escaping. Values
// built by this package always encode; should one not, the result is an
// internal error body.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	buf.Grow(1024)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal","message":"The server failed to encode its response."}}` + "\n")
	}
	return buf.Bytes()
}

// writeRaw writes an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// decodeJSON decodes the request body into dst, refusing unknown members,
// trailing data and bodies over 1 MiB (see readBody and decodeStrict). An
// empty body decodes as {} when allowEmpty is set.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) error {
	return decodeAndCheck(w, r, dst, allowEmpty, nil)
}

// decodeAndCheck decodes the request body into dst like decodeJSON, then
// runs check (when not nil) on it, so that one response lists every
// invalid field: those of the wrong JSON type or text, and those check
// refuses.
func decodeAndCheck(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool, check func() error) error {
	raw, release, err := readBody(w, r)
	if err != nil {
		return err
	}
	defer release()
	return decodeRaw(r.Context(), raw, dst, allowEmpty, check)
}

// decodeRaw decodes a request body read by readBody into dst and runs
// check on it; see decodeAndCheck. It stops when ctx is done (the client
// went away).
func decodeRaw(ctx context.Context, raw []byte, dst any, allowEmpty bool, check func() error) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		if allowEmpty {
			return nil
		}
		return invalid("body", "a JSON object is required")
	}
	err := decodeStrict(raw, dst)
	var ve *ValidationError
	if err != nil && (!errors.As(err, &ve) || !ve.typeOnly) {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if check == nil {
		return err
	}
	return mergeFieldErrors(ve, check())
}

// mergeFieldErrors adds the fields of the *ValidationError in more (if it
// is one) to those of ve, leaving out fields ve already names, in time
// linear in both, and keeping at most maxFieldErrors. An error of more that
// is not a validation error is returned as it is.
func mergeFieldErrors(ve *ValidationError, more error) error {
	if ve == nil {
		return more
	}
	var mv *ValidationError
	if more != nil && !errors.As(more, &mv) {
		return more
	}
	out := &ValidationError{Fields: ve.Fields, Truncated: ve.Truncated}
	if mv != nil {
		seen := make(map[string]bool, len(ve.Fields))
		for _, f := range ve.Fields {
			seen[f.Field] = true
		}
		out.Truncated = out.Truncated || mv.Truncated
		for _, f := range mv.Fields {
			if seen[f.Field] {
				continue
			}
			if len(out.Fields) >= maxFieldErrors {
				out.Truncated = true
				break
			}
			seen[f.Field] = true
			out.Fields = append(out.Fields, f)
		}
	}
	return out
}

// decodeStrict decodes one JSON value from raw into dst, refusing unknown
// members and trailing data, after checking the body's limits (see
// scanLimits and jsonscan.Decode). A body with an array over its limit, or
// nested too deeply, is refused without being decoded; strings with
// invalid UTF-8 or control characters are refused by name, along with any
// wrong member type, as an error marked typeOnly (the rest was decoded and
// can still be checked).
func decodeStrict(raw []byte, dst any) error {
	var v validator
	typeOnly := jsonscan.Decode(raw, dst, &scanLimits, v.add)
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields, Truncated: v.truncated, typeOnly: typeOnly}
}

// traceKey is the context key of the trace ID.
type traceKey struct{}

// ContextWithTraceID returns a context that carries a W3C trace ID (32
// lowercase hex digits). Events caused by Service calls made with it carry
// the ID as traceId. The HTTP handler does this from the traceparent header.
func ContextWithTraceID(ctx context.Context, traceID string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceID)
}

// traceIDFrom returns the context's trace ID (given by
// ContextWithTraceID, else that of the span it carries), or nil.
func traceIDFrom(ctx context.Context) *string {
	if id, ok := ctx.Value(traceKey{}).(string); ok && id != "" {
		return &id
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		id := sc.TraceID().String()
		return &id
	}
	return nil
}

// requestContext returns the request's context carrying its trace ID.
func requestContext(r *http.Request) context.Context {
	ctx := r.Context()
	if tp := r.Header.Get("traceparent"); tp != "" {
		if trace := oteltp.TraceID(tp); trace != "" {
			ctx = ContextWithTraceID(ctx, trace)
		}
	}
	return ctx
}

// nonNil returns s, or an empty slice when s is nil, so it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
