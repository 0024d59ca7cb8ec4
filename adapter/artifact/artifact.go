package artifact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/gittext"
)

// recordDir is the directory, at the root of every repository, that holds
// one directory of submission records per task.
const recordDir = ".lifecycle"

// Config configures an Adapter. Only Dir is required.
type Config struct {
	// Dir is the directory that holds the repositories, one per project,
	// each in the subdirectory named after it (see the package
	// documentation). It is created if missing. Required.
	Dir string
	// Owner is the Owner of every pull request. Defaults to "local".
	Owner string
	// DefaultRepo is the repository of tasks that have no project. It must
	// be a repository name: lower-case letters, digits, '.', '_' and '-',
	// beginning and ending with a letter or digit. Defaults to "default".
	DefaultRepo string
	// BaseBranch is the branch pull requests merge into when a request
	// names no other; every repository is created with it. Defaults to
	// "main".
	BaseBranch string
	// BranchPrefix starts the branch of a task, followed by its identifier
	// in lower case ("lifecycle/eng-42"). Defaults to "lifecycle/".
	BranchPrefix string
	// CommitterName and CommitterEmail are the author and committer of
	// every commit. Default to "lifecycle" and "lifecycle@localhost".
	CommitterName  string
	CommitterEmail string
	// Now tells the time recorded in commits and records. Defaults to
	// time.Now.
	Now func() time.Time
	// PackAfter is how many objects the Adapter writes to a repository
	// (each write's objects as a small pack) before it merges the
	// repository's small packs, and packs any loose objects, in the
	// background (see the package documentation). Defaults to 256;
	// negative: never (`git gc` can still pack them).
	PackAfter int
	// Logger receives the errors that no operation reports: those of
	// background packing, and those of writing the objects of an
	// operation that changed no ref (they are written with the next), and
	// the output of failed candidate checks. Defaults to discarding them.
	Logger *slog.Logger

	// QueueCheck, when set, tests the candidates of the lifecycle's merge
	// queue (see [Adapter.BuildCandidate]) in process: [Adapter.Checks]
	// of a candidate (CIQuery.Candidate set) calls it once per candidate
	// commit, in a goroutine, and reports one check named "queue-check",
	// running (and the report Pending) until it returns: nil passes the
	// candidate; an error fails it, and its text is the check's output
	// (see [Adapter.QueueCheckOutput]). Its context ends when
	// [Adapter.Close] is called. At most two candidate checks run at
	// once; the others are Pending, with no check, until they start.
	// Results are kept for the last 256 candidates, so a commit is not
	// tested twice while its result is kept. Set QueueCheck or
	// QueueCommand, not both; with neither, candidates have no checks and
	// nothing pending, so they pass at once.
	QueueCheck func(ctx context.Context, c QueueCandidate) error
	// QueueCommand, when set, tests the candidates of the lifecycle's
	// merge queue with a local command, as QueueCheck does in process:
	// QueueCommand[0] is the program (looked up in PATH when it has no
	// slash; a relative path with a slash, such as "./ci.sh", is taken in
	// the candidate's files), the rest its arguments. It runs in a
	// temporary directory holding the files of the candidate's tree
	// (written out from the repository; removed afterwards), with the
	// environment of the process and LIFECYCLE_CANDIDATE_SHA,
	// LIFECYCLE_CANDIDATE_REPO, LIFECYCLE_CANDIDATE_BASE and
	// LIFECYCLE_CANDIDATE_BRANCH. The check is named "queue-command";
	// exit status 0 passes the candidate, anything else fails it. The
	// last 8 KiB of its standard output and error, together, are kept as
	// the check's output. [Adapter.Close] kills it.
	QueueCommand []string
}

