package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Error is an error answer of the server: its status and the members of its
// error body.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the stable error code, such as "not_found" or "conflict".
	Code string
	// Message is the server's sentence for people; do not match on it.
	Message string
	// Fields lists every invalid field of a validation_error.
	Fields []lifecycle.FieldError
	// Reason is the machine-readable cause of a conflict, such as
	// "not_shippable" or "request_in_progress".
	Reason string
	// AvailableActions lists the task's next steps on a conflict over a task.
	AvailableActions []lifecycle.Action
	// RetryAfter is the wait the server asked for with Retry-After, or 0.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	msg := fmt.Sprintf("lifecycle API: %d %s: %s", e.StatusCode, e.Code, e.Message)
	if e.Reason != "" {
		msg += " (reason " + e.Reason + ")"
	}
	return msg
}

// codeSentinels maps error codes to the sentinels of package lifecycle.
var codeSentinels = map[string]error{
	"validation_error":   lifecycle.ErrValidation,
	"unauthorized":       lifecycle.ErrUnauthorized,
	"insufficient_scope": lifecycle.ErrInsufficientScope,
	"csrf_failed":        lifecycle.ErrCSRF,
	"not_found":          lifecycle.ErrNotFound,
	"conflict":           lifecycle.ErrConflict,
	"cursor_expired":     lifecycle.ErrCursorExpired,
	"payload_too_large":  lifecycle.ErrPayloadTooLarge,
	"rate_limited":       lifecycle.ErrRateLimited,
	"provider_error":     lifecycle.ErrProvider,
	"unavailable":        lifecycle.ErrClosed,
}

// Is reports whether target is the sentinel of package lifecycle that
// matches the error's code, so that errors.Is(err, lifecycle.ErrNotFound)
// works on the client as on the server.
func (e *Error) Is(target error) bool {
	s, ok := codeSentinels[e.Code]
	return ok && s == target
}

// parseError builds an *Error from an error answer. A body that is not the
// API's error body (from a proxy, say) gives the status text as message.
func parseError(status int, header http.Header, raw []byte) *Error {
	e := &Error{StatusCode: status}
	var body lifecycle.ErrorBody
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		if d := body.Error.Details; d != nil {
			e.Fields, e.Reason, e.AvailableActions = d.Fields, d.Reason, d.AvailableActions
		}
	} else {
		e.Code, e.Message = "http_"+strconv.Itoa(status), http.StatusText(status)
	}
	if s, err := strconv.Atoi(header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
