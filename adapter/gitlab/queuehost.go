package gitlab

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/gittext"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/adapter/internal/logtail"
)

// The lifecycle's own merge queue on a GitLab project without merge
// trains. GitLab's REST API cannot merge two commits onto a branch
// without a merge request, so candidates are built with the git program
// in a bare mirror of the project (Config.MirrorDir) and pushed over
// HTTPS to the project's http_url_to_repo, authenticated as the user
// "oauth2" with Config.Token as password (GitLab's documented way to use
// an access token over HTTPS). Branches are read and deleted with the
// branches API.

var _ lifecycle.QueueHost = (*Adapter)(nil)

// minGitMajor and minGitMinor are the oldest git the queue runs: git
// merge-tree --write-tree came with git 2.38.
const minGitMajor, minGitMinor = 2, 38

// maxGitStderr bounds the stderr of a git command kept for its error.
const maxGitStderr = 4 << 10

// gitStopDelay is how long a cancelled git has to stop before it is
// killed.
const gitStopDelay = 5 * time.Second

// mirrorLockFile is the file, in the mirror, whose file lock each git
// operation holds, so that Adapters of several processes may share a
// mirror.
const mirrorLockFile = "lifecycle-mirror.lock"

// gitMirror is the adapter's bare mirror of the project.
type gitMirror struct {
	// sem, a semaphore of one, serialises the git operations of the
	// Adapter, and guards the fields below: unlike a mutex, waiting for
	// it ends with the caller's context.
	sem chan struct{}
	// dir is the mirror's directory: Config.MirrorDir, or a temporary
	// one made on first use.
	dir string
	// temp says dir is a temporary directory the Adapter made, which
	// Close removes.
	temp bool
	// closed says Close was called: no git operation starts.
	closed bool
	// usable says dir holds a bare repository and git is new enough; it
	// is set with sem held, and read without.
	usable atomic.Bool
}

// Close ends the lifecycle's own merge queue at this Adapter: it waits
// for the git operation under way, if any, and removes the mirror's
// directory when the Adapter made it (Config.MirrorDir empty); a
// Config.MirrorDir is kept, for the next process. The Adapter keeps
// working otherwise, but building and landing candidates then fail with
// an error matching [lifecycle.ErrClosed]. Close is safe to call more
// than once.
func (a *Adapter) Close() error {
	m := &a.git
	m.sem <- struct{}{}
	defer func() { <-m.sem }()
	m.closed = true
	m.usable.Store(false)
	if !m.temp {
		return nil
	}
	m.temp = false
	if err := os.RemoveAll(m.dir); err != nil {
		return fmt.Errorf("gitlab: remove the mirror %s: %w", m.dir, err)
	}
	return nil
}

// shaRE matches a full commit SHA (SHA-1 or SHA-256), lower case.
var shaRE = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// checkSHA returns sha in lower case, or an error naming field when it is
// not a full commit SHA.
func checkSHA(field, sha string) (string, error) {
	s := strings.ToLower(sha)
	if !shaRE.MatchString(s) {
		return "", fmt.Errorf("gitlab: %s %q is not a full commit SHA", field, sha)
	}
	return s, nil
}

// checkBranch refuses a branch name git would not take as
// refs/heads/<name>, or one that could pass for an option.
func checkBranch(field, b string) error {
	if name, ok := gittext.Branch(b); !ok || name != b {
		return fmt.Errorf("gitlab: %s %q is not a valid branch name", field, b)
	}
	return nil
}

// checkRepo refuses a repository other than the project.
func (a *Adapter) checkRepo(s *settings, repo lifecycle.RepoRef) error {
	if repo.Owner != s.owner || repo.Repo != s.repo {
		return fmt.Errorf("gitlab: repository %s is not project %s/%s: %w", repo, s.owner, s.repo, lifecycle.ErrNotFound)
	}
	return nil
}

