package artifact_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// epoch is the time of every test clock, so commit SHAs are deterministic.
// gitStdinOut runs git in dir with stdin as its standard input and
// returns its standard output.
func gitStdinOut(t *testing.T, dir string, stdin io.Reader, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Require(t, testenv.Git, "this test runs git on the repositories")
	}
	cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	cmd.Stdin = stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

var epoch = time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC)

// newAdapter returns an Adapter on dir with a fixed clock.
func newAdapter(t *testing.T, dir string) *artifact.Adapter {
	t.Helper()
	a, err := artifact.New(artifact.Config{Dir: dir, Now: func() time.Time { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() }) // before dir is removed
	return a
}

// record returns the path of a file of the records of the task whose
// directory is dir: .lifecycle/<first two hex digits of SHA-256(dir)>/dir/file.
func record(dir, file string) string {
	sum := sha256.Sum256([]byte(dir))
	return ".lifecycle/" + hex.EncodeToString(sum[:1]) + "/" + dir + "/" + file
}

func task(project, identifier string) lifecycle.Task {
	t := lifecycle.Task{
		ID:         "tsk_" + strings.NewReplacer("-", "", " ", "").Replace(identifier) + "xxxxxxxxxxxxxxxxxxxx",
		Identifier: identifier,
		Title:      "Fix the login redirect",
		Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/" + identifier},
		Context:    lifecycle.TaskContext{Goal: "login works"},
	}
	if project != "" {
		t.Context.Project = &project
	}
	return t
}

func submission(tk lifecycle.Task, id string) lifecycle.PullRequestRequest {
	return lifecycle.PullRequestRequest{
		Task:         tk,
		SubmissionID: id,
		Summary:      "Fixed the redirect (" + id + ").",
		Notes:        "The old code dropped the query string.",
		Checks:       []lifecycle.SubmittedCheck{{Name: "unit", Status: lifecycle.CheckPassed}, {Name: "lint", Status: lifecycle.CheckSkipped}},
	}
}

func ensure(t *testing.T, a *artifact.Adapter, req lifecycle.PullRequestRequest) lifecycle.PullRequest {
	t.Helper()
	pr, err := a.EnsurePullRequest(t.Context(), req)
	if err != nil {
		t.Fatalf("EnsurePullRequest(%s, %s): %v", req.Task.Identifier, req.SubmissionID, err)
	}
	return pr
}

func merge(t *testing.T, a *artifact.Adapter, pr lifecycle.PullRequest) lifecycle.MergeResult {
	t.Helper()
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatalf("Merge(%s at %s): %v", pr.PullRequestRef, pr.HeadSHA, err)
	}
	return res
}

// openRepo opens a repository with go-git, independently of the Adapter.
func openRepo(t *testing.T, a *artifact.Adapter, name string) *git.Repository {
	t.Helper()
	r, err := git.PlainOpen(a.RepositoryDir(name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// refs returns every ref of a repository and its target.
func refs(t *testing.T, r *git.Repository) map[string]string {
	t.Helper()
	iter, err := r.References()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		out[ref.Name().String()] = ref.Strings()[1]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fileAt returns the content of path in the tree of a commit.
func fileAt(t *testing.T, r *git.Repository, commit, path string) string {
	t.Helper()
	c, err := r.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File(path)
	if err != nil {
		t.Fatalf("%s in %s: %v", path, commit, err)
	}
	s, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  artifact.Config
		want string // in the error
	}{
		{"no directory", artifact.Config{}, "Config.Dir is empty"},
		{"bad default repository", artifact.Config{Dir: dir, DefaultRepo: "../up"}, "Config.DefaultRepo"},
		{"bad base branch", artifact.Config{Dir: dir, BaseBranch: "two words"}, "Config.BaseBranch"},
		{"bad branch prefix", artifact.Config{Dir: dir, BranchPrefix: "a..b/"}, "Config.BranchPrefix"},
		{"directory is a file", artifact.Config{Dir: filepath.Join(dir, "file", "sub")}, "Config.Dir"},
		{"NUL in the committer", artifact.Config{Dir: dir, CommitterName: "a\x00b"}, "Config.CommitterName"},
		{"bracket in the email", artifact.Config{Dir: dir, CommitterEmail: "a>b@example.com"}, "CommitterEmail"},
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := artifact.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%+v) error = %v, want one mentioning %q", tt.cfg, err, tt.want)
			}
		})
	}
}

func TestNamesAndLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		project   string
		ident     string
		wantRepo  string
		wantHead  string
		wantFile  string
		wantOwner string
	}{
		{"plain", "web", "ENG-1", "web", "lifecycle/eng-1", record("ENG-1", "submission.json"), "local"},
		{"spaces and case", "Web App", "Eng 42/b", "web-app", "lifecycle/eng-42-b", record("Eng-42-b", "submission.json"), "local"},
		{"no project", "", "OPS-7", "default", "lifecycle/ops-7", record("OPS-7", "submission.json"), "local"},
		{"dots cannot climb", "../../etc", "..", "etc", "lifecycle/tsk_xxxxxxxxxxxxxxxxxxxx", record("tsk_xxxxxxxxxxxxxxxxxxxx", "submission.json"), "local"},
	}
	a := newAdapter(t, t.TempDir())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := task(tt.project, tt.ident)
			if tt.ident == ".." {
				tk.ID = "tsk_xxxxxxxxxxxxxxxxxxxx"
			}
			pr := ensure(t, a, submission(tk, "sub_"+tt.name))
			if pr.Repo != tt.wantRepo || pr.Head != tt.wantHead || pr.Owner != tt.wantOwner || pr.Base != "main" {
				t.Errorf("pull request %s/%s head %q base %q; want %s/%s head %q base main", pr.Owner, pr.Repo, pr.Head, pr.Base, tt.wantOwner, tt.wantRepo, tt.wantHead)
			}
			wantURL := "file://" + filepath.ToSlash(a.RepositoryDir(tt.wantRepo)) + "#pull/1"
			if pr.URL != wantURL {
				t.Errorf("URL = %q, want %q", pr.URL, wantURL)
			}
			var rec struct {
				SubmissionID string `json:"submissionId"`
			}
			if err := json.Unmarshal([]byte(fileAt(t, openRepo(t, a, tt.wantRepo), pr.HeadSHA, tt.wantFile)), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.SubmissionID != "sub_"+tt.name {
				t.Errorf("record holds submission %q, want %q", rec.SubmissionID, "sub_"+tt.name)
			}
		})
	}
}

func TestSubmissionRecord(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	req := submission(tk, "sub_one")
	pr := ensure(t, a, req)
	r := openRepo(t, a, "web")

	var got map[string]any
	if err := json.Unmarshal([]byte(fileAt(t, r, pr.HeadSHA, record("ENG-1", "submission.json"))), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"submissionId":   "sub_one",
		"taskId":         tk.ID,
		"taskIdentifier": "ENG-1",
		"taskTitle":      "Fix the login redirect",
		"summary":        req.Summary,
		"notes":          req.Notes,
		"checks":         []any{map[string]any{"name": "unit", "status": "passed"}, map[string]any{"name": "lint", "status": "skipped"}},
		"submittedAt":    "2026-11-21T10:04:05.000Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("submission.json (-want +got):\n%s", diff)
	}
	md := fileAt(t, r, pr.HeadSHA, record("ENG-1", "submission.md"))
	for _, s := range []string{"# ENG-1: Fix the login redirect", req.Summary, req.Notes, "- unit: passed", "- lint: skipped", "sub_one"} {
		if !strings.Contains(md, s) {
			t.Errorf("submission.md lacks %q:\n%s", s, md)
		}
	}

	c, err := r.CommitObject(plumbing.NewHash(pr.HeadSHA))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Author.When.Equal(epoch) || !c.Committer.When.Equal(epoch) || c.Author.Name != "lifecycle" {
		t.Errorf("commit by %s at %v, committed at %v; want lifecycle at %v (the configured clock)", c.Author.Name, c.Author.When, c.Committer.When, epoch)
	}
	if !strings.Contains(c.Message, "Lifecycle-Submission: sub_one\n") || !strings.Contains(c.Message, req.Summary) {
		t.Errorf("commit message lacks the summary or the submission trailer:\n%s", c.Message)
	}

	// The same clock and the same requests make the same commits.
	b := newAdapter(t, t.TempDir())
	if again := ensure(t, b, req); again.HeadSHA != pr.HeadSHA {
		t.Errorf("same submission in another directory: HeadSHA %s, want %s (deterministic)", again.HeadSHA, pr.HeadSHA)
	}
}

