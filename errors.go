package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Service methods, stores and adapters return errors that
// match one of these with errors.Is; the HTTP layer maps each to a status and
// an error code in one table (see [Service.Handler]).
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
	// [Config.BodyReadTimeout] (HTTP 408 request_timeout).
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
	// up to [Config.ShipRetryBudget], while every other failure is final.
	ErrTemporary = errors.New("temporary failure")
	// ErrInvalidSignature means a webhook request's signature does not
	// match its body and the subscription secret (see
	// [VerifyWebhookSignature]).
	ErrInvalidSignature = errors.New("lifecycle: webhook signature does not match")
	// ErrInstanceInUse means another live Service holds the instance ID a
	// Service was started with ([Config.InstanceID]).
	ErrInstanceInUse = errors.New("instance ID in use by a live Service")
)

// FieldError names one invalid part of a request and why it is invalid.
type FieldError struct {
	// Field is the JSON path of the member ("summary", "pullRequest.title",
	// "checks[2].status"), or a header or query parameter name.
	Field string `json:"field"`
	// Reason says what is wrong, in words a client developer can act on.
	Reason string `json:"reason"`
}

// ValidationError lists every invalid field of a request. It matches
// ErrValidation.
type ValidationError struct {
	Fields []FieldError
	// Truncated says that more fields were invalid than the first
	// maxFieldErrors listed in Fields; it is sent as details.truncated.
	Truncated bool

	// typeOnly marks an error of JSON decoding where only member types were
	// wrong: the rest of the body was decoded and can still be checked.
	typeOnly bool
}

// Error implements error.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Reason
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Is reports whether target is ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// invalid returns a *ValidationError for one field.
func invalid(field, reason string) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Field: field, Reason: reason}}}
}

// maxFieldErrors is the most field errors one response lists; past it,
// details.truncated says there were more. It keeps the work and the answer
// bounded whatever the request holds.
const maxFieldErrors = 100

// validator collects field errors while a request is checked, so that one
// response lists every failing field, up to maxFieldErrors.
type validator struct {
	fields    []FieldError
	truncated bool
}

// add records that field is invalid for reason.
func (v *validator) add(field, reason string) {
	if len(v.fields) >= maxFieldErrors {
		v.truncated = true
		return
	}
	v.fields = append(v.fields, FieldError{Field: field, Reason: reason})
}

// maxLen records an error when s is longer than n characters.
func (v *validator) maxLen(field, s string, n int) {
	if len(s) > n && charCount(s) > n {
		v.add(field, fmt.Sprintf("at most %d characters", n))
	}
}

// err returns the collected errors as a *ValidationError, or nil.
func (v *validator) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields, Truncated: v.truncated}
}

// charCount counts the characters (Unicode code points) of s, the unit of
// every length limit in the contract.
func charCount(s string) int {
	return utf8.RuneCountInString(s)
}

// ConflictError says why a request conflicts with the current state. It
// matches ErrConflict.
type ConflictError struct {
	// Reason is a machine-readable code such as "not_shippable" or
	// "request_in_progress"; it is sent as error.details.reason.
	Reason string
	// Message is the human sentence sent as error.message.
	Message string
	// AvailableActions, when not nil, lists the task's next steps; it is
	// sent as error.details.availableActions. Conflicts over a task set it,
	// to an empty slice when there is no next step.
	AvailableActions []Action
}

// Error implements error.
func (e *ConflictError) Error() string { return "conflict: " + e.Message }

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

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

// notFound returns an error matching ErrNotFound that names what was missing.
func notFound(what, id string) error {
	return fmt.Errorf("%s %q not found: %w", what, id, ErrNotFound)
}

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
