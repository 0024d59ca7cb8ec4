package lifecycle

import (
	"errors"
	"time"
)

// retryAfter returns the wait a temporary error asks for, or 0.
func retryAfter(err error) time.Duration {
	var te *TemporaryError
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

// rateLimited returns the wait of an error that says a rate limit is spent,
// and whether it says so.
func rateLimited(err error) (time.Duration, bool) {
	var te *TemporaryError
	if errors.As(err, &te) && te.RateLimited {
		return te.RetryAfter, true
	}
	return 0, false
}
