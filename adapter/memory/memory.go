// Package memory implements [lifecycle.ProviderAdapter] in memory: pull
// requests live in a map, and every submission "pushes" a new head commit.
// It also reports CI checks and review decisions set by the test. Hosts use
// it to test their integration without a code host; faults and latency can
// be injected.
package memory

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Op names an adapter operation, for injected faults and call counts.
type Op string

// The operations.
const (
	OpEnsure      Op = "ensure"
	OpPullRequest Op = "pull_request"
	OpMerge       Op = "merge"
	OpChecks      Op = "checks"
	OpReviews     Op = "reviews"
	// OpBatch is a call of the BatchReader that Batch returns.
	OpBatch Op = "batch"
	// OpCIFailure is a call of CIFailure.
	OpCIFailure Op = "ci_failure"
)

// Config configures an Adapter.
type Config struct {
	// Owner and Repo name the repository. Default to "acme" and "app".
	Owner, Repo string
	// BaseBranch is the default target branch. Defaults to "main".
	BaseBranch string
	// BranchPrefix starts the default source branch of a task, followed by
	// its identifier in lower case. Defaults to "lifecycle/".
	BranchPrefix string
	// Latency delays every call, honouring the context.
	Latency time.Duration
	// CountSelfReported is what CountsSelfReported answers.
	CountSelfReported bool
	// DismissStaleReviews makes the host stop counting approvals of an
	// earlier head when the head moves, as GitHub's branch protection
	// option does: an approved decision becomes pending. Pull requests
	// report it.
	DismissStaleReviews bool
}

// Adapter is an in-memory code host. It is safe for concurrent use.
type Adapter struct {
	cfg Config

	mu        sync.Mutex
	prs       []*lifecycle.PullRequest // index = number-1
	faults    map[Op][]error
	lost      map[Op][]error // errors returned after the call took effect
	calls     map[Op]int
	checks    map[string]lifecycle.CIReport
	failures  map[failureKey]lifecycle.CIFailure
	decisions map[int]lifecycle.ReviewDecision
	reviews   map[int][]lifecycle.HostReview
}

var (
	_ lifecycle.ProviderAdapter = (*Adapter)(nil)
	_ lifecycle.CIProvider      = (*Adapter)(nil)
	_ lifecycle.ReviewDecider   = (*Adapter)(nil)
	_ lifecycle.CIFailureReader = (*Adapter)(nil)
)

// failureKey names a check of a commit.
type failureKey struct{ sha, name string }

// New returns an empty Adapter.
func New(cfg Config) *Adapter {
	if cfg.Owner == "" {
		cfg.Owner = "acme"
	}
	if cfg.Repo == "" {
		cfg.Repo = "app"
	}
	if cfg.BaseBranch == "" {
		cfg.BaseBranch = "main"
	}
	if cfg.BranchPrefix == "" {
		cfg.BranchPrefix = "lifecycle/"
	}
	return &Adapter{
		cfg:       cfg,
		faults:    make(map[Op][]error),
		lost:      make(map[Op][]error),
		calls:     make(map[Op]int),
		checks:    make(map[string]lifecycle.CIReport),
		failures:  make(map[failureKey]lifecycle.CIFailure),
		decisions: make(map[int]lifecycle.ReviewDecision),
		reviews:   make(map[int][]lifecycle.HostReview),
	}
}

// FailNext makes the next call of op return err (once per call of FailNext).
func (a *Adapter) FailNext(op Op, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.faults[op] = append(a.faults[op], err)
}

// LoseNextAnswer makes the next call of op take effect and then return err,
// as a call whose answer was lost (a timeout after the host acted) does.
func (a *Adapter) LoseNextAnswer(op Op, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lost[op] = append(a.lost[op], err)
}

// lostAnswer returns the error queued by LoseNextAnswer, if any; a.mu
// must be held.
func (a *Adapter) lostAnswer(op Op) error {
	q := a.lost[op]
	if len(q) == 0 {
		return nil
	}
	a.lost[op] = q[1:]
	return q[0]
}

// TotalCalls returns how many calls were made of every operation.
func (a *Adapter) TotalCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		n += c
	}
	return n
}

// Calls returns how many times op was called, failed calls included.
func (a *Adapter) Calls(op Op) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[op]
}

// SetHeadSHA moves the head of pull request number to sha, as a push would.
func (a *Adapter) SetHeadSHA(number int, sha string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.moveHead(a.prs[number-1], sha)
}

