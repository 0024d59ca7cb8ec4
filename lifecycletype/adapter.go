package lifecycletype

import (
	"context"
	"fmt"
	"time"
)

// ProviderAdapter opens, reads and merges pull requests at a code host
// (GitHub, GitLab, or local git repositories for artifact submissions). A
// Go team can write one for its own host: three methods, each a call or two
// to the host's API. Run adapter/adaptertest from its tests.
//
// Errors: methods return an error matching ErrNotFound when the pull
// request does not exist, ErrHeadMismatch when a merge finds another head
// commit than expected, and a *ValidationError naming the member
// ("pullRequest.base") when a hint of the request cannot be used, which the
// client gets as 400. An error matching ErrTemporary (see
// [TemporaryError]) is a failure worth retrying: the ship runner retries it
// with backoff. Any other error is a failure of the host; the Service
// reports it as 502 provider_error and logs it.
type ProviderAdapter interface {
	// EnsurePullRequest opens a pull request from req.Head into req.Base,
	// or finds the one already open for req.Head and applies req to it. The
	// result's HeadSHA is the head commit as it is now; Created says
	// whether the pull request was opened by this call. Calling it again
	// with the same request must not open a second pull request.
	EnsurePullRequest(ctx context.Context, req PullRequestRequest) (PullRequest, error)
	// PullRequest returns the current state of a pull request: its head
	// commit, and whether (and as which commit) it was merged.
	PullRequest(ctx context.Context, ref PullRequestRef) (PullRequest, error)
	// Merge merges the pull request if and only if its head commit is
	// req.ExpectedHeadSHA. A pull request already merged with that head is
	// not merged again: Merge returns the existing merge commit with
	// AlreadyMerged set.
	Merge(ctx context.Context, req MergeRequest) (MergeResult, error)
}

// ReviewDecider is implemented by adapters whose host decides whether a
// pull request is approved (branch protection, approval rules). It is used
// for tasks whose codeReviewPolicy is github_rules; without it the Service
// decides from the reviews posted to it. Where the host gives a decision
// of its own (GitHub's reviewDecision, GitLab's approvals), that decision
// is what an adapter returns; where it gives none, an adapter decides from
// the reviews of people with write access to the repository only, so that
// an outsider's review on a public repository counts for nothing.
//
// Errors: any error is a failure of the host; the Service keeps the facts
// it had and reads again later.
type ReviewDecider interface {
	// ReviewDecision returns the host's decision on the pull request at
	// q.HeadSHA and the reviews the host holds. Whether approvals of an
	// earlier head still count is the host's rule (GitHub's "dismiss stale
	// reviews", GitLab's approval reset): the adapter applies it.
	ReviewDecision(ctx context.Context, q ReviewQuery) (HostReviews, error)
}

// BatchReader is implemented by adapters that read many pull requests,
// with their CI and review state, in a few host requests (GitHub's GraphQL
// API, GitLab's list endpoints), and that can tell cheaply that nothing
// changed since an earlier reading. When a task's adapter is one, the
// Service reads through it instead of calling PullRequest, Checks and
// ReviewDecision one by one: the reconciler for every task in review (see
// lifecycle.Config.ReconcileInterval), a submission for its pull request, and the
// ship runner right before it merges.
//
// Errors: ReadPullRequests returns an error when it read nothing (the host
// is down, its rate limit is spent); a *TemporaryError whose RateLimited is
// set says when to try again. One pull request that cannot be read has its
// Reading.Err set (matching ErrNotFound when it does not exist) and does not
// fail the others.
type BatchReader interface {
	// ReadPullRequests reads the pull requests q names and returns one
	// Reading for each, in the order of q.Reads.
	ReadPullRequests(ctx context.Context, q BatchQuery) ([]Reading, error)
}

// ReadPurpose says why the Service reads a code host, so that an adapter
// puts first what cannot wait and paces the rest within the host's rate
// limit.
type ReadPurpose string

