package lifecycletype

import (
	"context"
	"errors"
	"fmt"
)

// WaitMergeQueue is the [TemporaryError.Reason] of a ship whose change is
// in a merge queue: the host's own (GitHub's merge queue, when the base's
// rulesets require it) or the lifecycle's (see [QueueHost]). The ship
// runner follows the entry, however long the queue takes, outside
// Config.ShipRetryBudget, and shows the wait in [ShipOperation.Wait]; the
// queue ends it: landed, or removed with its reason.
const WaitMergeQueue = "merge_queue"

// ErrBranchMoved means a branch was not where a compare-and-swap of it
// expected: [QueueHost.AdvanceBranch] found the base moved by something
// else than the queue.
var ErrBranchMoved = errors.New("branch moved")

// RepoRef names a repository at its host.
type RepoRef struct {
	// Owner is the repository's owner (organisation, group, user).
	Owner string
	// Repo is the repository's name.
	Repo string
}

// String returns "owner/repo".
func (r RepoRef) String() string { return r.Owner + "/" + r.Repo }

// QueueHost is implemented by adapters whose host can carry the
// lifecycle's own merge queue: it makes candidate commits (the base with
// queued changes merged onto it) on queue branches, where the repository's
// CI tests them, and moves a base branch to exactly a tested commit, so
// that the landed tree is the tested tree. A task whose adapter is a
// QueueHost ships through the queue when Config.MergeQueue enables it,
// unless the host has a queue of its own for the base (NativeQueue).
//
// Errors: BranchHead returns an error matching ErrNotFound when the branch
// does not exist; BuildCandidate a *CandidateConflictError when a head
// does not merge; AdvanceBranch one matching ErrBranchMoved when the
// branch is not at From. An error matching ErrTemporary may pass and is
// tried again; any other is a failure of the host, tried again at the
// queue's next step and logged.
type QueueHost interface {
	// NativeQueue reports whether the host queues merges into base itself
	// (GitHub's merge queue required by the base's rulesets): the ship
	// then goes through Merge, which enqueues the pull request there.
	NativeQueue(ctx context.Context, repo RepoRef, base string) (bool, error)
	// BranchHead returns the commit a branch points to.
	BranchHead(ctx context.Context, repo RepoRef, branch string) (string, error)
	// BuildCandidate makes a candidate commit: req.Parent with each of
	// req.Heads merged onto it in order, a merge commit per head (a head
	// the parent already contains adds nothing); it points req.Branch at
	// it, creating the branch or moving it whatever it pointed to, and
	// returns its SHA. When a head does not merge it returns a
	// *CandidateConflictError naming it. Called again with the same
	// request, it makes a commit with the same tree.
	BuildCandidate(ctx context.Context, req CandidateRequest) (string, error)
	// AdvanceBranch moves req.Branch from req.From to req.To, a commit
	// that descends from req.From, and only if the branch is still at
	// req.From; when it is already at req.To, it returns nil. Otherwise
	// it returns an error matching ErrBranchMoved.
	AdvanceBranch(ctx context.Context, req AdvanceRequest) error
	// Tree returns the SHA of a commit's tree.
	Tree(ctx context.Context, repo RepoRef, sha string) (string, error)
	// DeleteBranch deletes a queue branch; one that does not exist is not
	// an error.
	DeleteBranch(ctx context.Context, repo RepoRef, branch string) error
}

// CandidateRequest asks a QueueHost for a candidate commit.
type CandidateRequest struct {
	// Repo is the repository.
	Repo RepoRef
	// Base is the base branch the candidate would land on.
	Base string
	// Branch is the queue branch to point at the candidate, such as
	// "lifecycle-queue/main/12".
	Branch string
	// Parent is the commit to build on: the base's, or another
	// candidate's.
	Parent string
	// Heads are the changes to merge onto Parent, in order.
	Heads []CandidateHead
	// Title is the first line of each merge commit's message.
	Title string
}

// CandidateHead is one change merged into a candidate.
type CandidateHead struct {
	// PullRequest is its pull request.
	PullRequest PullRequestRef
	// SHA is its head commit.
	SHA string
}