// queueProject returns the project's settings once repo is checked to be
// the project.
func (a *Adapter) queueProject(ctx context.Context, repo lifecycle.RepoRef) (*settings, error) {
	s, err := a.project(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.checkRepo(s, repo); err != nil {
		return nil, err
	}
	return s, nil
}

// urgent returns ctx for a queue's request: first in line for the rate
// limit, as merges are.
func urgent(ctx context.Context) context.Context {
	return hostbudget.WithPriority(ctx, hostbudget.Urgent)
}

// NativeQueue implements [lifecycle.QueueHost]: true when the project
// uses merge trains (merged results pipelines and merge trains enabled),
// whose ship goes through [Adapter.Merge] and the train; false
// otherwise, so that the lifecycle's own queue takes the project's merges
// when Config.MergeQueue enables it. Then the queue's git must do: until
// it has once, a git that is missing or older than 2.38 is a
// *lifecycle.RefusedError saying so, which fails the ship at once with
// that message rather than leaving its change in a queue that cannot
// build.
func (a *Adapter) NativeQueue(ctx context.Context, repo lifecycle.RepoRef, base string) (bool, error) {
	s, err := a.queueProject(ctx, repo)
	if err != nil {
		return false, err
	}
	if !s.mergeTrains && !a.git.usable.Load() {
		_, unlock, err := a.mirror(ctx, s)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, lifecycle.ErrClosed) {
				return false, err
			}
			return false, &lifecycle.RefusedError{Message: err.Error(), Err: err}
		}
		unlock()
	}
	return s.mergeTrains, nil
}

// BranchHead implements [lifecycle.QueueHost] with GET
// /projects/:id/repository/branches/:branch; a branch that does not
// exist is an error matching lifecycle.ErrNotFound.
func (a *Adapter) BranchHead(ctx context.Context, repo lifecycle.RepoRef, branch string) (string, error) {
	s, err := a.queueProject(ctx, repo)
	if err != nil {
		return "", err
	}
	return a.branchHead(urgent(ctx), s, branch)
}

func (a *Adapter) branchHead(ctx context.Context, s *settings, branch string) (string, error) {
	b, resp, err := a.client.Branches.GetBranch(s.id, branch, gl.WithContext(ctx))
	if err != nil {
		return "", a.fail(ctx, "read branch "+branch, resp, err)
	}
	if b.Commit == nil || b.Commit.ID == "" {
		return "", fmt.Errorf("gitlab: branch %s: GitLab answered no commit", branch)
	}
	return strings.ToLower(b.Commit.ID), nil
}

// DeleteBranch implements [lifecycle.QueueHost] with DELETE
// /projects/:id/repository/branches/:branch; a branch that does not
// exist (GitLab's 404) is not an error.
func (a *Adapter) DeleteBranch(ctx context.Context, repo lifecycle.RepoRef, branch string) error {
	s, err := a.queueProject(ctx, repo)
	if err != nil {
		return err
	}
	ctx = urgent(ctx)
	resp, err := a.client.Branches.DeleteBranch(s.id, branch, gl.WithContext(ctx))
	if err == nil {
		return nil
	}
	err = a.fail(ctx, "delete branch "+branch, resp, err)
	if errors.Is(err, lifecycle.ErrNotFound) {
		return nil
	}
	return err
}

