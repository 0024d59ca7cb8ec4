package github

import (
	"testing"

	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// fakeGitHub is the fake GitHub API of package githubtest, with the
// Adapter's tests' helpers.
type fakeGitHub struct{ *githubtest.Server }

func newFakeGitHub(t testing.TB) *fakeGitHub { return newFakeGitHubWith(t, githubtest.Options{}) }

func newFakeGitHubWith(t testing.TB, opts githubtest.Options) *fakeGitHub {
	t.Helper()
	return &fakeGitHub{githubtest.NewServer(t, opts)}
}

// pull returns what the fake holds of pull request n.
func (f *fakeGitHub) pull(t testing.TB, n int) githubtest.PullRequest {
	t.Helper()
	p, ok := f.PullRequest(n)
	if !ok {
		t.Fatalf("no pull request #%d at the fake", n)
	}
	return p
}

// adapter returns an Adapter on the fake, with cfg's other fields.
func (f *fakeGitHub) adapter(t testing.TB, cfg Config) *Adapter {
	t.Helper()
	cfg.Owner, cfg.Repo, cfg.APIURL = githubtest.Owner, githubtest.Repo, f.APIURL()
	if cfg.Token == "" && cfg.App == nil {
		cfg.Token = githubtest.Token
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
