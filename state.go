package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// This file holds the lifecycle's rules, written once: what a task may do
// next (availableActions), how the facts learned from its code host move
// it, and whether it may ship. Every read, event, precondition and runner
// check goes through these functions, which are pure: they look only at
// the task and the facts stored with it.

// mergeFacts returns a digest of the facts a host's refusal of a merge
// could depend on: the pull request (head, base, state, draft,
// mergeability), CI and the review decision.
func mergeFacts(t *Task) string {
	h := sha256.New()
	for _, f := range []string{deref(t.HeadSHA), deref(t.BaseBranch), string(t.Facts.PRState), strconv.FormatBool(t.Facts.Draft),
		string(t.Facts.Mergeable), t.Facts.BlockedReason, string(t.CI()), strconv.FormatBool(t.Facts.CIPending), string(t.Decision())} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
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
	refused    bool             // the host refused the last merge, and nothing changed since
	queueSent  bool             // the merge queue sent this head back for rework
	shipping   bool             // a ship operation is queued or running
	operation  string           // that operation's ID
	merging    bool             // its runner began merging: reviews can no longer change it
	adapters   adapterSet       // the adapters that take the task's submissions
	canDeploy  bool             // the Service has a Deployer
	waitingOn  string           // the first dependency not done yet, "" when none
	agentCap   int              // Config.MaxInProgressPerAgent when the task has an assignee, else 0
	agentLoad  int              // the assignee's other tasks in progress, where agentCap counts
	reworkCap  bool             // the task used its Config.MaxReworkRounds rework rounds
}

// limits are the caps of Config that the table applies.
type limits struct {
	maxInProgress int // Config.MaxInProgressPerAgent; 0: no cap
	maxRework     int // Config.MaxReworkRounds; 0: no cap
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
// (see [AdapterBinding.CIRequired]); canDeploy whether a Deployer is set;
// lim the caps. The assignee's tasks in progress are t.AssigneeInProgress,
// which the caller counted (see Service.countAgent) when needsCount says.
func stateOf(t *Task, adapters adapterSet, ciRequired, canDeploy bool, lim limits) taskState {
	st := taskState{
		status:     t.Status,
		ci:         t.CI(),
		ciOptional: !ciRequired,
		decision:   t.Decision(),
		rework:     lifecycletype.ReworkOf(t) != "",
		prState:    t.Facts.PRState,
		submitted:  t.PRNumber != nil && t.HeadSHA != nil,
		reviewable: t.SubmissionID != nil,
		draft:      t.Facts.Draft,
		mergeable:  t.Facts.Mergeable,
		refused:    t.Facts.MergeRefusal != nil,
		queueSent:  t.Facts.QueueRework != nil,
		shipping:   t.ActiveShipID != "",
		operation:  t.ActiveShipID,
		merging:    t.ShipMerging,
		adapters:   adapters,
		canDeploy:  canDeploy,
	}
	if len(t.WaitingOn) > 0 {
		st.waitingOn = t.WaitingOn[0]
	}
	if t.HeadSHA != nil {
		st.head = *t.HeadSHA
	}
	if lim.maxInProgress > 0 && t.AssigneeAgentID != nil {
		st.agentCap, st.agentLoad = lim.maxInProgress, t.AssigneeInProgress
	}
	st.reworkCap = lim.maxRework > 0 && reworkUsed(t) >= lim.maxRework
	return st
}

// reworkUsed returns the rework rounds t used since a person last granted
// it more.
func reworkUsed(t *Task) int { return t.ReworkRounds - t.ReworkRoundsBase }

// needsCount reports whether the table's answer to start depends on the
// count of the tasks in progress of t's assignee under cap: t has an
// assignee and the rest of the rules would let it start.
func needsCount(t *Task, cap int) bool {
	if cap <= 0 || t.AssigneeAgentID == nil || t.ActiveShipID != "" || len(t.WaitingOn) > 0 {
		return false
	}
	return t.Status == StatusTodo || (t.Status == StatusInReview && lifecycletype.ReworkOf(t) != "")
}

// stateOf returns the state that decides what t may do next.
func (s *Service) stateOf(t *Task) taskState {
	b := s.binding(t.Project())
	ciRequired := t.SubmissionMode == ModeArtifact || b == nil || b.ciRequired()
	var adapters adapterSet
	if b != nil {
		adapters |= managedAdapter
	}
	if s.cfg.ArtifactAdapter != nil {
		adapters |= artifactAdapter
	}
	return stateOf(t, adapters, ciRequired, s.cfg.Deployer != nil, limits{s.cfg.MaxInProgressPerAgent, s.cfg.MaxReworkRounds})
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
	refBlocked
	refHostRefused
	refQueueRework
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
	refDependencyNotDone
	refMaxInProgress
	refMaxRework
)

// rule is the lifecycle's table: it answers a. It is pure and cheap (no
// allocation), so that availableActions is derived from it on every read.
//
//	start    todo; in_review when the latest decisive review asked for
//	         changes, the merge queue sent it back, the pull request
//	         conflicts with its base or is behind it where the host
//	         requires it up to date, or CI of its head failed (rework),
//	         unless the task used its Config.MaxReworkRounds rounds;
//	         either only while no dependency waits (waitingOn is empty)
//	         and while its assignee has fewer than
//	         Config.MaxInProgressPerAgent tasks in progress
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
		case st.status == StatusInReview && st.rework && st.reworkCap:
			return refMaxRework
		case st.status != StatusTodo && !(st.status == StatusInReview && st.rework):
			return refNotStartable
		case st.waitingOn != "":
			return refDependencyNotDone
		case st.agentCap > 0 && st.agentLoad >= st.agentCap:
			return refMaxInProgress
		}
		return allowed
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
	case st.queueSent:
		return refQueueRework
	case !st.ciAllowsShip():
		return refCINotPassed
	case !st.decision.AllowsShip():
		return refNotApproved
	case st.mergeable == MergeabilityBlocked:
		return refBlocked
	case st.refused:
		return refHostRefused
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
	if r == refNoAdapter {
		return errNoAdapter(t, a.mode) // not a conflict: no adapter takes it
	}
	w := refusals[r]
	if w.code == "" {
		panic(fmt.Sprintf("lifecycle: no words for refusal %d", r))
	}
	return &ConflictError{Reason: w.code, Message: w.words(st, t, a), AvailableActions: st.actions()}
}

