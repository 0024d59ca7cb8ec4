package lifecycle

import (
	"fmt"
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
	// Start is offered in review only for rework, which the adapters and
	// CI do not decide.
	if st := stateOf(t, 0, false, false); st.status == StatusTodo || !st.allows(ask{cmd: cmdStart}) {
		return ""
	}
	return reworkOf(t)
}

// taskState is everything the rules depend on: availableActions and the
// answer to each command.
type taskState struct {
	status     Status
	ci         CIOverall
	ciOptional bool // the repository has no CI: none and pending count as passed
	decision   ReviewDecision
	rework     bool             // changes were requested, or the branch must be rebased
	prState    PullRequestState // "" before the first submission
	submitted  bool             // a pull request and head commit are recorded
	reviewable bool             // a submission is recorded, which reviews are of
	head       string           // the head commit, "" before the first submission
	draft      bool             // the pull request is a draft
	mergeable  Mergeability     // "" when the adapter does not say
	shipping   bool             // a ship operation is queued or running
	operation  string           // that operation's ID
	merging    bool             // its runner began merging: reviews can no longer change it
	adapters   adapterSet       // the adapters that take the task's submissions
	canDeploy  bool             // the Service has a Deployer
}

// adapterSet says which adapters take a task's submissions.
type adapterSet uint8

const (
	// managedAdapter: the adapter bound to the task's project.
	managedAdapter adapterSet = 1 << iota
	// artifactAdapter: Config.ArtifactAdapter.
	artifactAdapter
)

// stateOf returns the state of t. adapters says which adapters take the
// task's submissions; ciRequired whether the task's repository has CI
// (see [AdapterBinding.CIRequired]); canDeploy whether a Deployer is set.
func stateOf(t *Task, adapters adapterSet, ciRequired, canDeploy bool) taskState {
	st := taskState{
		status:     t.Status,
		ci:         ciOf(t),
		ciOptional: !ciRequired,
		decision:   decisionOf(t),
		rework:     reworkOf(t) != "",
		prState:    t.Facts.PRState,
		submitted:  t.PRNumber != nil && t.HeadSHA != nil,
		reviewable: t.SubmissionID != nil,
		draft:      t.Facts.Draft,
		mergeable:  t.Facts.Mergeable,
		shipping:   t.ActiveShipID != "",
		operation:  t.ActiveShipID,
		merging:    t.ShipMerging,
		adapters:   adapters,
		canDeploy:  canDeploy,
	}
	if t.HeadSHA != nil {
		st.head = *t.HeadSHA
	}
	return st
}

// stateOf returns the state that decides what t may do next.
func (s *Service) stateOf(t *Task) taskState {
	b := s.binding(t.project())
	ciRequired := t.SubmissionMode == ModeArtifact || b == nil || b.ciRequired()
	var adapters adapterSet
	if b != nil {
		adapters |= managedAdapter
	}
	if s.cfg.ArtifactAdapter != nil {
		adapters |= artifactAdapter
	}
	return stateOf(t, adapters, ciRequired, s.cfg.Deployer != nil)
}

// answer asks the table whether t may have a: it returns nil, or the
// error that refuses it.
func (s *Service) answer(t *Task, a ask) error {
	return s.stateOf(t).answer(t, a)
}

// command is a change asked of a task, by a client or by the ship runner.
// The table (taskState.rule) answers every one.
type command uint8

const (
	cmdStart   command = iota // start, or start again for rework
	cmdSubmit                 // submit work
	cmdShip                   // queue a ship operation
	cmdResolve                // resolve the blocker
	cmdView                   // read the CI status and review feedback of a submission
	cmdReview                 // post a review
	cmdCancel                 // cancel
	cmdBlock                  // record a blocker
	cmdRun                    // the ship runner takes up its operation
	cmdMerge                  // the ship runner merges, right after reading the host
)

// ask is a command with what its answer depends on.
type ask struct {
	cmd command
	// mode is the submission mode of cmdSubmit; "" asks whether any
	// adapter takes a submission.
	mode SubmitMode
	// head is the expected head commit of cmdShip and cmdMerge; "" (for
	// cmdShip) asks whether a ship is offered at all.
	head string
	// deploy says cmdShip would merge and deploy.
	deploy bool
	// operation is the ship operation of cmdRun and cmdMerge.
	operation string
}

// refusal is the table's answer to a command: allowed, or refused for a
// reason, which [taskState.refuse] turns into an error with a message.
type refusal uint8

const (
	allowed refusal = iota
	refShipInProgress
	refNotStartable
	refAlreadyInReview
	refNotSubmittable
	refNoAdapter
	refNotShippable
	refPRClosed
	refDraft
	refConflicting
	refBehind
	refCINotPassed
	refNotApproved
	refHeadMismatch
	refNoDeployer
	refNotInReview
	refNotCancellable
	refNotInProgress
	refNotBlocked
	refNotWaiting
	refHeadMoved
)

