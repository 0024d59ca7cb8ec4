package github

import (
	"errors"
	"maps"
	"net/http"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// fakeRepo is the fake's repository as the lifecycle names it.
var fakeRepo = lifecycle.RepoRef{Owner: githubtest.Owner, Repo: githubtest.Repo}

// openFiles pushes head branch changing files on top of main and opens
// the pull request of task n from it; it returns the candidate head.
func openFiles(t *testing.T, f *fakeGitHub, a *Adapter, n int, branch string, files map[string]string) lifecycle.CandidateHead {
	t.Helper()
	f.PushFiles(branch, "main", files)
	pr, err := a.EnsurePullRequest(t.Context(), lifecycle.PullRequestRequest{Task: testTask(n), Head: branch})
	if err != nil {
		t.Fatal(err)
	}
	return lifecycle.CandidateHead{PullRequest: pr.PullRequestRef, SHA: pr.HeadSHA}
}

// queueFixture is a fake with main at a commit holding README.md and
// three open pull requests: a and b change files of their own, c changes
// a.txt as a does, differently.
type queueFixture struct {
	f       *fakeGitHub
	a       *Adapter
	main    string
	x, y, z lifecycle.CandidateHead
}

func newQueueFixture(t *testing.T) queueFixture {
	t.Helper()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	main, _ := f.Branch("main")
	return queueFixture{
		f: f, a: a, main: main,
		x: openFiles(t, f, a, 1, "feat-a", map[string]string{"a.txt": "a from x\n"}),
		y: openFiles(t, f, a, 2, "feat-b", map[string]string{"b.txt": "b from y\n"}),
		z: openFiles(t, f, a, 3, "feat-c", map[string]string{"a.txt": "a from z\n"}),
	}
}

func TestBuildCandidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		heads    func(q queueFixture) []lifecycle.CandidateHead
		files    map[string]string // the candidate's files, when it builds
		conflict func(q queueFixture) lifecycle.CandidateHead
		merges   int // merge commits on top of the parent
	}{{
		name:   "two heads",
		heads:  func(q queueFixture) []lifecycle.CandidateHead { return []lifecycle.CandidateHead{q.x, q.y} },
		files:  map[string]string{"README.md": "# widgets\n", "a.txt": "a from x\n", "b.txt": "b from y\n"},
		merges: 2,
	}, {
		name:   "a head contained twice adds nothing the second time",
		heads:  func(q queueFixture) []lifecycle.CandidateHead { return []lifecycle.CandidateHead{q.x, q.x} },
		files:  map[string]string{"README.md": "# widgets\n", "a.txt": "a from x\n"},
		merges: 1,
	}, {
		name:   "no heads is the parent",
		heads:  func(queueFixture) []lifecycle.CandidateHead { return nil },
		files:  map[string]string{"README.md": "# widgets\n"},
		merges: 0,
	}, {
		name:     "a conflicting head is named",
		heads:    func(q queueFixture) []lifecycle.CandidateHead { return []lifecycle.CandidateHead{q.x, q.y, q.z} },
		conflict: func(q queueFixture) lifecycle.CandidateHead { return q.z },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueueFixture(t)
			req := lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: q.main,
				Heads: tc.heads(q), Title: "Queue main"}
			sha, err := q.a.BuildCandidate(t.Context(), req)
			if tc.conflict != nil {
				var ce *lifecycle.CandidateConflictError
				if !errors.As(err, &ce) || ce.Head != tc.conflict(q) || ce.Message != "Merge conflict" {
					t.Fatalf("BuildCandidate = %q, %v; want a conflict naming %+v", sha, err, tc.conflict(q))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := q.f.Files(sha); !maps.Equal(got, tc.files) {
				t.Errorf("candidate's files = %v, want %v", got, tc.files)
			}
			if at, _ := q.f.Branch(req.Branch); at != sha {
				t.Errorf("%s is at %s, want the candidate %s", req.Branch, at, sha)
			}
			// A chain of merge commits from the parent, each with the head
			// as its second parent.
			c := sha
			for range tc.merges {
				ps := q.f.Parents(c)
				if len(ps) != 2 {
					t.Fatalf("commit %s has parents %v, want a merge commit", c, ps)
				}
				c = ps[0]
			}
			if c != q.main {
				t.Errorf("candidate's first-parent chain ends at %s, want the parent %s", c, q.main)
			}
			tree, err := q.a.Tree(t.Context(), fakeRepo, sha)
			if err != nil || tree != q.f.Tree(sha) {
				t.Errorf("Tree = %q, %v; want %q", tree, err, q.f.Tree(sha))
			}

			// Built again (the branch exists: moved by force back to the
			// parent), the candidate has the same tree.
			again, err := q.a.BuildCandidate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if q.f.Tree(again) != q.f.Tree(sha) {
				t.Errorf("rebuilt candidate's tree %s, want %s", q.f.Tree(again), q.f.Tree(sha))
			}
			if tc.merges > 0 && q.f.IsAncestor(sha, again) {
				t.Errorf("rebuilt candidate %s descends from the first build %s; want it rebuilt from the parent", again, sha)
			}
		})
	}
}