// withDefaults returns cfg with the documented defaults filled in.
func (cfg Config) withDefaults() Config {
	if cfg.Owner == "" {
		cfg.Owner = "local"
	}
	if cfg.DefaultRepo == "" {
		cfg.DefaultRepo = "default"
	}
	if cfg.BaseBranch == "" {
		cfg.BaseBranch = "main"
	}
	if cfg.BranchPrefix == "" {
		cfg.BranchPrefix = "lifecycle/"
	}
	if cfg.CommitterName == "" {
		cfg.CommitterName = "lifecycle"
	}
	if cfg.CommitterEmail == "" {
		cfg.CommitterEmail = "lifecycle@localhost"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PackAfter == 0 {
		cfg.PackAfter = defaultPackAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.QueueCommand) == 0 {
		cfg.QueueCommand = nil
	}
	return cfg
}

// Adapter keeps pull requests in local git repositories. It implements
// [lifecycle.ProviderAdapter], [lifecycle.QueueHost] for the lifecycle's
// merge queue, and, for artifact mode, [lifecycle.CIProvider].
// It is safe for concurrent use. It packs its repositories' objects in the
// background: call [Adapter.Close] before removing its directory, or to let
// a packer finish before the program exits (a packer stopped midway loses
// nothing).
type Adapter struct {
	cfg Config

	mu    sync.Mutex
	repos map[string]*repo // open repositories by name

	packMu  sync.Mutex
	closed  bool           // Close was called: start no packer; guarded by packMu
	packers sync.WaitGroup // the running packers

	queue candidateChecks // the checks of merge queue candidates
}

var (
	_ lifecycle.ProviderAdapter = (*Adapter)(nil)
	_ lifecycle.CIProvider      = (*Adapter)(nil)
)

// New returns an Adapter keeping its repositories under cfg.Dir.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New(`artifact: Config.Dir is empty; set it to the directory that will hold the repositories, for example filepath.Join(dataDir, "repos")`)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("artifact: Config.Dir %q: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	if !gittext.Ident(cfg.CommitterName, cfg.CommitterEmail) {
		return nil, fmt.Errorf("artifact: Config.CommitterName %q and CommitterEmail %q must be valid UTF-8 without control characters, '<' or '>'", cfg.CommitterName, cfg.CommitterEmail)
	}
	if !validRepoName(cfg.DefaultRepo) {
		return nil, fmt.Errorf("artifact: Config.DefaultRepo %q is not a repository name; use lower-case letters, digits, '.', '_' and '-', beginning and ending with a letter or digit", cfg.DefaultRepo)
	}
	if b, ok := gittext.Branch(cfg.BaseBranch); !ok || b != cfg.BaseBranch {
		return nil, fmt.Errorf("artifact: Config.BaseBranch %q is not a valid branch name; use a name such as \"main\"", cfg.BaseBranch)
	}
	if b, ok := gittext.Branch(cfg.BranchPrefix + "x"); !ok || b != cfg.BranchPrefix+"x" {
		return nil, fmt.Errorf("artifact: Config.BranchPrefix %q does not make valid branch names; use a prefix such as \"lifecycle/\"", cfg.BranchPrefix)
	}
	if cfg.QueueCheck != nil && cfg.QueueCommand != nil {
		return nil, errors.New("artifact: Config.QueueCheck and Config.QueueCommand are both set; set one of them to test merge queue candidates")
	}
	if cfg.QueueCommand != nil && cfg.QueueCommand[0] == "" {
		return nil, errors.New("artifact: Config.QueueCommand[0] is empty; set it to the program that tests a candidate, for example []string{\"make\", \"test\"}")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("artifact: create Config.Dir: %w", err)
	}
	a := &Adapter{cfg: cfg, repos: make(map[string]*repo)}
	a.queue.init()
	return a, nil
}

// RepositoryDir returns the directory of the repository named repo (a
// PullRequestRef.Repo), where `git -C <dir> log --all --graph` shows its
// history. The repository may not exist yet.
func (a *Adapter) RepositoryDir(repo string) string {
	return filepath.Join(a.cfg.Dir, repo)
}

