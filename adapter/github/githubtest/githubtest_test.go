package githubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
)

// post sends a GraphQL query to the fake and decodes its answer.
func post(t *testing.T, s *Server, path, query string, vars map[string]any) (int, http.Header, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// newPull opens pull request from branch into main through the API.
func newPull(t *testing.T, s *Server, branch string) int {
	t.Helper()
	s.Push(branch)
	body, _ := json.Marshal(map[string]string{"title": branch, "head": branch, "base": "main"})
	req, _ := http.NewRequest(http.MethodPost, s.APIURL()+"repos/acme/widgets/pulls", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pr gh.PullRequest
	json.NewDecoder(resp.Body).Decode(&pr)
	return pr.GetNumber()
}

// TestGraphQLCost: points as GitHub's documentation computes them.
func TestGraphQLCost(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	s.SetGraphQLRateLimit(5000, time.Now().Add(time.Hour))
	newPull(t, s, "a")
	aliases := func(n int, fields string) string {
		var b strings.Builder
		b.WriteString(`query($o:String!,$r:String!){repository(owner:$o,name:$r){`)
		for i := range n {
			fmt.Fprintf(&b, "p%d: pullRequest(number: 1){%s} ", i, fields)
		}
		b.WriteString(`} rateLimit{cost remaining limit used nodeCount}}`)
		return b.String()
	}
	const two = `number latestOpinionatedReviews(first: 100){nodes{state}} statusCheckRollup{contexts(first: 100){nodes{__typename}}}`
	for _, tc := range []struct {
		name  string
		query string
		cost  int
	}{
		{"no connection", aliases(200, "number state headRefOid"), 1},
		{"50 of two connections", aliases(50, two), 1},
		{"75 of two connections", aliases(75, two), 2}, // 150 requests / 100, rounded
		{"nested connections", aliases(1, `latestOpinionatedReviews(first: 100){nodes{state}}`), 1},
	} {
		code, h, out := post(t, s, "/graphql", tc.query, map[string]any{"o": Owner, "r": Repo})
		if code != 200 || out["errors"] != nil {
			t.Fatalf("%s: %d %v", tc.name, code, out["errors"])
		}
		rl := out["data"].(map[string]any)["rateLimit"].(map[string]any)
		if int(rl["cost"].(float64)) != tc.cost {
			t.Errorf("%s: cost %v, want %d", tc.name, rl["cost"], tc.cost)
		}
		if h.Get("X-RateLimit-Resource") != "graphql" || h.Get("X-RateLimit-Remaining") != fmt.Sprint(rl["remaining"]) {
			t.Errorf("%s: headers %v, rateLimit %v", tc.name, h, rl)
		}
	}
	if u := s.Usage(); u.GraphQL != 4 || u.Points != 5 {
		t.Errorf("Usage = %+v, want 4 queries, 5 points", u)
	}
}

// TestGraphQLErrors: what GitHub answers for a pull request that does not
// exist (beside the data of the others), a connection without first,
// an unknown field, and a spent limit.
func TestGraphQLErrors(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	newPull(t, s, "a")
	q := `query($n:Int!){repository(owner:"acme",name:"widgets"){a: pullRequest(number: 1){number} b: pullRequest(number: $n){number}}}`
	_, _, out := post(t, s, "/api/graphql", q, map[string]any{"n": 99})
	data := out["data"].(map[string]any)["repository"].(map[string]any)
	errs, _ := out["errors"].([]any)
	if data["b"] != nil || data["a"].(map[string]any)["number"].(float64) != 1 || len(errs) != 1 {
		t.Fatalf("answer = %v", out)
	}
	e := errs[0].(map[string]any)
	if e["type"] != "NOT_FOUND" || fmt.Sprint(e["path"]) != "[repository b]" || e["message"] != "Could not resolve to a PullRequest with the number of 99." {
		t.Errorf("error = %v", e)
	}
	_, _, out = post(t, s, "/graphql", `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){latestOpinionatedReviews{nodes{state}}}}}`, nil)
	if e := out["errors"].([]any)[0].(map[string]any); e["type"] != "MISSING_PAGINATION_BOUNDARIES" {
		t.Errorf("connection without first: %v", out)
	}
	_, _, out = post(t, s, "/graphql", `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){latestOpinionatedReviews(first: 101){nodes{state}}}}}`, nil)
	if e := out["errors"].([]any)[0].(map[string]any); e["type"] != "EXCESSIVE_PAGINATION" {
		t.Errorf("first: 101: %v", out)
	}
	_, _, out = post(t, s, "/graphql", `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){isMergeQueueMagic}}}`, nil)
	if out["data"] != nil || out["errors"] == nil {
		t.Errorf("a field not in the schema: %v", out)
	}
	s.SetGraphQLRateLimit(1, time.Now().Add(time.Hour))
	post(t, s, "/graphql", `{rateLimit{cost}}`, nil)
	code, h, out := post(t, s, "/graphql", `{rateLimit{cost}}`, nil)
	if e := out["errors"].([]any)[0].(map[string]any); code != 200 || e["type"] != "RATE_LIMIT" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("spent limit: %d %v %v", code, h, out)
	}
}

// TestConditionalGET: a REST GET carries an ETag; asked again with it,
// the answer is 304, not charged.
func TestConditionalGET(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	s.SetRateLimit(100, time.Now().Add(time.Hour))
	n := newPull(t, s, "a")
	get := func(etag string) *http.Response { return getPull(t, s, n, "Bearer "+Token, etag) }
	first := get("")
	second := get(first.Header.Get("ETag"))
	if first.Header.Get("ETag") == "" || first.StatusCode != 200 || second.StatusCode != http.StatusNotModified {
		t.Fatalf("statuses %d %d, ETag %q", first.StatusCode, second.StatusCode, first.Header.Get("ETag"))
	}
	if second.Header.Get("X-RateLimit-Remaining") != first.Header.Get("X-RateLimit-Remaining") {
		t.Errorf("the 304 was charged: remaining %s, then %s", first.Header.Get("X-RateLimit-Remaining"), second.Header.Get("X-RateLimit-Remaining"))
	}
	if u := s.Usage(); u.NotModified != 1 || u.Core != 2 {
		t.Errorf("Usage = %+v, want 2 charged (the opening, a read), 1 not modified", u)
	}
	s.SetDraft(n, true)
	if third := get(first.Header.Get("ETag")); third.StatusCode != 200 || third.Header.Get("ETag") == first.Header.Get("ETag") {
		t.Errorf("after a change: %d with ETag %q, want 200 with another", third.StatusCode, third.Header.Get("ETag"))
	}
}

// TestReviewDecisionRules: GitHub's reviewDecision from the protection.
func TestReviewDecisionRules(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	n := newPull(t, s, "a")
	decision := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.reviewDecision(s.pulls[n])
	}
	head, _ := s.PullRequest(n)
	if d := decision(); d != "" {
		t.Errorf("unprotected: %q, want null", d)
	}
	s.SetProtection("main", &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 2, DismissStaleReviews: true}})
	s.SetAuthorAssociation("mallory", "NONE")
	s.Review(n, "mallory", "APPROVED", head.HeadSHA)
	s.Review(n, "alice", "APPROVED", head.HeadSHA)
	if d := decision(); d != "REVIEW_REQUIRED" {
		t.Errorf("one writer's approval of two required: %q", d)
	}
	s.Review(n, "bob", "APPROVED", head.HeadSHA)
	if d := decision(); d != "APPROVED" {
		t.Errorf("two writers approved: %q", d)
	}
	s.Push("a") // dismisses stale approvals
	if d := decision(); d != "REVIEW_REQUIRED" {
		t.Errorf("after a push: %q", d)
	}
	s.Review(n, "bob", "CHANGES_REQUESTED", head.HeadSHA)
	if d := decision(); d != "CHANGES_REQUESTED" {
		t.Errorf("changes requested: %q", d)
	}
}