// TestBuildCandidateAfterConflict: a build that conflicted leaves its
// branch wherever; the next build, without the conflicting head, starts
// from its parent again.
func TestBuildCandidateAfterConflict(t *testing.T) {
	t.Parallel()
	q := newQueueFixture(t)
	req := lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main", Branch: "lifecycle-queue/main/2", Parent: q.main,
		Heads: []lifecycle.CandidateHead{q.y, q.x, q.z}, Title: "Queue main"}
	var ce *lifecycle.CandidateConflictError
	if _, err := q.a.BuildCandidate(t.Context(), req); !errors.As(err, &ce) || ce.Head != q.z {
		t.Fatalf("BuildCandidate = %v, want a conflict naming %+v", err, q.z)
	}
	req.Heads = []lifecycle.CandidateHead{q.z}
	sha, err := q.a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"README.md": "# widgets\n", "a.txt": "a from z\n"}
	if got := q.f.Files(sha); !maps.Equal(got, want) {
		t.Errorf("candidate's files = %v, want %v", got, want)
	}
}

func TestAdvanceBranch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// prepare moves things before the advance from main to the
		// candidate and returns the request's From.
		prepare func(t *testing.T, q queueFixture, candidate string) string
		branch  string // the branch advanced; "" for main
		want    error  // nil, ErrBranchMoved, or a *RefusedError's type
		landed  bool   // main ends at the candidate, its pull requests merged
	}{{
		name:    "fast forward",
		prepare: func(_ *testing.T, q queueFixture, _ string) string { return q.main },
		landed:  true,
	}, {
		name: "already there",
		prepare: func(t *testing.T, q queueFixture, candidate string) string {
			if err := q.a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: fakeRepo, Branch: "main", From: q.main, To: candidate}); err != nil {
				t.Fatal(err)
			}
			return q.main
		},
		landed: true,
	}, {
		name: "moved by a push",
		prepare: func(_ *testing.T, q queueFixture, _ string) string {
			q.f.Push("main")
			return q.main
		},
		want: lifecycle.ErrBranchMoved,
	}, {
		name:    "no such branch",
		prepare: func(_ *testing.T, q queueFixture, _ string) string { return q.main },
		branch:  "gone",
		want:    lifecycle.ErrBranchMoved,
	}, {
		name: "not a descendant of From",
		prepare: func(_ *testing.T, q queueFixture, _ string) string {
			q.f.PushFiles("main", "main", map[string]string{"c.txt": "c\n"})
			at, _ := q.f.Branch("main")
			return at
		},
		want: &lifecycle.RefusedError{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueueFixture(t)
			candidate, err := q.a.BuildCandidate(t.Context(), lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main",
				Branch: "lifecycle-queue/main/1", Parent: q.main, Heads: []lifecycle.CandidateHead{q.x, q.y}, Title: "Queue main"})
			if err != nil {
				t.Fatal(err)
			}
			from := tc.prepare(t, q, candidate)
			branch := tc.branch
			if branch == "" {
				branch = "main"
			}
			err = q.a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: fakeRepo, Branch: branch, From: from, To: candidate})
			var refused *lifecycle.RefusedError
			switch want := tc.want; {
			case want == nil && err != nil:
				t.Fatalf("AdvanceBranch = %v, want nil", err)
			case errors.Is(want, lifecycle.ErrBranchMoved) && !errors.Is(err, lifecycle.ErrBranchMoved):
				t.Fatalf("AdvanceBranch = %v, want ErrBranchMoved", err)
			case errors.As(want, &refused) && !errors.As(err, &refused):
				t.Fatalf("AdvanceBranch = %v, want a *RefusedError", err)
			}
			at, _ := q.f.Branch("main")
			if tc.landed != (at == candidate) {
				t.Errorf("main at %s, candidate %s: landed %v, want %v", at, candidate, at == candidate, tc.landed)
			}
			// GitHub marks the pull requests whose head is now in main
			// merged, with main's new head as their merge commit; the
			// conflicting third is not.
			for _, h := range []lifecycle.CandidateHead{q.x, q.y} {
				pr, err := q.a.PullRequest(t.Context(), h.PullRequest)
				if err != nil {
					t.Fatal(err)
				}
				if merged := pr.State == lifecycle.PullRequestMerged; merged != tc.landed || (merged && pr.MergeCommitSHA != candidate) {
					t.Errorf("%s reads %s, merge commit %q; want merged %v at %s", h.PullRequest, pr.State, pr.MergeCommitSHA, tc.landed, candidate)
				}
			}
			if pr, err := q.a.PullRequest(t.Context(), q.z.PullRequest); err != nil || pr.State != lifecycle.PullRequestOpen {
				t.Errorf("%s reads %+v, %v; want open", q.z.PullRequest, pr, err)
			}
		})
	}
}