// repoFor returns the repository name of a task.
func (a *Adapter) repoFor(t lifecycle.Task) string {
	if t.Context.Project == nil || *t.Context.Project == "" {
		return a.cfg.DefaultRepo
	}
	return repoName(*t.Context.Project)
}

func (a *Adapter) signature() object.Signature {
	return signature(a.cfg.CommitterName, a.cfg.CommitterEmail, a.cfg.Now())
}

// errNoRepo means a repository does not exist.
var errNoRepo = fmt.Errorf("no such repository: %w", lifecycle.ErrNotFound)

// repo returns the open repository name, creating it first when create is
// set. A repository opened for the first time by this Adapter is recovered
// (see recoverMerges).
func (a *Adapter) repo(ctx context.Context, name string, create bool) (*repo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.repos[name]; ok {
		return r, nil
	}
	path := filepath.Join(a.cfg.Dir, name)
	gitDir := filepath.Join(path, git.GitDirName)
	if !isExist(gitDir) {
		if !create {
			return nil, fmt.Errorf("repository %q: %w", name, errNoRepo)
		}
		if err := initRepo(a.cfg.Dir, name, a.cfg.BaseBranch, a.signature()); err != nil {
			return nil, fmt.Errorf("create repository %q: %w", name, err)
		}
		if !isExist(gitDir) {
			return nil, fmt.Errorf("create repository %q: %s exists and is not a git repository; move it away", name, path)
		}
	}
	r := newRepo(name, path)
	r.afterWrite = func() { a.maybePack(r) }
	r.logger = a.cfg.Logger
	if err := a.recoverMerges(ctx, r); err != nil {
		return nil, fmt.Errorf("open repository %q: %w", name, err)
	}
	a.repos[name] = r
	// Pack what earlier processes left loose, estimated as git gc --auto
	// does from one of the 256 object directories, and merge the small
	// packs they left: a write makes a pack of about ten objects.
	if a.cfg.PackAfter > 0 {
		loose, _ := os.ReadDir(filepath.Join(gitDir, "objects", "17"))
		packs, _ := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
		// Each pack has two files, .idx and .pack.
		if len(loose)*256 >= a.cfg.PackAfter || len(packs)/2*10 >= a.cfg.PackAfter {
			a.startPacker(r, true)
		}
	}
	return r, nil
}

