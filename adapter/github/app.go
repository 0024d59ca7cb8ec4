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

// apiBase returns the REST base URL of apiURL: the URL as given, with one
// trailing slash.
func apiBase(apiURL string) string {
	return strings.TrimRight(apiURL, "/") + "/"
}