// prNumber returns the number of t's pull request, or 0.
func prNumber(t *Task) int {
	if t.PRNumber == nil {
		return 0
	}
	return *t.PRNumber
}

// refusals are the table's refusals as clients get them: the reason code
// of the 409 (details.reason) and its message, by refusal.
var refusals = [...]struct {
	code  string
	words func(st taskState, t *Task, a ask) string
}{
	refShipInProgress: {"ship_in_progress", func(st taskState, t *Task, a ask) string {
		switch a.cmd {
		case cmdShip:
			return fmt.Sprintf("Task %s is already being shipped by operation %s", t.Identifier, st.operation)
		case cmdReview:
			return fmt.Sprintf("Task %s is being merged by operation %s; a review can no longer change it", t.Identifier, st.operation)
		}
		verb := map[command]string{cmdStart: "start", cmdSubmit: "submit"}[a.cmd]
		if verb == "" {
			verb = "cancel"
		}
		return fmt.Sprintf("Task %s is being shipped by operation %s; %s it when that ends", t.Identifier, st.operation, verb)
	}},
	refNotStartable: {"not_startable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; start needs status todo, or in_review when it needs rework (changes requested, CI failed, a base to rebase on)", t.Identifier, t.Status)
	}},
	refAlreadyInReview: {"already_in_review", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; submit needs status in_progress", t.Identifier, t.Status)
	}},
	refNotSubmittable: {"not_submittable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; submit needs status in_progress", t.Identifier, t.Status)
	}},
	refNotShippable: {"not_shippable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; only a submitted task in review can be shipped", t.Identifier, t.Status)
	}},
	refPRClosed: {"not_shippable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Pull request #%d of task %s is %s", prNumber(t), t.Identifier, st.prState)
	}},
	refDraft: {"draft", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Pull request #%d of task %s is a draft; mark it ready for review at the code host", prNumber(t), t.Identifier)
	}},
	refConflicting: {"not_mergeable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Pull request #%d of task %s conflicts with its base branch; rebase it and submit again", prNumber(t), t.Identifier)
	}},
	refBehind: {"not_mergeable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Pull request #%d of task %s is behind its base branch, which must be up to date to merge; rebase it and submit again", prNumber(t), t.Identifier)
	}},
	refBlocked: {"not_mergeable", func(st taskState, t *Task, a ask) string {
		reason := t.Facts.BlockedReason
		if reason == "" {
			reason = "a requirement of its own"
		}
		return fmt.Sprintf("The code host blocks the merge of pull request #%d of task %s: %s", prNumber(t), t.Identifier, reason)
	}},
	refHostRefused: {"not_mergeable", func(st taskState, t *Task, a ask) string {
		msg := ""
		if r := t.Facts.MergeRefusal; r != nil {
			msg = r.Message
		}
		return fmt.Sprintf("The code host refused to merge pull request #%d of task %s: %s; ship is offered again once the pull request, its CI or its reviews change", prNumber(t), t.Identifier, msg)
	}},
	refQueueRework: {"not_mergeable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("The merge queue sent task %s back for rework: %s", t.Identifier, strings.TrimSuffix(t.Facts.QueueRework.Message, "."))
	}},
	refCINotPassed: {"ci_not_passed", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("CI of task %s is %s, not passed", t.Identifier, st.ci)
	}},
	refNotApproved: {"review_not_approved", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("The review decision on task %s is %s, not approved", t.Identifier, st.decision)
	}},
	refHeadMismatch: {"head_sha_mismatch", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("expectedHeadSha %s is not the head of task %s (%s); read the task again and ship its headSha", a.head, t.Identifier, st.head)
	}},
	refNoDeployer: {"deployer_not_configured", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("This service has no deployer; ship task %s with mode merge_only", t.Identifier)
	}},
	refNotInReview: {"not_in_review", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; only a task in review can be reviewed", t.Identifier, t.Status)
	}},
	refNotCancellable: {"not_cancellable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s and cannot be cancelled", t.Identifier, t.Status)
	}},
	refNotInProgress: {"not_in_progress", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; only a task in progress can be blocked", t.Identifier, t.Status)
	}},
	refNotBlocked: {"not_blocked", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s; only a blocked task has a blocker to resolve", t.Identifier, t.Status)
	}},
	refNotWaiting: {"not_shippable", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s is %s and no longer waits for this operation", t.Identifier, t.Status)
	}},
	refHeadMoved: {"head_moved", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("The head of pull request #%d of task %s moved from %s to %s", prNumber(t), t.Identifier, a.head, st.head)
	}},
	refDependencyNotDone: {"dependency_not_done", func(st taskState, t *Task, a ask) string {
		return dependencyWords(t, st.waitingOn+", which is not done")
	}},
	refMaxInProgress: {"max_in_progress_per_agent", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Agent %s has %d tasks in progress, the most this service allows per agent (%d); submit, block or cancel one of them before starting task %s",
			deref(t.AssigneeAgentID), st.agentLoad, st.agentCap, t.Identifier)
	}},
	refMaxRework: {"max_rework_rounds", func(st taskState, t *Task, a ask) string {
		return fmt.Sprintf("Task %s used its %d rework rounds; a person decides how it goes on", t.Identifier, reworkUsed(t))
	}},
}

