package githubtest

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"

	gh "github.com/google/go-github/v60/github"
)

func TestThreeWay(t *testing.T) {
	t.Parallel()
	base := map[string]string{"kept": "k", "ours": "o0", "theirs": "t0", "both": "b0", "gone": "g", "clash": "c0", "delmod": "d0"}
	ours := map[string]string{"kept": "k", "ours": "o1", "theirs": "t0", "both": "b1", "clash": "c1", "added": "same", "addclash": "x", "delmod": "d0"}
	theirs := map[string]string{"kept": "k", "ours": "o0", "theirs": "t1", "both": "b1", "clash": "c2", "added": "same", "addclash": "y"}
	got, conflicts := threeWay(base, ours, theirs)
	want := map[string]string{"kept": "k", "ours": "o1", "theirs": "t1", "both": "b1", "added": "same"}
	// gone: deleted on both sides; delmod: deleted by theirs only.
	if !maps.Equal(got, want) {
		t.Errorf("merged = %v, want %v", got, want)
	}
	if want := []string{"addclash", "clash"}; !slices.Equal(conflicts, want) {
		t.Errorf("conflicts = %v, want %v", conflicts, want)
	}
	if _, c := threeWay(base, map[string]string{"delmod": "d1"}, map[string]string{}); !slices.Equal(c, []string{"delmod"}) {
		t.Errorf("modified against deleted: conflicts = %v, want delmod", c)
	}
}

// TestMergeBase: the merge base of two commits is their nearest common
// ancestor, across merges.
func TestMergeBase(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{})
	root, _ := s.Branch("main")
	a := s.PushFiles("a", "main", map[string]string{"a": "1"})
	b := s.PushFiles("b", "main", map[string]string{"b": "1"})
	a2 := s.PushFiles("a", "a", map[string]string{"a": "2"})
	s.mu.Lock()
	m := s.mergeCommit(a2, b, "merge b into a")
	s.mu.Unlock()
	b2 := s.PushFiles("b", "b", map[string]string{"b": "2"})
	for _, tc := range []struct{ x, y, want string }{
		{a, b, root}, {a2, a, a}, {m, b2, b}, {m, a2, a2}, {m, m, m}, {root, NewSHA(), ""},
	} {
		s.mu.Lock()
		got := s.mergeBase(tc.x, tc.y)
		s.mu.Unlock()
		if got != tc.want {
			t.Errorf("mergeBase(%.7s, %.7s) = %.7s, want %.7s", tc.x, tc.y, got, tc.want)
		}
	}
	if !s.IsAncestor(root, m) || !s.IsAncestor(b, m) || s.IsAncestor(b2, m) || s.IsAncestor(m, a2) {
		t.Error("IsAncestor disagrees with the history")
	}
	if want := map[string]string{"README.md": "# widgets\n", "a": "2", "b": "1"}; !maps.Equal(s.Files(m), want) {
		t.Errorf("merge's files = %v, want %v", s.Files(m), want)
	}
}

// TestGitRefs: the git refs endpoints answer as GitHub documents them.
func TestGitRefs(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{})
	main, _ := s.Branch("main")
	next := s.PushFiles("next", "main", map[string]string{"n": "1"})
	var ref gh.Reference
	steps := []struct {
		method, path string
		body         any
		status       int
		message      string
	}{
		{"GET", "/git/ref/heads/q/main/1", nil, http.StatusNotFound, "Not Found"},
		{"POST", "/git/refs", map[string]string{"ref": "refs/heads/q/main/1", "sha": main}, http.StatusCreated, ""},
		{"GET", "/git/ref/heads/q/main/1", nil, http.StatusOK, ""},
		{"POST", "/git/refs", map[string]string{"ref": "refs/heads/q/main/1", "sha": main}, http.StatusUnprocessableEntity, "Reference already exists"},
		{"POST", "/git/refs", map[string]string{"ref": "refs/heads/q/main/2", "sha": NewSHA()}, http.StatusUnprocessableEntity, "Object does not exist"},
		{"POST", "/git/refs", map[string]string{"ref": "heads/q", "sha": main}, http.StatusUnprocessableEntity, "Validation Failed"},
		{"PATCH", "/git/refs/heads/q/main/1", map[string]any{"sha": next}, http.StatusOK, ""},
		{"PATCH", "/git/refs/heads/q/main/1", map[string]any{"sha": main}, http.StatusUnprocessableEntity, "Update is not a fast forward"},
		{"PATCH", "/git/refs/heads/q/main/1", map[string]any{"sha": main, "force": true}, http.StatusOK, ""},
		{"PATCH", "/git/refs/heads/nope", map[string]any{"sha": main}, http.StatusUnprocessableEntity, "Reference does not exist"},
		{"DELETE", "/git/refs/heads/q/main/1", nil, http.StatusNoContent, ""},
		{"DELETE", "/git/refs/heads/q/main/1", nil, http.StatusUnprocessableEntity, "Reference does not exist"},
		{"DELETE", "/git/refs/heads/main", nil, http.StatusUnprocessableEntity, "Validation Failed"},
	}
	for _, st := range steps {
		var out struct {
			gh.Reference
			Message string `json:"message"`
		}
		if got := call(t, s, st.method, st.path, st.body, &out); got != st.status || out.Message != st.message {
			t.Fatalf("%s %s = %d %q, want %d %q", st.method, st.path, got, out.Message, st.status, st.message)
		}
		if st.status == http.StatusOK || st.status == http.StatusCreated {
			ref = out.Reference
			if ref.GetRef() != "refs/heads/q/main/1" || ref.GetObject().GetType() != "commit" || ref.GetURL() == "" || ref.GetObject().GetURL() == "" {
				t.Errorf("%s %s answered %+v", st.method, st.path, ref)
			}
		}
	}
	if ref.GetObject().GetSHA() != main {
		t.Errorf("the branch was last at %s, want %s", ref.GetObject().GetSHA(), main)
	}
	if _, ok := s.Branch("q/main/1"); ok {
		t.Error("the deleted branch exists")
	}
}

