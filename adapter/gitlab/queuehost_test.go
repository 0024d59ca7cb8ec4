package gitlab_test

import (
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// testToken is the token of the queue's tests, looked for in their
// errors.
const testToken = "glpat-test-token"

// queueRepo is the fake's project as a RepoRef.
var queueRepo = lifecycle.RepoRef{Owner: "acme", Repo: "web"}

// gitFake returns a fake in git mode and an adapter on it with a mirror
// of its own.
func gitFake(t *testing.T, opts gitlabtest.Options, mutate ...func(*gitlab.Config)) (*gitlabtest.Server, *gitlab.Adapter) {
	t.Helper()
	f := gitlabtest.NewServer(t, opts)
	f.EnableGit(t)
	mirror := t.TempDir()
	a := newAdapter(t, f, append([]func(*gitlab.Config){func(c *gitlab.Config) { c.MirrorDir = mirror }}, mutate...)...)
	return f, a
}

// byAdapter maps the adapters the conformance harness made to their
// fakes.
var byAdapter sync.Map

func TestQueueHostConformance(t *testing.T) {
	adaptertest.RunQueueHost(t, adaptertest.QueueHostHarness{
		New: func(t *testing.T) (lifecycle.QueueHost, lifecycle.RepoRef, string) {
			f, a := gitFake(t, gitlabtest.Options{})
			byAdapter.Store(a, f)
			t.Cleanup(func() { byAdapter.Delete(a) })
			return a, queueRepo, "main"
		},
		Commit: func(t *testing.T, host lifecycle.QueueHost, repo lifecycle.RepoRef, parent string, files map[string]string) string {
			f, ok := byAdapter.Load(host)
			if !ok {
				t.Fatal("no fake for this adapter")
			}
			return f.(*gitlabtest.Server).Commit(parent, files)
		},
	})
}