// move is a change of a task's status: what a command does, or what a
// fact learned from the code host makes of the task (see settle).
type move uint8

const (
	moveCreate         move = iota // created: todo
	moveStart                      // todo, or in_review for rework: in_progress
	moveSubmit                     // in_progress: in_review
	moveBlock                      // in_progress (in_review, at the rework cap): blocked
	moveResolve                    // blocked: back to the status the blocker interrupted
	moveCancel                     // any but done and cancelled: cancelled
	moveShipped                    // in_review: done, merged by its ship operation
	moveMergedAtHost               // in_review, or back in progress after a close: done
	moveClosedAtHost               // in_review: in_progress, to submit again
	moveReopenedAtHost             // in_progress after a close at the host: in_review
)

// moves are the lifecycle's transitions: the status each move leads to
// ("" for resolve: the status the blocker interrupted, kept with the
// task). The table (taskState.rule) says when each command may move a
// task; settle, when a fact does.
var moves = [...]Status{
	moveCreate:         StatusTodo,
	moveStart:          StatusInProgress,
	moveSubmit:         StatusInReview,
	moveBlock:          StatusBlocked,
	moveResolve:        "",
	moveCancel:         StatusCancelled,
	moveShipped:        StatusDone,
	moveMergedAtHost:   StatusDone,
	moveClosedAtHost:   StatusInProgress,
	moveReopenedAtHost: StatusInReview,
}