// recoverMerges finishes the merges that a process stopped between moving
// a base branch and recording the pull request as merged: an open pull
// request whose base branch tip is a merge of its head made for it is
// recorded as merged with that commit.
func (a *Adapter) recoverMerges(ctx context.Context, r *repo) error {
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// The merges of advances of base branches (see AdvanceBranch) first.
	if err := a.finishAdvances(r); err != nil {
		return err
	}
	s, err := r.loadPulls()
	if err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(s.byNum)) {
		p := s.byNum[n]
		if p.State != lifecycle.PullRequestOpen {
			continue
		}
		head, err := r.ref(plumbing.NewBranchReferenceName(p.Head))
		if err != nil || head.IsZero() {
			continue // an open pull request without its branch can only be refused
		}
		m, err := r.findMerge(s, p, head)
		if err != nil {
			return err
		}
		if !m.IsZero() {
			if s, err = r.markMerged(s, p, head, m, a.signature(), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeSearchDepth bounds how far back findMerge looks along the base
// branch's first parents for a merge that was not recorded, the first time
// it looks at a branch or when the branch was rewritten.
const mergeSearchDepth = 1000

// mergeScan is what findMerge learnt of the first-parent history of a
// base branch: the merges made for pull requests that were not recorded as
// merged when it saw them.
type mergeScan struct {
	tip     plumbing.Hash // the tip it looked back from
	pending map[int]foundMerge
}

// foundMerge is a merge commit made for a pull request, and its head.
type foundMerge struct{ commit, head plumbing.Hash }

// findMerge returns the merge of head made for p on p's base branch, else
// the zero hash. It is not always the tip: a process may stop between
// moving the base branch and recording the merge, and other merges may
// land on top before the merge is recorded. So it looks back along the
// branch's first parents, but only as far as the tip it saw last time
// (up to mergeSearchDepth commits when it has not seen the branch or the
// branch was rewritten), and keeps the unrecorded merges it found: the
// cost of a call does not grow with the history.
func (r *repo) findMerge(s *pullSet, p *pullRecord, head plumbing.Hash) (plumbing.Hash, error) {
	tip, err := r.ref(plumbing.NewBranchReferenceName(p.Base))
	if err != nil || tip.IsZero() {
		return plumbing.ZeroHash, err
	}
	sc := r.scans[p.Base]
	found := make(map[int]foundMerge)
	reached := false
	at := tip
	for range mergeSearchDepth {
		if sc != nil && at == sc.tip {
			reached = true
			break
		}
		c, err := r.commitInfo(at)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(c.parents) == 2 {
			if n, err := strconv.Atoi(trailer(c.message, "Lifecycle-Pull")); err == nil {
				if q := s.byNum[n]; q == nil || q.State != lifecycle.PullRequestMerged {
					if _, ok := found[n]; !ok {
						found[n] = foundMerge{commit: at, head: c.parents[1]}
					}
				}
			}
		}
		if len(c.parents) == 0 {
			break
		}
		at = c.parents[0]
	}
	if !reached {
		sc = &mergeScan{pending: make(map[int]foundMerge)}
		r.scans[p.Base] = sc
	}
	for n, m := range found {
		if _, ok := sc.pending[n]; !ok {
			sc.pending[n] = m
		}
	}
	sc.tip = tip
	if m, ok := sc.pending[p.Number]; ok && m.head == head {
		return m.commit, nil
	}
	return plumbing.ZeroHash, nil
}

// markMerged records p as merged at head as commit m and returns the new
// set of pull requests. first, when not nil, is moved first (see savePull).
func (r *repo) markMerged(s *pullSet, p *pullRecord, head, m plumbing.Hash, sig object.Signature, first *refUpdate) (*pullSet, error) {
	q := p.clone()
	q.State = lifecycle.PullRequestMerged
	q.MergedHeadSHA = head.String()
	q.MergeCommitSHA = m.String()
	at := lifecycle.NewTimestamp(sig.When)
	q.MergedAt = &at
	if err := r.savePull(s, q, sig, fmt.Sprintf("Merge pull request #%d as %s", q.Number, m), first); err != nil {
		return nil, err
	}
	for _, sc := range r.scans {
		delete(sc.pending, q.Number)
	}
	return r.pulls, nil
}

// invalid returns a validation error for a pull request hint.
func invalid(field, reason string) error {
	return &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{Field: field, Reason: reason}}}
}

// EnsurePullRequest implements [lifecycle.ProviderAdapter]. It commits the
// submission's record on the task's branch, creating the branch from the
// base branch first, and opens a pull request for the branch unless one is
// open. A request whose SubmissionID is the one of the branch's last commit
// (a retry) commits nothing. Invalid Head and Base hints, and a Base
// branch that does not exist, give a [*lifecycle.ValidationError] for the
// field pullRequest.head or pullRequest.base.
func (a *Adapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	pr, err := a.ensure(ctx, req)
	if err != nil {
		return lifecycle.PullRequest{}, fmt.Errorf("artifact: ensure pull request for task %s: %w", req.Task.Identifier, err)
	}
	return pr, nil
}

func (a *Adapter) ensure(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.PullRequest{}, err
	}
	slug := taskSlug(req.Task)
	if slug == "" {
		return lifecycle.PullRequest{}, errors.New("the task has neither an identifier nor an ID")
	}
	head := a.cfg.BranchPrefix + slug
	if req.Head != "" {
		h, ok := gittext.Branch(req.Head)
		if !ok {
			return lifecycle.PullRequest{}, invalid("pullRequest.head", "not a valid git branch name")
		}
		head = h
	}
	base, baseGiven := a.cfg.BaseBranch, req.Base != ""
	if baseGiven {
		b, ok := gittext.Branch(req.Base)
		if !ok {
			return lifecycle.PullRequest{}, invalid("pullRequest.base", "not a valid git branch name")
		}
		base = b
	}

	r, err := a.repo(ctx, a.repoFor(req.Task), true)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	defer unlock()

	s, err := r.loadPulls()
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	open := s.openFor(head)
	if open != nil && !baseGiven {
		base = open.Base
	}
	if head == base {
		return lifecycle.PullRequest{}, invalid("pullRequest.head", fmt.Sprintf("is the base branch %q", base))
	}
	baseTip, err := r.ref(plumbing.NewBranchReferenceName(base))
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	if baseTip.IsZero() {
		if baseGiven {
			return lifecycle.PullRequest{}, invalid("pullRequest.base", fmt.Sprintf("no branch %q in repository %q", base, r.name))
		}
		return lifecycle.PullRequest{}, fmt.Errorf("the base branch %q of repository %q is missing", base, r.name)
	}

	sig := a.signature()
	headRef := plumbing.NewBranchReferenceName(head)
	tip, err := r.ref(headRef)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	headSHA := tip
	retry := false
	if !tip.IsZero() && req.SubmissionID != "" {
		c, err := r.commitInfo(tip)
		if err != nil {
			return lifecycle.PullRequest{}, err
		}
		retry = trailer(c.message, "Lifecycle-Submission") == gittext.OneLine(req.SubmissionID)
	}
	// The branch moves before the pull request records (with them, when
	// they change: see savePull).
	var headUpdate *refUpdate
	if !retry {
		parent := tip
		if parent.IsZero() {
			parent = baseTip
		}
		if headSHA, err = r.commitSubmission(parent, head, req, sig); err != nil {
			return lifecycle.PullRequest{}, err
		}
		headUpdate = &refUpdate{headRef, headSHA, tip}
	}

	if open == nil {
		p := &pullRecord{
			Number:             s.max + 1,
			Title:              req.Title,
			Body:               req.Body,
			Head:               head,
			Base:               base,
			State:              lifecycle.PullRequestOpen,
			Draft:              req.Draft,
			RequestedReviewers: mergeLogins(nil, req.Reviewers),
			TaskID:             req.Task.ID,
			TaskIdentifier:     req.Task.Identifier,
			CreatedAt:          lifecycle.NewTimestamp(sig.When),
		}
		if p.Title == "" {
			p.Title = gittext.OneLine(req.Task.Identifier + ": " + req.Task.Title)
		}
		if p.Body == "" {
			p.Body = defaultBody(req.Task)
		}
		if err := r.savePull(s, p, sig, fmt.Sprintf("Open pull request #%d: %s into %s", p.Number, head, base), headUpdate); err != nil {
			return lifecycle.PullRequest{}, err
		}
		return a.view(r, p, headSHA, true), nil
	}
	p := open.clone()
	if req.Title != "" {
		p.Title = req.Title
	}
	if req.Body != "" {
		p.Body = req.Body
	}
	p.Base = base
	p.Draft = req.Draft
	p.RequestedReviewers = mergeLogins(p.RequestedReviewers, req.Reviewers)
	if p.Title != open.Title || p.Body != open.Body || p.Base != open.Base || p.Draft != open.Draft || !slices.Equal(p.RequestedReviewers, open.RequestedReviewers) {
		if err := r.savePull(s, p, sig, fmt.Sprintf("Update pull request #%d", p.Number), headUpdate); err != nil {
			return lifecycle.PullRequest{}, err
		}
	} else if headUpdate != nil {
		if err := r.setRef(headUpdate.name, headUpdate.h, headUpdate.old); err != nil {
			return lifecycle.PullRequest{}, err
		}
	}
	return a.view(r, p, headSHA, false), nil
}

