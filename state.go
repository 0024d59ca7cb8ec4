package lifecycle

import (
	"fmt"
	"slices"
)

// This file holds the lifecycle's rules, written once: what a task may do
// next (availableActions), how the facts learned from its code host move
// it, and whether it may ship. Every read, event, precondition and runner
// check goes through these functions, which are pure: they look only at
// the task and the facts stored with it.

// Facts are what the Service knows of a task's latest submission from
// outside: the code host's pull request, the CI of its head commit and the
// host's review decision. They are stored with the task and changed in the
// transaction of the event they cause.
type Facts struct {
	// PRState is the pull request's state at the host: open, closed or
	// merged; empty before the first submission.
	PRState PullRequestState `json:"prState,omitempty"`
	// MergeCommitSHA is the commit the pull request was merged as.
	MergeCommitSHA string `json:"mergeCommitSha,omitempty"`
	// DismissesStaleReviews says the host stops counting approvals of
	// earlier heads when commits are pushed; see [PullRequest].
	DismissesStaleReviews bool `json:"dismissesStaleReviews,omitempty"`
	// CI is the overall CI state of the head commit, from every check
	// stored for it that counts.
	CI CIOverall `json:"ci,omitempty"`
	// CIPending says the CI provider expects checks it has not reported, or
	// could not be asked.
	CIPending bool `json:"ciPending,omitempty"`
	// CICheckedAt is when the CI provider was last asked, or nil.
	CICheckedAt *Timestamp `json:"ciCheckedAt,omitempty"`
	// HostDecision is the host's review decision under github_rules, or
	// empty when the host does not decide (the Service then decides from
	// the reviews posted to it).
	HostDecision ReviewDecision `json:"hostDecision,omitempty"`
	// Draft says the pull request is a draft, which is not shipped.
	Draft bool `json:"draft,omitempty"`
	// Mergeable says whether the host can merge the pull request as it
	// is, or is empty when the adapter does not say. Conflicting and
	// behind offer the agent rework (start), to rebase and submit again.
	Mergeable Mergeability `json:"mergeable,omitempty"`
	// HostVersion is the Version of the last [Reading] of a
	// [BatchReader], given back to it at the next reading.
	HostVersion string `json:"hostVersion,omitempty"`
	// CheckedAt is when the host was last read for the task, or nil.
	CheckedAt *Timestamp `json:"checkedAt,omitempty"`
}

// The reasons of rework, as [Task.ReworkReason] gives them and task.updated
// events carry them (reworkReason).
const (
	// ReworkChangesRequested: a review asked for changes.
	ReworkChangesRequested = "changes_requested"
	// ReworkMergeConflict: the pull request conflicts with its base.
	ReworkMergeConflict = "merge_conflict"
	// ReworkBehindBase: the base moved on and the host requires the pull
	// request to be up to date with it.
	ReworkBehindBase = "behind_base"
)

// ReworkReason says why a task in review offers start (rework): one of
// the Rework constants, or "" when it offers none.
func (t *Task) ReworkReason() string {
	if t.Status != StatusInReview || t.ActiveShipID != "" {
		return ""
	}
	return reworkOf(t)
}

// taskState is everything availableActions depends on.
type taskState struct {
	status     Status
	ci         CIOverall
	ciOptional bool // the repository has no CI: none and pending count as passed
	decision   ReviewDecision
	rework     bool             // changes were requested, or the branch must be rebased
	prState    PullRequestState // "" before the first submission
	draft      bool             // the pull request is a draft
	mergeable  Mergeability     // "" when the adapter does not say
	shipping   bool             // a ship operation is queued or running
	canSubmit  bool             // an adapter takes the task's submissions
}

// stateOf returns the state of t. canSubmit says whether an adapter takes
// the task's submissions (a live binding, or artifact mode); ciRequired
// whether the task's repository has CI (see [AdapterBinding.CIRequired]).
func stateOf(t *Task, canSubmit, ciRequired bool) taskState {
	return taskState{
		status:     t.Status,
		ci:         ciOf(t),
		ciOptional: !ciRequired,
		decision:   decisionOf(t),
		rework:     reworkOf(t) != "",
		prState:    t.Facts.PRState,
		draft:      t.Facts.Draft,
		mergeable:  t.Facts.Mergeable,
		shipping:   t.ActiveShipID != "",
		canSubmit:  canSubmit,
	}
}

