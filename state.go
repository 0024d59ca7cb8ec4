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
	// CheckedAt is when the host was last read for the task, or nil.
	CheckedAt *Timestamp `json:"checkedAt,omitempty"`
}

// taskState is everything availableActions depends on.
type taskState struct {
	status    Status
	ci        CIOverall
	decision  ReviewDecision
	rework    bool             // the latest decisive review asked for changes
	prState   PullRequestState // "" before the first submission
	shipping  bool             // a ship operation is queued or running
	canSubmit bool             // an adapter takes the task's submissions
}

// stateOf returns the state of t. canSubmit says whether an adapter takes
// the task's submissions (a live binding, or artifact mode).
func stateOf(t *Task, canSubmit bool) taskState {
	return taskState{
		status:    t.Status,
		ci:        ciOf(t),
		decision:  decisionOf(t),
		rework:    reworkOf(t),
		prState:   t.Facts.PRState,
		shipping:  t.ActiveShipID != "",
		canSubmit: canSubmit,
	}
}

// actions returns the actions available in st, in the order of the Action
// constants. It never returns nil, so the JSON is [] rather than null.
//
//	todo         start
//	in_progress  submit, unless no adapter takes the task or a ship is under way
//	in_review    start     when the latest decisive review asked for changes
//	             ship      when CI passed, the decision is approved or not
//	                       required and the pull request is open
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
	return st.status == StatusInReview && !st.shipping && st.ci == CIPassed && st.decision.allowsShip() &&
		(st.prState == PullRequestOpen || st.prState == "")
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

// reworkOf reports whether the agent may start t again: the latest
// decisive review posted asked for changes, or the host's decision is
// changes_requested.
func reworkOf(t *Task) bool {
	return t.ReworkRequested || (t.ReviewPolicy == PolicyGitHubRules && t.Facts.HostDecision == DecisionChangesRequested)
}

// settle moves a task in review whose pull request the host merged or
// closed: merged makes it done; closed without merging sends it back to
// in_progress, so that the agent submits again (which opens or reopens a
// pull request). A task being shipped is left to its ship operation, whose
// runner sees the same facts. It reports whether the status changed.
func settle(t *Task) bool {
	if t.Status != StatusInReview || t.ActiveShipID != "" {
		return false
	}
	switch t.Facts.PRState {
	case PullRequestMerged:
		t.Status = StatusDone
	case PullRequestClosed:
		t.Status = StatusInProgress
		t.ReworkRequested = false
	default:
		return false
	}
	return true
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
	case st.ci != CIPassed:
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
	return out
}
