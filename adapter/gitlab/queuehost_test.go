package gitlab_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// testToken is the token of the queue's tests, looked for in their
// errors.
const testToken = "glpat-test-token"

// queueRepo is the fake's project as a RepoRef.
var queueRepo = lifecycle.RepoRef{Owner: "acme", Repo: "web"}

// gitFake returns a fake in git mode and an adapter on it with a mirror
// of its own.
func gitFake(t *testing.T, opts gitlabtest.Options, mutate ...func(*gitlab.Config)) (*gitlabtest.Server, *gitlab.Adapter) {
	t.Helper()
	f := gitlabtest.NewServer(t, opts)
	f.EnableGit(t)
	mirror := t.TempDir()
	a := newAdapter(t, f, append([]func(*gitlab.Config){func(c *gitlab.Config) { c.MirrorDir = mirror }}, mutate...)...)
	return f, a
}

// byAdapter maps the adapters the conformance harness made to their
// fakes.
var byAdapter sync.Map

func TestQueueHostConformance(t *testing.T) {
	adaptertest.RunQueueHost(t, adaptertest.QueueHostHarness{
		New: func(t *testing.T) (lifecycle.QueueHost, lifecycle.RepoRef, string) {
			f, a := gitFake(t, gitlabtest.Options{})
			byAdapter.Store(a, f)
			t.Cleanup(func() { byAdapter.Delete(a) })
			return a, queueRepo, "main"
		},
		Commit: func(t *testing.T, host lifecycle.QueueHost, repo lifecycle.RepoRef, parent string, files map[string]string) string {
			f, ok := byAdapter.Load(host)
			if !ok {
				t.Fatal("no fake for this adapter")
			}
			return f.(*gitlabtest.Server).Commit(parent, files)
		},
	})
}

// queueRequest is a candidate request on queue branch
// lifecycle-queue/main/1.
func queueRequest(parent string, heads ...lifecycle.CandidateHead) lifecycle.CandidateRequest {
	return lifecycle.CandidateRequest{Repo: queueRepo, Base: "main", Branch: "lifecycle-queue/main/1", Parent: parent, Heads: heads, Title: "Queue"}
}

// openChange opens a merge request from branch whose head is a commit on
// main writing file, and returns it as a candidate head.
func openChange(t *testing.T, f *gitlabtest.Server, a *gitlab.Adapter, branch, file string) lifecycle.CandidateHead {
	t.Helper()
	sha := f.Commit(branchHead(t, a, "main"), map[string]string{file: branch + "\n"})
	iid := f.OpenMergeRequest(branch, "main", "Change "+branch, sha)
	return lifecycle.CandidateHead{PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: int(iid)}, SHA: sha}
}

// branchHead reads where a branch is, failing the test on error.
func branchHead(t *testing.T, a *gitlab.Adapter, branch string) string {
	t.Helper()
	sha, err := a.BranchHead(t.Context(), queueRepo, branch)
	if err != nil {
		t.Fatalf("BranchHead(%s): %v", branch, err)
	}
	return sha
}

// candidate builds a candidate of heads on main, failing the test on
// error.
func candidate(t *testing.T, a *gitlab.Adapter, heads ...lifecycle.CandidateHead) (base, cand string) {
	t.Helper()
	base = branchHead(t, a, "main")
	cand, err := a.BuildCandidate(t.Context(), queueRequest(base, heads...))
	if err != nil {
		t.Fatalf("BuildCandidate: %v", err)
	}
	return base, cand
}

func TestNativeQueueIsTheMergeTrain(t *testing.T) {
	for _, trains := range []bool{false, true} {
		f := gitlabtest.NewServer(t, gitlabtest.Options{MergeTrains: trains})
		a := newAdapter(t, f)
		got, err := a.NativeQueue(t.Context(), queueRepo, "main")
		if err != nil || got != trains {
			t.Errorf("merge trains %v: NativeQueue = %v, %v; want %v", trains, got, err, trains)
		}
	}
	a := newAdapter(t, gitlabtest.NewServer(t, gitlabtest.Options{}))
	if _, err := a.NativeQueue(t.Context(), lifecycle.RepoRef{Owner: "acme", Repo: "other"}, "main"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("NativeQueue of another project: %v, want ErrNotFound", err)
	}
}

