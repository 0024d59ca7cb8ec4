package gitlabtest_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// gitCmd runs git in dir against the fake's remote, authenticated as
// oauth2 with token when it is not empty, and returns its output and
// error.
func gitCmd(t *testing.T, dir, token string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
	if token != "" {
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte("oauth2:"+token)))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGitModeRemote(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	remote := f.URL + "/" + gitlabtest.ProjectPath + ".git"
	dir := t.TempDir()
	// Git asks for a user name only when the remote answered 401.
	if out, err := gitCmd(t, dir, "", "ls-remote", remote); err == nil || !strings.Contains(out, "could not read Username") {
		t.Fatalf("ls-remote without a token: %v: %s; want git to be asked for credentials (a 401)", err, out)
	}
	main := branch(t, f, "main")
	out, err := gitCmd(t, dir, "glpat-x", "ls-remote", remote)
	if err != nil || !strings.Contains(out, main+"\trefs/heads/main") {
		t.Fatalf("ls-remote: %v: %s; want main at %s", err, out, main)
	}

	// A merge request's head follows its source branch, and its head ref
	// is served.
	one := f.Commit(main, map[string]string{"one.txt": "one\n"})
	iid := f.OpenMergeRequest("one", "main", "One", one)
	two := f.Commit(one, map[string]string{"one.txt": "two\n"})
	if _, err := gitCmd(t, dir, "", "init", "--bare", "-q", "."); err != nil {
		t.Fatal(err)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "fetch", "-q", remote, two); err != nil {
		t.Fatalf("fetch %s: %v: %s", two, err, out)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "push", "-q", remote, two+":refs/heads/one"); err != nil {
		t.Fatalf("push: %v: %s", err, out)
	}
	if mr := f.MergeRequest(iid); mr.SHA != two || mr.State != "opened" {
		t.Fatalf("after a push to its source branch: %+v, want opened at %s", mr, two)
	}
	out, _ = gitCmd(t, dir, "glpat-x", "ls-remote", remote, "refs/merge-requests/*")
	if !strings.Contains(out, two+"\trefs/merge-requests/1/head") {
		t.Errorf("refs/merge-requests: %s; want !1's head at %s", out, two)
	}

	// A push to main that brings the head in marks it merged.
	var pushed []string
	f.OnPush(func(branch, sha string) { pushed = append(pushed, branch+"@"+sha) })
	if out, err := gitCmd(t, dir, "glpat-x", "push", "-q", remote, two+":refs/heads/main"); err != nil {
		t.Fatalf("push to main: %v: %s", err, out)
	}
	mr := f.MergeRequest(iid)
	if mr.State != "merged" || mr.MergeCommitSHA != two {
		t.Errorf("after a fast-forward of main to its head: %s, merge commit %q; want merged with %s", mr.State, mr.MergeCommitSHA, two)
	}
	if len(pushed) != 1 || pushed[0] != "main@"+two {
		t.Errorf("OnPush saw %v, want main@%s", pushed, two)
	}

	// A protected branch refuses pushes with GitLab's words.
	f.ProtectBranch("main")
	three := f.Commit(two, map[string]string{"three.txt": "three\n"})
	if out, err := gitCmd(t, dir, "glpat-x", "fetch", "-q", remote, three); err != nil {
		t.Fatalf("fetch %s: %v: %s", three, err, out)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "push", remote, three+":refs/heads/main"); err == nil || !strings.Contains(out, "You are not allowed to push code to protected branches") {
		t.Errorf("push to a protected branch: %v: %s", err, out)
	}
	if got := branch(t, f, "main"); got != two {
		t.Errorf("main is at %s, want %s", got, two)
	}
}

