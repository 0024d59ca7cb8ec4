package lifecycle

import (
	"context"
	"net/http"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/keyauth"
)

// This file serves a host that speaks another protocol beside the API,
// over the same credentials and with the same errors (package mcp serves
// the lifecycle as Model Context Protocol tools this way).

// Authenticate returns the principal of r as the API's routes find it:
// through [Config.Authenticator], or the Service's own API keys with their
// limit on failed attempts ([Config.AuthFailureLimit]), counting failures
// in lifecycle.auth.failures. Check the scope each operation needs with
// [Principal.Has]. It returns an error matching ErrUnauthorized for a
// request without valid credentials, and a *RateLimitError for a client
// that failed too often; answer both with [Service.APIError].
func (s *Service) Authenticate(r *http.Request) (Principal, error) {
	return s.authenticate(s.auth, r)
}

// authenticate authenticates r with auth, counting a failure in
// lifecycle.auth.failures.
func (s *Service) authenticate(auth Authenticator, r *http.Request) (Principal, error) {
	p, err := auth.Authenticate(r)
	if err != nil {
		s.tel.AuthFailure(r.Context(), keyauth.FailureReason(err))
	}
	return p, err
}

// APIError returns the HTTP status and the body with which the API
// answers err, from the one table that maps errors to codes (see
// [ErrorBody]): the stable code, the message for clients and, for a
// conflict over a task, details.availableActions, the task's next steps.
// A failure of the Store that may pass is 503 store_unavailable, as the
// API answers it; an error the table does not know is 500 internal, whose
// text never reaches the body (log it).
func (s *Service) APIError(err error) (status int, body ErrorBody) {
	ctx := context.Background()
	return httpapi.ErrorResponse(s.storeFailure(ctx, ctx, err))
}