// mergeLogins returns have with the logins of add it lacks appended.
func mergeLogins(have, add []string) []string {
	out := slices.Clone(have)
	if out == nil {
		out = []string{}
	}
	for _, l := range add {
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func defaultBody(t lifecycle.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Work on task %s (%s).\n", t.Identifier, t.ID)
	if t.Context.Goal != "" {
		fmt.Fprintf(&b, "\nGoal: %s\n", t.Context.Goal)
	}
	if t.Links.Issue != "" {
		fmt.Fprintf(&b, "\nIssue: %s\n", t.Links.Issue)
	}
	return b.String()
}

// submissionRecord is the JSON record of a submission, committed as
// .lifecycle/<task>/submission.json.
type submissionRecord struct {
	SubmissionID   string                     `json:"submissionId"`
	TaskID         string                     `json:"taskId"`
	TaskIdentifier string                     `json:"taskIdentifier"`
	TaskTitle      string                     `json:"taskTitle"`
	Summary        string                     `json:"summary"`
	Notes          string                     `json:"notes"`
	Checks         []lifecycle.SubmittedCheck `json:"checks"`
	SubmittedAt    lifecycle.Timestamp        `json:"submittedAt"`
}

// commitSubmission commits the record of req on top of parent and returns
// the new commit.
func (r *repo) commitSubmission(parent plumbing.Hash, head string, req lifecycle.PullRequestRequest, sig object.Signature) (plumbing.Hash, error) {
	pc, err := r.commitInfo(parent)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	rec := submissionRecord{
		SubmissionID:   req.SubmissionID,
		TaskID:         req.Task.ID,
		TaskIdentifier: req.Task.Identifier,
		TaskTitle:      req.Task.Title,
		Summary:        req.Summary,
		Notes:          req.Notes,
		Checks:         req.Checks,
		SubmittedAt:    lifecycle.NewTimestamp(sig.When),
	}
	if rec.Checks == nil {
		rec.Checks = []lifecycle.SubmittedCheck{}
	}
	js, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode submission record: %w", err)
	}
	js = append(js, '\n')
	path, err := r.recordPath(pc.tree, taskDir(req.Task))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tree, err := r.putFiles(pc.tree, path, []file{
		{name: "submission.json", data: js},
		{name: "submission.md", data: submissionMarkdown(rec)},
	})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write the record in %s: %w", strings.Join(path, "/"), err)
	}
	return r.writeCommit(&object.Commit{
		Author:    sig,
		Committer: sig,
		Message: message("Submit "+req.Task.Identifier+": "+req.Task.Title, req.Summary,
			"Lifecycle-Task", req.Task.ID, "Lifecycle-Submission", req.SubmissionID, "Lifecycle-Branch", head),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{parent},
	})
}