func TestRetriedSubmissionCommitsOnce(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	first := ensure(t, a, submission(tk, "sub_a"))
	retry := ensure(t, a, submission(tk, "sub_a"))
	if retry.HeadSHA != first.HeadSHA || retry.Created || retry.Number != first.Number {
		t.Errorf("retried submission: #%d head %s created %v; want #%d head %s not created", retry.Number, retry.HeadSHA, retry.Created, first.Number, first.HeadSHA)
	}
	// A summary cannot pass itself off as another submission.
	req := submission(tk, "sub_b")
	req.Summary = "Done.\n\nLifecycle-Submission: sub_c"
	second := ensure(t, a, req)
	if second.HeadSHA == first.HeadSHA {
		t.Error("a new submission did not commit")
	}
	if third := ensure(t, a, submission(tk, "sub_c")); third.HeadSHA == second.HeadSHA {
		t.Error("a submission was taken for a retry because of another's summary")
	}
}

func TestPullRequestUpdates(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	req := submission(tk, "sub_a")
	req.Draft = true
	req.Reviewers = []string{"ann"}
	first := ensure(t, a, req)
	if !first.Draft || !slices.Equal(first.RequestedReviewers, []string{"ann"}) {
		t.Errorf("first: draft %v reviewers %v; want true [ann]", first.Draft, first.RequestedReviewers)
	}
	req = submission(tk, "sub_b")
	req.Reviewers = []string{"bob", "ann"}
	second := ensure(t, a, req)
	if second.Draft || !slices.Equal(second.RequestedReviewers, []string{"ann", "bob"}) {
		t.Errorf("second: draft %v reviewers %v; want false [ann bob]", second.Draft, second.RequestedReviewers)
	}
	got, err := newAdapter(t, filepath.Dir(a.RepositoryDir("web"))).PullRequest(t.Context(), second.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	second.Created = false
	if diff := cmp.Diff(second, got); diff != "" {
		t.Errorf("PullRequest from a new Adapter (-want +got):\n%s", diff)
	}
}

func TestHintsAreValidated(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tests := []struct {
		name       string
		head, base string
		wantField  string
	}{
		{"head not a ref", "two words", "", "pullRequest.head"},
		{"head ends in .lock", "x.lock", "", "pullRequest.head"},
		{"base not a ref", "", "a..b", "pullRequest.base"},
		{"base missing", "", "release", "pullRequest.base"},
		{"head is the base", "main", "", "pullRequest.head"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := submission(task("web", "ENG-1"), "sub_x")
			req.Head, req.Base = tt.head, tt.base
			_, err := a.EnsurePullRequest(t.Context(), req)
			var verr *lifecycle.ValidationError
			if !errors.As(err, &verr) || len(verr.Fields) != 1 || verr.Fields[0].Field != tt.wantField {
				t.Errorf("EnsurePullRequest(head %q, base %q) error = %v, want a ValidationError for %s", tt.head, tt.base, err, tt.wantField)
			}
		})
	}
}

func TestOtherBaseBranch(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	// A pull request from "release" creates the branch...
	rel := submission(task("web", "REL-1"), "sub_rel")
	rel.Head = "refs/heads/release"
	relPR := ensure(t, a, rel)
	if relPR.Head != "release" {
		t.Fatalf("Head = %q, want the prefix dropped", relPR.Head)
	}
	// ...which another can target.
	req := submission(task("web", "ENG-1"), "sub_a")
	req.Base = "release"
	pr := ensure(t, a, req)
	if pr.Base != "release" {
		t.Fatalf("Base = %q, want release", pr.Base)
	}
	res := merge(t, a, pr)
	r := openRepo(t, a, "web")
	got := refs(t, r)
	if got["refs/heads/release"] != res.MergeCommitSHA {
		t.Errorf("release at %s, want the merge commit %s", got["refs/heads/release"], res.MergeCommitSHA)
	}
	// The later submission without hints stays on the open pull request's base.
	again := ensure(t, a, submission(task("web", "ENG-2"), "sub_b"))
	if again.Base != "main" {
		t.Errorf("Base = %q, want main", again.Base)
	}
}

func TestUnknownPullRequests(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	tests := []struct {
		name string
		ref  lifecycle.PullRequestRef
	}{
		{"number", lifecycle.PullRequestRef{Owner: "local", Repo: "web", Number: 2}},
		{"zero", lifecycle.PullRequestRef{Owner: "local", Repo: "web", Number: 0}},
		{"repository", lifecycle.PullRequestRef{Owner: "local", Repo: "api", Number: 1}},
		{"owner", lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 1}},
		{"path", lifecycle.PullRequestRef{Owner: "local", Repo: "../web", Number: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := a.PullRequest(t.Context(), tt.ref); !errors.Is(err, lifecycle.ErrNotFound) {
				t.Errorf("PullRequest(%s) error = %v, want ErrNotFound", tt.ref, err)
			}
			_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: tt.ref, ExpectedHeadSHA: pr.HeadSHA})
			if !errors.Is(err, lifecycle.ErrNotFound) {
				t.Errorf("Merge(%s) error = %v, want ErrNotFound", tt.ref, err)
			}
		})
	}
	if _, err := os.Stat(a.RepositoryDir("api")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading an unknown repository created it (stat: %v)", err)
	}
}