func TestAdvanceProtectedBaseIsRefused(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	base, cand := candidate(t, a, one)
	f.ProtectBranch("main")
	err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand})
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("AdvanceBranch of a protected base: %v, want a *lifecycle.RefusedError", err)
	}
	if !strings.Contains(refused.Message, "not allowed to push code to protected branches") || !strings.Contains(refused.Message, "Allowed to push") {
		t.Errorf("the refusal says %q; want GitLab's words and what the token's user needs", refused.Message)
	}
	if got := branchHead(t, a, "main"); got != base {
		t.Errorf("main is at %s after a refused push, want %s", got, base)
	}
	if st := f.MergeRequest(int64(one.PullRequest.Number)).State; st != "opened" {
		t.Errorf("the merge request is %s, want opened", st)
	}
}

func TestAdvanceMovedBase(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	base, cand := candidate(t, a, one)
	// Someone pushes to main meanwhile.
	other := f.Commit(base, map[string]string{"other.txt": "other\n"})
	f.SetBranch("main", other)
	err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand})
	if !errors.Is(err, lifecycle.ErrBranchMoved) || !strings.Contains(err.Error(), other) {
		t.Fatalf("AdvanceBranch from a moved base: %v, want ErrBranchMoved naming %s", err, other)
	}
	if got := branchHead(t, a, "main"); got != other {
		t.Errorf("main is at %s, want %s", got, other)
	}
}

func TestAdvanceRepeatedAndMergeRequestMerged(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	two := openChange(t, f, a, "two", "two.txt")
	base, cand := candidate(t, a, one, two)
	req := lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand}
	for i := range 2 {
		if err := a.AdvanceBranch(t.Context(), req); err != nil {
			t.Fatalf("AdvanceBranch (call %d): %v", i+1, err)
		}
	}
	if got := branchHead(t, a, "main"); got != cand {
		t.Fatalf("main is at %s, want the candidate %s", got, cand)
	}
	for _, h := range []lifecycle.CandidateHead{one, two} {
		pr, err := a.PullRequest(t.Context(), h.PullRequest)
		if err != nil {
			t.Fatal(err)
		}
		if pr.State != lifecycle.PullRequestMerged || pr.MergeCommitSHA == "" {
			t.Errorf("%s reads %s with merge commit %q after the landing, want merged with one", h.PullRequest, pr.State, pr.MergeCommitSHA)
		}
	}
	if n := f.Calls(gitlabtest.RouteMerge); n != 0 {
		t.Errorf("the accept-merge endpoint was called %d times", n)
	}
}