// TestMergesAPI: POST /merges merges a head into a branch (201, a merge
// commit), answers 204 when the branch has it, 409 on a conflict and 404
// for what does not exist; GET /git/commits shows the commits.
func TestMergesAPI(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{})
	main, _ := s.Branch("main")
	x := s.PushFiles("x", "main", map[string]string{"f": "x"})
	y := s.PushFiles("y", "main", map[string]string{"f": "y"})
	s.PushFiles("q", "main", nil)
	var made gh.RepositoryCommit
	if got := call(t, s, "POST", "/merges", map[string]string{"base": "q", "head": x, "commit_message": "Queue (#1)"}, &made); got != http.StatusCreated {
		t.Fatalf("merge x = %d", got)
	}
	if at, _ := s.Branch("q"); made.GetSHA() != at || made.GetCommit().GetMessage() != "Queue (#1)" || len(made.Parents) != 2 || made.Parents[1].GetSHA() != x {
		t.Errorf("merge answered %+v; q at %s", made, at)
	}
	var c gh.Commit
	if got := call(t, s, "GET", "/git/commits/"+made.GetSHA(), nil, &c); got != http.StatusOK || c.GetTree().GetSHA() != s.Tree(made.GetSHA()) || len(c.Parents) != 2 {
		t.Errorf("GET the merge commit = %d %+v", got, c)
	}
	if s.Tree(made.GetSHA()) != s.Tree(x) {
		t.Error("the merge of x onto an ancestor of x does not have x's tree")
	}
	for _, tc := range []struct {
		base, head string
		status     int
	}{
		{"q", "x", http.StatusNoContent}, // by branch name, already merged
		{"q", x, http.StatusNoContent},
		{"q", main, http.StatusNoContent},
		{"q", y, http.StatusConflict},
		{"q", NewSHA(), http.StatusNotFound},
		{"nope", y, http.StatusNotFound},
	} {
		if got := call(t, s, "POST", "/merges", map[string]string{"base": tc.base, "head": tc.head}, nil); got != tc.status {
			t.Errorf("merge %.7s into %s = %d, want %d", tc.head, tc.base, got, tc.status)
		}
	}
	if got := call(t, s, "GET", "/git/commits/"+NewSHA(), nil, nil); got != http.StatusNotFound {
		t.Errorf("GET an unknown commit = %d, want 404", got)
	}
}

// TestPullRequestsOverTrees: a pull request whose head changes a file its
// base changed too reads conflicting; a push to its head rebases it
// (keeping its changes) and resolves it; a ref update that makes its head
// reachable from its base merges it.
func TestPullRequestsOverTrees(t *testing.T) {
	t.Parallel()
	s := NewServer(t, Options{MergeabilityAtOnce: true})
	s.PushFiles("feat", "main", map[string]string{"f": "feat"})
	var pr gh.PullRequest
	if got := call(t, s, "POST", "/pulls", map[string]string{"title": "Feat", "head": "feat", "base": "main"}, &pr); got != http.StatusCreated {
		t.Fatalf("open = %d", got)
	}
	n := pr.GetNumber()
	mergeable := func() string {
		var p gh.PullRequest
		call(t, s, "GET", "/pulls/"+strconv.Itoa(n), nil, &p)
		return p.GetMergeableState()
	}
	if got := mergeable(); got == "dirty" {
		t.Fatalf("mergeable_state = %q before any conflict", got)
	}
	s.PushFiles("main", "main", map[string]string{"f": "main"})
	if got := mergeable(); got != "dirty" {
		t.Errorf("mergeable_state = %q with f changed on both sides, want dirty", got)
	}
	pushed := s.Push("feat")
	main, _ := s.Branch("main")
	if p := s.Parents(pushed); len(p) != 1 || p[0] != main || s.Files(pushed)["f"] != "feat" {
		t.Errorf("push to feat: parents %v, files %v; want a rebase on main %s keeping f", p, s.Files(pushed), main)
	}
	if got := mergeable(); got == "dirty" {
		t.Errorf("mergeable_state = %q after the push, want it resolved", got)
	}
	// Land feat by a fast-forward of main.
	if got := call(t, s, "PATCH", "/git/refs/heads/main", map[string]any{"sha": pushed}, nil); got != http.StatusOK {
		t.Fatalf("fast-forward main = %d", got)
	}
	if p, _ := s.PullRequest(n); !p.Merged || p.MergeCommitSHA != pushed || s.Merges() != 1 {
		t.Errorf("after main reached its head: %+v, merges %d; want merged at %s", p, s.Merges(), pushed)
	}
}
