package main

import (
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
)

// The example adapter passes the same conformance suite as the included
// ones. With only Harness.New set, the suite runs its base tests and skips
// those that need a hook into the host (pushes, reviews, webhooks).
func TestInboxAdapterConformance(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter {
			a, err := NewInboxAdapter(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
	})
}
