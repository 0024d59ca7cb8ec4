package github

import (
	"net/url"
	"strings"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
)

// scope is the instrumentation scope of the Adapter's telemetry.
const scope = "github.com/tasklifecycle/lifecycle/adapter/github"

// restRoutes are the REST endpoints the Adapter calls, under the API's
// base path, each named by GitHub's operationId in its REST API
// description with a dot for the slash ("pulls/get" is "pulls.get").
var restRoutes = []hostcall.Route{
	{Method: "GET", Path: "/repos/{owner}/{repo}", Operation: "repos.get"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/pulls", Operation: "pulls.list"},
	{Method: "POST", Path: "/repos/{owner}/{repo}/pulls", Operation: "pulls.create"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/pulls/{pull_number}", Operation: "pulls.get"},
	{Method: "PATCH", Path: "/repos/{owner}/{repo}/pulls/{pull_number}", Operation: "pulls.update"},
	{Method: "POST", Path: "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", Operation: "pulls.request-reviewers"},
	{Method: "PUT", Path: "/repos/{owner}/{repo}/pulls/{pull_number}/merge", Operation: "pulls.merge"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", Operation: "pulls.list-reviews"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/commits/{ref}/check-runs", Operation: "checks.list-for-ref"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/commits/{ref}/check-suites", Operation: "checks.list-suites-for-ref"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/commits/{ref}/status", Operation: "repos.get-combined-status-for-ref"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/branches/{branch}/protection", Operation: "repos.get-branch-protection"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/rules/branches/{branch}", Operation: "repos.get-branch-rules"},
	{Method: "POST", Path: "/repos/{owner}/{repo}/deployments", Operation: "repos.create-deployment"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/deployments", Operation: "repos.list-deployments"},
	{Method: "GET", Path: "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses", Operation: "repos.list-deployment-statuses"},
	{Method: "POST", Path: "/app/installations/{installation_id}/access_tokens", Operation: "apps.create-installation-access-token"},
}

// routes returns the routes of the REST API at restBase and the GraphQL
// endpoint at graphqlURL.
func routes(restBase *url.URL, graphqlURL string) *hostcall.Routes {
	base := strings.TrimSuffix(restBase.EscapedPath(), "/")
	rs := make([]hostcall.Route, 0, len(restRoutes)+1)
	for _, r := range restRoutes {
		r.Path = base + r.Path
		rs = append(rs, r)
	}
	if u, err := url.Parse(graphqlURL); err == nil && strings.HasPrefix(u.EscapedPath(), "/") {
		rs = append(rs, hostcall.Route{Method: "POST", Path: u.EscapedPath(), Operation: hostcall.OperationGraphQL})
	}
	return hostcall.NewRoutes(rs...)
}