func TestCandidateCIFromItsBranchPipeline(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	req := queueRequest(branchHead(t, a, "main"), one)
	cand, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	q := lifecycle.CIQuery{PullRequest: one.PullRequest, HeadSHA: cand, Candidate: &req}
	rep, err := a.Checks(t.Context(), q)
	if err != nil || !rep.Pending || len(rep.Checks) != 0 {
		t.Fatalf("candidate CI before any pipeline: %+v, %v; want pending", rep, err)
	}
	// The merge request's own pipeline is not the candidate's.
	f.Pipeline(int64(one.PullRequest.Number), "success", &gl.CommitStatus{Name: "test", Status: "success"})
	if rep, err := a.Checks(t.Context(), q); err != nil || !rep.Pending {
		t.Fatalf("candidate CI with only the merge request's pipeline: %+v, %v; want pending", rep, err)
	}
	f.BranchPipeline(req.Branch, cand, "", &gl.CommitStatus{Name: "test", Status: "failed"})
	rep, err = a.Checks(t.Context(), q)
	if err != nil || rep.Pending || len(rep.Checks) != 1 || rep.Checks[0].Status != lifecycle.CheckFailed {
		t.Fatalf("candidate CI with a failed job: %+v, %v; want the job failed", rep, err)
	}
	// A newer pipeline of the same commit (CI run again) is the one read.
	f.BranchPipeline(req.Branch, cand, "", &gl.CommitStatus{Name: "test", Status: "running"}, &gl.CommitStatus{Name: "lint", Status: "success"})
	rep, err = a.Checks(t.Context(), q)
	if err != nil || len(rep.Checks) != 2 || rep.Checks[0].Status != lifecycle.CheckRunning || rep.Checks[1].Status != lifecycle.CheckPassed {
		t.Fatalf("candidate CI of the newest pipeline: %+v, %v; want test running and lint passed", rep, err)
	}
	// The same commit on another queue branch has no pipeline yet.
	other := req
	other.Branch = "lifecycle-queue/main/2"
	if rep, err := a.Checks(t.Context(), lifecycle.CIQuery{PullRequest: one.PullRequest, HeadSHA: cand, Candidate: &other}); err != nil || !rep.Pending {
		t.Errorf("candidate CI on another queue branch: %+v, %v; want pending", rep, err)
	}
}

// fakeGit writes a stand-in for git that answers git version with
// version and fails every other command, printing its environment and
// arguments to stderr as a careless program might; it appends its
// arguments to a file whose path it returns too.
func fakeGit(t *testing.T, version string) (path, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	path, argsFile = filepath.Join(dir, "git"), filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\nif [ \"$1\" = version ]; then echo 'git version " + version + "'; exit 0; fi\nenv >&2\necho \"$@\" >&2\nexit 128\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

func TestTokenNeverInGitErrors(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in for git is a shell script")
	}
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	path, argsFile := fakeGit(t, "2.45.1")
	a := newAdapter(t, f, func(c *gitlab.Config) { c.GitPath, c.MirrorDir = path, t.TempDir() })
	sha := strings.Repeat("a", 40)
	_, err := a.BuildCandidate(t.Context(), queueRequest(sha, lifecycle.CandidateHead{PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1}, SHA: strings.Repeat("b", 40)}))
	errAdvance := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: branchHead(t, a, "main"), To: strings.Repeat("c", 40)})
	_, errTree := a.Tree(t.Context(), queueRepo, sha)
	basic := base64.StdEncoding.EncodeToString([]byte("oauth2:" + testToken))
	for name, err := range map[string]error{"BuildCandidate": err, "AdvanceBranch": errAdvance, "Tree": errTree} {
		if err == nil {
			t.Errorf("%s with a failing git succeeded", name)
			continue
		}
		if !strings.Contains(err.Error(), "git ") {
			t.Errorf("%s: %v; want git's failure", name, err)
		}
		if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), basic) {
			t.Errorf("%s: the error holds the token: %v", name, err)
		}
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(args), testToken) || strings.Contains(string(args), basic) {
		t.Errorf("the token was on git's command line: %s", args)
	}
	if !strings.Contains(string(args), "init --bare") {
		t.Errorf("git was not run past its version: %s", args)
	}
}

func TestOldGitIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in for git is a shell script")
	}
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	path, _ := fakeGit(t, "2.37.9")
	a := newAdapter(t, f, func(c *gitlab.Config) { c.GitPath, c.MirrorDir = path, t.TempDir() })
	_, err := a.Tree(t.Context(), queueRepo, strings.Repeat("a", 40))
	if err == nil || !strings.Contains(err.Error(), "2.38") || !strings.Contains(err.Error(), "2.37.9") {
		t.Errorf("Tree with git 2.37: %v; want an error naming the git needed and the one found", err)
	}
	// A ship asks NativeQueue first: without merge trains the queue's
	// git must do, and a refusal in words fails the ship at once.
	_, err = a.NativeQueue(t.Context(), queueRepo, "main")
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "2.38") {
		t.Errorf("NativeQueue without merge trains, with git 2.37: %v; want a *lifecycle.RefusedError naming the git needed", err)
	}
	// With merge trains the ship goes through the train: git is not
	// needed.
	trains := gitlabtest.NewServer(t, gitlabtest.Options{MergeTrains: true})
	b := newAdapter(t, trains, func(c *gitlab.Config) { c.GitPath, c.MirrorDir = path, t.TempDir() })
	if native, err := b.NativeQueue(t.Context(), queueRepo, "main"); err != nil || !native {
		t.Errorf("NativeQueue with merge trains and git 2.37: %v, %v; want true and no error", native, err)
	}
}

func TestBuildCandidateRefusesTheBase(t *testing.T) {
	_, a := gitFake(t, gitlabtest.Options{})
	req := queueRequest(branchHead(t, a, "main"))
	req.Branch = "main"
	if _, err := a.BuildCandidate(t.Context(), req); err == nil {
		t.Error("BuildCandidate onto the base branch succeeded")
	}
}

func TestTreeOfAnUnknownCommit(t *testing.T) {
	_, a := gitFake(t, gitlabtest.Options{})
	if _, err := a.Tree(t.Context(), queueRepo, strings.Repeat("d", 40)); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tree of a commit the project lacks: %v, want ErrNotFound", err)
	}
}

// Six tasks ship at once into a project without merge trains, through
// the lifecycle's own merge queue on the fake in git mode: the fake plays
// CI on every push to a queue branch with a passing branch pipeline. All
// land through tested candidates, pushed to main; none through the
// accept-merge endpoint; GitLab marks each merge request merged, as it
// does when a push to the target branch brings in its head; main ends at
// a candidate whose pipeline passed.
func TestShipThroughBuiltInQueue(t *testing.T) {
	t.Parallel()
	st := newStack(t, stackOptions{git: true, queue: lifecycle.MergeQueueConfig{Enabled: true, PollInterval: 20 * time.Millisecond}})
	var (
		mu     sync.Mutex
		passed = map[string]bool{} // candidates whose pipeline passed
	)
	st.f.OnPush(func(branch, sha string) {
		if !strings.HasPrefix(branch, "lifecycle-queue/") {
			return
		}
		st.f.BranchPipeline(branch, sha, "", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "test", Status: "success"})
		mu.Lock()
		passed[sha] = true
		mu.Unlock()
	})
	var ops []lifecycle.ShipOperation
	var tasks []lifecycle.Task
	for i := range 6 {
		tk := st.green(t, st.submitted(t, fmt.Sprintf("GLQ-%d", i+1)))
		tasks = append(tasks, tk)
		ops = append(ops, st.ship(t, tk, lifecycle.ShipMergeOnly, *tk.HeadSHA))
	}
	waitUntil(t, 60*time.Second, "the six ship operations to finish", func() bool {
		for i := range ops {
			op, err := st.svc.ShipOperation(t.Context(), ops[i].OperationID)
			if err != nil {
				t.Fatal(err)
			}
			if ops[i] = op; op.Status != lifecycle.ShipSucceeded && op.Status != lifecycle.ShipFailed {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for i, op := range ops {
		if op.Status != lifecycle.ShipSucceeded || op.MergeCommitSHA == nil || !passed[*op.MergeCommitSHA] {
			t.Errorf("ship %d = %s %+v (merged as %v), want succeeded at a tested candidate", i, op.Status, op.Error, op.MergeCommitSHA)
		}
	}
	main := branchHead(t, st.a, "main")
	if !passed[main] {
		t.Errorf("main is at %s, which is not a candidate whose pipeline passed", main)
	}
	for _, tk := range tasks {
		mr := st.f.MergeRequest(int64(*tk.PRNumber))
		if mr.State != "merged" || mr.MergeCommitSHA == "" {
			t.Errorf("merge request !%d is %s (merge commit %q), want merged by the push of its candidate", mr.IID, mr.State, mr.MergeCommitSHA)
		}
		if got := st.task(t, tk.ID); got.Status != lifecycle.StatusDone {
			t.Errorf("task %s is %s, want done", tk.Identifier, got.Status)
		}
	}
	if n := st.f.Calls(gitlabtest.RouteMerge); n != 0 {
		t.Errorf("%d merges through the accept-merge endpoint, want none: the queue lands tested candidates", n)
	}
	t.Logf("six changes landed; %d candidates tested", len(passed))
}

// Where GitLab serves no commit by SHA, the mirror fetches the refs that
// hold them: the base, the queue branches, the merge requests' head refs,
// and, to land a candidate another replica built, every branch.
func TestQueueFetchesRefsWhereNotBySHA(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	f.RefuseFetchBySHA()
	one := openChange(t, f, a, "one", "one.txt")
	two := openChange(t, f, a, "two", "two.txt")
	base, cand := candidate(t, a, one, two)
	tree, err := a.Tree(t.Context(), queueRepo, cand)
	if err != nil || tree == "" {
		t.Fatalf("Tree of the candidate: %q, %v", tree, err)
	}
	// Another replica, with a mirror of its own, lands it.
	other := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = t.TempDir() })
	if err := other.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand}); err != nil {
		t.Fatalf("AdvanceBranch by another replica: %v", err)
	}
	if got, err := other.Tree(t.Context(), queueRepo, cand); err != nil || got != tree {
		t.Errorf("the other replica reads the candidate's tree as %q, %v; want %s", got, err, tree)
	}
	// The old base, now no ref's tip, is not served by SHA: a third
	// replica reads it from the branches that contain it.
	third := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = t.TempDir() })
	if _, err := third.Tree(t.Context(), queueRepo, base); err != nil {
		t.Errorf("Tree of the old base, no ref's tip: %v", err)
	}
	// A commit no ref holds cannot be had.
	loose := f.Commit(base, map[string]string{"loose.txt": "loose\n"})
	if _, err := other.Tree(t.Context(), queueRepo, loose); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tree of a commit no ref holds, not served by SHA: %v, want ErrNotFound", err)
	}
}