// Push pushes a new commit to pull request number, as an agent or a person
// would at the host, and returns its SHA.
func (a *Adapter) Push(number int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	pr := a.prs[number-1]
	a.moveHead(pr, sha("push", pr.HeadSHA))
	return pr.HeadSHA
}

// moveHead moves the head of pr to head. With DismissStaleReviews an
// approval of the pull request no longer counts: an approved decision
// becomes pending. a.mu must be held.
func (a *Adapter) moveHead(pr *lifecycle.PullRequest, head string) {
	if pr.HeadSHA == head {
		return
	}
	pr.HeadSHA = head
	if a.cfg.DismissStaleReviews && a.decisions[pr.Number] == lifecycle.DecisionApproved {
		a.decisions[pr.Number] = lifecycle.DecisionPending
	}
}

// MergeByHand merges pull request number at its head, as a person would
// at the host, and returns the merge commit.
func (a *Adapter) MergeByHand(number int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	pr := a.prs[number-1]
	pr.State = lifecycle.PullRequestMerged
	pr.MergeCommitSHA = sha("merge", pr.Owner, pr.Repo, pr.Base, pr.HeadSHA)
	return pr.MergeCommitSHA
}

// SetState sets the state of pull request number, as closing or reopening
// it at the host does.
func (a *Adapter) SetState(number int, st lifecycle.PullRequestState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prs[number-1].State = st
}

// AddReview adds a review of pull request number at the host; its ID is
// made up when empty. The host's decision is not changed: set it with
// SetReviewDecision.
func (a *Adapter) AddReview(number int, r lifecycle.HostReview) lifecycle.HostReview {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.ID == "" {
		r.ID = fmt.Sprintf("review-%d-%d", number, len(a.reviews[number])+1)
	}
	if r.CommitSHA == "" {
		r.CommitSHA = a.prs[number-1].HeadSHA
	}
	a.reviews[number] = append(a.reviews[number], r)
	return r
}

// SetChecks sets the CI report of a commit.
func (a *Adapter) SetChecks(sha string, r lifecycle.CIReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks[sha] = r
}

// SetCheck sets check c of a commit, replacing the check of that name.
func (a *Adapter) SetCheck(sha string, c lifecycle.CICheck) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.checks[sha]
	r.Checks = slices.Clone(r.Checks)
	if i := slices.IndexFunc(r.Checks, func(o lifecycle.CICheck) bool { return o.Name == c.Name }); i >= 0 {
		r.Checks[i] = c
	} else {
		r.Checks = append(r.Checks, c)
	}
	a.checks[sha] = r
}

// SetMergeable sets whether the host can merge pull request number, as
// its base moving on (conflicting, behind) or the host working it out
// (unknown) does.
func (a *Adapter) SetMergeable(number int, m lifecycle.Mergeability) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prs[number-1].Mergeable = m
	a.prs[number-1].BlockedReason = ""
}

// SetBlocked makes the host block the merge of pull request number for a
// requirement of its own, said in reason (see
// lifecycle.MergeabilityBlocked).
func (a *Adapter) SetBlocked(number int, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prs[number-1].Mergeable = lifecycle.MergeabilityBlocked
	a.prs[number-1].BlockedReason = reason
}

// SetDraft marks pull request number as a draft, or ready for review.
func (a *Adapter) SetDraft(number int, draft bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prs[number-1].Draft = draft
}

// SetBase retargets pull request number at another base branch.
func (a *Adapter) SetBase(number int, base string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prs[number-1].Base = base
}

// SetReviewDecision sets the host's review decision of a pull request.
func (a *Adapter) SetReviewDecision(number int, d lifecycle.ReviewDecision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decisions[number] = d
}