// actions returns the actions available in st, in the order of the Action
// constants. It never returns nil, so the JSON is [] rather than null.
//
//	todo         start
//	in_progress  submit, unless no adapter takes the task or a ship is under way
//	in_review    start     when the latest decisive review asked for
//	                       changes, or the pull request conflicts with its
//	                       base or is behind it where the host requires it
//	                       up to date (rework: rebase and submit again)
//	             ship      when CI passed (or the repository has no CI and
//	                       there is none), the decision is approved or not
//	                       required, and the pull request is open, not a
//	                       draft and not in need of rework to merge
//	             view_ci_status, view_review_feedback
//	             (no start or ship while a ship operation is under way)
//	blocked      resolve_blocker
//	done, cancelled  none
func (st taskState) actions() []Action {
	switch st.status {
	case StatusTodo:
		return actionsTodo
	case StatusInProgress:
		if st.canSubmit && !st.shipping {
			return actionsSubmit
		}
		return []Action{}
	case StatusInReview:
		rework, ship := st.rework && !st.shipping, st.shippable()
		switch {
		case rework && ship:
			return actionsReviewReworkShip
		case rework:
			return actionsReviewRework
		case ship:
			return actionsReviewShip
		}
		return actionsReview
	case StatusBlocked:
		return actionsBlocked
	}
	return []Action{}
}

// The lists actions returns, shared by every task that has them (a read
// costs no allocation for them): never modify their elements.
var (
	actionsTodo             = []Action{ActionStart}
	actionsSubmit           = []Action{ActionSubmit}
	actionsBlocked          = []Action{ActionResolveBlocker}
	actionsReview           = []Action{ActionViewCIStatus, ActionViewReviewFeedback}
	actionsReviewShip       = []Action{ActionShip, ActionViewCIStatus, ActionViewReviewFeedback}
	actionsReviewRework     = []Action{ActionStart, ActionViewCIStatus, ActionViewReviewFeedback}
	actionsReviewReworkShip = []Action{ActionStart, ActionShip, ActionViewCIStatus, ActionViewReviewFeedback}
)

// shippable reports whether a task in st may be shipped.
func (st taskState) shippable() bool {
	return st.status == StatusInReview && !st.shipping && st.ciAllowsShip() && st.decision.allowsShip() &&
		(st.prState == PullRequestOpen || st.prState == "") && !st.draft && !st.mergeable.needsRework()
}

// ciAllowsShip reports whether CI lets the task ship: it passed, or the
// repository has no CI and nothing ran or failed.
func (st taskState) ciAllowsShip() bool {
	return st.ci == CIPassed || (st.ciOptional && (st.ci == CINone || st.ci == CIPending))
}

// hasAction reports whether acts contains a.
func hasAction(acts []Action, a Action) bool {
	return slices.Contains(acts, a)
}

// ciOf returns the overall CI state of t's head commit as stored.
func ciOf(t *Task) CIOverall {
	if t.HeadSHA == nil || t.Facts.CI == "" {
		return CINone
	}
	return t.Facts.CI
}

// decisionOf returns the review decision that counts for t: not_required
// under never_require; the host's under github_rules when its adapter
// decides; else the one reached by the reviews posted to the Service.
func decisionOf(t *Task) ReviewDecision {
	switch {
	case t.ReviewPolicy == PolicyNeverRequire:
		return DecisionNotRequired
	case t.ReviewPolicy == PolicyGitHubRules && t.Facts.HostDecision != "":
		return t.Facts.HostDecision
	case t.ReviewDecision == "":
		return DecisionPending
	}
	return t.ReviewDecision
}

// reworkOf returns why the agent may start t again, whatever its status:
// the latest decisive review posted asked for changes, the host's decision
// is changes_requested, or the pull request must be rebased to merge. It
// is "" when none holds.
func reworkOf(t *Task) string {
	switch {
	case t.ReworkRequested || (t.ReviewPolicy == PolicyGitHubRules && t.Facts.HostDecision == DecisionChangesRequested):
		return ReworkChangesRequested
	case t.Facts.Mergeable == MergeabilityConflicting:
		return ReworkMergeConflict
	case t.Facts.Mergeable == MergeabilityBehind:
		return ReworkBehindBase
	}
	return ""
}

