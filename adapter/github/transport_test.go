package github

import (
	"sync"
	"testing"
)

// TestConnectionsReused: 16 concurrent callers (the ship runner's
// default concurrency) keep their connections to GitHub open between
// calls, instead of one TCP (and, at GitHub, TLS) handshake per call
// beyond net/http's default of 2 idle connections per host.
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	pr := open(t, f, a, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// A dial raced by a connection freed meanwhile may add a few.
	if n := f.Connections(); n > 32 {
		t.Errorf("%d connections opened for 320 calls from 16 callers, want about one per caller", n)
	}
}
