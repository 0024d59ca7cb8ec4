package lifecycle

import (
	"errors"
	"time"
)

// rateLimited returns the wait of an error that says a rate limit is spent,
// and whether it says so.
func rateLimited(err error) (time.Duration, bool) {
	var te *TemporaryError
	if errors.As(err, &te) && te.RateLimited {
		return te.RetryAfter, true
	}
	return 0, false
}