// settle moves a task whose pull request the host merged, closed or
// reopened: merged makes a task in review done; closed without merging
// sends it back to in_progress, so that the agent submits again (which
// opens or reopens a pull request); reopened (closed before, open now)
// puts a task that the close sent back to in_progress in review again. A
// task being shipped is left to its ship operation, whose runner sees the
// same facts. wasState is the pull request's state before the facts
// applied. It reports whether the status changed.
func settle(t *Task, wasState PullRequestState) bool {
	if t.ActiveShipID != "" {
		return false
	}
	switch {
	case t.Status == StatusInReview && t.Facts.PRState == PullRequestMerged:
		t.Status = StatusDone
		t.ReconcileAt = Timestamp{}
	case t.Status == StatusInReview && t.Facts.PRState == PullRequestClosed:
		t.Status = StatusInProgress // ReconcileAt stays: a reopen is read too
		t.ReworkRequested = false
	case t.Status == StatusInProgress && wasState == PullRequestClosed && t.Facts.PRState == PullRequestOpen:
		t.Status = StatusInReview
	case t.Status == StatusInProgress && wasState == PullRequestClosed && t.Facts.PRState == PullRequestMerged:
		t.Status = StatusDone // reopened and merged at the host between two readings
		t.ReconcileAt = Timestamp{}
	default:
		return false
	}
	return true
}

// closedAtHost reports whether t went back to in_progress because its
// pull request was closed at the host (not because its agent started
// rework): such a task is read again, for a reopen.
func closedAtHost(t *Task) bool {
	return t.Status == StatusInProgress && t.Facts.PRState == PullRequestClosed && t.PRNumber != nil
}

// shipRefusal says why t cannot be shipped at expectedHead, or is nil. It
// is the precondition check of ship acceptance and, with the operation
// under way, of the runner right before it merges.
func shipRefusal(t *Task, st taskState, expectedHead string) *ConflictError {
	refuse := func(reason, format string, args ...any) *ConflictError {
		return &ConflictError{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case t.Status != StatusInReview || t.PRNumber == nil || t.HeadSHA == nil:
		return refuse("not_shippable", "Task %s is %s; only a submitted task in review can be shipped", t.Identifier, t.Status)
	case st.prState == PullRequestMerged || st.prState == PullRequestClosed:
		return refuse("not_shippable", "Pull request #%d of task %s is %s", *t.PRNumber, t.Identifier, st.prState)
	case st.draft:
		return refuse("draft", "Pull request #%d of task %s is a draft; mark it ready for review at the code host", *t.PRNumber, t.Identifier)
	case st.mergeable == MergeabilityConflicting:
		return refuse("not_mergeable", "Pull request #%d of task %s conflicts with its base branch; rebase it and submit again", *t.PRNumber, t.Identifier)
	case st.mergeable == MergeabilityBehind:
		return refuse("not_mergeable", "Pull request #%d of task %s is behind its base branch, which must be up to date to merge; rebase it and submit again", *t.PRNumber, t.Identifier)
	case !st.ciAllowsShip():
		return refuse("ci_not_passed", "CI of task %s is %s, not passed", t.Identifier, st.ci)
	case !st.decision.allowsShip():
		return refuse("review_not_approved", "The review decision on task %s is %s, not approved", t.Identifier, st.decision)
	case expectedHead != *t.HeadSHA:
		return refuse("head_sha_mismatch", "expectedHeadSha %s is not the head of task %s (%s); read the task again and ship its headSha", expectedHead, t.Identifier, *t.HeadSHA)
	}
	return nil
}

// factFields names the facts that changedFields reports beside the
// served members of a task.
func factFields(before, after *Task) []string {
	var out []string
	if ciOf(before) != ciOf(after) {
		out = append(out, "ciStatus")
	}
	if before.Facts.PRState != after.Facts.PRState {
		out = append(out, "prState")
	}
	if decisionOf(before) != decisionOf(after) {
		out = append(out, "reviewDecision")
	}
	if before.Facts.Draft != after.Facts.Draft {
		out = append(out, "draft")
	}
	if before.Facts.Mergeable != after.Facts.Mergeable {
		out = append(out, "mergeable")
	}
	return out
}