// submissionMarkdown renders a submission for people.
func submissionMarkdown(rec submissionRecord) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n\n", rec.TaskIdentifier, gittext.OneLine(rec.TaskTitle))
	fmt.Fprintf(&b, "Submission %s of task %s, %s.\n\n## Summary\n\n%s\n", rec.SubmissionID, rec.TaskID, rec.SubmittedAt, strings.TrimSpace(rec.Summary))
	if n := strings.TrimSpace(rec.Notes); n != "" {
		fmt.Fprintf(&b, "\n## Notes\n\n%s\n", n)
	}
	b.WriteString("\n## Self-reported checks\n\n")
	if len(rec.Checks) == 0 {
		b.WriteString("None reported.\n")
	}
	for _, c := range rec.Checks {
		fmt.Fprintf(&b, "- %s: %s\n", gittext.OneLine(c.Name), c.Status)
	}
	return []byte(b.String())
}

// view returns p as a lifecycle.PullRequest with head commit head.
func (a *Adapter) view(r *repo, p *pullRecord, head plumbing.Hash, created bool) lifecycle.PullRequest {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(r.path), Fragment: "pull/" + strconv.Itoa(p.Number)}
	return lifecycle.PullRequest{
		PullRequestRef:     lifecycle.PullRequestRef{Owner: a.cfg.Owner, Repo: r.name, Number: p.Number},
		URL:                u.String(),
		Head:               p.Head,
		Base:               p.Base,
		HeadSHA:            head.String(),
		Draft:              p.Draft,
		State:              p.State,
		MergeCommitSHA:     p.MergeCommitSHA,
		RequestedReviewers: slices.Clone(p.RequestedReviewers),
		Created:            created,
	}
}