// rule is the lifecycle's table: it answers a. It is pure and cheap (no
// allocation), so that availableActions is derived from it on every read.
//
//	start    todo; in_review when the latest decisive review asked for
//	         changes, or the pull request conflicts with its base or is
//	         behind it where the host requires it up to date (rework)
//	submit   in_progress, when an adapter takes the task's submissions
//	ship     in_review, submitted, when CI passed (or the repository has
//	         no CI and there is none), the decision is approved or not
//	         required, and the pull request is open, not a draft and not
//	         in need of rework to merge; at the expected head, with a
//	         Deployer to deploy
//	resolve  blocked
//	view     in_review (view_ci_status, view_review_feedback)
//	review   in_review with a submission, until the runner begins merging
//	cancel   any status but done and cancelled
//	block    in_progress
//	run      the task in review still waits for the operation
//	merge    run, at the operation's head, and ship's rules but its own
//	         operation
//
// While a ship operation is queued or running, start, submit, ship and
// cancel are refused (ship_in_progress).
func (st taskState) rule(a ask) refusal {
	switch a.cmd {
	case cmdStart:
		switch {
		case st.shipping:
			return refShipInProgress
		case st.status == StatusTodo, st.status == StatusInReview && st.rework:
			return allowed
		}
		return refNotStartable
	case cmdSubmit:
		switch {
		case st.shipping:
			return refShipInProgress
		case st.status == StatusInReview:
			return refAlreadyInReview
		case st.status != StatusInProgress:
			return refNotSubmittable
		case a.mode == ModeArtifact && st.adapters&artifactAdapter == 0,
			a.mode == ModeAdapterManaged && st.adapters&managedAdapter == 0,
			st.adapters == 0:
			return refNoAdapter
		}
		return allowed
	case cmdShip:
		if st.shipping {
			return refShipInProgress
		}
		if r := st.shipRule(); r != allowed {
			return r
		}
		switch {
		case a.head != "" && a.head != st.head:
			return refHeadMismatch
		case a.deploy && !st.canDeploy:
			return refNoDeployer
		}
		return allowed
	case cmdResolve:
		if st.status != StatusBlocked {
			return refNotBlocked
		}
		return allowed
	case cmdView:
		if st.status != StatusInReview {
			return refNotInReview
		}
		return allowed
	case cmdReview:
		switch {
		case st.status != StatusInReview || !st.reviewable:
			return refNotInReview
		case st.merging:
			return refShipInProgress
		}
		return allowed
	case cmdCancel:
		switch {
		case st.status == StatusDone || st.status == StatusCancelled:
			return refNotCancellable
		case st.shipping:
			return refShipInProgress
		}
		return allowed
	case cmdBlock:
		if st.status != StatusInProgress {
			return refNotInProgress
		}
		return allowed
	case cmdRun, cmdMerge:
		switch {
		case st.status != StatusInReview || st.operation != a.operation:
			return refNotWaiting
		case a.cmd == cmdRun:
			return allowed
		case st.head != "" && st.head != a.head:
			return refHeadMoved // new commits: whatever else changed follows from them
		}
		return st.shipRule()
	}
	panic(fmt.Sprintf("lifecycle: no rule for command %d", a.cmd))
}

// shipRule is the part of ship's rule that the facts decide, in the order
// its refusals are given.
func (st taskState) shipRule() refusal {
	switch {
	case st.status != StatusInReview || !st.submitted:
		return refNotShippable
	case st.prState == PullRequestMerged || st.prState == PullRequestClosed:
		return refPRClosed
	case st.draft:
		return refDraft
	case st.mergeable == MergeabilityConflicting:
		return refConflicting
	case st.mergeable == MergeabilityBehind:
		return refBehind
	case !st.ciAllowsShip():
		return refCINotPassed
	case !st.decision.allowsShip():
		return refNotApproved
	}
	return allowed
}

// ciAllowsShip reports whether CI lets the task ship: it passed, or the
// repository has no CI and nothing ran or failed.
func (st taskState) ciAllowsShip() bool {
	return st.ci == CIPassed || (st.ciOptional && (st.ci == CINone || st.ci == CIPending))
}

// allows reports whether the table allows a.
func (st taskState) allows(a ask) bool { return st.rule(a) == allowed }

// answer returns nil when the table allows a, or the error that refuses
// it: a *ConflictError with t's available actions, or for a submission
// no adapter takes, an error matching ErrNotFound.
func (st taskState) answer(t *Task, a ask) error {
	if r := st.rule(a); r != allowed {
		return st.refuse(t, a, r)
	}
	return nil
}