// begin counts a call, waits the configured latency and returns an
// injected fault, if any. It is called without the lock held.
func (a *Adapter) begin(ctx context.Context, op Op) error {
	a.mu.Lock()
	a.calls[op]++
	var fault error
	if q := a.faults[op]; len(q) > 0 {
		fault, a.faults[op] = q[0], q[1:]
	}
	a.mu.Unlock()
	if a.cfg.Latency > 0 {
		t := time.NewTimer(a.cfg.Latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fault
}

// sha returns a deterministic commit SHA for the given parts.
func sha(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// EnsurePullRequest implements lifecycle.ProviderAdapter. Each call pushes
// a new head commit, derived from the submission ID.
func (a *Adapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	if err := a.begin(ctx, OpEnsure); err != nil {
		return lifecycle.PullRequest{}, fmt.Errorf("memory: ensure pull request: %w", err)
	}
	head := req.Head
	if head == "" {
		head = a.cfg.BranchPrefix + strings.ToLower(req.Task.Identifier)
	}
	base := req.Base
	if base == "" {
		base = a.cfg.BaseBranch
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	headSHA := sha(a.cfg.Owner, a.cfg.Repo, head, req.SubmissionID)
	for _, pr := range a.prs {
		if pr.Head == head && pr.State != lifecycle.PullRequestMerged {
			a.moveHead(pr, headSHA)
			pr.Draft, pr.State = req.Draft, lifecycle.PullRequestOpen // reopened if closed
			pr.RequestedReviewers = mergeLogins(pr.RequestedReviewers, req.Reviewers)
			out := clonePR(pr)
			out.Created = false
			return out, nil
		}
	}
	n := len(a.prs) + 1
	pr := &lifecycle.PullRequest{
		PullRequestRef:     lifecycle.PullRequestRef{Owner: a.cfg.Owner, Repo: a.cfg.Repo, Number: n},
		URL:                fmt.Sprintf("memory://%s/%s/pull/%d", a.cfg.Owner, a.cfg.Repo, n),
		Head:               head,
		Base:               base,
		HeadSHA:            headSHA,
		Draft:              req.Draft,
		State:              lifecycle.PullRequestOpen,
		RequestedReviewers: slices.Clone(req.Reviewers),

		DismissesStaleReviews: a.cfg.DismissStaleReviews,
	}
	a.prs = append(a.prs, pr)
	out := clonePR(pr)
	out.Created = true
	return out, nil
}

func mergeLogins(have, add []string) []string {
	out := slices.Clone(have)
	for _, l := range add {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func clonePR(pr *lifecycle.PullRequest) lifecycle.PullRequest {
	out := *pr
	out.RequestedReviewers = slices.Clone(pr.RequestedReviewers)
	return out
}

// lookup returns the pull request ref names; a.mu must be held.
func (a *Adapter) lookup(ref lifecycle.PullRequestRef) (*lifecycle.PullRequest, error) {
	if ref.Owner != a.cfg.Owner || ref.Repo != a.cfg.Repo || ref.Number < 1 || ref.Number > len(a.prs) {
		return nil, fmt.Errorf("memory: pull request %s: %w", ref, lifecycle.ErrNotFound)
	}
	return a.prs[ref.Number-1], nil
}

// PullRequest implements lifecycle.ProviderAdapter.
func (a *Adapter) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	if err := a.begin(ctx, OpPullRequest); err != nil {
		return lifecycle.PullRequest{}, fmt.Errorf("memory: pull request %s: %w", ref, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	pr, err := a.lookup(ref)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	return clonePR(pr), nil
}

// Merge implements lifecycle.ProviderAdapter.
func (a *Adapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	if err := a.begin(ctx, OpMerge); err != nil {
		return lifecycle.MergeResult{}, fmt.Errorf("memory: merge %s: %w", req.Ref, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	pr, err := a.lookup(req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if pr.HeadSHA != req.ExpectedHeadSHA {
		return lifecycle.MergeResult{}, fmt.Errorf("memory: merge %s: head is %s, not %s: %w", req.Ref, pr.HeadSHA, req.ExpectedHeadSHA, lifecycle.ErrHeadMismatch)
	}
	switch pr.State {
	case lifecycle.PullRequestMerged:
		return lifecycle.MergeResult{MergeCommitSHA: pr.MergeCommitSHA, AlreadyMerged: true}, nil
	case lifecycle.PullRequestClosed:
		return lifecycle.MergeResult{}, fmt.Errorf("memory: merge %s: the pull request is closed", req.Ref)
	}
	pr.State = lifecycle.PullRequestMerged
	pr.MergeCommitSHA = sha("merge", pr.Owner, pr.Repo, pr.Base, pr.HeadSHA)
	if err := a.lostAnswer(OpMerge); err != nil {
		return lifecycle.MergeResult{}, fmt.Errorf("memory: merge %s: %w", req.Ref, err)
	}
	return lifecycle.MergeResult{MergeCommitSHA: pr.MergeCommitSHA}, nil
}

// Name implements lifecycle.CIProvider.
func (a *Adapter) Name() string { return "memory" }

// Checks implements lifecycle.CIProvider with the report set by SetChecks.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	if err := a.begin(ctx, OpChecks); err != nil {
		return lifecycle.CIReport{}, fmt.Errorf("memory: checks of %s: %w", q.HeadSHA, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.checks[q.HeadSHA]
	r.Checks = slices.Clone(r.Checks)
	return r, nil
}

// SetFailure sets why check name of a commit failed, as CIFailure tells
// it.
func (a *Adapter) SetFailure(sha, name string, f lifecycle.CIFailure) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures[failureKey{sha, name}] = f
}

// CIFailure implements lifecycle.CIFailureReader with the failure set by
// SetFailure, its excerpt cut to its last q.MaxBytes bytes; it returns an
// error matching lifecycle.ErrNotFound when none was set.
func (a *Adapter) CIFailure(ctx context.Context, q lifecycle.CIFailureQuery) (lifecycle.CIFailure, error) {
	if err := a.begin(ctx, OpCIFailure); err != nil {
		return lifecycle.CIFailure{}, fmt.Errorf("memory: failure of check %s of %s: %w", q.Check.Name, q.HeadSHA, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.failures[failureKey{q.HeadSHA, q.Check.Name}]
	if !ok {
		return f, fmt.Errorf("memory: failure of check %s of %s: %w", q.Check.Name, q.HeadSHA, lifecycle.ErrNotFound)
	}
	f.Annotations = slices.Clone(f.Annotations)
	if q.MaxBytes > 0 && len(f.Excerpt) > q.MaxBytes {
		f.Excerpt, f.Truncated = f.Excerpt[len(f.Excerpt)-q.MaxBytes:], true
	}
	return f, nil
}

// CountsSelfReported implements lifecycle.CIProvider.
func (a *Adapter) CountsSelfReported() bool { return a.cfg.CountSelfReported }

// ReviewDecision implements lifecycle.ReviewDecider with the decision set
// by SetReviewDecision (pending when none was set) and the reviews added
// by AddReview.
func (a *Adapter) ReviewDecision(ctx context.Context, q lifecycle.ReviewQuery) (lifecycle.HostReviews, error) {
	if err := a.begin(ctx, OpReviews); err != nil {
		return lifecycle.HostReviews{}, fmt.Errorf("memory: reviews of %s: %w", q.PullRequest, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.lookup(q.PullRequest); err != nil {
		return lifecycle.HostReviews{}, err
	}
	out := lifecycle.HostReviews{Decision: lifecycle.DecisionPending, Reviews: slices.Clone(a.reviews[q.PullRequest.Number])}
	if d, ok := a.decisions[q.PullRequest.Number]; ok {
		out.Decision = d
	}
	return out, nil
}

// Batch returns the Adapter as a [lifecycle.BatchReader] too: one call
// (OpBatch) reads every pull request asked for, with its checks and
// reviews, and answers Unchanged to a sweep whose Version says nothing
// changed. The Adapter itself reads one pull request at a time, as an
// adapter without batches does.
func (a *Adapter) Batch() *Batching { return &Batching{a} }

// Batching is an Adapter that is a [lifecycle.BatchReader] too; see
// [Adapter.Batch].
type Batching struct{ *Adapter }

var _ lifecycle.BatchReader = (*Batching)(nil)

// ReadPullRequests implements [lifecycle.BatchReader].
func (b *Batching) ReadPullRequests(ctx context.Context, q lifecycle.BatchQuery) ([]lifecycle.Reading, error) {
	a := b.Adapter
	if err := a.begin(ctx, OpBatch); err != nil {
		return nil, fmt.Errorf("memory: read %d pull requests: %w", len(q.Reads), err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]lifecycle.Reading, len(q.Reads))
	for i, rd := range q.Reads {
		pr, err := a.lookup(rd.PullRequest)
		if err != nil {
			out[i].Err = err
			continue
		}
		r := lifecycle.Reading{PullRequest: clonePR(pr)}
		ci := a.checks[pr.HeadSHA]
		ci.Checks = slices.Clone(ci.Checks)
		r.CI = &ci
		hr := lifecycle.HostReviews{Decision: lifecycle.DecisionPending, Reviews: slices.Clone(a.reviews[pr.Number])}
		if d, ok := a.decisions[pr.Number]; ok {
			hr.Decision = d
		}
		r.Reviews = &hr
		r.Version = version(r)
		if q.Purpose == lifecycle.ReadSweep && rd.Version != "" && rd.Version == r.Version {
			r = lifecycle.Reading{Unchanged: true, Version: r.Version}
		}
		out[i] = r
	}
	return out, nil
}

// version summarises what a reading found: equal summaries, nothing
// changed.
func version(r lifecycle.Reading) string {
	b, _ := json.Marshal(r)
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:8])
}