func TestCandidateConflictNamesThePaths(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "same.txt")
	two := openChange(t, f, a, "two", "same.txt")
	_, err := a.BuildCandidate(t.Context(), queueRequest(branchHead(t, a, "main"), one, two))
	var conflict *lifecycle.CandidateConflictError
	if !errors.As(err, &conflict) || conflict.Head != two || !strings.Contains(conflict.Message, "same.txt") {
		t.Fatalf("BuildCandidate of two changes to same.txt: %v; want a conflict of the second naming the path", err)
	}
	if _, err := a.BranchHead(t.Context(), queueRepo, "lifecycle-queue/main/1"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("a candidate that does not merge was pushed: %v", err)
	}
}

// A merge request whose branch shares no history with the base merges as
// if from an empty tree, as the artifact adapter's does, rather than
// failing every build (git merge-tree refuses unrelated histories unless
// told).
func TestCandidateOfUnrelatedHistory(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	root := f.Commit("", map[string]string{"vendor/lib.txt": "lib\n"})
	iid := f.OpenMergeRequest("orphan", "main", "Vendor a library", root)
	head := lifecycle.CandidateHead{PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: int(iid)}, SHA: root}
	base, cand := candidate(t, a, head)
	if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand}); err != nil {
		t.Fatalf("AdvanceBranch: %v", err)
	}
	if st := f.MergeRequest(iid).State; st != "merged" {
		t.Errorf("the merge request is %s after landing, want merged", st)
	}
}