func TestGitModeBranchesAndPipelines(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	c := client(t, f)
	main := branch(t, f, "main")
	f.SetBranch("lifecycle-queue/main/1", main)
	f.BranchPipeline("lifecycle-queue/main/1", main, "", &gl.CommitStatus{Name: "test", Status: "failed"})
	newer := f.BranchPipeline("lifecycle-queue/main/1", main, "", &gl.CommitStatus{Name: "test", Status: "success"})
	f.BranchPipeline("main", main, "success")
	// Another commit's pipeline on the same branch is not listed.
	f.BranchPipeline("lifecycle-queue/main/1", f.Commit(main, map[string]string{"other.txt": "other\n"}), "success")
	list, _, err := c.Pipelines.ListProjectPipelines(gitlabtest.ProjectID, &gl.ListProjectPipelinesOptions{SHA: gl.Ptr(main), Ref: gl.Ptr("lifecycle-queue/main/1")})
	if err != nil || len(list) != 2 || list[0].ID != newer || list[0].Status != "success" || list[1].Status != "failed" {
		t.Fatalf("pipelines of the queue branch: %+v, %v; want the newest (%d, success) first, then the failed one", list, err, newer)
	}
	resp, err := c.Branches.DeleteBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete branch: %v, %v", resp, err)
	}
	if _, resp, err := c.Branches.GetBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1"); err == nil || status(resp) != http.StatusNotFound {
		t.Errorf("a deleted branch reads %d, %v; want 404", status(resp), err)
	}
	if resp, err := c.Branches.DeleteBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1"); err == nil || status(resp) != http.StatusNotFound {
		t.Errorf("deleting it again: %d, %v; want 404", status(resp), err)
	}
	remote := f.URL + "/" + gitlabtest.ProjectPath + ".git"
	dir := t.TempDir()
	if out, err := gitCmd(t, dir, "", "init", "--bare", "-q", "."); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "ls-remote", remote, "refs/heads/*"); err != nil || strings.Contains(out, "lifecycle-queue") {
		t.Errorf("the repository after the deletion: %v: %s; want no queue branch", err, out)
	}
	// The default branch is not deleted, through the API or by a push.
	if resp, err := c.Branches.DeleteBranch(gitlabtest.ProjectID, "main"); status(resp) != http.StatusBadRequest || err == nil || !strings.Contains(err.Error(), "The default branch of a project cannot be deleted.") {
		t.Errorf("deleting main: %d, %v; want 400 with GitLab's words", status(resp), err)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "push", remote, ":refs/heads/main"); err == nil || !strings.Contains(out, "GitLab: The default branch of a project cannot be deleted.") {
		t.Errorf("a push deleting main: %v: %s", err, out)
	}
	if got := branch(t, f, "main"); got != main {
		t.Errorf("main is at %s, want %s", got, main)
	}
	// The accept-merge endpoint writes a real merge commit in git mode.
	one := f.Commit(main, map[string]string{"one.txt": "one\n"})
	iid := f.OpenMergeRequest("one", "main", "One", one)
	mr, _, err := c.MergeRequests.AcceptMergeRequest(gitlabtest.ProjectID, iid, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(one)})
	if err != nil || mr.State != "merged" || mr.MergeCommitSHA == "" {
		t.Fatalf("accept merge: %+v, %v", mr, err)
	}
	if out, err := gitCmd(t, dir, "glpat-x", "fetch", "-q", remote, "main"); err != nil {
		t.Fatalf("fetch main: %v: %s", err, out)
	}
	out, err := gitCmd(t, dir, "", "rev-list", "--parents", "-1", "FETCH_HEAD")
	if want := mr.MergeCommitSHA + " " + main + " " + one; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("main after the merge: %q, %v; want the merge commit of %s and %s (%s)", out, err, main, one, want)
	}
	p, _, err := c.Projects.GetProject(gitlabtest.ProjectID, nil)
	if err != nil || p.HTTPURLToRepo != f.URL+"/"+gitlabtest.ProjectPath+".git" {
		t.Errorf("http_url_to_repo = %q, %v", p.HTTPURLToRepo, err)
	}
}