// Tree implements [lifecycle.QueueHost]: the tree of commit sha, read in
// the mirror, the commit fetched first when the mirror does not have it.
// A commit the project does not have is an error matching
// lifecycle.ErrNotFound.
func (a *Adapter) Tree(ctx context.Context, repo lifecycle.RepoRef, sha string) (string, error) {
	s, err := a.queueProject(ctx, repo)
	if err != nil {
		return "", err
	}
	c, err := checkSHA("commit", sha)
	if err != nil {
		return "", err
	}
	g, unlock, err := a.mirror(ctx, s)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := g.ensure(ctx, []string{c}, []string{"+refs/heads/*:refs/lifecycle/heads/*"}); err != nil {
		return "", err
	}
	out, err := g.run(ctx, nil, "rev-parse", "--verify", "--end-of-options", c+"^{tree}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// BuildCandidate implements [lifecycle.QueueHost] in the mirror. It makes
// sure req.Parent and each head are there, fetching what is missing: by
// SHA first, and where GitLab does not serve a commit by SHA, the refs
// refs/heads/<base>, the queue branches beside req.Branch, and each head's
// refs/merge-requests/<iid>/head (GitLab keeps that ref on every merge
// request). Then, from req.Parent, each head in turn: one the commit so
// far contains adds nothing (git merge-base --is-ancestor); otherwise the
// trees are merged (git merge-tree --write-tree), a conflict being a
// *lifecycle.CandidateConflictError naming the head and the conflicting
// paths, and a merge commit is written (git commit-tree) whose parents
// are the commit so far and the head, whose message is "Title (!iid)" (or
// "Merge merge request !iid into the queue" without a title), by
// Config.CommitterName and CommitterEmail, dated as the later of its
// parents' committer dates, so that the same request makes the same
// commit. The result is pushed by force to refs/heads/<req.Branch>, which
// may not be req.Base; a push GitLab refuses (a protected branch) is a
// *lifecycle.RefusedError with its words. Calls are serialised in this process, and hold the
// mirror's file lock.
func (a *Adapter) BuildCandidate(ctx context.Context, req lifecycle.CandidateRequest) (string, error) {
	s, err := a.queueProject(ctx, req.Repo)
	if err != nil {
		return "", err
	}
	if err := checkBranch("queue branch", req.Branch); err != nil {
		return "", err
	}
	if err := checkBranch("base branch", req.Base); err != nil {
		return "", err
	}
	if req.Branch == req.Base {
		return "", fmt.Errorf("gitlab: the queue branch is the base branch %q", req.Base)
	}
	parent, err := checkSHA("parent", req.Parent)
	if err != nil {
		return "", err
	}
	heads := make([]string, len(req.Heads))
	need := []string{parent}
	refs := []string{"+refs/heads/" + req.Base + ":refs/lifecycle/heads/" + req.Base}
	if i := strings.LastIndex(req.Branch, "/"); i > 0 {
		dir := req.Branch[:i]
		refs = append(refs, "+refs/heads/"+dir+"/*:refs/lifecycle/heads/"+dir+"/*")
	}
	for i, h := range req.Heads {
		if heads[i], err = checkSHA(fmt.Sprintf("head of %s", h.PullRequest), h.SHA); err != nil {
			return "", err
		}
		need = append(need, heads[i])
		refs = append(refs, fmt.Sprintf("+refs/merge-requests/%d/head:refs/lifecycle/merge-requests/%d", h.PullRequest.Number, h.PullRequest.Number))
	}
	g, unlock, err := a.mirror(ctx, s)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := g.ensure(ctx, need, refs); err != nil {
		return "", err
	}
	subject := gittext.OneLine(req.Title)
	cur := parent
	for i, head := range heads {
		contained, err := g.isAncestor(ctx, head, cur)
		if err != nil {
			return "", err
		}
		if contained {
			continue
		}
		tree, conflicts, err := g.mergeTree(ctx, cur, head)
		if err != nil {
			return "", fmt.Errorf("gitlab: merge %s at %s: %w", req.Heads[i].PullRequest, head, err)
		}
		if conflicts != nil {
			msg := "conflicting changes"
			if len(conflicts) > 0 {
				msg = "conflicts in " + strings.Join(conflicts, ", ")
			}
			return "", &lifecycle.CandidateConflictError{Head: req.Heads[i], Message: msg}
		}
		title := fmt.Sprintf("%s (!%d)", subject, req.Heads[i].PullRequest.Number)
		if subject == "" {
			title = fmt.Sprintf("Merge merge request !%d into the queue", req.Heads[i].PullRequest.Number)
		}
		if cur, err = g.commit(ctx, a.cfg.CommitterName, a.cfg.CommitterEmail, tree, title, cur, head); err != nil {
			return "", err
		}
	}
	if rejected, err := g.push(ctx, "+"+cur+":refs/heads/"+req.Branch); rejected {
		msg := fmt.Sprintf("GitLab refused the push of candidate %s to branch %s: %v", cur, req.Branch, err)
		if strings.Contains(err.Error(), "protected branch") {
			msg += " (the token's user must be allowed to push to the queue's branches)"
		}
		return "", &lifecycle.RefusedError{Message: msg, Err: err}
	} else if err != nil {
		return "", fmt.Errorf("gitlab: push candidate %s to %s: %w", cur, req.Branch, err)
	}
	return cur, nil
}

// AdvanceBranch implements [lifecycle.QueueHost]. It reads the branch
// first (GET .../repository/branches/:branch), and again should GitLab
// refuse the push: at req.To, it was moved already (an answer lost, a
// call repeated) and that is a success; not at req.From, it is an error
// matching lifecycle.ErrBranchMoved naming where it is, told without
// the mirror, which may lack req.From. At req.From, it checks in the
// mirror that req.To descends from req.From, then pushes req.To to
// refs/heads/<req.Branch> with --force-with-lease naming req.From, a
// compare-and-swap that GitLab's receive-pack does: the branch moves only
// if it is at req.From. A push GitLab refuses while the branch is still
// at req.From is a *lifecycle.RefusedError with its words: on a
// protected branch, the token's user must be allowed to push to it.
func (a *Adapter) AdvanceBranch(ctx context.Context, req lifecycle.AdvanceRequest) error {
	s, err := a.queueProject(ctx, req.Repo)
	if err != nil {
		return err
	}
	if err := checkBranch("branch", req.Branch); err != nil {
		return err
	}
	from, err := checkSHA("from", req.From)
	if err != nil {
		return err
	}
	to, err := checkSHA("to", req.To)
	if err != nil {
		return err
	}
	ctx = urgent(ctx)
	what := fmt.Sprintf("move branch %s from %s to %s", req.Branch, from, to)
	// Where the branch is comes first: a branch moved elsewhere, or to
	// To already, is told without the mirror, which may lack From.
	if done, err := a.advanced(ctx, s, req.Branch, what, from, to); done || err != nil {
		return err
	}
	g, unlock, err := a.mirror(ctx, s)
	if err != nil {
		return err
	}
	defer unlock()
	// The candidate was built here, or by another replica and pushed to a
	// queue branch: every branch is fetched when GitLab does not serve
	// the commits by SHA.
	if err := g.ensure(ctx, []string{from, to}, []string{"+refs/heads/*:refs/lifecycle/heads/*"}); err != nil {
		return fmt.Errorf("gitlab: %s: %w", what, err)
	}
	if ff, err := g.isAncestor(ctx, from, to); err != nil {
		return err
	} else if !ff {
		return fmt.Errorf("gitlab: %s: %s does not descend from %s: only a fast-forward advances a branch", what, to, from)
	}
	rejected, perr := g.push(ctx, to+":refs/heads/"+req.Branch, "--force-with-lease=refs/heads/"+req.Branch+":"+from)
	if perr == nil {
		return nil
	}
	if !rejected {
		return fmt.Errorf("gitlab: %s: %w", what, perr)
	}
	if done, herr := a.advanced(ctx, s, req.Branch, what, from, to); done || herr != nil {
		if herr != nil && !errors.Is(herr, lifecycle.ErrBranchMoved) {
			return fmt.Errorf("gitlab: %s: GitLab refused the push (%v), and reading where the branch is failed: %w", what, perr, herr)
		}
		return herr
	}
	msg := fmt.Sprintf("GitLab refused to %s: %v", what, perr)
	if strings.Contains(perr.Error(), "protected branch") {
		msg += " (the token's user must be allowed to push to the branch: \"Allowed to push and merge\" in its protected branch settings)"
	}
	return &lifecycle.RefusedError{Message: msg, Err: perr}
}

// advanced reads where branch is for a move from from to to: done, with
// no error, when it is at to already; an error matching
// lifecycle.ErrBranchMoved when it is neither there nor at from (or is
// gone); not done when it is at from.
func (a *Adapter) advanced(ctx context.Context, s *settings, branch, what, from, to string) (done bool, err error) {
	at, err := a.branchHead(ctx, s, branch)
	switch {
	case errors.Is(err, lifecycle.ErrNotFound):
		return true, fmt.Errorf("gitlab: %s: it does not exist: %w", what, lifecycle.ErrBranchMoved)
	case err != nil:
		return true, err
	case at == to:
		return true, nil
	case at != from:
		return true, fmt.Errorf("gitlab: %s: it is at %s: %w", what, at, lifecycle.ErrBranchMoved)
	}
	return false, nil
}

// mirror returns the mirror, made ready, with its lock held; unlock
// releases it. Waiting for the lock ends with ctx.
func (a *Adapter) mirror(ctx context.Context, s *settings) (g *gitRun, unlock func(), err error) {
	if s.httpURL == "" {
		return nil, nil, errors.New("gitlab: GitLab gave no http_url_to_repo for the project: the merge queue cannot reach its repository")
	}
	if err := checkRemote(s.httpURL); err != nil {
		return nil, nil, err
	}
	m := &a.git
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("gitlab: wait for the mirror: %w", ctx.Err())
	}
	release := func() { <-m.sem }
	if m.closed {
		release()
		return nil, nil, fmt.Errorf("gitlab: the merge queue's mirror: the adapter is closed: %w", lifecycle.ErrClosed)
	}
	g = &gitRun{path: a.cfg.GitPath, remote: s.httpURL, token: a.cfg.Token}
	if !m.usable.Load() {
		if err := a.prepareMirror(ctx, g); err != nil {
			release()
			return nil, nil, err
		}
		m.usable.Store(true)
	}
	g.dir = m.dir
	f, err := osfs.New(m.dir).OpenFile(mirrorLockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("gitlab: open the mirror's lock: %w", err)
	}
	// Another process may hold the file lock for a while (a long
	// fetch): the wait ends with ctx, and a lock taken after that is let
	// go at once.
	locked := make(chan error, 1)
	go func() { locked <- f.Lock() }()
	select {
	case err := <-locked:
		if err != nil {
			f.Close()
			release()
			return nil, nil, fmt.Errorf("gitlab: lock the mirror: %w", err)
		}
	case <-ctx.Done():
		go func() { <-locked; f.Close() }()
		release()
		return nil, nil, fmt.Errorf("gitlab: wait for the mirror's lock: %w", ctx.Err())
	}
	return g, func() { f.Close(); release() }, nil
}

// prepareMirror checks git's version and makes the bare mirror. The
// caller holds a.git.sem.
func (a *Adapter) prepareMirror(ctx context.Context, g *gitRun) error {
	out, err := g.exec(ctx, "", nil, nil, "version")
	if err != nil {
		return fmt.Errorf("gitlab: the merge queue needs git %d.%d or later (Config.GitPath %q): %w", minGitMajor, minGitMinor, a.cfg.GitPath, err)
	}
	if !gitNewEnough(out) {
		return fmt.Errorf("gitlab: the merge queue needs git %d.%d or later, for git merge-tree --write-tree; Config.GitPath %q is %s", minGitMajor, minGitMinor, a.cfg.GitPath, strings.TrimSpace(out))
	}
	m := &a.git
	if m.dir == "" {
		d, err := os.MkdirTemp("", "lifecycle-gitlab-mirror-")
		if err != nil {
			return fmt.Errorf("gitlab: make the mirror's directory: %w", err)
		}
		m.dir, m.temp = d, true
	}
	if _, err := os.Stat(filepath.Join(m.dir, "HEAD")); err == nil {
		return nil
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("gitlab: make the mirror's directory: %w", err)
	}
	if _, err := g.exec(ctx, "", nil, nil, "init", "--bare", "--quiet", "--", m.dir); err != nil {
		return fmt.Errorf("gitlab: make the mirror in %s: %w", m.dir, err)
	}
	return nil
}

// gitVersionRE reads the version git version prints.
var gitVersionRE = regexp.MustCompile(`git version (\d+)\.(\d+)`)

// gitNewEnough reports whether git version's output names git 2.38 or
// later.
func gitNewEnough(out string) bool {
	m := gitVersionRE.FindStringSubmatch(out)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major > minGitMajor || major == minGitMajor && minor >= minGitMinor
}

// checkRemote refuses a remote the token must not be sent to: one not on
// https, but for loopback hosts, or one carrying credentials.
func checkRemote(remote string) error {
	u, err := url.Parse(remote)
	if err != nil || u.Host == "" {
		return fmt.Errorf("gitlab: the project's http_url_to_repo %q is not a URL", remote)
	}
	if u.User != nil {
		return errors.New("gitlab: the project's http_url_to_repo carries credentials: refused")
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname())) {
		return fmt.Errorf("gitlab: the project's http_url_to_repo %q is not https: the token is not sent there", remote)
	}
	return nil
}

