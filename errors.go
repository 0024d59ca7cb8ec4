package lifecycle

import (
	"fmt"
)

// notFound returns an error matching ErrNotFound that names what was missing.
func notFound(what, id string) error {
	return fmt.Errorf("%s %q not found: %w", what, id, ErrNotFound)
}