// lookup returns the repository of ref, or an error matching
// lifecycle.ErrNotFound.
func (a *Adapter) lookup(ctx context.Context, ref lifecycle.PullRequestRef) (*repo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ref.Owner != a.cfg.Owner || !validRepoName(ref.Repo) || ref.Number < 1 {
		return nil, errNoRepo
	}
	return a.repo(ctx, ref.Repo, false)
}

// errNoPull means a repository has no pull request of that number.
var errNoPull = fmt.Errorf("no such pull request: %w", lifecycle.ErrNotFound)

// headOf returns the head commit of p: the one it was merged at, or the
// tip of its branch.
func (r *repo) headOf(p *pullRecord) (plumbing.Hash, error) {
	if p.State == lifecycle.PullRequestMerged {
		return plumbing.NewHash(p.MergedHeadSHA), nil
	}
	h, err := r.ref(plumbing.NewBranchReferenceName(p.Head))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if h.IsZero() {
		return plumbing.ZeroHash, fmt.Errorf("the branch %q of pull request #%d is gone", p.Head, p.Number)
	}
	return h, nil
}

// PullRequest implements [lifecycle.ProviderAdapter]. The HeadSHA of an
// open pull request is the tip of its branch; of a merged one, the commit
// it was merged at.
func (a *Adapter) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	pr, err := a.pullRequest(ctx, ref)
	if err != nil {
		return lifecycle.PullRequest{}, fmt.Errorf("artifact: pull request %s: %w", ref, err)
	}
	return pr, nil
}

func (a *Adapter) pullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	r, err := a.lookup(ctx, ref)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	if err := r.acquire(ctx); err != nil {
		return lifecycle.PullRequest{}, err
	}
	defer r.release()
	s, err := r.loadPulls()
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	p, ok := s.byNum[ref.Number]
	if !ok {
		return lifecycle.PullRequest{}, errNoPull
	}
	head, err := r.headOf(p)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	return a.view(r, p, head, false), nil
}

// Merge implements [lifecycle.ProviderAdapter]. It writes a merge commit
// on the base branch whose parents are the base tip and the head, and
// whose tree is the base tree with the pull request's changes applied
// (a three-way merge of trees). When both branches changed a path
// differently it fails and changes nothing.
func (a *Adapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	res, err := a.merge(ctx, req)
	if err != nil {
		return lifecycle.MergeResult{}, fmt.Errorf("artifact: merge %s: %w", req.Ref, err)
	}
	return res, nil
}