// postWith sends a GraphQL query with an Accept header.
func postWith(t *testing.T, s *Server, accept, query string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+Token)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestEnterpriseSchema: an older Enterprise Server's schema lacks
// fields, and refuses a query asking for one whole, with GitHub's
// undefinedField error; mergeStateStatus is there only for requests
// asking for the merge info preview.
func TestEnterpriseSchema(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true, OmitFields: []string{"PullRequestReview.fullDatabaseId"}, MergeInfoPreview: true})
	newPull(t, s, "a")
	_, out := postWith(t, s, MergeInfoPreview, `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){latestOpinionatedReviews(first: 1){nodes{fullDatabaseId}}}}}`)
	errs, _ := out["errors"].([]any)
	if out["data"] != nil || len(errs) != 1 {
		t.Fatalf("a field the schema lacks: %v", out)
	}
	e := errs[0].(map[string]any)
	ext, _ := e["extensions"].(map[string]any)
	if e["message"] != "Field 'fullDatabaseId' doesn't exist on type 'PullRequestReview'" || ext["code"] != "undefinedField" ||
		ext["typeName"] != "PullRequestReview" || ext["fieldName"] != "fullDatabaseId" {
		t.Errorf("error = %v", e)
	}
	const merge = `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){mergeStateStatus}}}`
	if _, out := postWith(t, s, "", merge); out["data"] != nil || out["errors"] == nil {
		t.Errorf("mergeStateStatus without the preview: %v", out)
	}
	if _, out := postWith(t, s, MergeInfoPreview, merge); out["errors"] != nil {
		t.Errorf("mergeStateStatus with the preview: %v", out)
	}
}

