package gitlabtest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Git mode (see [Server.EnableGit]): the project has a real repository,
// served over git's smart HTTP protocol at its http_url_to_repo, so that
// code that pushes and fetches (the merge queue's candidates) meets a
// real git remote. Branches are the repository's refs/heads; every merge
// request has its refs/merge-requests/<iid>/head, as at GitLab ("Merge
// requests" > "Check out merge requests locally through the head ref"). A
// push through the remote has GitLab's effects on merge requests (see
// afterPushLocked), and [Server.OnPush] lets a test play CI on it.

// RouteGitHTTP is the route of the project's repository over git's smart
// HTTP protocol in git mode, as given to [Server.Calls].
const RouteGitHTTP = "/" + ProjectPath + ".git/"

// protectedMessage is what GitLab's pre-receive check answers a push to a
// protected branch by a user not allowed to push to it.
const protectedMessage = "GitLab: You are not allowed to push code to protected branches on this project."

// defaultBranchMessage is what GitLab's pre-receive check answers a
// deletion of the default branch, by push or through the API (whose
// answer is 400 with the message without its "GitLab: " prefix).
const defaultBranchMessage = "GitLab: The default branch of a project cannot be deleted."

// gitRepo is the fake's repository in git mode.
type gitRepo struct {
	path   string // the git program
	dir    string // the bare repository
	commit int    // commits made by Commit and Push, for their dates
	onPush []func(branch, sha string)
	// v0 makes the remote speak git's protocol version 0 only (see
	// RefuseFetchBySHA).
	v0 bool
}

// EnableGit gives the project a real bare repository (in t.TempDir),
// served at its http_url_to_repo (URL + "/acme/web.git") through git
// http-backend, with receive-pack on. Like GitLab, the remote wants HTTP
// basic authentication: any user with a non-empty password (the
// oauth2 user and an access token) is let in, anyone else answered 401.
// Branch main becomes the repository's first commit, holding README.md.
// It must be called before any merge request is opened or branch pushed.
// The test is skipped when git or git http-backend is not installed.
func (s *Server) EnableGit(t testing.TB) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("gitlabtest: git mode needs the git program on PATH")
	}
	execPath, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		t.Skipf("gitlabtest: git --exec-path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")); err != nil {
		t.Skip("gitlabtest: git mode needs git http-backend, which this git lacks")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.git != nil {
		return
	}
	if len(s.mrs) > 0 || len(s.branches) > 1 {
		t.Fatal("gitlabtest: EnableGit must come before any merge request or branch")
	}
	root := t.TempDir()
	dir := filepath.Join(root, ProjectPath+".git")
	g := &gitRepo{path: git, dir: dir}
	g.run(t, nil, "", "init", "--bare", "--quiet", dir)
	g.run(t, nil, "", "--git-dir="+dir, "config", "http.receivepack", "true")
	hook := filepath.Join(dir, "hooks", "pre-receive")
	script := "#!/bin/sh\n# Refuse, as GitLab's pre-receive checks do, the deletion of the default\n# branch and pushes to the branches listed in lifecycle-protected.\nwhile read old new ref; do\n  if [ \"$ref\" = refs/heads/main ] && [ -z \"$(echo \"$new\" | tr -d 0)\" ]; then\n    echo '" + defaultBranchMessage + "' >&2\n    exit 1\n  fi\n  if grep -qxF \"$ref\" \"$GIT_DIR/lifecycle-protected\" 2>/dev/null; then\n    echo '" + protectedMessage + "' >&2\n    exit 1\n  fi\ndone\nexit 0\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s.git = g
	first := s.commitLocked("", map[string]string{"README.md": "# web\n"})
	s.git.updateRef(s.t, "refs/heads/main", first)
	s.branches["main"] = first
	s.mux.Handle(RouteGitHTTP, http.HandlerFunc(s.serveGit))
}

// env is the environment of the fake's git commands.
func (g *gitRepo) env(extra []string) []string {
	env := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + g.dir, "LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	return append(env, extra...)
}

// run runs git (in the repository unless args name a --git-dir or dir is
// given) and returns its stdout, failing the test on error.
func (g *gitRepo) run(t testing.TB, env []string, stdin string, args ...string) string {
	t.Helper()
	out, err := g.try(env, stdin, args...)
	if err != nil {
		t.Fatalf("gitlabtest: %v", err)
	}
	return out
}

// try runs git as run does, returning its error.
func (g *gitRepo) try(env []string, stdin string, args ...string) (string, error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "--git-dir=") && args[0] != "init" {
		args = append([]string{"--git-dir=" + g.dir}, args...)
	}
	cmd := exec.Command(g.path, args...)
	cmd.Env = g.env(env)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (g *gitRepo) updateRef(t testing.TB, ref, sha string) {
	t.Helper()
	g.run(t, nil, "", "update-ref", ref, sha)
}