// The read purposes.
const (
	// ReadSweep is the reconciler's reading of the tasks in review, on its
	// schedule or after a webhook. It is paced: an adapter uses at most a
	// share of the host's rate limit for it and, when that share is spent,
	// fails with a *TemporaryError that is RateLimited. It may answer
	// Unchanged for a pull request whose Version says nothing changed.
	ReadSweep ReadPurpose = "sweep"
	// ReadNow is a reading a caller waits for (a submission, a call of
	// Service.Reconcile). It is read in full.
	ReadNow ReadPurpose = "now"
	// ReadMerge is the ship runner's reading right before a merge: in full,
	// and first in line for the host's rate limit, as writes are.
	ReadMerge ReadPurpose = "merge"
)

// BatchQuery asks a BatchReader for pull requests.
type BatchQuery struct {
	// Purpose says why they are read.
	Purpose ReadPurpose
	// Reads name the pull requests; an adapter splits them into as many
	// host requests as it needs.
	Reads []ReadRequest
}

// ReadRequest names one pull request of a BatchQuery.
type ReadRequest struct {
	// PullRequest names it.
	PullRequest PullRequestRef
	// HeadSHA is its head commit as the Service last read it, or "".
	HeadSHA string
	// Version is the Version of the Service's last Reading of it, or "".
	// With ReadSweep, an adapter that finds nothing changed since answers
	// Unchanged.
	Version string
}

// Reading is what a BatchReader read of one pull request.
type Reading struct {
	// Unchanged says nothing changed since the Version of the request: the
	// facts the Service holds are current. PullRequest, CI and Reviews are
	// then zero; Version may be a new one, which the Service keeps.
	Unchanged bool
	// PullRequest is the pull request as it is now.
	PullRequest PullRequest
	// CI is the CI of its head (as [CIProvider.Checks] reports it), or nil
	// when the adapter does not report CI.
	CI *CIReport
	// Reviews is the host's review state of its head (as
	// [ReviewDecider.ReviewDecision] reports it), or nil when the host does
	// not decide reviews.
	Reviews *HostReviews
	// Version is what the adapter wants as ReadRequest.Version of the next
	// reading: an opaque summary of what it read, at most 1,000 bytes. The
	// Service stores it with the task.
	Version string
	// Err says why this pull request could not be read; the other members
	// are then zero.
	Err error
}

// ReviewQuery asks a ReviewDecider about a pull request.
type ReviewQuery struct {
	// PullRequest names the pull request.
	PullRequest PullRequestRef
	// HeadSHA is its head commit as the Service last read it.
	HeadSHA string
}

// HostReviews is a host's review state of a pull request.
type HostReviews struct {
	// Decision is approved, changes_requested, pending or not_required.
	Decision ReviewDecision
	// Reviews are the reviews the host holds, oldest first. The Service
	// records those it has not seen (by ID) and emits task.reviewed for each.
	Reviews []HostReview
}

// HostReview is one review at a code host.
type HostReview struct {
	// ID identifies the review at the host; it must be stable and unique
	// within the pull request.
	ID string
	// Reviewer is the reviewer's login.
	Reviewer string
	// Outcome is approved, changes_requested or commented.
	Outcome ReviewOutcome
	// Body is the review's text.
	Body string
	// CommitSHA is the head the review was made at, or empty.
	CommitSHA string
	// SubmittedAt is when it was made.
	SubmittedAt time.Time
}

// PullRequestRef names a pull request at its host.
type PullRequestRef struct {
	// Owner is the repository's owner (organisation, group, user).
	Owner string
	// Repo is the repository's name.
	Repo string
	// Number is the pull request's number in the repository.
	Number int
}

// String returns "owner/repo#number".
func (r PullRequestRef) String() string { return fmt.Sprintf("%s/%s#%d", r.Owner, r.Repo, r.Number) }

// PullRequestRequest asks an adapter for a pull request for a task's work.
type PullRequestRequest struct {
	// Task is the task being submitted.
	Task Task
	// SubmissionID is the ID of the submission being made ("sub_...").
	SubmissionID string
	// Head is the branch with the work. Empty means the adapter's
	// configured source branch for the task.
	Head string
	// Base is the branch to merge into. Empty means the adapter's default.
	Base string
	// Title and Body describe the pull request; empty means the adapter
	// derives them from the task.
	Title string
	Body  string
	// Draft opens the pull request as a draft.
	Draft bool
	// Reviewers are login names whose review is requested.
	Reviewers []string
	// Summary, Notes and Checks are what the agent submitted. Adapters that
	// record submissions (artifact mode) keep them; others may ignore them.
	Summary string
	Notes   string
	Checks  []SubmittedCheck
}

