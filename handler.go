package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

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
	httpapi.WriteJSON(w, status, v)
}

// routes builds the API's ServeMux, authenticating requests with auth:
// the Service's Authenticator for Handler, another for HandlerWith.
func (s *Service) routes(auth Authenticator) http.Handler {
	mux := http.NewServeMux()
	depth := 0 // the most segments of a route, which bounds httpapi.MountHint's work
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
	handle("PUT /tasks/{id}/dependencies", ScopeTasksAdmin, s.handleSetDependencies)
	handle("POST /tasks/{id}/submit", ScopeTasksWrite, s.handleSubmit)
	handle("POST /tasks/{id}/reviews", ScopeReviewsWrite, s.handlePostReview)
	handle("GET /tasks/{id}/review-feedback", ScopeTasksRead, s.handleReviewFeedback)
	handle("POST /tasks/{id}/checks", ScopeCIWrite, s.handleReportChecks)
	handle("GET /tasks/{id}/ci-status", ScopeTasksRead, s.handleCIStatus)
	handle("POST /tasks/{id}/ship", ScopeShipWrite, s.handleShip)
	handle("GET /ship-operations/{operationId}", ScopeTasksRead, s.handleGetShipOperation)
	handle("GET /merge-queues", ScopeTasksRead, s.handleListMergeQueues)
	handle("GET /merge-queues/{id}", ScopeTasksRead, s.handleGetMergeQueue)
	handle("POST /merge-queues/{id}/pause", ScopeShipWrite, s.handlePauseMergeQueue)
	handle("POST /merge-queues/{id}/resume", ScopeShipWrite, s.handleResumeMergeQueue)
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
	ctx := httpapi.WithLimits(r.Context(), &s.bodies) // for httpapi.ReadBody
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

// unrouted answers requests no route matched: 405 when the path exists
// under another method, 404 otherwise (see httpapi.MountHint for depth).
func (s *Service) unrouted(mux *http.ServeMux, depth int) http.Handler {
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range methods {
			if strings.Count(r.URL.Path, "/") > depth {
				break // no route has that many segments, under any method
			}
			if _, pattern := mux.Handler(httpapi.Probe(r, m, r.URL.Path)); pattern != "/" && pattern != "" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			s.writeError(w, r, fmt.Errorf("%s is not allowed on %s; use %s: %w", r.Method, r.URL.Path, strings.Join(allowed, " or "), httpapi.ErrMethodNotAllowed))
			return
		}
		s.writeError(w, r, fmt.Errorf("no such endpoint: %s %s%s: %w", r.Method, r.URL.Path, httpapi.MountHint(mux, depth, r), ErrNotFound))
	})
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
	status, body := httpapi.ErrorResponse(err)
	switch {
	case status == http.StatusServiceUnavailable:
		s.log.WarnContext(r.Context(), "request refused: the service is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case status >= 500:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	httpapi.WriteError(w, err, status, body)
}

// ContextWithTraceID returns a context that carries a W3C trace ID (32
// lowercase hex digits). Events caused by Service calls made with it carry
// the ID as traceId. The HTTP handler does this from the traceparent header.
func ContextWithTraceID(ctx context.Context, traceID string) context.Context {
	return httpapi.ContextWithTraceID(ctx, traceID)
}