func TestBranchHeadAndTree(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	main, _ := f.Branch("main")
	if got, err := a.BranchHead(t.Context(), fakeRepo, "main"); err != nil || got != main {
		t.Errorf("BranchHead(main) = %q, %v; want %q", got, err, main)
	}
	head := f.PushFiles("deep/er/branch", "main", map[string]string{"x": "1"})
	if got, err := a.BranchHead(t.Context(), fakeRepo, "deep/er/branch"); err != nil || got != head {
		t.Errorf("BranchHead(deep/er/branch) = %q, %v; want %q", got, err, head)
	}
	if _, err := a.BranchHead(t.Context(), fakeRepo, "nope"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("BranchHead(nope) = %v, want ErrNotFound", err)
	}
	if _, err := a.Tree(t.Context(), fakeRepo, githubtest.NewSHA()); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tree of an unknown commit = %v, want ErrNotFound", err)
	}
	if got, err := a.Tree(t.Context(), fakeRepo, head); err != nil || got != f.Tree(head) || got == f.Tree(main) {
		t.Errorf("Tree = %q, %v; want %q, not main's", got, err, f.Tree(head))
	}
	other := lifecycle.RepoRef{Owner: "acme", Repo: "gadgets"}
	if _, err := a.BranchHead(t.Context(), other, "main"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("BranchHead of another repository = %v, want ErrNotFound", err)
	}
}

func TestDeleteBranch(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	f.PushFiles("lifecycle-queue/main/3", "main", map[string]string{"x": "1"})
	for _, branch := range []string{"lifecycle-queue/main/3", "lifecycle-queue/main/3", "never-was"} {
		if err := a.DeleteBranch(t.Context(), fakeRepo, branch); err != nil {
			t.Errorf("DeleteBranch(%s) = %v, want nil", branch, err)
		}
	}
	if _, ok := f.Branch("lifecycle-queue/main/3"); ok {
		t.Error("the branch still exists")
	}
	var refused *lifecycle.RefusedError
	if err := a.DeleteBranch(t.Context(), fakeRepo, "main"); !errors.As(err, &refused) {
		t.Errorf("DeleteBranch(main) = %v, want GitHub's refusal", err)
	}
}

