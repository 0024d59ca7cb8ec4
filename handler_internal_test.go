package lifecycle

import (
	"fmt"
	"net/http"
	"testing"
)

// A *ProviderError is a 502 whatever its cause wraps.
func TestProviderErrorIs502WhateverItWraps(t *testing.T) {
	t.Parallel()
	for _, m := range errorMapping {
		err := &ProviderError{Op: "read the pull request", Err: fmt.Errorf("host: %w", m.err)}
		status, body := errorResponse(err)
		if status != http.StatusBadGateway || body.Error.Code != "provider_error" {
			t.Errorf("a provider error wrapping %q = %d %s, want 502 provider_error", m.err, status, body.Error.Code)
		}
	}
}
