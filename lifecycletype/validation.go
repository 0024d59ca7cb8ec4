package lifecycletype

import (
	"fmt"
	"strings"
	"unicode/utf8"
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
	// MaxFieldErrors listed in Fields; it is sent as details.truncated.
	Truncated bool
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

// Invalid returns a *ValidationError for one field.
func Invalid(field, reason string) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Field: field, Reason: reason}}}
}

// MaxFieldErrors is the most field errors one response lists; past it,
// details.truncated says there were more. It keeps the work and the answer
// bounded whatever the request holds.
const MaxFieldErrors = 100

// Validator collects field errors while a request is checked, so that one
// response lists every failing field, up to MaxFieldErrors. Its zero
// value is ready to use.
type Validator struct {
	fields    []FieldError
	truncated bool
}

// Add records that field is invalid for reason.
func (v *Validator) Add(field, reason string) {
	if len(v.fields) >= MaxFieldErrors {
		v.truncated = true
		return
	}
	v.fields = append(v.fields, FieldError{Field: field, Reason: reason})
}

// MaxLen records an error when s is longer than n characters.
func (v *Validator) MaxLen(field, s string, n int) {
	if len(s) > n && CharCount(s) > n {
		v.Add(field, fmt.Sprintf("at most %d characters", n))
	}
}

// Err returns the collected errors as a *ValidationError, or nil.
func (v *Validator) Err() error {
	if e := v.Errors(); e != nil {
		return e
	}
	return nil
}

// Errors returns the collected errors as a *ValidationError, or nil
// (a nil pointer, unlike Err's nil interface) when there are none.
func (v *Validator) Errors() *ValidationError {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields, Truncated: v.truncated}
}

// CharCount counts the characters (Unicode code points) of s, the unit of
// every length limit in the contract.
func CharCount(s string) int {
	return utf8.RuneCountInString(s)
}

// ErrorBody is the JSON body of every error response of the HTTP API.
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