// A replica whose mirror never saw From (it took the queue over, say)
// learns from the branch itself that the base moved or was moved to To
// already, before it fetches anything.
func TestAdvanceReadsTheBranchFirst(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	base, cand := candidate(t, a, one)
	// A commit only the project has, that main is moved to and that the
	// second adapter's mirror never fetched.
	other := f.Commit(base, map[string]string{"other.txt": "other\n"})
	f.SetBranch("main", other)
	fresh := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = t.TempDir() })
	gone := strings.Repeat("e", 40) // a From the project never had
	err := fresh.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: gone, To: cand})
	if !errors.Is(err, lifecycle.ErrBranchMoved) || !strings.Contains(err.Error(), other) {
		t.Errorf("AdvanceBranch from a commit the project lacks, the base elsewhere: %v, want ErrBranchMoved naming %s", err, other)
	}
	f.SetBranch("main", cand)
	if err := fresh.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: gone, To: cand}); err != nil {
		t.Errorf("AdvanceBranch to where the base is already: %v, want nil", err)
	}
}

// Waiting for the mirror, held by another process's long operation, ends
// with the caller's context.
func TestMirrorWaitEndsWithContext(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in for git is a shell script")
	}
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	mirror := t.TempDir()
	dir := t.TempDir()
	release, started := filepath.Join(dir, "release"), filepath.Join(dir, "started")
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	// A git whose fetch hangs until the test lets it go (or 30 seconds
	// have passed, so that it stops by itself).
	slow := filepath.Join(dir, "git")
	script := "#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = fetch ]; then : > " + started + "; i=0; while [ ! -e " + release + " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; fi; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) })
	holder := newAdapter(t, f, func(c *gitlab.Config) { c.GitPath, c.MirrorDir = slow, mirror })
	waiter := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = mirror })
	held := make(chan error, 1)
	go func() {
		_, err := holder.Tree(t.Context(), queueRepo, strings.Repeat("d", 40)) // fetches, and hangs
		held <- err
	}()
	// The holder takes the mirror's file lock before it fetches: wait
	// for its fetch to start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's fetch never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = waiter.Tree(ctx, queueRepo, branchHead(t, waiter, "main"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Tree while another process holds the mirror: %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Tree waited %v for the mirror past its context", d)
	}
	os.WriteFile(release, nil, 0o644)
	<-held
}

// Through a whole build, a refused landing and a landing, with the real
// git behind a stand-in that records its arguments: the token is never
// on git's command line, nor in an error, and it reaches the remote (the
// fake answers 401 without it).
func TestTokenNeverOnGitsCommandLine(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in for git is a shell script")
	}
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	wrapper, argsFile := filepath.Join(dir, "git"), filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f, a := gitFake(t, gitlabtest.Options{}, func(c *gitlab.Config) { c.GitPath = wrapper })
	one := openChange(t, f, a, "one", "one.txt")
	base, cand := candidate(t, a, one)
	f.ProtectBranch("main")
	refused := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand})
	if refused == nil {
		t.Fatal("a landing on a protected base succeeded")
	}
	basic := base64.StdEncoding.EncodeToString([]byte("oauth2:" + testToken))
	if strings.Contains(refused.Error(), testToken) || strings.Contains(refused.Error(), basic) {
		t.Errorf("the refusal holds the token: %v", refused)
	}
	f.UnprotectBranch("main")
	if err := a.AdvanceBranch(t.Context(), lifecycle.AdvanceRequest{Repo: queueRepo, Branch: "main", From: base, To: cand}); err != nil {
		t.Fatalf("AdvanceBranch: %v", err)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fetch", "merge-tree", "commit-tree", "push"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("git never ran %s: %s", want, args)
		}
	}
	if strings.Contains(string(args), testToken) || strings.Contains(string(args), basic) {
		t.Errorf("the token was on git's command line: %s", args)
	}
}