// gitRun runs git in the mirror.
type gitRun struct {
	path, dir, remote, token string
}

// env is the environment of git: no system or global configuration (HOME
// is the mirror), no prompt, no credential helper, no redirect followed,
// the C locale, and the token in an http.extraHeader given through
// GIT_CONFIG_COUNT, never on the command line. Proxy and certificate settings of the process pass through.
func (g *gitRun) env(extra []string) []string {
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=",
		"LC_ALL=C", "LANG=C", "GIT_OPTIONAL_LOCKS=0",
		"GIT_CONFIG_COUNT=7",
		// The header goes with the requests of the remote's URL only.
		"GIT_CONFIG_KEY_0=http." + g.remote + ".extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("oauth2:"+g.token)),
		"GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=",
		// A redirect elsewhere is not followed.
		"GIT_CONFIG_KEY_2=http.followRedirects", "GIT_CONFIG_VALUE_2=false",
		// Only git's HTTP transports (checkRemote allows plain http on
		// loopback alone).
		"GIT_CONFIG_KEY_3=protocol.allow", "GIT_CONFIG_VALUE_3=never",
		"GIT_CONFIG_KEY_4=protocol.https.allow", "GIT_CONFIG_VALUE_4=always",
		"GIT_CONFIG_KEY_5=protocol.http.allow", "GIT_CONFIG_VALUE_5=always",
		// An automatic gc runs within the operation, under the mirror's
		// lock, not after it in the background.
		"GIT_CONFIG_KEY_6=gc.autoDetach", "GIT_CONFIG_VALUE_6=false",
	}
	home := g.dir
	if home == "" {
		home = os.TempDir()
	}
	env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+home)
	for _, k := range []string{"PATH", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// run runs git in the mirror with args; see exec.
func (g *gitRun) run(ctx context.Context, env []string, args ...string) (string, error) {
	return g.exec(ctx, g.dir, env, nil, args...)
}

// exec runs git with args (in git directory dir unless it is empty),
// stdin its standard input (nil: none), and returns its stdout. A failure
// is a *gitError with its exit code and its stderr, bounded and with the
// token scrubbed.
func (g *gitRun) exec(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	full := args
	if dir != "" {
		full = append([]string{"--git-dir=" + dir}, args...)
	}
	cmd := exec.CommandContext(ctx, g.path, full...)
	// A cancelled git is asked to stop, so that it removes its lock
	// files and temporary packs, and killed if it has not within
	// gitStopDelay.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = gitStopDelay
	cmd.Env = g.env(env)
	var stdout bytes.Buffer
	// The end of stderr says why git failed. The token is scrubbed
	// before the text is cut to maxGitStderr, so that no part of it
	// survives a cut: the writer keeps a margin.
	stderr := &tailWriter{max: maxGitStderr + 1<<10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("gitlab: git %s: %w", args[0], ctx.Err())
	}
	msg, _ := logtail.Cut(g.scrub(string(stderr.bytes())), maxGitStderr)
	ge := &gitError{cmd: args[0], code: -1, stderr: msg}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ge.code = ee.ExitCode()
	} else {
		ge.stderr = g.scrub(err.Error())
	}
	return stdout.String(), ge
}

