package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// netClassifier is a Store whose classifier takes every network failure
// for its own, as a database's client library may.
type netClassifier struct{ Store }

// Unavailable implements FailureClassifier.
func (netClassifier) Unavailable(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

// A code host's failure stays the provider's (502) even when it wraps a
// network error the Store would take for its own; the Store's own
// failures, and only those, become ErrUnavailable.
func TestStoreFailureLeavesProviderErrorsAlone(t *testing.T) {
	t.Parallel()
	st := netClassifier{}
	s := &Service{store: st, caps: capabilities(st)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	ctx := context.Background()
	tests := []struct {
		name            string
		err             error
		wantUnavailable bool
	}{
		{"the store's", fmt.Errorf("get task: %w", reset), true},
		{"a code host's", &ProviderError{Op: "open pull request", Err: reset}, false},
		{"a conflict", ErrConflict, false},
	}
	for _, tt := range tests {
		got := s.storeFailure(ctx, ctx, tt.err)
		if errors.Is(got, ErrUnavailable) != tt.wantUnavailable {
			t.Errorf("%s: storeFailure(%v) = %v, unavailable %v; want %v", tt.name, tt.err, got, !tt.wantUnavailable, tt.wantUnavailable)
		}
		if status, _ := httpapi.ErrorResponse(got); tt.name == "a code host's" && status != 502 {
			t.Errorf("%s: answered %d, want 502", tt.name, status)
		}
	}
}