// Commit makes a commit in the repository (git mode), as a person pushing
// one does: its parent is parent ("" for none) and its tree is parent's
// with files written (path, '/' between directories, to content). It
// moves no branch; see [Server.SetBranch], [Server.OpenMergeRequest]. It
// returns its SHA.
func (s *Server) Commit(parent string, files map[string]string) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needGit()
	return s.commitLocked(parent, files)
}

func (s *Server) needGit() {
	s.t.Helper()
	if s.git == nil {
		s.t.Fatal("gitlabtest: this needs git mode (Server.EnableGit)")
	}
}

// commitLocked writes a commit: parent's tree with files, dated a second
// after the last commit it wrote.
func (s *Server) commitLocked(parent string, files map[string]string) string {
	s.t.Helper()
	g := s.git
	index := filepath.Join(s.t.TempDir(), "index")
	env := []string{"GIT_INDEX_FILE=" + index}
	if parent == "" {
		g.run(s.t, env, "", "read-tree", "--empty")
	} else {
		g.run(s.t, env, "", "read-tree", parent)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		blob := strings.TrimSpace(g.run(s.t, nil, files[p], "hash-object", "-w", "--stdin"))
		g.run(s.t, env, "", "update-index", "--add", "--cacheinfo", "100644,"+blob+","+p)
	}
	tree := strings.TrimSpace(g.run(s.t, env, "", "write-tree"))
	who := g.nextAuthor()
	args := []string{"commit-tree", "-m", fmt.Sprintf("Change %d", g.commit)}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	return strings.TrimSpace(g.run(s.t, who, "", append(args, tree)...))
}

// nextAuthor returns the environment of the next commit the fake writes:
// Alice's, dated a second after the last one, so that the same test
// makes the same commits.
func (g *gitRepo) nextAuthor() []string {
	g.commit++
	date := fmt.Sprintf("@%d +0000", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()+int64(g.commit))
	return []string{"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.com", "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.com", "GIT_COMMITTER_DATE=" + date}
}