// scrub removes the token, as given and as sent, from a text of git.
func (g *gitRun) scrub(s string) string {
	if g.token == "" {
		return s
	}
	for _, secret := range []string{base64.StdEncoding.EncodeToString([]byte("oauth2:" + g.token)), url.QueryEscape(g.token), g.token} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[token]")
		}
	}
	return s
}

// gitError is a git command that failed.
type gitError struct {
	cmd    string
	code   int
	stderr string // its end, scrubbed of the token
}

// Error implements error: the command, its exit code and its stderr.
func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("git %s exited %d: %s", e.cmd, e.code, msg)
}

// exitCode returns the exit code of a *gitError, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// missing returns the commits of shas the mirror does not have, read
// in one git cat-file --batch-check.
func (g *gitRun) missing(ctx context.Context, shas []string) ([]string, error) {
	var in strings.Builder
	for _, sha := range shas {
		in.WriteString(sha + "^{commit}\n")
	}
	out, err := g.exec(ctx, g.dir, nil, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, fmt.Errorf("gitlab: %w", err)
	}
	var miss []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutSuffix(line, " missing"); ok {
			if sha := strings.TrimSuffix(name, "^{commit}"); !slices.Contains(miss, sha) {
				miss = append(miss, sha)
			}
		}
	}
	return miss, nil
}