func (a *Adapter) merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	r, err := a.lookup(ctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	defer unlock()
	s, err := r.loadPulls()
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	p, ok := s.byNum[req.Ref.Number]
	if !ok {
		return lifecycle.MergeResult{}, errNoPull
	}
	// An advance of the base branch whose merges are not recorded yet
	// (see AdvanceBranch) may have merged p.
	if r.pendingAdvance(p.Base) {
		if err := a.finishAdvance(r, p.Base); err != nil {
			return lifecycle.MergeResult{}, err
		}
		if s, err = r.loadPulls(); err != nil {
			return lifecycle.MergeResult{}, err
		}
		p = s.byNum[req.Ref.Number]
	}
	head, err := r.headOf(p)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if head.String() != req.ExpectedHeadSHA {
		return lifecycle.MergeResult{}, fmt.Errorf("head is %s, not %s: %w", head, req.ExpectedHeadSHA, lifecycle.ErrHeadMismatch)
	}
	switch p.State {
	case lifecycle.PullRequestMerged:
		return lifecycle.MergeResult{MergeCommitSHA: p.MergeCommitSHA, AlreadyMerged: true}, nil
	case lifecycle.PullRequestClosed:
		return lifecycle.MergeResult{}, errors.New("the pull request is closed")
	}
	sig := a.signature()
	// A merge made by a process that stopped before recording it.
	if m, err := r.findMerge(s, p, head); err != nil || !m.IsZero() {
		if err != nil {
			return lifecycle.MergeResult{}, err
		}
		if _, err := r.markMerged(s, p, head, m, sig, nil); err != nil {
			return lifecycle.MergeResult{}, err
		}
		return lifecycle.MergeResult{MergeCommitSHA: m.String(), AlreadyMerged: true}, nil
	}

	baseRef := plumbing.NewBranchReferenceName(p.Base)
	baseTip, err := r.ref(baseRef)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if baseTip.IsZero() {
		return lifecycle.MergeResult{}, fmt.Errorf("the base branch %q is missing", p.Base)
	}
	bc, err := r.commitInfo(baseTip)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	hc, err := r.commitInfo(head)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	mb, err := r.mergeBase(baseTip, head)
	if err != nil {
		return lifecycle.MergeResult{}, fmt.Errorf("find the merge base of %s and %s: %w", p.Base, p.Head, err)
	}
	var mergeBaseTree plumbing.Hash // none: unrelated histories
	if !mb.IsZero() {
		mbc, err := r.commitInfo(mb)
		if err != nil {
			return lifecycle.MergeResult{}, err
		}
		mergeBaseTree = mbc.tree
	}
	tree, err := r.mergeTrees(mergeBaseTree, bc.tree, hc.tree, "")
	if err != nil {
		return lifecycle.MergeResult{}, fmt.Errorf("merge %s into %s: %w", p.Head, p.Base, err)
	}
	title := req.CommitTitle
	if title == "" {
		title = fmt.Sprintf("Merge pull request #%d from %s", p.Number, p.Head)
	}
	m, err := r.writeCommit(&object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      message(title, p.Title, "Lifecycle-Pull", strconv.Itoa(p.Number), "Lifecycle-Task", p.TaskID),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{baseTip, head},
	})
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	// The base branch moves first, then the record. Should the process
	// stop between the two, the next Adapter to open the repository
	// records the merge (recoverMerges).
	if _, err := r.markMerged(s, p, head, m, sig, &refUpdate{baseRef, m, baseTip}); err != nil {
		return lifecycle.MergeResult{}, err
	}
	return lifecycle.MergeResult{MergeCommitSHA: m.String()}, nil
}

// Name implements [lifecycle.CIProvider]: "artifact".
func (a *Adapter) Name() string { return "artifact" }

// Checks implements [lifecycle.CIProvider]. Local repositories have no CI
// of their own, so it reports no checks and nothing pending; the checks an
// agent reports with its submission count instead (see CountsSelfReported).
// A merge queue candidate (q.Candidate set) is tested by Config.QueueCheck
// or Config.QueueCommand, once per commit, and reported as one check while
// it runs and after; with neither set it has no checks and nothing
// pending, and passes at once.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.CIReport{}, fmt.Errorf("artifact: checks of %s: %w", q.HeadSHA, err)
	}
	if q.Candidate != nil {
		rep, err := a.candidateChecks(ctx, q)
		if err != nil {
			return lifecycle.CIReport{}, fmt.Errorf("artifact: checks of candidate %s: %w", q.HeadSHA, err)
		}
		return rep, nil
	}
	return lifecycle.CIReport{Checks: []lifecycle.CICheck{}}, nil
}

// CountsSelfReported implements [lifecycle.CIProvider]: true, so the checks
// of submissions count toward the CI status in artifact mode.
func (a *Adapter) CountsSelfReported() bool { return true }