// TestRollupCounts: the counts of a rollup's check runs and statuses by
// state, as GitHub's StatusCheckRollupContextConnection gives them.
func TestRollupCounts(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	n := newPull(t, s, "a")
	p, _ := s.PullRequest(n)
	s.CheckRun(p.HeadSHA, "build", "")
	s.CheckRun(p.HeadSHA, "lint", "success")
	s.CheckRun(p.HeadSHA, "test", "success")
	s.Status(p.HeadSHA, "ci/jenkins", "pending")
	s.CompleteCheckRun(p.HeadSHA, "build", "failure")
	_, _, out := post(t, s, "/graphql", `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){statusCheckRollup{contexts(first: 1){
		totalCount checkRunCount statusContextCount checkRunCountsByState{state count} statusContextCountsByState{state count}}}}}}`, nil)
	got, _ := json.Marshal(out["data"])
	want := `{"repository":{"pullRequest":{"statusCheckRollup":{"contexts":{"totalCount":4,"checkRunCount":3,"statusContextCount":1,` +
		`"checkRunCountsByState":[{"state":"FAILURE","count":1},{"state":"SUCCESS","count":2}],"statusContextCountsByState":[{"state":"PENDING","count":1}]}}}}}`
	var w any
	json.Unmarshal([]byte(want), &w)
	if wantSorted, _ := json.Marshal(w); string(got) != string(wantSorted) {
		t.Errorf("counts = %s\nwant     %s", got, want)
	}
}

// TestGraphQLTimeout: a query of more pull requests than SetGraphQLTimeout
// allows is answered 502, as GitHub answers one it gave up on, and
// charged.
func TestGraphQLTimeout(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	newPull(t, s, "a")
	s.SetGraphQLTimeout(1)
	q := `{repository(owner:"acme",name:"widgets"){a: pullRequest(number: 1){number} b: pullRequest(number: 1){number}}}`
	code, _, out := post(t, s, "/graphql", q, nil)
	errs, _ := out["errors"].([]any)
	if code != http.StatusBadGateway || len(errs) != 1 || !strings.HasPrefix(errs[0].(map[string]any)["message"].(string), "Something went wrong while executing your query") {
		t.Errorf("two pull requests: %d %v", code, out)
	}
	if code, _, _ := post(t, s, "/graphql", `{repository(owner:"acme",name:"widgets"){pullRequest(number: 1){number}}}`, nil); code != 200 {
		t.Errorf("one pull request: %d", code)
	}
	if s.GraphQLTimeouts() != 1 || s.Usage().GraphQL != 2 {
		t.Errorf("timeouts %d, usage %+v", s.GraphQLTimeouts(), s.Usage())
	}
}

// TestETagsPerToken: an ETag stands for the answer to the token that got
// it; another token asking with it gets the answer in full.
func TestETagsPerToken(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	n := newPull(t, s, "a")
	// The same token, another scheme: another Authorization.
	get := func(etag string) *http.Response { return getPull(t, s, n, "token "+Token, etag) }
	bearer := getPull(t, s, n, "Bearer "+Token, "").Header.Get("ETag")
	if other := get(bearer); other.StatusCode != 200 || other.Header.Get("ETag") == bearer || !strings.Contains(other.Header.Get("Vary"), "Authorization") {
		t.Errorf("another Authorization with the ETag: %d, ETag %q (was %q), Vary %q", other.StatusCode, other.Header.Get("ETag"), bearer, other.Header.Get("Vary"))
	}
}

// getPull gets pull request n from s with the Authorization header auth,
// conditionally on etag when it is not empty, and returns the closed
// response.
func getPull(t *testing.T, s *Server, n int, auth, etag string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%srepos/acme/widgets/pulls/%d", s.APIURL(), n), nil)
	req.Header.Set("Authorization", auth)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
