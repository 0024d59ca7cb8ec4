package artifact

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/tasklifecycle/lifecycle"
)

// The checks of merge queue candidates: Config.QueueCheck or
// Config.QueueCommand, run once per candidate commit in a goroutine the
// Adapter tracks, at most queueChecksAtOnce at once, their results kept
// for the last maxQueueResults candidates.

const (
	// queueChecksAtOnce bounds the candidate checks running at once.
	queueChecksAtOnce = 2
	// maxQueueResults bounds the finished candidate checks kept.
	maxQueueResults = 256
	// maxQueueOutput bounds the output kept of a candidate check: its end.
	maxQueueOutput = 8 << 10
	// queueCommandWaitDelay bounds how long a finished or killed
	// QueueCommand may hold its output open (through a process it left
	// running) before its output is cut.
	queueCommandWaitDelay = 5 * time.Second
)

// The names of the check of a candidate.
const (
	queueCheckName   = "queue-check"
	queueCommandName = "queue-command"
)

// QueueCandidate is a merge queue candidate that Config.QueueCheck or
// Config.QueueCommand tests.
type QueueCandidate struct {
	// SHA is the candidate commit.
	SHA string
	// Repo is its repository: Owner is Config.Owner, Repo the name of
	// the repository under Config.Dir.
	Repo lifecycle.RepoRef
	// Base is the branch the candidate would land on.
	Base string
	// Branch is the queue branch it is on.
	Branch string
	// GitDir is the repository's git directory, which a check may read
	// (with go-git, or git), not write.
	GitDir string
	// Dir is the temporary directory holding the files of the candidate's
	// tree, where Config.QueueCommand runs; "" for Config.QueueCheck.
	Dir string
}

// candidateChecks is the state of an Adapter's candidate checks.
type candidateChecks struct {
	ctx    context.Context // ends when the Adapter is closed
	cancel context.CancelFunc
	slots  chan struct{}  // one per running check
	wg     sync.WaitGroup // the goroutines of the checks

	mu     sync.Mutex
	closed bool
	runs   map[string]*candidateRun // by candidateKey
	done   []string                 // the keys of finished runs, oldest first
}

// candidateRun is the check of one candidate commit. Its fields but done
// are guarded by candidateChecks.mu.
type candidateRun struct {
	started  bool // it has a slot and runs
	finished bool
	passed   bool
	output   string
	done     chan struct{} // closed once finished (or dropped by Close)
}

func (q *candidateChecks) init() {
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.slots = make(chan struct{}, queueChecksAtOnce)
	q.runs = make(map[string]*candidateRun)
}

// close stops the checks and waits for their goroutines.
func (q *candidateChecks) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()
}

// candidateKey keys the check of commit sha of repository repo.
func candidateKey(repo, sha string) string { return repo + "@" + sha }

// queueCheckName returns the name of the check of candidates, or "" when
// candidates are not tested.
func (a *Adapter) queueCheckName() string {
	switch {
	case a.cfg.QueueCheck != nil:
		return queueCheckName
	case a.cfg.QueueCommand != nil:
		return queueCommandName
	}
	return ""
}

// candidateChecks reports the check of the candidate q.HeadSHA, starting it
// the first time it is asked for.
func (a *Adapter) candidateChecks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	name := a.queueCheckName()
	if name == "" {
		return lifecycle.CIReport{Checks: []lifecycle.CICheck{}}, nil
	}
	h, err := parseSHA("head", q.HeadSHA)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	key := candidateKey(q.Candidate.Repo.Repo, h.String())
	qs := &a.queue
	qs.mu.Lock()
	run := qs.runs[key]
	qs.mu.Unlock()
	if run == nil {
		r, err := a.queueRepo(ctx, q.Candidate.Repo)
		if err != nil {
			return lifecycle.CIReport{}, err
		}
		if err := r.acquire(ctx); err != nil {
			return lifecycle.CIReport{}, err
		}
		_, err = r.commitOf(h)
		r.release()
		if err != nil {
			return lifecycle.CIReport{}, err
		}
		c := QueueCandidate{
			SHA:    h.String(),
			Repo:   lifecycle.RepoRef{Owner: a.cfg.Owner, Repo: r.name},
			Base:   q.Candidate.Base,
			Branch: q.Candidate.Branch,
			GitDir: r.gitDir,
		}
		qs.mu.Lock()
		if qs.closed {
			qs.mu.Unlock()
			return lifecycle.CIReport{}, fmt.Errorf("the adapter is closed: %w", lifecycle.ErrClosed)
		}
		if run = qs.runs[key]; run == nil {
			run = &candidateRun{done: make(chan struct{})}
			qs.runs[key] = run
			qs.wg.Add(1)
			go a.testCandidate(r, key, run, c)
		}
		qs.mu.Unlock()
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	switch {
	case run.finished && run.passed:
		return lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: name, Status: lifecycle.CheckPassed}}}, nil
	case run.finished:
		return lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: name, Status: lifecycle.CheckFailed}}}, nil
	case run.started:
		return lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: name, Status: lifecycle.CheckRunning}}, Pending: true}, nil
	}
	return lifecycle.CIReport{Checks: []lifecycle.CICheck{}, Pending: true}, nil
}