// A queue branch GitLab will not take (protected, the token's user not
// allowed to push to it) is a refusal in GitLab's words, on which the
// queue pauses rather than building again at every step.
func TestCandidatePushRefused(t *testing.T) {
	f, a := gitFake(t, gitlabtest.Options{})
	one := openChange(t, f, a, "one", "one.txt")
	f.ProtectBranch("lifecycle-queue/main/1")
	_, err := a.BuildCandidate(t.Context(), queueRequest(branchHead(t, a, "main"), one))
	var refused *lifecycle.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, "not allowed to push code to protected branches") {
		t.Fatalf("BuildCandidate onto a protected queue branch: %v, want a *lifecycle.RefusedError in GitLab's words", err)
	}
}

// Close removes the temporary mirror the Adapter made, keeps a
// Config.MirrorDir, and ends the queue's git operations with ErrClosed
// rather than refusing the project.
func TestCloseRemovesTemporaryMirror(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp("", ...) makes the mirror
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	a := newAdapter(t, f)
	one := openChange(t, f, a, "one", "one.txt")
	if _, err := a.BuildCandidate(t.Context(), queueRequest(branchHead(t, a, "main"), one)); err != nil {
		t.Fatal(err)
	}
	made, err := filepath.Glob(filepath.Join(tmp, "lifecycle-gitlab-mirror-*", "HEAD"))
	if err != nil || len(made) != 1 {
		t.Fatalf("temporary mirrors = %v, %v; want one", made, err)
	}
	for range 2 {
		if err := a.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Dir(made[0])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary mirror is still there after Close: %v", err)
	}
	if _, err := a.BuildCandidate(t.Context(), queueRequest(branchHead(t, a, "main"), one)); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("BuildCandidate after Close: %v, want ErrClosed", err)
	}
	fresh := newAdapter(t, f)
	if err := fresh.Close(); err != nil {
		t.Fatalf("Close of an Adapter without a mirror: %v", err)
	}
	var refused *lifecycle.RefusedError
	if _, err := fresh.NativeQueue(t.Context(), queueRepo, "main"); !errors.Is(err, lifecycle.ErrClosed) || errors.As(err, &refused) {
		t.Errorf("NativeQueue after Close: %v, want ErrClosed and no refusal (which would fail the ship)", err)
	}

	kept := t.TempDir()
	b := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = kept })
	if _, err := b.BuildCandidate(t.Context(), queueRequest(branchHead(t, b, "main"), one)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(kept, "HEAD")); err != nil {
		t.Errorf("Close removed Config.MirrorDir: %v", err)
	}
}

// A candidate's merge commits have a one-line subject whatever the title
// holds (line breaks, control characters, invalid UTF-8), and a
// committer that git could not write is refused when the Adapter is
// made.
func TestCandidateSubjectIsOneLine(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	mirror := t.TempDir()
	a := newAdapter(t, f, func(c *gitlab.Config) { c.MirrorDir = mirror })
	one := openChange(t, f, a, "one", "one.txt")
	req := queueRequest(branchHead(t, a, "main"), one)
	req.Title = "Fix the\nlogin\x00 page \xff\tnow"
	sha, err := a.BuildCandidate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "--git-dir="+mirror, "log", "-1", "--format=%B", sha).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Fix the login page \uFFFD now (!%d)", one.PullRequest.Number)
	if got := strings.TrimRight(string(out), "\n"); got != want {
		t.Errorf("the candidate's message = %q, want %q", got, want)
	}
	for _, c := range []struct{ name, email string }{{"a<b", ""}, {"", "x\ny@z"}, {"nul\x00", ""}} {
		cfg := gitlab.Config{BaseURL: f.URL, Token: testToken, Project: gitlabtest.ProjectPath, CommitterName: c.name, CommitterEmail: c.email}
		if _, err := gitlab.New(cfg); err == nil || !strings.Contains(err.Error(), "CommitterName") {
			t.Errorf("New with committer %q <%q>: %v, want an error naming CommitterName", c.name, c.email, err)
		}
	}
}
