package gitlabtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// graphQL posts query with variables to the fake's /api/graphql and
// returns the decoded answer.
func graphQL(t *testing.T, f *gitlabtest.Server, query string, vars map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.URL+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer glpat-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/graphql: %s", resp.Status)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

const mrQuery = `query($fullPath: ID!, $iids: [String!]) {
  project(fullPath: $fullPath) {
    mergeRequests(iids: $iids, first: 100) {
      nodes {
        iid updatedAt title draft state diffHeadSha sourceBranch targetBranch sourceProjectId targetProjectId
        detailedMergeStatus mergeStatusEnum conflicts
        approvedBy(first: 100) { nodes { id username } pageInfo { hasNextPage } }
        reviewers { nodes { id username mergeRequestInteraction { reviewState approved } } }
      }
    }
  }
}`

// GraphQL shows the merge requests it is asked for from the state the
// REST API serves, in GitLab's GraphQL types: times to the second, enums
// by their GraphQL names, users by global ID; approvals and reviewers'
// states, which no REST list shows, included. One query is one request;
// it starts no mergeability check.
func TestGraphQLMergeRequests(t *testing.T) {
	t.Parallel()
	f, clock := fake(t, gitlabtest.Options{ApprovalsRequired: 1})
	one, two := open(t, f, "feature/one"), open(t, f, "feature/two")
	f.SettleMergeability()
	clock.Advance(1500 * time.Millisecond)
	f.Approve(one, "alice")
	f.SetReviewerState(one, "bob", "requested_changes")
	f.SetDetailedMergeStatus(two, "merge_request_blocked")
	f.Push("main") // both unchecked, nothing touched
	before := f.TotalCalls()
	ans := graphQL(t, f, mrQuery, map[string]any{"fullPath": gitlabtest.ProjectPath, "iids": []string{fmt.Sprint(one)}})
	if n := f.TotalCalls() - before; n != 1 {
		t.Errorf("one query counted %d requests", n)
	}
	nodes := ans["data"].(map[string]any)["project"].(map[string]any)["mergeRequests"].(map[string]any)["nodes"].([]any)
	if len(nodes) != 1 {
		t.Fatalf("nodes: %v", nodes)
	}
	mr, rest := nodes[0].(map[string]any), f.MergeRequest(one)
	for k, want := range map[string]any{
		"iid": fmt.Sprint(one), "updatedAt": rest.UpdatedAt.UTC().Format(time.RFC3339), "state": "opened", "diffHeadSha": rest.SHA,
		"sourceBranch": "feature/one", "targetBranch": "main", "sourceProjectId": float64(gitlabtest.ProjectID), "draft": false,
		"detailedMergeStatus": "UNCHECKED", "mergeStatusEnum": "UNCHECKED", "conflicts": false,
	} {
		if fmt.Sprint(mr[k]) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", k, mr[k], want)
		}
	}
	if got := fmt.Sprint(mr["approvedBy"]); got != "map[nodes:[map[id:gid://gitlab/User/1 username:alice]] pageInfo:map[hasNextPage:false]]" {
		t.Errorf("approvedBy: %s", got)
	}
	if got := fmt.Sprint(mr["reviewers"]); got != "map[nodes:[map[id:gid://gitlab/User/2 mergeRequestInteraction:map[approved:false reviewState:REQUESTED_CHANGES] username:bob]]]" {
		t.Errorf("reviewers: %s", got)
	}
	if got := f.MergeRequest(one).DetailedMergeStatus; got != "unchecked" {
		t.Errorf("after a GraphQL read, detailed_merge_status %q: want unchecked still (no check started)", got)
	}
	f.SettleMergeability()
	ans = graphQL(t, f, `query { project(fullPath: "acme/web") { mergeRequests(iids: ["2"]) { count nodes { detailedMergeStatus } } } }`, nil)
	if got := fmt.Sprint(ans["data"]); got != "map[project:map[mergeRequests:map[count:1 nodes:[map[detailedMergeStatus:BLOCKED_STATUS]]]]]" {
		t.Errorf("a blocked merge request: %s", got)
	}
	if got := fmt.Sprint(graphQL(t, f, `{ project(fullPath: "acme/other") { id } }`, nil)["data"]); got != "map[project:<nil>]" {
		t.Errorf("another project: %s", got)
	}
}

// A field or argument outside the fake's part of GitLab's schema is
// answered as GitLab answers one that does not exist: 200, errors, no
// data.
func TestGraphQLUnknownFields(t *testing.T) {
	t.Parallel()
	f, _ := fake(t, gitlabtest.Options{})
	open(t, f, "feature/one")
	for _, tc := range []struct{ query, want string }{
		{`{ project(fullPath: "acme/web") { mergeRequests { nodes { approvalsLeftToGive } } } }`, "Field 'approvalsLeftToGive' doesn't exist on type 'MergeRequest'"},
		{`{ project(fullPath: "acme/web") { mergeRequests(labels: ["x"]) { nodes { iid } } } }`, "Field 'mergeRequests' doesn't accept argument 'labels'"},
		{`{ currentUser { id } }`, "Field 'currentUser' doesn't exist on type 'Query'"},
		{`mutation { x }`, "syntax error"},
	} {
		ans := graphQL(t, f, tc.query, nil)
		if _, ok := ans["data"]; ok || !strings.Contains(fmt.Sprint(ans["errors"]), tc.want) {
			t.Errorf("%s: %v, want errors with %q", tc.query, ans, tc.want)
		}
	}
}