// ensure fetches the commits of shas the mirror does not have: by SHA,
// then, for those GitLab did not serve so, with refspecs. A commit
// still missing is an error matching lifecycle.ErrNotFound.
func (g *gitRun) ensure(ctx context.Context, shas, refspecs []string) error {
	miss, err := g.missing(ctx, shas)
	if err != nil || len(miss) == 0 {
		return err
	}
	_, byID := g.fetch(ctx, miss...)
	if byID == nil {
		if miss, err = g.missing(ctx, miss); err != nil || len(miss) == 0 {
			return err
		}
	}
	_, byRef := g.fetch(ctx, refspecs...)
	if miss, err = g.missing(ctx, miss); err != nil {
		return err
	}
	if len(miss) == 0 {
		return nil
	}
	// Fetched its refs, or told they are not there, the project does not
	// have the commit; a fetch that failed otherwise (the connection,
	// authentication) says nothing of it.
	if byRef != nil && !notFoundFetch(byRef) {
		return fmt.Errorf("gitlab: fetch %s: %w", strings.Join(miss, ", "), byRef)
	}
	return fmt.Errorf("gitlab: the project has no commit %s: %w", strings.Join(miss, ", "), lifecycle.ErrNotFound)
}

// notFoundFetch reports whether a fetch failed for want of what it asked,
// not for the connection or authentication.
func notFoundFetch(err error) bool {
	s := err.Error()
	return strings.Contains(s, "not our ref") || strings.Contains(s, "couldn't find remote ref") ||
		strings.Contains(s, "unadvertised object") || strings.Contains(s, "no such remote ref")
}