// CandidateConflictError says a head did not merge onto a candidate's
// parent with the heads before it.
type CandidateConflictError struct {
	// Head is the head that did not merge.
	Head CandidateHead
	// Message is the host's words, or "".
	Message string
}

// Error implements error.
func (e *CandidateConflictError) Error() string {
	msg := fmt.Sprintf("%s at %s does not merge", e.Head.PullRequest, e.Head.SHA)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// AdvanceRequest asks a QueueHost to move a branch to a tested commit.
type AdvanceRequest struct {
	// Repo is the repository.
	Repo RepoRef
	// Branch is the branch to move (the base).
	Branch string
	// From is where the branch must be; To is where it moves.
	From, To string
}

// MergeQueueRecord is a merge queue as a Store keeps it: one per
// repository and base branch. The Store does not read State.
type MergeQueueRecord struct {
	// ID begins "mq_"; it is derived from the repository and base, so
	// that every process names a queue alike.
	ID string
	// Mode is the submission mode of the queue's tasks, and Project the
	// project of the first task that entered it: together they say which
	// adapter carries it.
	Mode    SubmitMode
	Project string
	// Owner and Repo name the repository; Base the base branch.
	Owner, Repo, Base string
	// State is the queue's state, as the Service encodes it (JSON).
	State []byte
	// Version counts the updates of the record.
	Version int64
	// LeaseOwner names the process that drives the queue; LeaseUntil is
	// when another may take it over.
	LeaseOwner string
	LeaseUntil Timestamp
	// UpdatedAt is when it last changed.
	UpdatedAt Timestamp
}

// MergeQueueStore is implemented by a Store that keeps merge queues, so
// that the Service can run the lifecycle's own merge queue (see
// [QueueHost]). Its Update's Tx is then a [MergeQueueTx].
type MergeQueueStore interface {
	// MergeQueues returns every merge queue, in ID order.
	MergeQueues(ctx context.Context) ([]MergeQueueRecord, error)
	// MergeQueue returns the merge queue with the given ID.
	MergeQueue(ctx context.Context, id string) (MergeQueueRecord, error)
}

// MergeQueueTx is the Tx of a [MergeQueueStore]: queues change in the
// transaction of the tasks and operations they move.
type MergeQueueTx interface {
	// MergeQueue returns the merge queue with the given ID, read for
	// update.
	MergeQueue(ctx context.Context, id string) (MergeQueueRecord, error)
	// CreateMergeQueue inserts a new queue. It returns ErrConflict when
	// one with the same ID exists, even one inserted by a transaction
	// that committed after this one began.
	CreateMergeQueue(ctx context.Context, q MergeQueueRecord) error
	// UpdateMergeQueue replaces the stored queue with q.ID. It returns
	// ErrNotFound when there is none.
	UpdateMergeQueue(ctx context.Context, q MergeQueueRecord) error
}

// The reason of rework of a change the merge queue sent back (see
// [Facts.QueueRework]), besides ReworkMergeConflict.
const ReworkChecksFailed = "checks_failed"

// QueueRework says why the merge queue sent a change back to its agent:
// it conflicted with the changes ahead of it (ReworkMergeConflict), or its
// it failed CI, tested apart from the changes ahead of it
// (ReworkChecksFailed). It stands until the
// task is submitted again.
type QueueRework struct {
	// Reason is merge_conflict or checks_failed.
	Reason string `json:"reason"`
	// Checks are the checks that failed, with their links: where their
	// logs are.
	Checks []CICheck `json:"checks,omitempty"`
	// CandidateSHA is the candidate commit whose checks failed.
	CandidateSHA string `json:"candidateSha,omitempty"`
	// Message says it in words.
	Message string `json:"message"`
}

// QueueReworkError is what the merge queue's Merge returns for a change it
// sent back for rework: the ship operation fails with the rework's
// reason as its code, and the task offers start.
type QueueReworkError struct{ Rework QueueRework }

// Error implements error.
func (e *QueueReworkError) Error() string { return e.Rework.Message }