func TestMergeAtAnotherHeadChangesNothing(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	old := ensure(t, a, submission(tk, "sub_a"))
	pr := ensure(t, a, submission(tk, "sub_b"))
	r := openRepo(t, a, "web")
	before := refs(t, r)
	for _, sha := range []string{old.HeadSHA, "0000000000000000000000000000000000000001", "not a sha"} {
		_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: sha})
		if !errors.Is(err, lifecycle.ErrHeadMismatch) {
			t.Errorf("Merge at %s: error = %v, want ErrHeadMismatch", sha, err)
		}
	}
	if diff := cmp.Diff(before, refs(t, r)); diff != "" {
		t.Errorf("refs changed by refused merges (-before +after):\n%s", diff)
	}
	got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.PullRequestOpen || got.HeadSHA != pr.HeadSHA {
		t.Errorf("after refused merges: %s at %s, want open at %s", got.State, got.HeadSHA, pr.HeadSHA)
	}
	// After the merge, another expected head is refused too.
	merge(t, a, pr)
	_, err = a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: old.HeadSHA})
	if !errors.Is(err, lifecycle.ErrHeadMismatch) {
		t.Errorf("Merge of a merged pull request at another head: error = %v, want ErrHeadMismatch", err)
	}
}

func TestMergeCommit(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	one := ensure(t, a, submission(task("web", "ENG-1"), "sub_one"))
	two := ensure(t, a, submission(task("web", "ENG-2"), "sub_two"))
	r := openRepo(t, a, "web")
	base0 := refs(t, r)["refs/heads/main"]

	m1 := merge(t, a, one)
	m2 := merge(t, a, two)
	for i, tc := range []struct {
		res      lifecycle.MergeResult
		parents  []string
		wantFile string
	}{
		{m1, []string{base0, one.HeadSHA}, record("ENG-1", "submission.json")},
		{m2, []string{m1.MergeCommitSHA, two.HeadSHA}, record("ENG-2", "submission.json")},
	} {
		c, err := r.CommitObject(plumbing.NewHash(tc.res.MergeCommitSHA))
		if err != nil {
			t.Fatal(err)
		}
		var parents []string
		for _, p := range c.ParentHashes {
			parents = append(parents, p.String())
		}
		if !slices.Equal(parents, tc.parents) {
			t.Errorf("merge %d: parents %v, want %v (base tip, head)", i+1, parents, tc.parents)
		}
		fileAt(t, r, tc.res.MergeCommitSHA, tc.wantFile)
	}
	// The last merge holds both tasks' records and the initial README.
	for _, f := range []string{"README.md", record("ENG-1", "submission.md"), record("ENG-2", "submission.md")} {
		fileAt(t, r, m2.MergeCommitSHA, f)
	}
	if got := refs(t, r)["refs/heads/main"]; got != m2.MergeCommitSHA {
		t.Errorf("main at %s, want %s", got, m2.MergeCommitSHA)
	}
	got, err := a.PullRequest(t.Context(), two.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != m2.MergeCommitSHA || got.HeadSHA != two.HeadSHA {
		t.Errorf("PullRequest = %s merge %s head %s; want merged %s head %s", got.State, got.MergeCommitSHA, got.HeadSHA, m2.MergeCommitSHA, two.HeadSHA)
	}
}

func TestMergeConflictChangesNothing(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	// Two branches of one task both write the directory of ENG-1.
	reqA, reqB := submission(tk, "sub_a"), submission(tk, "sub_b")
	reqA.Head, reqB.Head = "agent/a", "agent/b"
	prA, prB := ensure(t, a, reqA), ensure(t, a, reqB)
	merge(t, a, prA)
	r := openRepo(t, a, "web")
	before := refs(t, r)
	_, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: prB.PullRequestRef, ExpectedHeadSHA: prB.HeadSHA})
	if err == nil || !strings.Contains(err.Error(), record("ENG-1", "submission.json")) {
		t.Fatalf("conflicting Merge error = %v, want one naming %s", err, record("ENG-1", "submission.json"))
	}
	if diff := cmp.Diff(before, refs(t, r)); diff != "" {
		t.Errorf("refs changed by a conflicting merge (-before +after):\n%s", diff)
	}
	if got, _ := a.PullRequest(t.Context(), prB.PullRequestRef); got.State != lifecycle.PullRequestOpen {
		t.Errorf("after a conflicting merge State = %q, want open", got.State)
	}
}