// fetch fetches what specs name from the remote.
func (g *gitRun) fetch(ctx context.Context, specs ...string) (string, error) {
	if len(specs) == 0 {
		return "", nil
	}
	args := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head"}
	if strings.Contains(specs[0], ":") {
		// Refspecs: refs the remote no longer has go, so that an old
		// branch does not stand in the way of a new one named under it.
		args = append(args, "--prune")
	}
	args = append(append(args, "--", g.remote), specs...)
	return g.run(ctx, nil, args...)
}

// push pushes refspec to the remote, with git push's options opts.
// rejected says the remote refused the ref (git's porcelain "!" status),
// rather than the push failing to reach it.
func (g *gitRun) push(ctx context.Context, refspec string, opts ...string) (rejected bool, err error) {
	args := append(append([]string{"push", "--porcelain", "--quiet"}, opts...), "--", g.remote, refspec)
	out, err := g.run(ctx, nil, args...)
	if err == nil {
		return false, nil
	}
	var ge *gitError
	if !errors.As(err, &ge) {
		return false, err
	}
	var reasons []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.SplitN(line, "\t", 3); len(f) == 3 && f[0] == "!" {
			reasons = append(reasons, g.scrub(f[2]))
		}
	}
	if len(reasons) == 0 {
		return false, err
	}
	remote := remoteLines(ge.stderr)
	msg := strings.Join(reasons, "; ")
	if remote != "" {
		msg += ": " + remote
	}
	return true, errors.New(msg)
}

