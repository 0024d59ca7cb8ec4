package lifecycle

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// TestActionsTable checks availableActions over every combination of
// status, CI, review decision, rework, pull request state, a ship under
// way and whether an adapter takes submissions, against the rules written
// out independently here.
func TestActionsTable(t *testing.T) {
	t.Parallel()
	statuses := []Status{StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}
	cis := []CIOverall{CIPassed, CIFailed, CIRunning, CIPending, CINone}
	decisions := []ReviewDecision{DecisionApproved, DecisionChangesRequested, DecisionPending, DecisionNotRequired}
	prStates := []PullRequestState{"", PullRequestOpen, PullRequestClosed, PullRequestMerged}
	n := 0
	for _, st := range statuses {
		for _, ci := range cis {
			for _, d := range decisions {
				for _, pr := range prStates {
					for bits := range 32 {
						rework, shipping, canSubmit, submitted, waiting := bits&1 != 0, bits&2 != 0, bits&4 != 0, bits&8 != 0, bits&16 != 0
						in := taskState{status: st, ci: ci, decision: d, rework: rework, prState: pr, shipping: shipping, submitted: submitted}
						if waiting {
							in.waitingOn = "tsk_dependency"
						}
						if canSubmit {
							in.adapters = managedAdapter
						}
						var want []Action
						switch st {
						case StatusTodo:
							if !shipping && !waiting {
								want = []Action{ActionStart}
							}
						case StatusInProgress:
							if canSubmit && !shipping {
								want = []Action{ActionSubmit}
							}
						case StatusInReview:
							if rework && !shipping && !waiting {
								want = append(want, ActionStart)
							}
							if !shipping && submitted && ci == CIPassed && (d == DecisionApproved || d == DecisionNotRequired) && (pr == PullRequestOpen || pr == "") {
								want = append(want, ActionShip)
							}
							want = append(want, ActionViewCIStatus, ActionViewReviewFeedback)
						case StatusBlocked:
							want = []Action{ActionResolveBlocker}
						}
						got := in.actions()
						if got == nil {
							t.Fatalf("%+v: actions() = nil, want a non-nil slice", in)
						}
						if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
							t.Errorf("%+v: actions() = %v, want %v", in, got, want)
						}
						n++
					}
				}
			}
		}
	}
	if n != 6*5*4*4*32 {
		t.Fatalf("checked %d combinations", n)
	}
}

// TestSettleAndShipRefusal checks how host facts move a task in review and
// which precondition a ship fails first.
func TestSettleAndShipRefusal(t *testing.T) {
	t.Parallel()
	head := "1111111111111111111111111111111111111111"
	base := func() Task {
		n, h := 7, head
		return Task{Identifier: "ENG-1", Status: StatusInReview, PRNumber: &n, HeadSHA: &h, ReviewPolicy: PolicyNeverRequire,
			Facts: Facts{PRState: PullRequestOpen, CI: CIPassed}}
	}
	settles := []struct {
		pr       PullRequestState
		shipping bool
		want     Status
	}{
		{PullRequestOpen, false, StatusInReview},
		{PullRequestMerged, false, StatusDone},
		{PullRequestClosed, false, StatusInProgress},
		{PullRequestMerged, true, StatusInReview}, // left to the ship operation
		{PullRequestClosed, true, StatusInReview},
	}
	for _, tt := range settles {
		task := base()
		task.Facts.PRState = tt.pr
		if tt.shipping {
			task.ActiveShipID = "shp_x"
		}
		settle(&task, task.Facts.PRState)
		if task.Status != tt.want {
			t.Errorf("settle(pr %s, shipping %v) = %s, want %s", tt.pr, tt.shipping, task.Status, tt.want)
		}
	}
	refusals := []struct {
		change func(*Task)
		head   string
		want   string
	}{
		{func(*Task) {}, head, ""},
		{func(t *Task) { t.Status = StatusInProgress }, head, "not_shippable"},
		{func(t *Task) { t.Facts.PRState = PullRequestClosed }, head, "not_shippable"},
		{func(t *Task) { t.Facts.CI = CIRunning }, head, "ci_not_passed"},
		{func(t *Task) { t.ReviewPolicy, t.ReviewDecision = PolicyAlwaysRequire, DecisionChangesRequested }, head, "review_not_approved"},
		{func(*Task) {}, "2222222222222222222222222222222222222222", "head_sha_mismatch"},
		{func(t *Task) { t.Facts.CI = CIFailed }, "2222222222222222222222222222222222222222", "ci_not_passed"}, // CI before head
	}
	for i, tt := range refusals {
		task := base()
		tt.change(&task)
		reason := ""
		var c *ConflictError
		if err := stateOf(&task, managedAdapter, true, false).answer(&task, ask{cmd: cmdShip, head: tt.head}); errors.As(err, &c) {
			reason = c.Reason
		} else if err != nil {
			t.Fatalf("case %d: answer = %v, want a *ConflictError", i, err)
		}
		if reason != tt.want {
			t.Errorf("case %d: shipRefusal = %q, want %q", i, reason, tt.want)
		}
	}
}