// A push that merges a merge request's head into its target marks it
// merged with the commit GitLab's BranchPushMergeCommitAnalyzer names:
// the head when the push's first-parent chain holds it, else the merge on
// that chain that brought it in. Push and SetBranch call the OnPush
// functions as a push through the remote does.
func TestGitModeMergedByPush(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	var pushed []string
	f.OnPush(func(branch, sha string) { pushed = append(pushed, branch) })
	main := branch(t, f, "main")
	remote := f.URL + "/" + gitlabtest.ProjectPath + ".git"
	dir := t.TempDir()
	if out, err := gitCmd(t, dir, "", "init", "--bare", "-q", "."); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Main goes A (main) -> B (the head) -> C in one push: B merged it.
	b := f.Commit(main, map[string]string{"b.txt": "b\n"})
	iidB := f.OpenMergeRequest("b", "main", "B", b)
	c := f.Commit(b, map[string]string{"c.txt": "c\n"})
	// A head merged by a merge commit, on a side line: D, merged into E.
	d := f.Commit(main, map[string]string{"d.txt": "d\n"})
	iidD := f.OpenMergeRequest("d", "main", "D", d)
	if out, err := gitCmd(t, dir, "glpat-x", "fetch", "-q", remote, c, d); err != nil {
		t.Fatalf("fetch: %v: %s", err, out)
	}
	tree, err := gitCmd(t, dir, "", "merge-tree", "--write-tree", c, d)
	if err != nil {
		t.Fatalf("merge-tree: %v: %s", err, tree)
	}
	e, err := gitCmd(t, dir, "", "-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit-tree", "-m", "Merge d", "-p", c, "-p", d, strings.TrimSpace(tree))
	if err != nil {
		t.Fatalf("commit-tree: %v: %s", err, e)
	}
	e = strings.TrimSpace(e)
	pushed = nil
	if out, err := gitCmd(t, dir, "glpat-x", "push", "-q", remote, e+":refs/heads/main"); err != nil {
		t.Fatalf("push: %v: %s", err, out)
	}
	for _, tc := range []struct {
		iid  int64
		want string
	}{{iidB, b}, {iidD, e}} {
		if mr := f.MergeRequest(tc.iid); mr.State != "merged" || mr.MergeCommitSHA != tc.want {
			t.Errorf("!%d after the push: %s, merge commit %s; want merged with %s", tc.iid, mr.State, mr.MergeCommitSHA, tc.want)
		}
	}
	if len(pushed) != 1 || pushed[0] != "main" {
		t.Errorf("OnPush after a push to main saw %v", pushed)
	}
	pushed = nil
	f.Push("feature")
	f.SetBranch("other", main)
	if want := []string{"feature", "other"}; strings.Join(pushed, " ") != strings.Join(want, " ") {
		t.Errorf("OnPush after Push and SetBranch saw %v, want %v", pushed, want)
	}
}

// A merge request whose head conflicts with its target, in the
// repository, cannot be merged: 405, as GitLab answers once its
// mergeability check found the conflict.
func TestGitModeConflictIsFound(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	f.EnableGit(t)
	c := client(t, f)
	main := branch(t, f, "main")
	one := f.Commit(main, map[string]string{"same.txt": "one\n"})
	iid := f.OpenMergeRequest("one", "main", "One", one)
	f.SetBranch("main", f.Commit(main, map[string]string{"same.txt": "two\n"}))
	_, resp, err := c.MergeRequests.AcceptMergeRequest(gitlabtest.ProjectID, iid, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(one)})
	if err == nil || status(resp) != http.StatusMethodNotAllowed {
		t.Errorf("merging a conflicting merge request: %d, %v; want 405", status(resp), err)
	}
	if mr := f.MergeRequest(iid); mr.State != "opened" {
		t.Errorf("the merge request is %s, want opened", mr.State)
	}
}

// status returns a response's status code, or 0 without one.
func status(resp *gl.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

// branch reads where a branch is through the API.
func branch(t *testing.T, f *gitlabtest.Server, name string) string {
	t.Helper()
	b, _, err := client(t, f).Branches.GetBranch(gitlabtest.ProjectID, name)
	if err != nil {
		t.Fatalf("branch %s: %v", name, err)
	}
	return b.Commit.ID
}

// client returns a client-go client of the fake.
func client(t *testing.T, f *gitlabtest.Server) *gl.Client {
	t.Helper()
	c, err := gl.NewClient("glpat-test", gl.WithBaseURL(f.URL+"/api/v4/"), gl.WithoutRetries())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