// testCandidate runs the check of candidate c, once it has a slot, and
// records its result in run.
func (a *Adapter) testCandidate(r *repo, key string, run *candidateRun, c QueueCandidate) {
	qs := &a.queue
	defer qs.wg.Done()
	defer close(run.done)
	drop := func() {
		qs.mu.Lock()
		if qs.runs[key] == run {
			delete(qs.runs, key)
		}
		qs.mu.Unlock()
	}
	select {
	case qs.slots <- struct{}{}:
	case <-qs.ctx.Done():
		drop()
		return
	}
	defer func() { <-qs.slots }()
	qs.mu.Lock()
	run.started = true
	qs.mu.Unlock()

	var passed bool
	var output string
	if a.cfg.QueueCheck != nil {
		passed, output = a.callQueueCheck(c)
	} else {
		passed, output = a.runQueueCommand(r, c)
	}
	if qs.ctx.Err() != nil {
		drop() // stopped by Close: no result
		return
	}
	qs.mu.Lock()
	run.finished, run.passed, run.output = true, passed, output
	qs.done = append(qs.done, key)
	for len(qs.done) > maxQueueResults {
		delete(qs.runs, qs.done[0])
		qs.done = qs.done[1:]
	}
	qs.mu.Unlock()
	if !passed {
		a.cfg.Logger.Info("artifact: a merge queue candidate failed its check", "repo", c.Repo.Repo, "sha", c.SHA, "branch", c.Branch, "output", output)
	}
}

// callQueueCheck calls Config.QueueCheck; a panic fails the candidate.
func (a *Adapter) callQueueCheck(c QueueCandidate) (passed bool, output string) {
	defer func() {
		if p := recover(); p != nil {
			passed, output = false, tail(fmt.Sprintf("Config.QueueCheck panicked: %v", p))
		}
	}()
	if err := a.cfg.QueueCheck(a.queue.ctx, c); err != nil {
		return false, tail(err.Error())
	}
	return true, ""
}

// runQueueCommand runs Config.QueueCommand in a checkout of c.
func (a *Adapter) runQueueCommand(r *repo, c QueueCandidate) (passed bool, output string) {
	dir, err := os.MkdirTemp("", "lifecycle-candidate-")
	if err != nil {
		return false, fmt.Sprintf("artifact: make the directory of the candidate's files: %v", err)
	}
	defer os.RemoveAll(dir)
	if err := a.checkout(r, plumbing.NewHash(c.SHA), dir); err != nil {
		return false, tail(fmt.Sprintf("artifact: write out the candidate's files: %v", err))
	}
	c.Dir = dir
	argv := a.cfg.QueueCommand
	cmd := exec.CommandContext(a.queue.ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"LIFECYCLE_CANDIDATE_SHA="+c.SHA,
		"LIFECYCLE_CANDIDATE_REPO="+c.Repo.Repo,
		"LIFECYCLE_CANDIDATE_BASE="+c.Base,
		"LIFECYCLE_CANDIDATE_BRANCH="+c.Branch,
	)
	out := &tailWriter{}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = queueCommandWaitDelay
	err = cmd.Run()
	if err != nil {
		fmt.Fprintf(out, "\n%s: %v\n", argv[0], err)
	}
	return err == nil, out.String()
}

// checkout writes the files of the tree of commit h into dir. It holds
// the repository only while it reads each object, so that the
// repository's operations go on meanwhile.
func (a *Adapter) checkout(r *repo, h plumbing.Hash, dir string) error {
	hold := func(read func() error) error { return a.holding(r, read) }
	var c commitInfo
	if err := hold(func() (err error) { c, err = r.commitInfo(h); return err }); err != nil {
		return err
	}
	return r.checkout(a.queue.ctx, c.tree, dir, hold)
}

// holding calls read holding r, unless the Adapter is closed.
func (a *Adapter) holding(r *repo, read func() error) error {
	if err := r.acquire(a.queue.ctx); err != nil {
		return err
	}
	defer r.release()
	return read()
}

// QueueCheckOutput returns the output of the finished check of the merge
// queue candidate sha of repo (see Config.QueueCheck and
// Config.QueueCommand), at most its last 8 KiB, and whether that check
// finished and its result is still kept.
func (a *Adapter) QueueCheckOutput(repo lifecycle.RepoRef, sha string) (output string, finished bool) {
	qs := &a.queue
	qs.mu.Lock()
	defer qs.mu.Unlock()
	run := qs.runs[candidateKey(repo.Repo, sha)]
	if run == nil || !run.finished {
		return "", false
	}
	return run.output, true
}

// tail returns the last maxQueueOutput bytes of s.
func tail(s string) string {
	if len(s) <= maxQueueOutput {
		return s
	}
	return strings.ToValidUTF8(s[len(s)-maxQueueOutput:], "")
}

// tailWriter keeps the last maxQueueOutput bytes written to it. The
// command's standard output and error share it, and exec.Cmd then calls
// Write from one goroutine at a time.
type tailWriter struct {
	buf []byte
}

// Write implements io.Writer.
func (w *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= maxQueueOutput {
		w.buf = append(w.buf[:0], p[len(p)-maxQueueOutput:]...)
		return n, nil
	}
	if over := len(w.buf) + len(p) - maxQueueOutput; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// String returns what was kept, valid UTF-8.
func (w *tailWriter) String() string { return strings.ToValidUTF8(string(w.buf), "\uFFFD") }
