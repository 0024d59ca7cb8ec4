package adaptertest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// QueueHostHarness tells [RunQueueHost] how to reach a
// [lifecycle.QueueHost] and how to make the commits it merges. Tests run
// in parallel, each on what its own New call returned.
type QueueHostHarness struct {
	// New returns a QueueHost on a fresh repository, that repository,
	// and the name of its base branch, which has at least one commit.
	// Required.
	New func(t *testing.T) (host lifecycle.QueueHost, repo lifecycle.RepoRef, base string)
	// Commit makes a commit at the host, as a person pushing a branch
	// does: its parent is parent (a commit of the repository) and its
	// tree is parent's with files written (path, with '/' between
	// directories, to content), replacing files of the same path. It
	// returns its SHA. The harness may point a branch of its own at it.
	// Required.
	Commit func(t *testing.T, host lifecycle.QueueHost, repo lifecycle.RepoRef, parent string, files map[string]string) (sha string)
}

// queueTest is one conformance test of a QueueHost.
type queueTest struct {
	name string
	fn   func(t *testing.T, q *queueFixture)
}

var queueTests = []queueTest{
	{"CandidateMergesHeads", testCandidateMergesHeads},
	{"CandidateConflict", testCandidateConflict},
	{"ContainedHeadAddsNothing", testContainedHeadAddsNothing},
	{"AdvanceBranch", testAdvanceBranch},
	{"AdvanceOnlyFastForward", testAdvanceOnlyFastForward},
	{"BranchHeadOfMissingBranch", testBranchHeadOfMissingBranch},
	{"DeleteBranch", testDeleteBranch},
}

// RunQueueHost runs the conformance tests of [lifecycle.QueueHost], each
// on what a fresh call of h.New returned. The heads it merges carry pull
// request numbers it makes up (1, 2, ...) in the harness's repository.
func RunQueueHost(t *testing.T, h QueueHostHarness) {
	t.Helper()
	if h.New == nil || h.Commit == nil {
		t.Fatal("adaptertest: QueueHostHarness.New and .Commit are required")
	}
	for _, tt := range queueTests {
		t.Run("QueueHost/"+tt.name, func(t *testing.T) {
			t.Parallel()
			host, repo, base := h.New(t)
			q := &queueFixture{t: t, h: h, host: host, repo: repo, base: base}
			tt.fn(t, q)
		})
	}
}

// queueFixture is the host and repository of one test, with helpers that
// fail the test when the host fails.
type queueFixture struct {
	t    *testing.T
	h    QueueHostHarness
	host lifecycle.QueueHost
	repo lifecycle.RepoRef
	base string
}

// head returns the commit branch points to.
func (q *queueFixture) head(branch string) string {
	q.t.Helper()
	sha, err := q.host.BranchHead(q.t.Context(), q.repo, branch)
	if err != nil {
		q.t.Fatalf("BranchHead(%s): %v", branch, err)
	}
	if !shaRE.MatchString(sha) {
		q.t.Fatalf("BranchHead(%s) = %q, want a full SHA", branch, sha)
	}
	return sha
}

// change returns a head: a commit on parent writing files, as pull
// request n's.
func (q *queueFixture) change(n int, parent string, files map[string]string) lifecycle.CandidateHead {
	q.t.Helper()
	sha := q.h.Commit(q.t, q.host, q.repo, parent, files)
	return lifecycle.CandidateHead{PullRequest: lifecycle.PullRequestRef{Owner: q.repo.Owner, Repo: q.repo.Repo, Number: n}, SHA: sha}
}

// request returns the request of a candidate on queue branch number n.
func (q *queueFixture) request(n int, parent string, heads ...lifecycle.CandidateHead) lifecycle.CandidateRequest {
	return lifecycle.CandidateRequest{
		Repo:   q.repo,
		Base:   q.base,
		Branch: fmt.Sprintf("lifecycle-queue/%s/%d", q.base, n),
		Parent: parent,
		Heads:  heads,
		Title:  "Merge queue candidate",
	}
}

// build builds a candidate and checks that its branch points at it.
func (q *queueFixture) build(req lifecycle.CandidateRequest) string {
	q.t.Helper()
	sha, err := q.host.BuildCandidate(q.t.Context(), req)
	if err != nil {
		q.t.Fatalf("BuildCandidate(%s on %s, %d heads): %v", req.Branch, req.Parent, len(req.Heads), err)
	}
	if !shaRE.MatchString(sha) {
		q.t.Fatalf("BuildCandidate = %q, want a full SHA", sha)
	}
	if got := q.head(req.Branch); got != sha {
		q.t.Errorf("after BuildCandidate, %s is at %s, want the candidate %s", req.Branch, got, sha)
	}
	return sha
}

// tree returns the tree of a commit.
func (q *queueFixture) tree(sha string) string {
	q.t.Helper()
	tree, err := q.host.Tree(q.t.Context(), q.repo, sha)
	if err != nil {
		q.t.Fatalf("Tree(%s): %v", sha, err)
	}
	if tree == "" {
		q.t.Fatalf("Tree(%s) is empty", sha)
	}
	return tree
}

// advance moves the base from from to to.
func (q *queueFixture) advance(from, to string) error {
	return q.host.AdvanceBranch(q.t.Context(), lifecycle.AdvanceRequest{Repo: q.repo, Branch: q.base, From: from, To: to})
}