// remoteLines returns the lines the remote sent ("remote: ..."), joined.
func remoteLines(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "remote:"); ok {
			if rest = strings.TrimSpace(rest); rest != "" {
				lines = append(lines, rest)
			}
		}
	}
	return strings.Join(lines, " ")
}

// isAncestor reports whether commit a is an ancestor of commit b (or b).
func (g *gitRun) isAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := g.run(ctx, nil, "merge-base", "--is-ancestor", "--end-of-options", a, b)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	}
	return false, fmt.Errorf("gitlab: %w", err)
}

// mergeTree merges commits ours and theirs (git merge-tree --write-tree):
// the merged tree, or, when they conflict, the conflicting paths (not
// nil, perhaps empty). Commits with no history in common merge as if
// from an empty tree, as the artifact adapter's do.
func (g *gitRun) mergeTree(ctx context.Context, ours, theirs string) (tree string, conflicts []string, err error) {
	out, err := g.run(ctx, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", "--allow-unrelated-histories", "--end-of-options", ours, theirs)
	switch code := exitCode(err); {
	case err == nil:
		return firstLine(out), nil, nil
	case code == 1:
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		conflicts = []string{}
		for _, l := range lines[1:] {
			if l == "" {
				break
			}
			if !slices.Contains(conflicts, l) {
				conflicts = append(conflicts, l)
			}
		}
		return "", conflicts, nil
	}
	return "", nil, err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// commit writes a merge commit of tree with parents, dated as the later
// of its parents' committer dates.
func (g *gitRun) commit(ctx context.Context, name, email, tree, message string, parents ...string) (string, error) {
	out, err := g.run(ctx, nil, append([]string{"show", "--no-patch", "--format=%ct", "--end-of-options"}, parents...)...)
	if err != nil {
		return "", fmt.Errorf("gitlab: read the dates of %s: %w", strings.Join(parents, ", "), err)
	}
	var when int64
	for _, f := range strings.Fields(out) {
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", fmt.Errorf("gitlab: read the dates of %s: %q", strings.Join(parents, ", "), out)
		}
		when = max(when, t)
	}
	date := fmt.Sprintf("@%d +0000", when)
	env := []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email, "GIT_COMMITTER_DATE=" + date,
	}
	args := []string{"commit-tree", "-m", message}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err = g.run(ctx, env, append(args, tree)...)
	if err != nil {
		return "", fmt.Errorf("gitlab: write a merge commit: %w", err)
	}
	return strings.ToLower(firstLine(out)), nil
}
