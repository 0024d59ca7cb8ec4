package lifecycletype

import (
	"errors"
)

// Sentinel errors. Service methods, stores and adapters return errors that
// match one of these with errors.Is; the HTTP layer maps each to a status and
// an error code in one table (see lifecycle.Service.Handler).
var (
	// ErrNotFound means the thing asked for does not exist (HTTP 404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request is well formed but the resource's state
	// does not allow it (HTTP 409 conflict). A *ConflictError says why.
	ErrConflict = errors.New("conflict")
	// ErrValidation means the request is malformed (HTTP 400
	// validation_error). A *ValidationError lists the failing fields.
	ErrValidation = errors.New("validation failed")
	// ErrUnauthorized means the request carries no valid credentials
	// (HTTP 401 unauthorized).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInsufficientScope means the credentials lack the scope the
	// operation needs (HTTP 403 insufficient_scope).
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrPayloadTooLarge means a request body exceeds 1 MiB (HTTP 413
	// payload_too_large).
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrCursorExpired means an event cursor is unknown or outside the replay
	// window (HTTP 410 cursor_expired).
	ErrCursorExpired = errors.New("cursor expired")
	// ErrRateLimited means a limit on concurrent use was reached (HTTP 429
	// rate_limited). A *RateLimitError says when to retry.
	ErrRateLimited = errors.New("rate limited")
	// ErrRequestTimeout means a request body did not arrive within
	// lifecycle.Config.BodyReadTimeout (HTTP 408 request_timeout).
	ErrRequestTimeout = errors.New("request timeout")
	// ErrCSRF means a request authenticated by a browser session came
	// from another site, or changed something without the session's CSRF
	// token (HTTP 403 csrf_failed); the operator console (package console)
	// refuses such requests with it.
	ErrCSRF = errors.New("cross-site request refused")
	// ErrClosed means the Service or Store has been closed.
	ErrClosed = errors.New("closed")
	// ErrUnavailable means the Store failed in a way that may pass (its
	// database restarting or out of reach, its disk full), or did not
	// answer within the request's time (HTTP 503 store_unavailable, with
	// Retry-After). Nothing the request changed was acknowledged; it may
	// be retried, with the same Idempotency-Key where it takes one.
	ErrUnavailable = errors.New("store unavailable")

	// ErrHeadMismatch means a pull request's head commit is not the one a
	// merge expected. Adapters wrap it; the Service answers 409 conflict.
	ErrHeadMismatch = errors.New("head commit is not the expected one")
	// ErrTemporary means a code host, CI system or deployer failed in a way
	// that may pass: an HTTP 5xx, a rate limit, GitHub's "Base branch was
	// modified". Adapters and deployers wrap it, usually in a
	// *TemporaryError; the ship runner retries such failures with backoff for
	// up to lifecycle.Config.ShipRetryBudget, while every other failure is final.
	ErrTemporary = errors.New("temporary failure")
	// ErrInvalidSignature means a webhook request's signature does not
	// match its body and the subscription secret (see
	// lifecycle.VerifyWebhookSignature).
	ErrInvalidSignature = errors.New("lifecycle: webhook signature does not match")
	// ErrInstanceInUse means another live Service holds the instance ID a
	// Service was started with (lifecycle.Config.InstanceID).
	ErrInstanceInUse = errors.New("instance ID in use by a live Service")
)

// ErrProvider means a code host, CI system or deployer failed (HTTP 502
// provider_error). A *ProviderError says which operation.
var ErrProvider = errors.New("provider failed")

// ProviderError reports the failure of an adapter, CI provider or
// deployer. It matches ErrProvider and unwraps to the cause, which only
// the log sees.
type ProviderError struct {
	// Op names what was attempted, such as "open pull request".
	Op string
	// Err is the adapter's error.
	Err error
}

// Error implements error.
func (e *ProviderError) Error() string { return "provider: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// Is reports whether target is ErrProvider.
func (e *ProviderError) Is(target error) bool { return target == ErrProvider }

// RateLimitError says when a rate-limited request may be retried. It matches
// ErrRateLimited.
type RateLimitError struct {
	// RetryAfterSeconds is sent as the Retry-After header.
	RetryAfterSeconds int
	// Message is the human sentence sent as error.message.
	Message string
}

// Error implements error.
func (e *RateLimitError) Error() string { return "rate limited: " + e.Message }

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }
