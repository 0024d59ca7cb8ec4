package artifact_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// webRepo is the repository of the tasks of project "web".
var webRepo = lifecycle.RepoRef{Owner: "local", Repo: "web"}

func TestQueueHostConformance(t *testing.T) {
	t.Parallel()
	adaptertest.RunQueueHost(t, adaptertest.QueueHostHarness{
		New: func(t *testing.T) (lifecycle.QueueHost, lifecycle.RepoRef, string) {
			a := newAdapter(t, t.TempDir())
			// The repository is made by the first submission.
			ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
			return a, webRepo, "main"
		},
		Commit: func(t *testing.T, host lifecycle.QueueHost, repo lifecycle.RepoRef, parent string, files map[string]string) string {
			return commitFiles(t, host.(*artifact.Adapter), repo.Repo, parent, files)
		},
	})
}

// commitFiles commits files on parent with go-git, without the Adapter, as
// a person pushing would, points a branch of its own at the commit and
// returns it.
func commitFiles(t *testing.T, a *artifact.Adapter, repoName, parent string, files map[string]string) string {
	t.Helper()
	r := openRepo(t, a, repoName)
	pc, err := r.CommitObject(plumbing.NewHash(parent))
	if err != nil {
		t.Fatal(err)
	}
	root, err := putFiles(r, pc.TreeHash, files)
	if err != nil {
		t.Fatal(err)
	}
	sig := object.Signature{Name: "A Person", Email: "person@example.com", When: epoch}
	c := &object.Commit{Author: sig, Committer: sig, Message: "Change files\n", TreeHash: root, ParentHashes: []plumbing.Hash{pc.Hash}}
	h, err := store(r.Storer, plumbing.CommitObject, c.Encode)
	if err != nil {
		t.Fatal(err)
	}
	branch := plumbing.NewBranchReferenceName("pushed/" + h.String()[:12])
	if err := r.Storer.SetReference(plumbing.NewHashReference(branch, h)); err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// putFiles returns tree with files (paths to contents) written.
func putFiles(r *git.Repository, tree plumbing.Hash, files map[string]string) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !tree.IsZero() {
		t, err := r.TreeObject(tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = slices.Clone(t.Entries)
	}
	here := make(map[string]string)
	sub := make(map[string]map[string]string)
	for path, content := range files {
		if dir, rest, ok := strings.Cut(path, "/"); ok {
			if sub[dir] == nil {
				sub[dir] = make(map[string]string)
			}
			sub[dir][rest] = content
		} else {
			here[path] = content
		}
	}
	set := func(e object.TreeEntry) {
		entries = slices.DeleteFunc(entries, func(x object.TreeEntry) bool { return x.Name == e.Name })
		entries = append(entries, e)
	}
	for _, name := range slices.Sorted(maps.Keys(here)) {
		blob, err := store(r.Storer, plumbing.BlobObject, func(o plumbing.EncodedObject) error {
			w, err := o.Writer()
			if err != nil {
				return err
			}
			if _, err := w.Write([]byte(here[name])); err != nil {
				return err
			}
			return w.Close()
		})
		if err != nil {
			return plumbing.ZeroHash, err
		}
		set(object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: blob})
	}
	for _, dir := range slices.Sorted(maps.Keys(sub)) {
		var old plumbing.Hash
		for _, e := range entries {
			if e.Name == dir && e.Mode == filemode.Dir {
				old = e.Hash
			}
		}
		h, err := putFiles(r, old, sub[dir])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		set(object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h})
	}
	slices.SortFunc(entries, func(x, y object.TreeEntry) int { return strings.Compare(treeKey(x), treeKey(y)) })
	return store(r.Storer, plumbing.TreeObject, (&object.Tree{Entries: entries}).Encode)
}

// queueSetup makes an Adapter on dir with two open pull requests into main.
func queueSetup(t *testing.T, dir string) (*artifact.Adapter, lifecycle.PullRequest, lifecycle.PullRequest) {
	t.Helper()
	a := newAdapter(t, dir)
	one := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	two := ensure(t, a, submission(task("web", "ENG-2"), "sub_b"))
	return a, one, two
}

func candidateHead(pr lifecycle.PullRequest) lifecycle.CandidateHead {
	return lifecycle.CandidateHead{PullRequest: pr.PullRequestRef, SHA: pr.HeadSHA}
}

// buildAndAdvance builds a candidate of prs on main and advances main to it.
func buildAndAdvance(t *testing.T, a *artifact.Adapter, prs ...lifecycle.PullRequest) (from, to string) {
	t.Helper()
	from, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	req := lifecycle.CandidateRequest{Repo: webRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: from, Title: "Queue"}
	for _, pr := range prs {
		req.Heads = append(req.Heads, candidateHead(pr))
	}
	to, err = a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: webRepo, Branch: "main", From: from, To: to}); err != nil {
		t.Fatal(err)
	}
	return from, to
}

// TestAdvanceMergesPullRequests: the pull requests whose heads a landed
// candidate contains read as merged with it, and Merge answers
// AlreadyMerged; the others stay open.
func TestAdvanceMergesPullRequests(t *testing.T) {
	t.Parallel()
	a, one, two := queueSetup(t, t.TempDir())
	three := ensure(t, a, submission(task("web", "ENG-3"), "sub_c"))
	_, to := buildAndAdvance(t, a, one, two)
	for _, pr := range []lifecycle.PullRequest{one, two} {
		got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != to || got.HeadSHA != pr.HeadSHA {
			t.Errorf("%s after the advance: %s, merge commit %s, head %s; want merged, %s, %s", pr.PullRequestRef, got.State, got.MergeCommitSHA, got.HeadSHA, to, pr.HeadSHA)
		}
		res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
		if err != nil {
			t.Fatal(err)
		}
		if !res.AlreadyMerged || res.MergeCommitSHA != to {
			t.Errorf("Merge(%s) = %+v, want AlreadyMerged with %s", pr.PullRequestRef, res, to)
		}
	}
	if got, err := a.PullRequest(t.Context(), three.PullRequestRef); err != nil || got.State != lifecycle.PullRequestOpen {
		t.Errorf("a pull request not in the candidate: %s, %v; want open", got.State, err)
	}
	r := openRepo(t, a, "web")
	if got := refs(t, r)["refs/heads/main"]; got != to {
		t.Errorf("main at %s, want %s (Merge made no commit)", got, to)
	}
	// The candidate's merges carry the queue's trailers, not those of
	// Merge's commits.
	c, err := r.CommitObject(plumbing.NewHash(to))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Message, "Queue\n") || !strings.Contains(c.Message, "Lifecycle-Queue-Pull: 2\n") || strings.Contains(c.Message, "Lifecycle-Pull:") {
		t.Errorf("candidate message %q", c.Message)
	}
	if len(c.ParentHashes) != 2 || c.ParentHashes[1].String() != two.HeadSHA {
		t.Errorf("candidate parents %v, want [first merge, %s]", c.ParentHashes, two.HeadSHA)
	}
}

// TestAdvanceInterrupted stops an advance between moving the base and
// recording the pull requests, by putting the records back as they were
// and the note of the advance in place: an Adapter reopening the
// repository, or a Merge, or the advance repeated, records them.
func TestAdvanceInterrupted(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"reopen", "merge", "repeat"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			a, one, two := queueSetup(t, dir)
			r := openRepo(t, a, "web")
			pullsBefore := refs(t, r)["refs/lifecycle/pulls"]
			from, to := buildAndAdvance(t, a, one, two)
			git := filepath.Join(a.RepositoryDir("web"), ".git")
			if err := os.WriteFile(filepath.Join(git, "refs", "lifecycle", "pulls"), []byte(pullsBefore+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			note := filepath.Join(git, "refs", "lifecycle", "advance", "main")
			if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(note, []byte(to+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got, _ := a.PullRequest(t.Context(), one.PullRequestRef); got.State != lifecycle.PullRequestOpen {
				t.Fatalf("the records were not put back: %s", got.State)
			}
			switch how {
			case "reopen":
				a = newAdapter(t, dir)
			case "merge":
				res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: two.PullRequestRef, ExpectedHeadSHA: two.HeadSHA})
				if err != nil || !res.AlreadyMerged || res.MergeCommitSHA != to {
					t.Errorf("Merge = %+v, %v; want AlreadyMerged with %s", res, err, to)
				}
			case "repeat":
				if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: webRepo, Branch: "main", From: from, To: to}); err != nil {
					t.Fatal(err)
				}
			}
			for _, pr := range []lifecycle.PullRequest{one, two} {
				got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != to {
					t.Errorf("%s: %s %s, want merged %s", pr.PullRequestRef, got.State, got.MergeCommitSHA, to)
				}
			}
			if _, ok := refs(t, r)["refs/lifecycle/advance/main"]; ok {
				t.Error("the note of the advance is still there")
			}
			if got := refs(t, r)["refs/heads/main"]; got != to {
				t.Errorf("main at %s, want %s", got, to)
			}
		})
	}
}

// TestAdvanceNotedButNotMoved: a process that stopped after noting an
// advance but before moving the base leaves the pull requests open.
func TestAdvanceNotedButNotMoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, one, _ := queueSetup(t, dir)
	base, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	cand, err := a.BuildCandidate(t.Context(), lifecycle.CandidateRequest{Repo: webRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: base, Heads: []lifecycle.CandidateHead{candidateHead(one)}})
	if err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(a.RepositoryDir("web"), ".git", "refs", "lifecycle", "advance", "main")
	if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(note, []byte(cand+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a = newAdapter(t, dir)
	if got, err := a.PullRequest(t.Context(), one.PullRequestRef); err != nil || got.State != lifecycle.PullRequestOpen {
		t.Errorf("PullRequest = %s, %v; want open", got.State, err)
	}
	if _, ok := refs(t, openRepo(t, a, "web"))["refs/lifecycle/advance/main"]; ok {
		t.Error("the note of the advance is still there")
	}
}

// TestCandidateIsDeterministic: the same request makes the same commit,
// whatever the clock says.
func TestCandidateIsDeterministic(t *testing.T) {
	t.Parallel()
	a, one, two := queueSetup(t, t.TempDir())
	base, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	req := lifecycle.CandidateRequest{Repo: webRepo, Base: "main", Branch: "lifecycle-queue/main/7", Parent: base, Heads: []lifecycle.CandidateHead{candidateHead(one), candidateHead(two)}}
	first, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Branch = "lifecycle-queue/main/8"
	second, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("the same heads on the same parent made %s and %s", first, second)
	}
}

// TestQueueHostRefusals: what the QueueHost methods refuse, changing
// nothing.
func TestQueueHostRefusals(t *testing.T) {
	t.Parallel()
	a, one, _ := queueSetup(t, t.TempDir())
	base, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	ok := lifecycle.CandidateRequest{Repo: webRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: base, Heads: []lifecycle.CandidateHead{candidateHead(one)}}
	missing := strings.Repeat("1", 40)
	for _, tc := range []struct {
		name     string
		mutate   func(*lifecycle.CandidateRequest)
		notFound bool
	}{
		{"other owner", func(r *lifecycle.CandidateRequest) { r.Repo.Owner = "someone" }, true},
		{"no repository", func(r *lifecycle.CandidateRequest) { r.Repo.Repo = "nope" }, true},
		{"bad branch", func(r *lifecycle.CandidateRequest) { r.Branch = "a..b" }, false},
		{"branch is the base", func(r *lifecycle.CandidateRequest) { r.Branch = "main" }, false},
		{"branch of a pull request", func(r *lifecycle.CandidateRequest) { r.Branch = one.Head }, false},
		{"short parent", func(r *lifecycle.CandidateRequest) { r.Parent = "abc" }, false},
		{"missing parent", func(r *lifecycle.CandidateRequest) { r.Parent = missing }, true},
		{"missing head", func(r *lifecycle.CandidateRequest) { r.Heads[0].SHA = missing }, true},
	} {
		req := ok
		req.Heads = slices.Clone(ok.Heads)
		tc.mutate(&req)
		_, err := a.BuildCandidate(t.Context(), req)
		if err == nil {
			t.Errorf("%s: BuildCandidate succeeded", tc.name)
		} else if errors.Is(err, lifecycle.ErrNotFound) != tc.notFound {
			t.Errorf("%s: error %v, ErrNotFound %v; want %v", tc.name, err, errors.Is(err, lifecycle.ErrNotFound), tc.notFound)
		}
	}
	for _, b := range []string{"main", one.Head} {
		if err := a.DeleteBranch(t.Context(), webRepo, b); err == nil {
			t.Errorf("DeleteBranch(%s) succeeded", b)
		}
	}
	if _, err := a.Tree(t.Context(), webRepo, missing); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tree(missing) error = %v, want ErrNotFound", err)
	}
	if native, err := a.NativeQueue(t.Context(), webRepo, "main"); native || err != nil {
		t.Errorf("NativeQueue = %v, %v; want false, nil", native, err)
	}
	if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: webRepo, Branch: "nope", From: base, To: one.HeadSHA}); !errors.Is(err, lifecycle.ErrBranchMoved) {
		t.Errorf("AdvanceBranch of a missing branch: error = %v, want ErrBranchMoved", err)
	}
	got, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil || got != base {
		t.Errorf("main at %s, %v; want %s", got, err, base)
	}
	if _, err := a.BranchHead(t.Context(), webRepo, "lifecycle-queue/main/1"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a refused BuildCandidate made its branch: %v", err)
	}
}

// TestGitReadsCandidates: git sees a sound repository after candidates,
// an advance and a deleted branch.
func TestGitReadsCandidates(t *testing.T) {
	t.Parallel()
	a, one, two := queueSetup(t, t.TempDir())
	_, to := buildAndAdvance(t, a, one, two)
	if err := a.DeleteBranch(t.Context(), webRepo, "lifecycle-queue/main/1"); err != nil {
		t.Fatal(err)
	}
	dir := a.RepositoryDir("web")
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	if got := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main")); got != to {
		t.Errorf("git rev-parse main = %s, want %s", got, to)
	}
	if got := gitCLI(t, dir, "branch", "--list", "lifecycle-queue/*"); got != "" {
		t.Errorf("git branch --list lifecycle-queue/* = %q, want none", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "lifecycle-queue")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory of the deleted branch is left: %v", err)
	}
}

// TestQueueAfterGitGC: git gc packs the refs, queue branches and the note
// of an advance among them; the QueueHost reads, moves and deletes them.
func TestQueueAfterGitGC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, one, two := queueSetup(t, dir)
	base, err := a.BranchHead(t.Context(), webRepo, "main")
	if err != nil {
		t.Fatal(err)
	}
	req := lifecycle.CandidateRequest{Repo: webRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: base, Heads: []lifecycle.CandidateHead{candidateHead(one)}}
	cand, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	repoDir := a.RepositoryDir("web")
	// An advance noted but not finished, as a crash leaves it, packed.
	gitCLI(t, repoDir, "update-ref", "refs/lifecycle/advance/main", base)
	gitCLI(t, repoDir, "gc", "--prune=now", "--quiet")
	if _, err := os.Stat(filepath.Join(repoDir, ".git", "refs", "heads", "lifecycle-queue", "main", "1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("git gc left the queue branch loose: %v", err)
	}
	if got, err := a.BranchHead(t.Context(), webRepo, req.Branch); err != nil || got != cand {
		t.Errorf("BranchHead of a packed branch = %s, %v; want %s", got, err, cand)
	}
	req.Heads = append(req.Heads, candidateHead(two))
	cand2, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: webRepo, Branch: "main", From: base, To: cand2}); err != nil {
		t.Fatal(err)
	}
	for _, pr := range []lifecycle.PullRequest{one, two} {
		if got, err := a.PullRequest(t.Context(), pr.PullRequestRef); err != nil || got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != cand2 {
			t.Errorf("%s = %s %s, %v; want merged %s", pr.PullRequestRef, got.State, got.MergeCommitSHA, err, cand2)
		}
	}
	gitCLI(t, repoDir, "gc", "--prune=now", "--quiet")
	for range 2 {
		if err := a.DeleteBranch(t.Context(), webRepo, req.Branch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.BranchHead(t.Context(), webRepo, req.Branch); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("BranchHead of a deleted packed branch: %v, want ErrNotFound", err)
	}
	if got := gitCLI(t, repoDir, "for-each-ref", "refs/heads/lifecycle-queue", "refs/lifecycle/advance"); got != "" {
		t.Errorf("git for-each-ref lists %q, want no queue branch and no note", got)
	}
	gitCLI(t, repoDir, "fsck", "--strict", "--no-dangling")
}
