package github

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// newAppTransport returns a transport authenticating as the installation
// of cfg.App, over base: ghinstallation signs a JWT with the App's key,
// exchanges it at POST /app/installations/{id}/access_tokens for an
// installation token, and renews the token before it expires.
func newAppTransport(base http.RoundTripper, cfg Config) (http.RoundTripper, error) {
	tr, err := ghinstallation.New(base, cfg.App.AppID, cfg.App.InstallationID, cfg.App.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("github: Config.App: %w", err)
	}
	tr.BaseURL = strings.TrimSuffix(apiBase(cfg.APIURL), "/")
	return tr, nil
}

// apiBase returns the REST base URL go-github uses for apiURL: for
// another host than api.github.com, "api/v3/" is added unless present.
func apiBase(apiURL string) string {
	u := strings.TrimSuffix(apiURL, "/") + "/"
	if strings.TrimSuffix(u, "/") == strings.TrimSuffix(DefaultAPIURL, "/") || strings.HasSuffix(u, "/api/v3/") {
		return u
	}
	host := strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	if strings.HasPrefix(host, "api.") || strings.Contains(strings.SplitN(host, "/", 2)[0], ".api.") {
		return u
	}
	return u + "api/v3/"
}