// moveTask moves t as m says, with what goes with the new status: a
// blocker is kept (block) or cleared (resolve, cancel); a task started,
// done or cancelled is no longer read by the reconciler, while one closed
// at the host is, for a reopen.
func moveTask(t *Task, m move) {
	to := moves[m]
	switch m {
	case moveBlock:
		t.StatusBeforeBlocker = t.Status
	case moveResolve:
		to = t.StatusBeforeBlocker
		if to == "" {
			to = StatusInProgress
		}
		if t.Blocker != nil && t.Blocker.Reason == BlockerMaxReworkRounds {
			t.ReworkRoundsBase = t.ReworkRounds // a person grants more rounds
		}
		t.StatusBeforeBlocker, t.Blocker = "", nil
	case moveCancel:
		t.StatusBeforeBlocker, t.Blocker = "", nil
	case moveStart, moveShipped, moveMergedAtHost:
		if m == moveStart && t.Status == StatusInReview {
			t.ReworkRounds++
		}
		t.ReconcileAt = Timestamp{}
	case moveClosedAtHost:
		t.ReworkRequested = false
	}
	t.Status = to
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
		moveTask(t, moveMergedAtHost)
	case t.Status == StatusInReview && t.Facts.PRState == PullRequestClosed:
		moveTask(t, moveClosedAtHost)
	case t.Status == StatusInProgress && wasState == PullRequestClosed && t.Facts.PRState == PullRequestOpen:
		moveTask(t, moveReopenedAtHost)
	case t.Status == StatusInProgress && wasState == PullRequestClosed && t.Facts.PRState == PullRequestMerged:
		moveTask(t, moveMergedAtHost) // reopened and merged at the host between two readings
	default:
		return false
	}
	return true
}

// BlockerMaxReworkRounds is the reason of the blocker the Service records
// on a task in review that needs rework again after it used its
// Config.MaxReworkRounds rounds.
const BlockerMaxReworkRounds = "max_rework_rounds"

// capRework blocks t for a person when it is in review, needs rework
// (start would be offered but for the cap) and used its max rework rounds
// (0: no cap): status blocked, returning to in_review when resolved, with
// a blocker of the Service's. It reports whether it did. changeTask calls
// it on every change of a task, in its transaction, so that the fact,
// review or ship that made the task need rework blocks it there.
func capRework(t *Task, max int, now Timestamp) bool {
	if max <= 0 || t.Status != StatusInReview || t.ActiveShipID != "" || reworkUsed(t) < max {
		return false
	}
	reason := lifecycletype.ReworkOf(t)
	if reason == "" {
		return false
	}
	moveTask(t, moveBlock)
	t.Blocker = &Blocker{
		Kind:          BlockerKindAwaitingUser,
		SourceAgentID: SystemActor().ID,
		Reason:        BlockerMaxReworkRounds,
		ActionRequired: fmt.Sprintf("Task %s needs rework again (%s) after %d rework rounds, the most this service allows (Config.MaxReworkRounds %d). "+
			"Look at its pull request, its reviews and its CI, and decide: help the agent, change the task, or cancel it.", t.Identifier, reason, reworkUsed(t), max),
		ResumeInstructions: fmt.Sprintf("Resolving the blocker returns the task to in_review, where it offers start for rework again, with %d more rework rounds.", max),
		CreatedAt:          now,
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
	if before.CI() != after.CI() {
		out = append(out, "ciStatus")
	}
	if before.Facts.PRState != after.Facts.PRState {
		out = append(out, "prState")
	}
	if before.Decision() != after.Decision() {
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