// TestMoves checks the status each move leads to, and what goes with it.
func TestMoves(t *testing.T) {
	t.Parallel()
	at := NewTimestamp(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	blocker := &Blocker{Reason: "r"}
	tests := []struct {
		name string
		from Task
		move move
		want Task
	}{
		{"create", Task{}, moveCreate, Task{Status: StatusTodo}},
		{"start", Task{Status: StatusTodo, ReconcileAt: at}, moveStart, Task{Status: StatusInProgress}},
		{"rework", Task{Status: StatusInReview, ReconcileAt: at}, moveStart, Task{Status: StatusInProgress}},
		{"submit", Task{Status: StatusInProgress}, moveSubmit, Task{Status: StatusInReview}},
		{"block", Task{Status: StatusInProgress}, moveBlock, Task{Status: StatusBlocked, StatusBeforeBlocker: StatusInProgress}},
		{"resolve", Task{Status: StatusBlocked, StatusBeforeBlocker: StatusInProgress, Blocker: blocker}, moveResolve, Task{Status: StatusInProgress}},
		{"resolve without a status before", Task{Status: StatusBlocked, Blocker: blocker}, moveResolve, Task{Status: StatusInProgress}},
		{"cancel a blocked task", Task{Status: StatusBlocked, StatusBeforeBlocker: StatusInProgress, Blocker: blocker}, moveCancel, Task{Status: StatusCancelled}},
		{"shipped", Task{Status: StatusInReview, ReconcileAt: at}, moveShipped, Task{Status: StatusDone}},
		{"merged at the host", Task{Status: StatusInReview, ReconcileAt: at}, moveMergedAtHost, Task{Status: StatusDone}},
		{"closed at the host", Task{Status: StatusInReview, ReconcileAt: at, ReworkRequested: true}, moveClosedAtHost, Task{Status: StatusInProgress, ReconcileAt: at}},
		{"reopened at the host", Task{Status: StatusInProgress, ReconcileAt: at}, moveReopenedAtHost, Task{Status: StatusInReview, ReconcileAt: at}},
	}
	for _, tt := range tests {
		got := tt.from
		moveTask(&got, tt.move)
		if got.Status != tt.want.Status || got.StatusBeforeBlocker != tt.want.StatusBeforeBlocker || (got.Blocker == nil) != (tt.want.Blocker == nil) ||
			!got.ReconcileAt.Equal(tt.want.ReconcileAt.Time) || got.ReworkRequested != tt.want.ReworkRequested {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestHostRefusalsComeLast checks that a merge the host blocks, or refused,
// refuses ship with not_mergeable only once every requirement the
// lifecycle models is met, so that the refusal names what to do first.
func TestHostRefusalsComeLast(t *testing.T) {
	t.Parallel()
	task := &Task{Identifier: "ENG-1", PRNumber: ptr(7), Facts: Facts{BlockedReason: "conversations must be resolved", MergeRefusal: &MergeRefusal{Message: "merge queue"}}}
	for _, tt := range []struct {
		name string
		st   taskState
		want string
	}{
		{"blocked", taskState{status: StatusInReview, submitted: true, prState: PullRequestOpen, ci: CIPassed, decision: DecisionApproved, mergeable: MergeabilityBlocked}, "not_mergeable"},
		{"blocked, CI failed", taskState{status: StatusInReview, submitted: true, prState: PullRequestOpen, ci: CIFailed, decision: DecisionApproved, mergeable: MergeabilityBlocked}, "ci_not_passed"},
		{"refused", taskState{status: StatusInReview, submitted: true, prState: PullRequestOpen, ci: CIPassed, decision: DecisionApproved, refused: true}, "not_mergeable"},
		{"refused, review pending", taskState{status: StatusInReview, submitted: true, prState: PullRequestOpen, ci: CIPassed, decision: DecisionPending, refused: true}, "review_not_approved"},
	} {
		err := tt.st.answer(task, ask{cmd: cmdShip})
		var c *ConflictError
		if !errors.As(err, &c) || c.Reason != tt.want {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
		if slices.Contains(tt.st.actions(), ActionShip) {
			t.Errorf("%s: ship offered", tt.name)
		}
	}
}

// TestReworkReasonAgreesWithTheTable checks Task.ReworkReason, which
// package lifecycletype answers from the task's fields, against the
// table: a reason exactly when the table offers start to a task that is
// not in todo, and then the one ReworkOf gives.
func TestReworkReasonAgreesWithTheTable(t *testing.T) {
	t.Parallel()
	statuses := []Status{StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}
	policies := []CodeReviewPolicy{PolicyGitHubRules, PolicyNeverRequire, PolicyAlwaysRequire}
	decisions := []ReviewDecision{"", DecisionApproved, DecisionChangesRequested, DecisionPending}
	mergeable := []Mergeability{"", MergeabilityConflicting, MergeabilityBehind, MergeabilityMergeable}
	n := 0
	for _, st := range statuses {
		for _, p := range policies {
			for _, d := range decisions {
				for _, m := range mergeable {
					for bits := range 4 {
						task := Task{Status: st, ReviewPolicy: p, ReworkRequested: bits&1 != 0}
						task.Facts.HostDecision, task.Facts.Mergeable = d, m
						if bits&2 != 0 {
							task.ActiveShipID = "shp_1"
						}
						want := ""
						if s := stateOf(&task, 0, false, false); s.status != StatusTodo && s.allows(ask{cmd: cmdStart}) {
							want = lifecycletype.ReworkOf(&task)
						}
						if got := task.ReworkReason(); got != want {
							t.Errorf("%+v: ReworkReason() = %q, the table gives %q", task, got, want)
						}
						n++
					}
				}
			}
		}
	}
	if n != 6*3*4*4*4 {
		t.Fatalf("checked %d tasks", n)
	}
}