// conflictsLocked reports, in git mode, whether merge request mr's head
// does not merge onto its target branch (git merge-tree exits 1).
func (s *Server) conflictsLocked(mr *mergeRequest) bool {
	if s.git == nil {
		return false
	}
	_, err := s.git.try(nil, "", "merge-tree", "--write-tree", "--no-messages", s.branches[mr.target], mr.sha)
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// mergeCommitLocked returns the commit a merge of head into target makes:
// without git, a made-up SHA; in git mode, a merge commit of the
// target's head and head (with squash, a commit of the merged tree on the
// target's head alone), written in the repository. A merge request whose
// head conflicts is not merged: its mergeability check finds the conflict
// first (see conflictsLocked).
func (s *Server) mergeCommitLocked(target, head string, squash bool) string {
	if s.git == nil {
		return NewSHA()
	}
	g := s.git
	base := s.branches[target]
	out, err := g.try(nil, "", "merge-tree", "--write-tree", "--no-messages", base, head)
	if err != nil {
		s.t.Fatalf("gitlabtest: merge %s into %s: %v", head, target, err)
	}
	tree, _, _ := strings.Cut(out, "\n")
	who := g.nextAuthor()
	args := []string{"commit-tree", "-m", "Merge branch into " + target, "-p", base}
	if !squash {
		args = append(args, "-p", head)
	}
	return strings.TrimSpace(g.run(s.t, who, "", append(args, strings.TrimSpace(tree))...))
}

// setBranchLocked points a branch at sha: in git mode its ref too.
func (s *Server) setBranchLocked(branch, sha string) {
	if s.git != nil {
		s.git.updateRef(s.t, "refs/heads/"+branch, sha)
	}
	s.branches[branch] = sha
}

// SetBranch points branch at commit sha of the repository (git mode), as
// a person's push does, creating it if needed, with a push's effects on
// merge requests (see [Server.OnPush]), whose functions it calls.
func (s *Server) SetBranch(branch, sha string) {
	s.t.Helper()
	s.mu.Lock()
	s.needGit()
	s.branchPushedLocked(branch, sha)
	s.unlockAfterPush(branch, sha)
}

// branchPushedLocked moves branch to sha (its ref too, in git mode) as a
// push does, with a push's effects on merge requests.
func (s *Server) branchPushedLocked(branch, sha string) {
	old := s.branches[branch]
	s.setBranchLocked(branch, sha)
	s.afterPushLocked(branch, old, sha)
}

// pushHooksLocked returns the OnPush functions, to call once s.mu is
// let go.
func (s *Server) pushHooksLocked() []func(branch, sha string) {
	if s.git == nil {
		return nil
	}
	return slices.Clone(s.git.onPush)
}

// unlockAfterPush lets s.mu go, after a push moved branch to sha, and
// calls the OnPush functions; it returns sha.
func (s *Server) unlockAfterPush(branch, sha string) string {
	hooks := s.pushHooksLocked()
	s.mu.Unlock()
	for _, f := range hooks {
		f(branch, sha)
	}
	return sha
}

// OpenMergeRequest opens a merge request (git mode) from source branch,
// pointed at commit sha first, into target, and returns its IID, as a
// person pushing a branch and opening a merge request does.
func (s *Server) OpenMergeRequest(source, target, title, sha string) int64 {
	s.t.Helper()
	s.SetBranch(source, sha)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.branches[target]; !ok {
		s.t.Fatalf("gitlabtest: no target branch %q", target)
	}
	mr := s.newMRLocked(ProjectID, source, target, title, "", sha, false)
	s.mrRefLocked(mr)
	s.check(mr)
	return mr.iid
}

// mrRefLocked points refs/merge-requests/<iid>/head at mr's head, in git
// mode.
func (s *Server) mrRefLocked(mr *mergeRequest) {
	if s.git != nil {
		s.git.updateRef(s.t, fmt.Sprintf("refs/merge-requests/%d/head", mr.iid), mr.sha)
	}
}

// OnPush calls f, in git mode, after each push that moves or makes a
// branch (through the remote, [Server.SetBranch], [Server.Push] or
// [Server.PushConflicting]), with
// the branch and its new commit, once GitLab's effects on merge requests
// are done: a test plays CI there, with [Server.BranchPipeline], as
// GitLab runs a branch pipeline on a push.
func (s *Server) OnPush(f func(branch, sha string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needGit()
	s.git.onPush = append(s.git.onPush, f)
}

// ProtectBranch makes the remote refuse pushes to branch (git mode), as
// GitLab refuses a push to a protected branch by a user who is not
// allowed to push to it: the pre-receive check answers "GitLab: You are
// not allowed to push code to protected branches on this project.".
func (s *Server) ProtectBranch(branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needGit()
	f, err := os.OpenFile(filepath.Join(s.git.dir, "lifecycle-protected"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, "refs/heads/"+branch); err != nil {
		s.t.Fatal(err)
	}
}

// UnprotectBranch lets pushes to branch through again (git mode), as
// unprotecting it, or allowing the user to push to it, does at GitLab.
func (s *Server) UnprotectBranch(branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needGit()
	path := filepath.Join(s.git.dir, "lifecycle-protected")
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" && l != "refs/heads/"+branch {
			keep = append(keep, l+"\n")
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(keep, "")), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// RefuseFetchBySHA makes the remote (git mode) speak only git's protocol
// version 0, whose upload-pack, with uploadpack.allowReachableSHA1InWant
// and allowAnySHA1InWant off (git's defaults), serves only the commits
// its refs advertise: a fetch of a commit by SHA that no ref points at is
// refused ("Server does not allow request for unadvertised object"), as
// at a server that keeps clients to its refs. Fetches of refs still work.
func (s *Server) RefuseFetchBySHA() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needGit()
	s.git.v0 = true
}

// BranchPipeline runs a branch pipeline (source push) for commit sha on
// branch, as GitLab does for a push, records its jobs (Name, Status and
// optionally AllowFailure and TargetURL set) as its commit statuses, and
// returns its ID. Its status is status, or with "" follows its jobs (see
// [Server.AddStatus] to change them).
func (s *Server) BranchPipeline(branch, sha, status string, jobs ...*gl.CommitStatus) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.newPipelineLocked(nil, sha, branch, "push", status)
	s.addJobsLocked(p, jobs)
	if status == "" {
		s.settleLocked(p)
	}
	return p.id
}

// serveGit serves the repository over git's smart HTTP protocol through
// git http-backend, after checking the request's basic authentication as
// GitLab does; after a push, GitLab's effects follow (afterPushLocked),
// then the OnPush functions.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[RouteGitHTTP]++
	g := s.git
	v0 := g.v0
	s.mu.Unlock()
	if v0 {
		r.Header.Del("Git-Protocol")
	}
	if _, pass, ok := r.BasicAuth(); !ok || pass == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitLab"`)
		http.Error(w, "HTTP Basic: Access denied", http.StatusUnauthorized)
		return
	}
	push := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack")
	h := &cgi.Handler{
		Path: g.path,
		Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(filepath.Dir(g.dir)), "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + g.dir, "REMOTE_USER=oauth2"},
		InheritEnv: []string{"PATH"},
	}
	if !push {
		h.ServeHTTP(w, r)
		return
	}
	// Pushes one at a time, so that the refs before and after are this
	// push's.
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	before, err := s.refs()
	if err != nil {
		s.t.Errorf("gitlabtest: before a push: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h.ServeHTTP(w, r)
	changes, hooks, err := s.pushedThroughGit(before)
	if err != nil {
		s.t.Errorf("gitlabtest: after a push: %v", err)
		return
	}
	for _, c := range changes {
		for _, f := range hooks {
			f(c.branch, c.sha)
		}
	}
}

// moved is a branch a push moved from old ("" when new) to sha.
type moved struct{ branch, old, sha string }

// pushedThroughGit records what a push through the remote did to the
// branches, before being the refs before it, with a push's effects on
// merge requests, and returns the branches it moved, in order, and the
// OnPush functions to call.
func (s *Server) pushedThroughGit(before map[string]string) ([]moved, []func(branch, sha string), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	after, err := s.refsLocked()
	if err != nil {
		return nil, nil, err
	}
	var changes []moved
	for b, sha := range after {
		if before[b] != sha {
			changes = append(changes, moved{b, before[b], sha})
		}
	}
	for b := range before {
		if _, ok := after[b]; !ok {
			delete(s.branches, b)
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].branch < changes[j].branch })
	for _, c := range changes {
		s.branches[c.branch] = c.sha
		s.afterPushLocked(c.branch, c.old, c.sha)
	}
	return changes, s.pushHooksLocked(), nil
}

