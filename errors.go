package lifecycle

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

// notFound returns an error matching ErrNotFound that names what was missing.
func notFound(what, id string) error {
	return fmt.Errorf("%s %q not found: %w", what, id, ErrNotFound)
}