func testCandidateMergesHeads(t *testing.T, q *queueFixture) {
	if _, err := q.host.NativeQueue(t.Context(), q.repo, q.base); err != nil {
		t.Errorf("NativeQueue: %v", err)
	}
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/one.txt": "one\n"})
	two := q.change(2, base, map[string]string{"queue/two.txt": "two\n"})
	both := q.build(q.request(1, base, one, two))
	if q.tree(both) == q.tree(base) {
		t.Errorf("the candidate of two changes has the base's tree %s", q.tree(base))
	}
	onlyOne := q.build(q.request(2, base, one))
	if q.tree(onlyOne) == q.tree(both) || q.tree(onlyOne) == q.tree(base) {
		t.Errorf("the candidate of one change has tree %s; want neither the base's %s nor that of both changes %s", q.tree(onlyOne), q.tree(base), q.tree(both))
	}
	// Rebuilt, on the same branch, which moves whatever it pointed to.
	q.build(q.request(1, base, one))
	again := q.build(q.request(1, base, one, two))
	if q.tree(again) != q.tree(both) {
		t.Errorf("a rebuilt candidate has tree %s, want %s as before", q.tree(again), q.tree(both))
	}
	// A candidate on another candidate.
	three := q.change(3, base, map[string]string{"queue/three.txt": "three\n"})
	stacked := q.build(q.request(3, both, three))
	if q.tree(stacked) == q.tree(both) {
		t.Error("a candidate on another candidate has its parent's tree")
	}
	if got := q.head(q.base); got != base {
		t.Errorf("building candidates moved the base to %s, want it at %s", got, base)
	}
}

func testCandidateConflict(t *testing.T, q *queueFixture) {
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/conflict.txt": "one\n"})
	two := q.change(2, base, map[string]string{"queue/conflict.txt": "two\n"})
	_, err := q.host.BuildCandidate(t.Context(), q.request(1, base, one, two))
	var conflict *lifecycle.CandidateConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("BuildCandidate of two changes to one file: error = %v, want a *lifecycle.CandidateConflictError", err)
	}
	if conflict.Head != two {
		t.Errorf("the conflict names %+v, want the second head %+v", conflict.Head, two)
	}
	// The first alone merges.
	q.build(q.request(1, base, one))
}

func testContainedHeadAddsNothing(t *testing.T, q *queueFixture) {
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/one.txt": "one\n"})
	first := q.build(q.request(1, base, one))
	again := q.build(q.request(2, first, one))
	if q.tree(again) != q.tree(first) {
		t.Errorf("a head its parent contains changed the tree from %s to %s", q.tree(first), q.tree(again))
	}
}

func testAdvanceBranch(t *testing.T, q *queueFixture) {
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/one.txt": "one\n"})
	cand := q.build(q.request(1, base, one))
	if err := q.advance(base, cand); err != nil {
		t.Fatalf("AdvanceBranch(%s → %s): %v", base, cand, err)
	}
	if got := q.head(q.base); got != cand {
		t.Fatalf("after AdvanceBranch the base is at %s, want the candidate %s", got, cand)
	}
	if q.tree(q.head(q.base)) != q.tree(cand) {
		t.Errorf("the base's tree is %s, want the candidate's %s (the tested tree lands)", q.tree(q.head(q.base)), q.tree(cand))
	}
	if err := q.advance(base, cand); err != nil {
		t.Errorf("AdvanceBranch repeated, the base already at its To: %v, want nil", err)
	}
	// A candidate built on the old base: the base has moved since.
	two := q.change(2, base, map[string]string{"queue/two.txt": "two\n"})
	next := q.build(q.request(2, cand, two))
	err := q.advance(base, next)
	if !errors.Is(err, lifecycle.ErrBranchMoved) {
		t.Errorf("AdvanceBranch from a stale From: error = %v, want ErrBranchMoved", err)
	}
	if got := q.head(q.base); got != cand {
		t.Errorf("after a refused AdvanceBranch the base is at %s, want %s", got, cand)
	}
	if err := q.advance(cand, next); err != nil {
		t.Errorf("AdvanceBranch(%s → %s): %v", cand, next, err)
	}
	if got := q.head(q.base); got != next {
		t.Errorf("the base is at %s, want %s", got, next)
	}
}

func testAdvanceOnlyFastForward(t *testing.T, q *queueFixture) {
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/one.txt": "one\n"})
	cand := q.build(q.request(1, base, one))
	if err := q.advance(base, cand); err != nil {
		t.Fatalf("AdvanceBranch: %v", err)
	}
	// A commit that does not descend from the base.
	other := q.change(2, base, map[string]string{"queue/two.txt": "two\n"})
	if err := q.advance(cand, other.SHA); err == nil {
		t.Error("AdvanceBranch to a commit that does not descend from From succeeded")
	}
	if got := q.head(q.base); got != cand {
		t.Errorf("after a refused AdvanceBranch the base is at %s, want %s", got, cand)
	}
}

func testBranchHeadOfMissingBranch(t *testing.T, q *queueFixture) {
	_, err := q.host.BranchHead(t.Context(), q.repo, "lifecycle-queue/"+q.base+"/404")
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("BranchHead of a missing branch: error = %v, want ErrNotFound", err)
	}
}

func testDeleteBranch(t *testing.T, q *queueFixture) {
	base := q.head(q.base)
	one := q.change(1, base, map[string]string{"queue/one.txt": "one\n"})
	req := q.request(1, base, one)
	q.build(req)
	for i := range 2 {
		if err := q.host.DeleteBranch(t.Context(), q.repo, req.Branch); err != nil {
			t.Errorf("DeleteBranch (call %d): %v", i+1, err)
		}
	}
	if _, err := q.host.BranchHead(t.Context(), q.repo, req.Branch); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("BranchHead of a deleted branch: error = %v, want ErrNotFound", err)
	}
	if got := q.head(q.base); got != base {
		t.Errorf("DeleteBranch moved the base to %s, want it at %s", got, base)
	}
	// The branch can be made again.
	q.build(req)
}
