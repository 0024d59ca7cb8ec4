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
	if out, err := gitCmd(t, dir, "", "ls-remote", remote); err == nil {
		t.Fatalf("ls-remote without a token succeeded: %s", out)
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
	list, _, err := c.Pipelines.ListProjectPipelines(gitlabtest.ProjectID, &gl.ListProjectPipelinesOptions{SHA: gl.Ptr(main), Ref: gl.Ptr("lifecycle-queue/main/1")})
	if err != nil || len(list) != 2 || list[0].ID != newer || list[0].Status != "success" || list[1].Status != "failed" {
		t.Fatalf("pipelines of the queue branch: %+v, %v; want the newest (%d, success) first, then the failed one", list, err, newer)
	}
	resp, err := c.Branches.DeleteBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete branch: %v, %v", resp, err)
	}
	if _, resp, err := c.Branches.GetBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted branch reads %v, %v; want 404", resp, err)
	}
	if resp, err := c.Branches.DeleteBranch(gitlabtest.ProjectID, "lifecycle-queue/main/1"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleting it again: %v, %v; want 404", resp, err)
	}
	// The accept-merge endpoint writes a real merge commit in git mode.
	one := f.Commit(main, map[string]string{"one.txt": "one\n"})
	iid := f.OpenMergeRequest("one", "main", "One", one)
	mr, _, err := c.MergeRequests.AcceptMergeRequest(gitlabtest.ProjectID, iid, &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(one)})
	if err != nil || mr.State != "merged" || mr.MergeCommitSHA == "" {
		t.Fatalf("accept merge: %+v, %v", mr, err)
	}
	dir := t.TempDir()
	remote := f.URL + "/" + gitlabtest.ProjectPath + ".git"
	if out, err := gitCmd(t, dir, "", "init", "--bare", "-q", "."); err != nil {
		t.Fatalf("%v: %s", err, out)
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
