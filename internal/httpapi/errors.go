package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// ErrMethodNotAllowed answers a known path asked with an unsupported
// method (HTTP 405 method_not_allowed).
var ErrMethodNotAllowed = errors.New("method not allowed")

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
	{lifecycletype.ErrProvider, http.StatusBadGateway, "provider_error", ""},
	{lifecycletype.ErrValidation, http.StatusBadRequest, "validation_error", ""},
	{lifecycletype.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", ""},
	{lifecycletype.ErrInsufficientScope, http.StatusForbidden, "insufficient_scope", ""},
	{lifecycletype.ErrCSRF, http.StatusForbidden, "csrf_failed", ""},
	{lifecycletype.ErrNotFound, http.StatusNotFound, "not_found", ""},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", ""},
	{lifecycletype.ErrConflict, http.StatusConflict, "conflict", ""},
	{lifecycletype.ErrCursorExpired, http.StatusGone, "cursor_expired", ""},
	{lifecycletype.ErrPayloadTooLarge, http.StatusRequestEntityTooLarge, "payload_too_large", ""},
	{lifecycletype.ErrRequestTimeout, http.StatusRequestTimeout, "request_timeout", ""},
	{lifecycletype.ErrRateLimited, http.StatusTooManyRequests, "rate_limited", ""},
	{lifecycletype.ErrClosed, http.StatusServiceUnavailable, "unavailable", "The service is shutting down; retry shortly."},
	{lifecycletype.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable", "The service's store is unavailable; retry shortly, with the same Idempotency-Key where the endpoint takes one. The request was not acknowledged, but a change the store was saving as it failed may have been made."},
}

// StoreRetryAfter is the Retry-After of a 503 store_unavailable, in
// seconds.
const StoreRetryAfter = "2"

// ErrorResponse maps err to a status and body, by the one table that
// maps errors.
func ErrorResponse(err error) (int, lifecycletype.ErrorBody) {
	for _, m := range errorMapping {
		if !errors.Is(err, m.err) {
			continue
		}
		obj := lifecycletype.ErrorObject{Code: m.code, Message: m.message}
		if obj.Message == "" {
			obj.Message = publicMessage(err)
		}
		var (
			ve *lifecycletype.ValidationError
			ce *lifecycletype.ConflictError
			pe *lifecycletype.ProviderError
			rl *lifecycletype.RateLimitError
		)
		switch {
		case errors.As(err, &pe):
			obj.Message = "The code host failed to " + pe.Op + "; the request changed nothing and can be retried."
		case errors.As(err, &ve):
			obj.Message = "The request is invalid; error.details.fields lists every problem."
			obj.Details = &lifecycletype.ErrorDetails{Fields: ve.Fields, Truncated: ve.Truncated}
			if len(ve.Fields) > lifecycletype.MaxFieldErrors {
				obj.Details.Fields, obj.Details.Truncated = ve.Fields[:lifecycletype.MaxFieldErrors], true
			}
		case errors.As(err, &ce):
			obj.Message = ce.Message
			if ce.Reason != "" || ce.AvailableActions != nil {
				obj.Details = &lifecycletype.ErrorDetails{Reason: ce.Reason, AvailableActions: ce.AvailableActions}
			}
		case errors.As(err, &rl):
			obj.Message = rl.Message + "."
		}
		return m.status, lifecycletype.ErrorBody{Error: obj}
	}
	return http.StatusInternalServerError, lifecycletype.ErrorBody{Error: lifecycletype.ErrorObject{
		Code:    "internal",
		Message: "The server failed to handle the request; it has been logged.",
	}}
}

// publicMessage turns an error built by package lifecycle into a
// sentence for clients: the wrapped sentinel's text is dropped and the
// first letter raised.
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

// WriteError writes the answer ErrorResponse gave for err, status and
// body, with Retry-After for a rate limit or an unavailable Store.
// Logging is the caller's.
func WriteError(w http.ResponseWriter, err error, status int, body lifecycletype.ErrorBody) {
	var rl *lifecycletype.RateLimitError
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(rl.RetryAfterSeconds))
	case errors.Is(err, lifecycletype.ErrUnavailable):
		w.Header().Set("Retry-After", StoreRetryAfter)
	}
	WriteJSON(w, status, body)
}

// NetHTTPErrorBody is the API's error body for an answer net/http writes by
// itself, with its status code and what net/http said (see package
// errlisten).
func NetHTTPErrorBody(code int, detail string) []byte {
	var obj lifecycletype.ErrorObject
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		obj = lifecycletype.ErrorObject{Code: "payload_too_large", Message: "The request's headers are too large."}
	case http.StatusNotImplemented:
		obj = lifecycletype.ErrorObject{Code: "not_implemented", Message: "The request's transfer encoding is not supported."}
	default:
		field := "request"
		if code == http.StatusExpectationFailed {
			field = "Expect"
		}
		if detail == "" {
			detail = "is malformed"
		}
		obj = lifecycletype.ErrorObject{Code: "validation_error", Message: "The request is malformed; error.details.fields says how.",
			Details: &lifecycletype.ErrorDetails{Fields: []lifecycletype.FieldError{{Field: field, Reason: detail}}}}
	}
	return EncodeJSON(lifecycletype.ErrorBody{Error: obj})
}