// PullRequestState is the state of a pull request at its host.
type PullRequestState string

// The pull request states.
const (
	PullRequestOpen   PullRequestState = "open"
	PullRequestClosed PullRequestState = "closed"
	PullRequestMerged PullRequestState = "merged"
)

// PullRequest is a pull request as its host reports it.
type PullRequest struct {
	PullRequestRef
	// URL is where a person reads the pull request.
	URL string
	// Head and Base are the source and target branches.
	Head string
	Base string
	// HeadSHA is the full 40-hex-digit SHA of the head commit.
	HeadSHA string
	// Draft says whether the pull request is a draft. A draft is not
	// shipped: the host does not merge it.
	Draft bool
	// Mergeable says whether the host can merge the pull request into its
	// base as it is, or "" when the adapter does not say (then the merge
	// is tried and the host decides).
	Mergeable Mergeability
	// BlockedReason says, in the host's terms and for people, why the host
	// will not merge the pull request when Mergeable is
	// MergeabilityBlocked ("the base requires conversations to be
	// resolved"); it is "" otherwise.
	BlockedReason string
	// State is open, closed or merged.
	State PullRequestState
	// MergeCommitSHA is the merge commit, when State is merged.
	MergeCommitSHA string
	// RequestedReviewers are the logins whose review is requested.
	RequestedReviewers []string
	// DismissesStaleReviews says that the host no longer counts approvals
	// of an earlier head once new commits are pushed (GitHub's "dismiss
	// stale pull request approvals", GitLab's "reset approvals on push").
	// The Service then does the same with the approvals posted to it.
	DismissesStaleReviews bool
	// Created is set by EnsurePullRequest when it opened the pull request.
	Created bool
}

// Mergeability says whether a host can merge a pull request into its base
// branch as it is.
type Mergeability string

// The mergeabilities.
const (
	// MergeabilityMergeable: the host can merge it.
	MergeabilityMergeable Mergeability = "mergeable"
	// MergeabilityConflicting: it conflicts with its base; the agent must
	// rebase (or merge the base) and submit again.
	MergeabilityConflicting Mergeability = "conflicting"
	// MergeabilityBehind: its base moved on, and the host requires it to
	// be up to date before merging (GitHub's "require branches to be up to
	// date", GitLab's fast-forward and semi-linear merges); the agent must
	// rebase and submit again.
	MergeabilityBehind Mergeability = "behind"
	// MergeabilityUnknown: the host has not worked it out yet (GitHub and
	// GitLab compute it in the background after a push to the pull
	// request or its base). It is read again before a merge.
	MergeabilityUnknown Mergeability = "unknown"
	// MergeabilityBlocked: the host will not merge it for a requirement of
	// its own that the lifecycle does not model (GitHub's BLOCKED while CI
	// and reviews are met: unresolved conversations, signed commits,
	// required deployments, a merge queue; GitLab's unresolved discussions
	// or external status checks). PullRequest.BlockedReason says which.
	// An adapter reports it only when every requirement the lifecycle
	// models (CI, reviews, drafts, conflicts) is met, or its host names a
	// requirement the lifecycle does not model; ship is not offered while
	// it holds.
	MergeabilityBlocked Mergeability = "blocked"
)

// MergeRequest asks an adapter to merge a pull request.
type MergeRequest struct {
	Ref PullRequestRef
	// ExpectedHeadSHA is the head commit the merge is for; the host must
	// refuse to merge another.
	ExpectedHeadSHA string
	// CommitTitle is the title of the merge commit; empty means the
	// adapter's default.
	CommitTitle string
}

// MergeResult reports a merge.
type MergeResult struct {
	// MergeCommitSHA is the commit the pull request was merged as.
	MergeCommitSHA string
	// AlreadyMerged says the pull request had been merged before this call.
	AlreadyMerged bool
}

// SubmittedCheck is a check result an agent reports with a submission.
type SubmittedCheck struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	// Failure says why a failed check failed, or is nil; it is kept for
	// failed checks only.
	Failure *CIFailure `json:"failure,omitempty"`
}

