package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// A *ProviderError is a 502 whatever its cause wraps.
func TestProviderErrorIs502WhateverItWraps(t *testing.T) {
	t.Parallel()
	for _, m := range errorMapping {
		err := &lifecycletype.ProviderError{Op: "read the pull request", Err: fmt.Errorf("host: %w", m.err)}
		status, body := ErrorResponse(err)
		if status != http.StatusBadGateway || body.Error.Code != "provider_error" {
			t.Errorf("a provider error wrapping %q = %d %s, want 502 provider_error", m.err, status, body.Error.Code)
		}
	}
}
