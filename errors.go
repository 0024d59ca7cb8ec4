package lifecycle

import (
	"fmt"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// notFound returns an error matching ErrNotFound that names what was missing.
func notFound(what, id string) error {
	return fmt.Errorf("%s %q not found: %w", what, id, ErrNotFound)
}

// The errors a request is refused with, and the body it is answered
// with, defined in package lifecycletype so that the HTTP plumbing
// (internal/httpapi) shares them.
type (
	// FieldError is [lifecycletype.FieldError].
	FieldError = lifecycletype.FieldError
	// ValidationError is [lifecycletype.ValidationError].
	ValidationError = lifecycletype.ValidationError
	// ConflictError is [lifecycletype.ConflictError].
	ConflictError = lifecycletype.ConflictError
	// ErrorBody is [lifecycletype.ErrorBody].
	ErrorBody = lifecycletype.ErrorBody
	// ErrorObject is [lifecycletype.ErrorObject].
	ErrorObject = lifecycletype.ErrorObject
	// ErrorDetails is [lifecycletype.ErrorDetails].
	ErrorDetails = lifecycletype.ErrorDetails
)