func TestNativeQueue(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{})
	f.SetRulesJSON("main", `{"type":"merge_queue","parameters":{"check_response_timeout_minutes":60,"grouping_strategy":"ALLGREEN","max_entries_to_build":5,"max_entries_to_merge":5,"merge_method":"MERGE","min_entries_to_merge":1,"min_entries_to_merge_wait_minutes":5},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`)
	f.SetRulesJSON("develop", `{"type":"required_linear_history","ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":43}`)
	for base, want := range map[string]bool{"main": true, "develop": false, "release": false} {
		if got, err := a.NativeQueue(t.Context(), fakeRepo, base); err != nil || got != want {
			t.Errorf("NativeQueue(%s) = %v, %v; want %v", base, got, err, want)
		}
	}
	reads := f.Calls(githubtest.RouteRules)
	if _, err := a.NativeQueue(t.Context(), fakeRepo, "main"); err != nil || f.Calls(githubtest.RouteRules) != reads {
		t.Errorf("NativeQueue read the rules again (%v): want the policy cached", err)
	}
}

// TestQueueHostTemporary: GitHub's server errors and rate limits on the
// queue's calls are temporary, as on the Adapter's others.
func TestQueueHostTemporary(t *testing.T) {
	t.Parallel()
	secondary := githubtest.Error(http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
	for _, tc := range []struct {
		route string
		fault githubtest.Fault
		call  func(t *testing.T, q queueFixture) error
	}{
		{githubtest.RouteMergeBranch, githubtest.Error(http.StatusBadGateway, "Server Error"), func(t *testing.T, q queueFixture) error {
			_, err := q.a.BuildCandidate(t.Context(), lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main", Branch: "q/1", Parent: q.main,
				Heads: []lifecycle.CandidateHead{q.x}})
			return err
		}},
		{githubtest.RouteCreateRef, secondary, func(t *testing.T, q queueFixture) error {
			_, err := q.a.BuildCandidate(t.Context(), lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main", Branch: "q/1", Parent: q.main})
			return err
		}},
		{githubtest.RouteUpdateRef, githubtest.Error(http.StatusServiceUnavailable, "Unavailable"), func(t *testing.T, q queueFixture) error {
			return q.a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: fakeRepo, Branch: "main", From: q.main, To: q.x.SHA})
		}},
		{githubtest.RouteGetRef, githubtest.Error(http.StatusInternalServerError, "Server Error"), func(t *testing.T, q queueFixture) error {
			_, err := q.a.BranchHead(t.Context(), fakeRepo, "main")
			return err
		}},
		{githubtest.RouteGitCommit, secondary, func(t *testing.T, q queueFixture) error {
			_, err := q.a.Tree(t.Context(), fakeRepo, q.main)
			return err
		}},
		{githubtest.RouteDeleteRef, githubtest.Error(http.StatusBadGateway, "Server Error"), func(t *testing.T, q queueFixture) error {
			return q.a.DeleteBranch(t.Context(), fakeRepo, "feat-a")
		}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			t.Parallel()
			q := newQueueFixture(t)
			q.f.Inject(tc.route, tc.fault)
			if err := tc.call(t, q); !errors.Is(err, lifecycle.ErrTemporary) {
				t.Errorf("with %d on %s: error = %v, want a temporary one", tc.fault.Status, tc.route, err)
			}
			if n := q.f.Calls(tc.route); n != 1 {
				t.Errorf("%s called %d times, want once (the caller retries)", tc.route, n)
			}
		})
	}
}

// TestCandidateChecks: the checks of a candidate commit are read as a
// head's are.
func TestCandidateChecks(t *testing.T) {
	t.Parallel()
	q := newQueueFixture(t)
	req := lifecycle.CandidateRequest{Repo: fakeRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: q.main,
		Heads: []lifecycle.CandidateHead{q.x, q.y}, Title: "Queue main"}
	sha, err := q.a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	q.f.CheckRun(sha, "build", "failure")
	q.f.Status(sha, "lint", "success")
	rep, err := q.a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: q.x.PullRequest, HeadSHA: sha, Candidate: &req})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lifecycle.CheckStatus{}
	for _, c := range rep.Checks {
		got[c.Name] = c.Status
	}
	want := map[string]lifecycle.CheckStatus{"build": lifecycle.CheckFailed, "lint": lifecycle.CheckPassed}
	if !maps.Equal(got, want) || rep.Pending {
		t.Errorf("Checks of the candidate = %+v, want %v", rep, want)
	}
}
