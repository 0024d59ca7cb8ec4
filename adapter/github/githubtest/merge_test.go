package githubtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	gh "github.com/google/go-github/v60/github"
)

// call sends a REST request to the fake and decodes its answer into out.
func call(t *testing.T, s *Server, method, path string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, s.APIURL()+"repos/acme/widgets"+path, rd)
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestMergeMethods: a merge with a method the repository's settings or a
// ruleset do not allow is refused with GitHub's 405 naming it; the
// settings are in the repository's answer unless hidden, and in GraphQL.
func TestMergeMethods(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true})
	s.SetMergeMethods(false, true, true)
	s.SetRulesJSON("main", `{"type":"pull_request","parameters":{"required_approving_review_count":0,"allowed_merge_methods":["merge","squash"]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":1}`)
	n := newPull(t, s, "a")
	var repo gh.Repository
	call(t, s, http.MethodGet, "", nil, &repo)
	if repo.AllowMergeCommit == nil || repo.GetAllowMergeCommit() || !repo.GetAllowSquashMerge() || !repo.GetAllowRebaseMerge() {
		t.Errorf("repository: merge %v, squash %v, rebase %v; want false, true, true", repo.AllowMergeCommit, repo.AllowSquashMerge, repo.AllowRebaseMerge)
	}
	for _, tc := range []struct {
		method string
		code   int
		msg    string
	}{
		{"", 405, "Merge commits are not allowed on this repository."},
		{"merge", 405, "Merge commits are not allowed on this repository."},
		{"rebase", 405, "Rebase merges are not allowed on this repository."}, // by the ruleset
		{"squash", 200, "Pull Request successfully merged"},
	} {
		var out struct{ Message string }
		body := map[string]string{}
		if tc.method != "" {
			body["merge_method"] = tc.method
		}
		if code := call(t, s, http.MethodPut, "/pulls/1/merge", body, &out); code != tc.code || out.Message != tc.msg {
			t.Errorf("merge_method %q: %d %q, want %d %q", tc.method, code, out.Message, tc.code, tc.msg)
		}
	}
	if p, _ := s.PullRequest(n); p.MergeMethod != "squash" {
		t.Errorf("MergeMethod = %q, want squash", p.MergeMethod)
	}
	s.HideMergeSettings(true)
	repo = gh.Repository{}
	call(t, s, http.MethodGet, "", nil, &repo)
	if repo.AllowMergeCommit != nil || repo.AllowSquashMerge != nil || repo.AllowRebaseMerge != nil {
		t.Errorf("hidden settings answered: %v %v %v", repo.AllowMergeCommit, repo.AllowSquashMerge, repo.AllowRebaseMerge)
	}
	_, _, out := post(t, s, "/graphql", `query{repository(owner:"acme",name:"widgets"){mergeCommitAllowed squashMergeAllowed rebaseMergeAllowed}}`, nil)
	got, _ := json.Marshal(out["data"])
	if string(got) != `{"repository":{"mergeCommitAllowed":false,"rebaseMergeAllowed":true,"squashMergeAllowed":true}}` {
		t.Errorf("GraphQL: %s", got)
	}
}

// TestMergesRefusedWhileComputing: after a merge into the base, the next
// merge of another pull request into it is refused while GitHub computes,
// and a read right after finds it mergeable.
func TestMergesRefusedWhileComputing(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true, MergesRefusedWhileComputing: 1})
	a, b := newPull(t, s, "a"), newPull(t, s, "b")
	s.MergeByHand(a)
	var out struct{ Message string }
	if code := call(t, s, http.MethodPut, "/pulls/2/merge", map[string]string{}, &out); code != 405 || out.Message != "Pull Request is not mergeable" {
		t.Errorf("merge while computing: %d %q", code, out.Message)
	}
	var pr gh.PullRequest
	call(t, s, http.MethodGet, "/pulls/2", nil, &pr)
	if pr.Mergeable == nil || !*pr.Mergeable || pr.GetMergeableState() != "clean" {
		t.Errorf("read right after: mergeable %v %q, want true, clean", pr.Mergeable, pr.GetMergeableState())
	}
	if code := call(t, s, http.MethodPut, "/pulls/2/merge", map[string]string{}, &out); code != 200 {
		t.Errorf("merge again: %d %q", code, out.Message)
	}
	if p, _ := s.PullRequest(b); !p.Merged {
		t.Error("not merged")
	}
}

// TestBaseRulesBlock: unresolved conversations where the base requires
// them resolved, and a merge queue a ruleset requires, make the pull
// request BLOCKED and the merge refused; the protection applies though
// reading it answers 403.
func TestBaseRulesBlock(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{AutoBranch: true, EnforceBranchProtection: true})
	s.SetProtection("main", &gh.Protection{RequiredConversationResolution: &gh.RequiredConversationResolution{Enabled: true}})
	s.SetProtectionError(http.StatusForbidden)
	if code := call(t, s, http.MethodGet, "/branches/main/protection", nil, nil); code != 403 {
		t.Errorf("protection read: %d, want 403", code)
	}
	n := newPull(t, s, "a")
	s.SetUnresolvedConversations(n, 1)
	var pr gh.PullRequest
	call(t, s, http.MethodGet, "/pulls/1", nil, &pr)
	call(t, s, http.MethodGet, "/pulls/1", nil, &pr)
	if pr.GetMergeableState() != "blocked" {
		t.Errorf("unresolved conversation: %q, want blocked", pr.GetMergeableState())
	}
	var out struct{ Message string }
	if code := call(t, s, http.MethodPut, "/pulls/1/merge", map[string]string{}, &out); code != 405 || out.Message != "A conversation must be resolved before this pull request can be merged." {
		t.Errorf("merge: %d %q", code, out.Message)
	}
	s.SetUnresolvedConversations(n, 0)
	s.SetRulesJSON("main", `{"type":"merge_queue","parameters":{"merge_method":"MERGE"},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":1}`)
	call(t, s, http.MethodGet, "/pulls/1", nil, &pr)
	if pr.GetMergeableState() != "blocked" {
		t.Errorf("merge queue required: %q, want blocked", pr.GetMergeableState())
	}
	if code := call(t, s, http.MethodPut, "/pulls/1/merge", map[string]string{}, &out); code != 405 || out.Message != "Repository rule violations found\n\nChanges must be made through the merge queue" {
		t.Errorf("merge: %d %q", code, out.Message)
	}
}