// refuse words refusal r of a for t.
func (st taskState) refuse(t *Task, a ask, r refusal) error {
	c := &ConflictError{AvailableActions: st.actions()}
	set := func(reason, format string, args ...any) error {
		c.Reason, c.Message = reason, fmt.Sprintf(format, args...)
		return c
	}
	pr := 0
	if t.PRNumber != nil {
		pr = *t.PRNumber
	}
	switch r {
	case refShipInProgress:
		switch a.cmd {
		case cmdShip:
			return set("ship_in_progress", "Task %s is already being shipped by operation %s", t.Identifier, st.operation)
		case cmdReview:
			return set("ship_in_progress", "Task %s is being merged by operation %s; a review can no longer change it", t.Identifier, st.operation)
		}
		verb := "cancel"
		switch a.cmd {
		case cmdStart:
			verb = "start"
		case cmdSubmit:
			verb = "submit"
		}
		return set("ship_in_progress", "Task %s is being shipped by operation %s; %s it when that ends", t.Identifier, st.operation, verb)
	case refNotStartable:
		return set("not_startable", "Task %s is %s; start needs status todo, or in_review after changes were requested", t.Identifier, t.Status)
	case refAlreadyInReview:
		return set("already_in_review", "Task %s is %s; submit needs status in_progress", t.Identifier, t.Status)
	case refNotSubmittable:
		return set("not_submittable", "Task %s is %s; submit needs status in_progress", t.Identifier, t.Status)
	case refNoAdapter:
		return errNoAdapter(t, a.mode)
	case refNotShippable:
		return set("not_shippable", "Task %s is %s; only a submitted task in review can be shipped", t.Identifier, t.Status)
	case refPRClosed:
		return set("not_shippable", "Pull request #%d of task %s is %s", pr, t.Identifier, st.prState)
	case refDraft:
		return set("draft", "Pull request #%d of task %s is a draft; mark it ready for review at the code host", pr, t.Identifier)
	case refConflicting:
		return set("not_mergeable", "Pull request #%d of task %s conflicts with its base branch; rebase it and submit again", pr, t.Identifier)
	case refBehind:
		return set("not_mergeable", "Pull request #%d of task %s is behind its base branch, which must be up to date to merge; rebase it and submit again", pr, t.Identifier)
	case refCINotPassed:
		return set("ci_not_passed", "CI of task %s is %s, not passed", t.Identifier, st.ci)
	case refNotApproved:
		return set("review_not_approved", "The review decision on task %s is %s, not approved", t.Identifier, st.decision)
	case refHeadMismatch:
		return set("head_sha_mismatch", "expectedHeadSha %s is not the head of task %s (%s); read the task again and ship its headSha", a.head, t.Identifier, st.head)
	case refNoDeployer:
		return set("deployer_not_configured", "This service has no deployer; ship task %s with mode merge_only", t.Identifier)
	case refNotInReview:
		return set("not_in_review", "Task %s is %s; only a task in review can be reviewed", t.Identifier, t.Status)
	case refNotCancellable:
		return set("not_cancellable", "Task %s is %s and cannot be cancelled", t.Identifier, t.Status)
	case refNotInProgress:
		return set("not_in_progress", "Task %s is %s; only a task in progress can be blocked", t.Identifier, t.Status)
	case refNotBlocked:
		return set("not_blocked", "Task %s is %s; only a blocked task has a blocker to resolve", t.Identifier, t.Status)
	case refNotWaiting:
		return set("not_shippable", "Task %s is %s and no longer waits for this operation", t.Identifier, t.Status)
	case refHeadMoved:
		return set("head_sha_mismatch", "The head of pull request #%d of task %s moved from %s to %s", pr, t.Identifier, a.head, st.head)
	}
	panic(fmt.Sprintf("lifecycle: no words for refusal %d", r))
}

// offered are the actions availableActions may list, in the order of the
// Action constants, with the command that the table asks for each.
var offered = [...]struct {
	action Action
	ask    ask
}{
	{ActionStart, ask{cmd: cmdStart}},
	{ActionSubmit, ask{cmd: cmdSubmit}},
	{ActionShip, ask{cmd: cmdShip}},
	{ActionViewCIStatus, ask{cmd: cmdView}},
	{ActionViewReviewFeedback, ask{cmd: cmdView}},
	{ActionResolveBlocker, ask{cmd: cmdResolve}},
}

// actionLists holds every list actions can return, by the set of offered
// actions it holds (bit i for offered[i]), so that a read allocates none.
// Never modify their elements.
var actionLists = func() (lists [1 << len(offered)][]Action) {
	for set := range lists {
		lists[set] = []Action{}
		for i, o := range offered {
			if set&(1<<i) != 0 {
				lists[set] = append(lists[set], o.action)
			}
		}
	}
	return lists
}()

// actions returns the actions the table allows in st, in the order of the
// Action constants. It never returns nil, so the JSON is [] rather than
// null.
func (st taskState) actions() []Action {
	set := 0
	for i, o := range offered {
		if st.allows(o.ask) {
			set |= 1 << i
		}
	}
	return actionLists[set]
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