func TestSubmitAfterMergeOpensAnother(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	first := ensure(t, a, submission(tk, "sub_a"))
	m := merge(t, a, first)
	next := ensure(t, a, submission(tk, "sub_b"))
	if !next.Created || next.Number == first.Number || next.Head != first.Head {
		t.Fatalf("submission after the merge: #%d created %v on %s; want a new pull request on %s", next.Number, next.Created, next.Head, first.Head)
	}
	// The merged one keeps the head it was merged at.
	got, err := a.PullRequest(t.Context(), first.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	if got.HeadSHA != first.HeadSHA || got.MergeCommitSHA != m.MergeCommitSHA {
		t.Errorf("merged pull request: head %s merge %s, want head %s merge %s", got.HeadSHA, got.MergeCommitSHA, first.HeadSHA, m.MergeCommitSHA)
	}
	// The new one merges over the first merge (the branch's changes since).
	m2 := merge(t, a, next)
	var rec struct {
		SubmissionID string `json:"submissionId"`
	}
	if err := json.Unmarshal([]byte(fileAt(t, openRepo(t, a, "web"), m2.MergeCommitSHA, record("ENG-1", "submission.json"))), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.SubmissionID != "sub_b" {
		t.Errorf("main holds submission %q, want sub_b", rec.SubmissionID)
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAdapter(t, dir)
	tk := task("web", "ENG-1")
	req := submission(tk, "sub_a")
	req.Reviewers = []string{"ann"}
	req.Draft = true
	first := ensure(t, a, req)

	b := newAdapter(t, dir)
	got, err := b.PullRequest(t.Context(), first.PullRequestRef)
	if err != nil {
		t.Fatal(err)
	}
	want := first
	want.Created = false
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PullRequest after reopening (-want +got):\n%s", diff)
	}
	again := ensure(t, b, submission(tk, "sub_b"))
	if again.Created || again.Number != first.Number || again.URL != first.URL || !slices.Equal(again.RequestedReviewers, []string{"ann"}) {
		t.Errorf("submission after reopening: #%d %s created %v reviewers %v; want #%d %s, not created, [ann]", again.Number, again.URL, again.Created, again.RequestedReviewers, first.Number, first.URL)
	}
	other := ensure(t, b, submission(task("web", "ENG-2"), "sub_c"))
	if other.Number != 2 {
		t.Errorf("next pull request after reopening is #%d, want #2", other.Number)
	}

	res := merge(t, b, again)
	r := openRepo(t, b, "web")
	before := refs(t, r)
	c := newAdapter(t, dir)
	res2, err := c.Merge(t.Context(), lifecycle.MergeRequest{Ref: again.PullRequestRef, ExpectedHeadSHA: again.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	if !res2.AlreadyMerged || res2.MergeCommitSHA != res.MergeCommitSHA {
		t.Errorf("Merge after reopening = %+v, want AlreadyMerged with %s", res2, res.MergeCommitSHA)
	}
	if diff := cmp.Diff(before, refs(t, r)); diff != "" {
		t.Errorf("a repeated merge changed refs (-before +after):\n%s", diff)
	}
}

// TestMergeInterrupted stops a merge between moving the base branch and
// saving the record, by putting the record back as it was: the merge is
// recognised, by the same Adapter and by a new one, and not repeated.
func TestMergeInterrupted(t *testing.T) {
	t.Parallel()
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			a := newAdapter(t, dir)
			pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
			r := openRepo(t, a, "web")
			pullsBefore := refs(t, r)["refs/lifecycle/pulls"]
			res := merge(t, a, pr)
			// Undo the record of the merge: the state a crash right after the
			// base branch moved would leave.
			pullsFile := filepath.Join(a.RepositoryDir("web"), ".git", "refs", "lifecycle", "pulls")
			if err := os.WriteFile(pullsFile, []byte(pullsBefore+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if reopen {
				a = newAdapter(t, dir)
				got, err := a.PullRequest(t.Context(), pr.PullRequestRef)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != lifecycle.PullRequestMerged || got.MergeCommitSHA != res.MergeCommitSHA {
					t.Errorf("after reopening PullRequest = %s %s, want merged %s", got.State, got.MergeCommitSHA, res.MergeCommitSHA)
				}
			}
			again, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			if err != nil {
				t.Fatal(err)
			}
			if !again.AlreadyMerged || again.MergeCommitSHA != res.MergeCommitSHA {
				t.Errorf("Merge = %+v, want AlreadyMerged with %s", again, res.MergeCommitSHA)
			}
			if got := refs(t, r)["refs/heads/main"]; got != res.MergeCommitSHA {
				t.Errorf("main at %s, want %s (no second merge commit)", got, res.MergeCommitSHA)
			}
		})
	}
}

// TestMergeInterruptedThenBuriedByAnother stops a merge between moving the
// base branch and saving its record, then merges another pull request on
// top (as another process sharing the repository would): the first merge
// is still recognised, deep in the base branch, and not repeated.
func TestMergeInterruptedThenBuriedByAnother(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAdapter(t, dir)
	first := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	second := ensure(t, a, submission(task("web", "ENG-2"), "sub_b"))
	r := openRepo(t, a, "web")
	pullsBefore := refs(t, r)["refs/lifecycle/pulls"]
	res := merge(t, a, first)
	pullsFile := filepath.Join(a.RepositoryDir("web"), ".git", "refs", "lifecycle", "pulls")
	if err := os.WriteFile(pullsFile, []byte(pullsBefore+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another Adapter, which opened the repository before, merges on top.
	other := merge(t, a, second)
	if got := refs(t, r)["refs/heads/main"]; got != other.MergeCommitSHA {
		t.Fatalf("main at %s, want the second merge %s", got, other.MergeCommitSHA)
	}
	again, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: first.PullRequestRef, ExpectedHeadSHA: first.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	if !again.AlreadyMerged || again.MergeCommitSHA != res.MergeCommitSHA {
		t.Errorf("Merge = %+v, want AlreadyMerged with %s", again, res.MergeCommitSHA)
	}
	if got := refs(t, r)["refs/heads/main"]; got != other.MergeCommitSHA {
		t.Errorf("main at %s, want %s (no third merge commit)", got, other.MergeCommitSHA)
	}
}

// branchHistory returns the submission IDs of the commits on head since
// it left base, newest first, failing unless the history is linear.
func branchHistory(t *testing.T, r *git.Repository, head, base string) []string {
	t.Helper()
	hr, err := r.Reference(plumbing.NewBranchReferenceName(head), true)
	if err != nil {
		t.Fatal(err)
	}
	br, err := r.Reference(plumbing.NewBranchReferenceName(base), true)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	c, err := r.CommitObject(hr.Hash())
	for err == nil && c.Hash != br.Hash() {
		if len(c.ParentHashes) != 1 {
			t.Fatalf("commit %s on %s has %d parents, want 1 (linear history)", c.Hash, head, len(c.ParentHashes))
		}
		_, id, _ := strings.Cut(c.Message, "Lifecycle-Submission: ")
		id, _, _ = strings.Cut(id, "\n")
		ids = append(ids, id)
		c, err = c.Parent(0)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestConcurrentSubmissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		adapters int // on the same directory
	}{
		{"one adapter", 1},
		{"two adapters", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var adapters []*artifact.Adapter
			for range tt.adapters {
				adapters = append(adapters, newAdapter(t, dir))
			}
			const n = 24
			tk := task("web", "ENG-1")
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				numbers = map[int]int{}
				created int
				heads   = map[string]bool{}
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pr, err := adapters[i%len(adapters)].EnsurePullRequest(context.Background(), submission(tk, fmt.Sprintf("sub_%02d", i)))
					if err != nil {
						t.Errorf("EnsurePullRequest: %v", err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					numbers[pr.Number]++
					heads[pr.HeadSHA] = true
					if pr.Created {
						created++
					}
				}()
			}
			wg.Wait()
			if len(numbers) != 1 || created != 1 || len(heads) != n {
				t.Errorf("%d concurrent submissions: pull requests %v, %d created, %d distinct heads; want one, created once, %d heads", n, numbers, created, len(heads), n)
			}
			ids := branchHistory(t, openRepo(t, adapters[0], "web"), "lifecycle/eng-1", "main")
			slices.Sort(ids)
			var want []string
			for i := range n {
				want = append(want, fmt.Sprintf("sub_%02d", i))
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("submissions on the branch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConcurrentRepositories(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := task(fmt.Sprintf("p%d", i%4), fmt.Sprintf("ENG-%d", i))
			pr, err := a.EnsurePullRequest(context.Background(), submission(tk, "sub_x"))
			if err != nil {
				t.Errorf("EnsurePullRequest: %v", err)
				return
			}
			if _, err := a.Merge(context.Background(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err != nil {
				t.Errorf("Merge: %v", err)
			}
		}()
	}
	wg.Wait()
	for p := range 4 {
		name := fmt.Sprintf("p%d", p)
		c, err := openRepo(t, a, name).CommitObject(plumbing.NewHash(refs(t, openRepo(t, a, name))["refs/heads/main"]))
		if err != nil {
			t.Fatal(err)
		}
		files, err := c.Files()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		files.ForEach(func(f *object.File) error {
			if strings.HasSuffix(f.Name, "submission.json") {
				n++
			}
			return nil
		})
		if n != 2 {
			t.Errorf("repository %s: main holds %d submission records, want 2", name, n)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	pr := ensure(t, a, submission(task("web", "ENG-1"), "sub_a"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.PullRequest(ctx, pr.PullRequestRef); !errors.Is(err, context.Canceled) {
		t.Errorf("PullRequest error = %v, want context.Canceled", err)
	}
	if _, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); !errors.Is(err, context.Canceled) {
		t.Errorf("Merge error = %v, want context.Canceled", err)
	}
	if _, err := a.Checks(ctx, lifecycle.CIQuery{HeadSHA: pr.HeadSHA}); !errors.Is(err, context.Canceled) {
		t.Errorf("Checks error = %v, want context.Canceled", err)
	}
}

func TestCIProvider(t *testing.T) {
	t.Parallel()
	var ci lifecycle.CIProvider = newAdapter(t, t.TempDir())
	if ci.Name() != "artifact" || !ci.CountsSelfReported() {
		t.Errorf("Name %q, CountsSelfReported %v; want artifact, true", ci.Name(), ci.CountsSelfReported())
	}
	rep, err := ci.Checks(t.Context(), lifecycle.CIQuery{HeadSHA: strings.Repeat("a", 40)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 0 || rep.Pending {
		t.Errorf("Checks = %+v, want no checks, not pending", rep)
	}
}

// gitCLI runs the git command line in dir, or skips the test without it.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Require(t, testenv.Git, "this test checks that git reads the repositories")
	}
	cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestGitReadsRepositories(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, t.TempDir())
	tk := task("web", "ENG-1")
	var heads []string
	for _, id := range []string{"sub_a", "sub_b", "sub_c"} {
		heads = append(heads, ensure(t, a, submission(tk, id)).HeadSHA)
	}
	pr := ensure(t, a, submission(task("web", "ENG-2"), "sub_d"))
	m := merge(t, a, lifecycle.PullRequest{PullRequestRef: lifecycle.PullRequestRef{Owner: "local", Repo: "web", Number: 1}, HeadSHA: heads[2]})
	dir := a.RepositoryDir("web")

	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	log := gitCLI(t, dir, "log", "--all", "--format=%H %P")
	parents := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		sha, ps, _ := strings.Cut(line, " ")
		parents[sha] = ps
	}
	for _, h := range append(heads, pr.HeadSHA, m.MergeCommitSHA) {
		if _, ok := parents[h]; !ok {
			t.Errorf("git log --all lacks commit %s", h)
		}
	}
	if got := strings.Fields(parents[m.MergeCommitSHA]); len(got) != 2 || got[1] != heads[2] {
		t.Errorf("git log: merge commit parents %v, want two, the second %s", got, heads[2])
	}
	if got := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main")); got != m.MergeCommitSHA {
		t.Errorf("git rev-parse main = %s, want %s", got, m.MergeCommitSHA)
	}
	if got := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "lifecycle/eng-1")); got != heads[2] {
		t.Errorf("git rev-parse lifecycle/eng-1 = %s, want %s", got, heads[2])
	}
	cat := gitCLI(t, dir, "cat-file", "-p", m.MergeCommitSHA)
	if strings.Count(cat, "\nparent ") != 2 || !strings.Contains(cat, "parent "+heads[2]) {
		t.Errorf("git cat-file -p of the merge commit:\n%s\nwant two parents, one %s", cat, heads[2])
	}
	if got := gitCLI(t, dir, "rev-list", "--count", "main.."+heads[2]); strings.TrimSpace(got) != "0" {
		t.Errorf("git rev-list main..head = %s commits, want 0 (merged)", got)
	}
	show := gitCLI(t, dir, "show", "main:"+record("ENG-1", "submission.json"))
	if !strings.Contains(show, `"submissionId": "sub_c"`) {
		t.Errorf("git show main:%s:\n%s\nwant submission sub_c", record("ENG-1", "submission.json"), show)
	}
	record := gitCLI(t, dir, "show", "refs/lifecycle/pulls:0/1.json")
	if !strings.Contains(record, `"state": "merged"`) || !strings.Contains(record, m.MergeCommitSHA) {
		t.Errorf("git show refs/lifecycle/pulls:0/1.json:\n%s\nwant merged with %s", record, m.MergeCommitSHA)
	}
	if graph := gitCLI(t, dir, "log", "--all", "--graph", "--oneline"); !strings.Contains(graph, "Merge pull request #1 from lifecycle/eng-1") {
		t.Errorf("git log --all --graph lacks the merge:\n%s", graph)
	}
}

// TestAfterGitGC packs a repository's objects and refs with git while an
// Adapter has it open: the Adapter, and a new one, carry on.
func TestAfterGitGC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAdapter(t, dir)
	tk := task("web", "ENG-1")
	pr := ensure(t, a, submission(tk, "sub_a"))
	merge(t, a, ensure(t, a, submission(task("web", "ENG-2"), "sub_b")))
	repoDir := a.RepositoryDir("web")
	gitCLI(t, repoDir, "gc", "--prune=now", "--quiet")
	if loose := strings.TrimSpace(gitCLI(t, repoDir, "count-objects")); !strings.HasPrefix(loose, "0 objects") {
		t.Fatalf("git gc left loose objects: %s", loose)
	}

	for _, ad := range []*artifact.Adapter{a, newAdapter(t, dir)} {
		got, err := ad.PullRequest(t.Context(), pr.PullRequestRef)
		if err != nil || got.HeadSHA != pr.HeadSHA {
			t.Fatalf("PullRequest after git gc = %+v, %v; want head %s", got, err, pr.HeadSHA)
		}
	}
	next := ensure(t, a, submission(tk, "sub_c"))
	if next.Number != pr.Number {
		t.Errorf("submission after git gc opened #%d, want #%d", next.Number, pr.Number)
	}
	m := merge(t, a, next)
	b := newAdapter(t, dir)
	if res, err := b.Merge(t.Context(), lifecycle.MergeRequest{Ref: next.PullRequestRef, ExpectedHeadSHA: next.HeadSHA}); err != nil || !res.AlreadyMerged || res.MergeCommitSHA != m.MergeCommitSHA {
		t.Errorf("Merge by a new Adapter after git gc = %+v, %v; want AlreadyMerged %s", res, err, m.MergeCommitSHA)
	}
	gitCLI(t, repoDir, "fsck", "--strict", "--no-dangling")
	if got := strings.TrimSpace(gitCLI(t, repoDir, "rev-parse", "main")); got != m.MergeCommitSHA {
		t.Errorf("main = %s, want %s", got, m.MergeCommitSHA)
	}
}

// Records are kept in buckets of 100: more than one bucket reads back
// after a restart, and git finds each record where the docs say.
func TestPullRecordsAcrossBuckets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newAdapter(t, dir)
	const n = 105
	for i := 1; i <= n; i++ {
		ensure(t, a, submission(task("web", fmt.Sprintf("ENG-%d", i)), fmt.Sprintf("sub_%d", i)))
	}
	b := newAdapter(t, dir) // a restart reads every record back
	for _, num := range []int{1, 99, 100, n} {
		pr, err := b.PullRequest(t.Context(), lifecycle.PullRequestRef{Owner: "local", Repo: "web", Number: num})
		if err != nil || pr.Head != fmt.Sprintf("lifecycle/eng-%d", num) {
			t.Errorf("pull request #%d after reopening = %+v, %v", num, pr, err)
		}
	}
	again := ensure(t, b, submission(task("web", "ENG-100"), "sub_again"))
	if again.Created || again.Number != 100 {
		t.Errorf("resubmitting ENG-100 after reopening = #%d, created %v; want #100 reused", again.Number, again.Created)
	}
	if _, err := exec.LookPath("git"); err == nil {
		if rec := gitCLI(t, a.RepositoryDir("web"), "show", "refs/lifecycle/pulls:1/105.json"); !strings.Contains(rec, `"number": 105`) {
			t.Errorf("git show refs/lifecycle/pulls:1/105.json:\n%s", rec)
		}
	}
}

// TestMain prints, once, which tests skipped for want of a tool, and how
// to install it (see internal/testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