// CheckStatus is the state of one CI check.
type CheckStatus string

// The check statuses.
const (
	CheckPassed  CheckStatus = "passed"
	CheckFailed  CheckStatus = "failed"
	CheckRunning CheckStatus = "running"
	CheckSkipped CheckStatus = "skipped"
)

// Valid reports whether s is one of the check statuses.
func (s CheckStatus) Valid() bool {
	switch s {
	case CheckPassed, CheckFailed, CheckRunning, CheckSkipped:
		return true
	}
	return false
}

// CIProvider reports the CI checks of a commit. An adapter may implement it
// too; see lifecycle.AdapterBinding.
//
// Errors: any error is a failure of the CI system; reads answer as if it
// had reported nothing and say so in the log, and ship refuses to proceed.
type CIProvider interface {
	// Name is served as a submission's ciProvider and a CI status's provider.
	Name() string
	// Checks returns the checks the CI system knows for q.HeadSHA.
	Checks(ctx context.Context, q CIQuery) (CIReport, error)
	// CountsSelfReported says whether the checks an agent reports with its
	// submission count toward the overall CI status. Only a CI provider
	// that has no checks of its own (local artifact mode) should say yes.
	CountsSelfReported() bool
}

// CIQuery asks a CIProvider for the checks of a commit.
type CIQuery struct {
	// Task is the task whose pull request is checked.
	Task Task
	// PullRequest names the pull request.
	PullRequest PullRequestRef
	// HeadSHA is the commit whose checks count.
	HeadSHA string
	// Candidate, when not nil, says HeadSHA is a merge queue candidate
	// (see [QueueHost]): the request it was built from. Task and
	// PullRequest are then those of its first change.
	Candidate *CandidateRequest
}

// CIReport is what a CIProvider knows of a commit.
type CIReport struct {
	// Checks are the provider's checks of the commit.
	Checks []CICheck
	// Pending says CI is expected to report on the commit but has not yet.
	Pending bool
	// Stale are checks the host lists as expected but that have not
	// started for longer than the adapter waits for them (a check suite an
	// App left queued with no run): they are not waited on, and are shown
	// so that a person can tell why.
	Stale []StaleCheck
}

// StaleCheck is a check the host lists as expected that has not started
// for longer than an adapter waits for it.
type StaleCheck struct {
	// Name names it as the host does (the App of a check suite).
	Name string `json:"name"`
	// Since is when the host created it.
	Since Timestamp `json:"since"`
}

// CICheck is one CI check of a commit.
type CICheck struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	// URL points to the check's details, or is empty.
	URL string `json:"url,omitempty"`
	// Failure says why a failed check failed, or is nil: reported with
	// the check (POST /tasks/{id}/checks), or known to the CI provider as
	// it reports the check, which then spares a later fetch through its
	// [CIFailureReader]. It is kept for failed checks only.
	Failure *CIFailure `json:"failure,omitempty"`
}

// Deployer deploys merged commits.
//
// Errors: any error fails the ship operation with code deploy_failed.
type Deployer interface {
	// Deploy deploys commit req.CommitSHA to req.Environment. After a crash
	// it may be called again for the same req.OperationID; it must then not
	// deploy twice, or deploying twice must be harmless.
	Deploy(ctx context.Context, req DeployRequest) (Deployment, error)
}

// DeployRequest asks a Deployer to deploy a merged commit.
type DeployRequest struct {
	// Task is the task being shipped.
	Task Task
	// OperationID is the ship operation ("shp_...").
	OperationID string
	// Environment is staging or production.
	Environment Environment
	// PullRequest is the merged pull request.
	PullRequest PullRequestRef
	// CommitSHA is the merge commit to deploy.
	CommitSHA string
}

// Deployment is a Deployer's record of a deployment.
type Deployment struct {
	// ID identifies the deployment at the Deployer.
	ID string `json:"id"`
	// Environment is where the commit was deployed.
	Environment Environment `json:"environment"`
	// CommitSHA is the deployed commit.
	CommitSHA string `json:"commitSha"`
	// URL points to the deployment or the deployed service, or is empty.
	URL string `json:"url,omitempty"`
	// DeployedAt is when the deployment finished.
	DeployedAt Timestamp `json:"deployedAt"`
}
