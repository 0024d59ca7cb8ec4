package gitlab

import (
	"net/url"
	"strings"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
)

// scope is the instrumentation scope of the adapter's telemetry.
const scope = "github.com/tasklifecycle/lifecycle/adapter/gitlab"

// apiRoutes are the endpoints of GitLab's REST API the adapter calls,
// under /api/v4, each named by the page of GitLab's API documentation it
// is on and what it does.
var apiRoutes = []hostcall.Route{
	{Method: "GET", Path: "/projects/{id}", Operation: "projects.get"},
	{Method: "GET", Path: "/projects/{id}/approvals", Operation: "projects.get-approval-configuration"},
	{Method: "GET", Path: "/projects/{id}/merge_requests", Operation: "merge_requests.list"},
	{Method: "POST", Path: "/projects/{id}/merge_requests", Operation: "merge_requests.create"},
	{Method: "GET", Path: "/projects/{id}/merge_requests/{merge_request_iid}", Operation: "merge_requests.get"},
	{Method: "PUT", Path: "/projects/{id}/merge_requests/{merge_request_iid}", Operation: "merge_requests.update"},
	{Method: "PUT", Path: "/projects/{id}/merge_requests/{merge_request_iid}/merge", Operation: "merge_requests.merge"},
	{Method: "GET", Path: "/projects/{id}/merge_requests/{merge_request_iid}/approvals", Operation: "merge_request_approvals.get"},
	{Method: "GET", Path: "/projects/{id}/merge_requests/{merge_request_iid}/reviewers", Operation: "merge_requests.list-reviewers"},
	{Method: "GET", Path: "/projects/{id}/merge_requests/{merge_request_iid}/notes", Operation: "notes.list-merge-request-notes"},
	{Method: "GET", Path: "/projects/{id}/merge_trains/merge_requests/{merge_request_iid}", Operation: "merge_trains.get-merge-request"},
	{Method: "POST", Path: "/projects/{id}/merge_trains/merge_requests/{merge_request_iid}", Operation: "merge_trains.add-merge-request"},
	{Method: "GET", Path: "/projects/{id}/pipelines", Operation: "pipelines.list"},
	{Method: "GET", Path: "/projects/{id}/repository/commits/{sha}", Operation: "commits.get"},
	{Method: "GET", Path: "/projects/{id}/repository/commits/{sha}/statuses", Operation: "commits.list-statuses"},
	{Method: "GET", Path: "/projects/{id}/repository/branches/{branch}", Operation: "branches.get"},
	{Method: "DELETE", Path: "/projects/{id}/repository/branches/{branch}", Operation: "branches.delete"},
	{Method: "GET", Path: "/users", Operation: "users.list"},
	{Method: "GET", Path: "/projects/{id}/deployments", Operation: "deployments.list"},
	{Method: "POST", Path: "/projects/{id}/deployments", Operation: "deployments.create"},
	{Method: "GET", Path: "/projects/{id}/deployments/{deployment_id}", Operation: "deployments.get"},
	{Method: "PUT", Path: "/projects/{id}/deployments/{deployment_id}", Operation: "deployments.update"},
}

// routes returns the routes of the API at api (".../api/v4/").
func routes(api string) *hostcall.Routes {
	base := "/api/v4"
	if u, err := url.Parse(api); err == nil {
		base = strings.TrimSuffix(u.EscapedPath(), "/")
	}
	rs := make([]hostcall.Route, 0, len(apiRoutes)+1)
	for _, r := range apiRoutes {
		r.Path = base + r.Path
		rs = append(rs, r)
	}
	// GitLab's GraphQL endpoint is beside the REST API's: /api/graphql.
	rs = append(rs, hostcall.Route{Method: "POST", Path: strings.TrimSuffix(base, "/v4") + "/graphql", Operation: "graphql"})
	return hostcall.NewRoutes(rs...)
}

// gaugedResource says which of the budget's limits the rate-limit gauges
// report: rateResource, the limit GitLab reports on its answers, and not
// blockResource, the adapter's own account of a 429's wait.
func gaugedResource(resource string) bool { return resource == rateResource }
