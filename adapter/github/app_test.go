package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// appKey returns a new RSA key of a GitHub App and its PEM encoding, as
// GitHub hands it out (PKCS #1).
func appKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// TestAppAuthentication: with Config.App, ghinstallation signs a JWT
// (RS256, iss the App's ID) with the App's key, exchanges it at the fake's
// POST /api/v3/app/installations/{id}/access_tokens (the Enterprise base
// URL of Config.APIURL), and the Adapter's calls carry "token" and the
// installation token, which is kept until it nears its expiry.
func TestAppAuthentication(t *testing.T) {
	t.Parallel()
	key, keyPEM := appKey(t)
	f := newFakeGitHubWith(t, githubtest.Options{App: &githubtest.App{ID: 424242, InstallationID: 5151, PublicKey: &key.PublicKey}})
	a := f.adapter(t, Config{App: &AppAuth{AppID: 424242, InstallationID: 5151, PrivateKey: keyPEM}})

	f.Push("lifecycle/eng-1")
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	if err != nil || !pr.Created {
		t.Fatalf("EnsurePullRequest as an App installation = %+v, %v", pr, err)
	}
	auth := f.Authorization()
	if !strings.HasPrefix(auth, "token ghs_") {
		t.Errorf("Authorization of the API calls = %q, want token and the installation token", auth)
	}
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls(githubtest.RouteAccessTokens); n != 1 || f.InstallationTokens() != 1 {
		t.Errorf("%d token exchanges (%d tokens), want one token for every call while it is valid", n, f.InstallationTokens())
	}
	if f.Authorization() != auth {
		t.Errorf("second call's Authorization %q, want the same installation token", f.Authorization())
	}
}

// TestAppTokenRenewed: a token that expires within a minute is renewed
// before the next call.
func TestAppTokenRenewed(t *testing.T) {
	t.Parallel()
	key, keyPEM := appKey(t)
	f := newFakeGitHubWith(t, githubtest.Options{App: &githubtest.App{ID: 7, InstallationID: 8, PublicKey: &key.PublicKey, TokenTTL: 30 * time.Second}})
	a := f.adapter(t, Config{App: &AppAuth{AppID: 7, InstallationID: 8, PrivateKey: keyPEM}})
	f.Push("lifecycle/eng-1")
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(1)})
	if err != nil {
		t.Fatal(err)
	}
	first := f.Authorization()
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil {
		t.Fatal(err)
	}
	if f.Authorization() == first || f.InstallationTokens() < 2 {
		t.Errorf("a token expiring within a minute was used again (%d tokens issued)", f.InstallationTokens())
	}
}

// TestAppAuthenticationRefused: a JWT the fake cannot verify (another
// App's ID, another key) gets no installation token, and the Adapter's
// call fails without reaching the repository.
func TestAppAuthenticationRefused(t *testing.T) {
	t.Parallel()
	key, keyPEM := appKey(t)
	_, otherPEM := appKey(t)
	f := newFakeGitHubWith(t, githubtest.Options{App: &githubtest.App{ID: 1, InstallationID: 2, PublicKey: &key.PublicKey}})
	for name, app := range map[string]*AppAuth{
		"another App's ID": {AppID: 99, InstallationID: 2, PrivateKey: keyPEM},
		"another key":      {AppID: 1, InstallationID: 2, PrivateKey: otherPEM},
	} {
		a := f.adapter(t, Config{App: app})
		if _, err := a.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: githubtest.Owner, Repo: githubtest.Repo, Number: 1}); err == nil {
			t.Errorf("%s: the call succeeded", name)
		}
	}
	if n := f.Calls(githubtest.RouteGetPull); n != 0 || f.InstallationTokens() != 0 {
		t.Errorf("%d calls reached the repository, %d tokens issued; want none", n, f.InstallationTokens())
	}
}