// refs reads the repository's branches.
func (s *Server) refs() (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refsLocked()
}

// refsLocked reads the repository's branches.
func (s *Server) refsLocked() (map[string]string, error) {
	out, err := s.git.try(nil, "", "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sha, ref, ok := strings.Cut(line, " ")
		if ok {
			refs[strings.TrimPrefix(ref, "refs/heads/")] = sha
		}
	}
	return refs, nil
}

// afterPushLocked does what GitLab does after a push moved branch from
// old ("" when new) to sha, as its MergeRequests::RefreshService does:
//
//   - open merge requests from the branch get sha as their head, and
//     their refs/merge-requests/<iid>/head follows (see pushedLocked);
//   - open merge requests into the branch whose head the push brought in
//     (reachable from sha, not from old) are marked merged
//     (post_merge_manually_merged): state merged, merged_at now, and
//     merge_commit_sha the pushed commit that merged the head (the one
//     having it as a parent; the head itself when fast-forwarded); the
//     other merge requests into the branch are behind it and checked
//     again.
func (s *Server) afterPushLocked(branch, old, sha string) {
	s.pushedLocked(branch, sha)
	merged := false
	for _, mr := range s.mrs {
		if mr.target != branch || mr.state != "opened" || !s.broughtInLocked(mr.sha, old, sha) {
			continue
		}
		mr.state, mr.mergedAt = "merged", s.now()
		mr.mergeCommit = s.mergingCommitLocked(mr.sha, old, sha)
		s.save(mr)
		merged = true
	}
	if merged || old != "" {
		s.movedLocked(branch)
	}
}

// broughtInLocked reports whether commit head is reachable from sha and
// not from old.
func (s *Server) broughtInLocked(head, old, sha string) bool {
	if _, err := s.git.try(nil, "", "merge-base", "--is-ancestor", head, sha); err != nil {
		return false
	}
	if old == "" {
		return true
	}
	_, err := s.git.try(nil, "", "merge-base", "--is-ancestor", head, old)
	return err != nil
}

// mergingCommitLocked returns the commit that merged head into the
// branch a push moved from old to sha, as GitLab's
// BranchPushMergeCommitAnalyzer finds it: head itself when it is on the
// first-parent chain the push brought in (a fast-forward, or a push of
// the change's own commits); else the oldest commit of that chain that
// holds head, the merge that brought it in. Should git fail, it is head.
func (s *Server) mergingCommitLocked(head, old, sha string) string {
	args := []string{"rev-list", "--first-parent", "--reverse", sha}
	if old != "" {
		args = append(args, "^"+old)
	}
	out, err := s.git.try(nil, "", args...)
	if err != nil {
		s.t.Errorf("gitlabtest: the commits of a push: %v", err)
		return head
	}
	chain := strings.Fields(out)
	if slices.Contains(chain, head) {
		return head
	}
	for _, c := range chain {
		if _, err := s.git.try(nil, "", "merge-base", "--is-ancestor", head, c); err == nil {
			return c
		}
	}
	return head
}
