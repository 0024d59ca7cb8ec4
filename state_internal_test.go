package lifecycle

import (
	"errors"
	"slices"
	"strings"
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
		if err := stateOf(&task, managedAdapter, true, false, limits{}).answer(&task, ask{cmd: cmdShip, head: tt.head}); errors.As(err, &c) {
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
	head := "1111111111111111111111111111111111111111"
	n := 0
	for _, st := range statuses {
		for _, p := range policies {
			for _, d := range decisions {
				for _, m := range mergeable {
					for bits := range 8 {
						task := Task{Status: st, ReviewPolicy: p, ReworkRequested: bits&1 != 0}
						task.Facts.HostDecision, task.Facts.Mergeable = d, m
						if bits&2 != 0 {
							task.ActiveShipID = "shp_1"
						}
						if bits&4 != 0 {
							task.HeadSHA, task.Facts.CI = &head, CIFailed
						}
						want := ""
						if s := stateOf(&task, 0, false, false, limits{}); s.status != StatusTodo && s.allows(ask{cmd: cmdStart}) {
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
	if n != 6*3*4*4*8 {
		t.Fatalf("checked %d tasks", n)
	}
}

// TestReworkReasons checks which reason ReworkOf gives when several hold:
// a review first, then the merge queue, the base, and CI last.
func TestReworkReasons(t *testing.T) {
	t.Parallel()
	head := "1111111111111111111111111111111111111111"
	tests := []struct {
		name string
		task Task
		want string
	}{
		{"nothing", Task{Status: StatusInReview, HeadSHA: &head, Facts: Facts{CI: CIPassed}}, ""},
		{"CI failed", Task{Status: StatusInReview, HeadSHA: &head, Facts: Facts{CI: CIFailed}}, lifecycletype.ReworkCIFailed},
		{"CI failed of no head", Task{Status: StatusInReview, Facts: Facts{CI: CIFailed}}, ""},
		{"CI running", Task{Status: StatusInReview, HeadSHA: &head, Facts: Facts{CI: CIRunning}}, ""},
		{"CI failed and behind", Task{Status: StatusInReview, HeadSHA: &head, Facts: Facts{CI: CIFailed, Mergeable: MergeabilityBehind}}, lifecycletype.ReworkBehindBase},
		{"CI failed and changes requested", Task{Status: StatusInReview, HeadSHA: &head, ReworkRequested: true, Facts: Facts{CI: CIFailed}}, lifecycletype.ReworkChangesRequested},
		{"CI failed, shipping", Task{Status: StatusInReview, HeadSHA: &head, ActiveShipID: "shp_1", Facts: Facts{CI: CIFailed}}, ""},
	}
	for _, tt := range tests {
		if got := tt.task.ReworkReason(); got != tt.want {
			t.Errorf("%s: ReworkReason() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestLimitsRule checks the caps of the table: start of a task whose
// assignee is at Config.MaxInProgressPerAgent, and rework beyond
// Config.MaxReworkRounds, with their reasons and the actions offered.
func TestLimitsRule(t *testing.T) {
	t.Parallel()
	agent := "agent-1"
	todo := func(load int) Task {
		return Task{Identifier: "T-1", Status: StatusTodo, AssigneeAgentID: &agent, AssigneeInProgress: load}
	}
	rework := func(rounds, base, load int) Task {
		return Task{Identifier: "T-1", Status: StatusInReview, AssigneeAgentID: &agent, AssigneeInProgress: load,
			ReworkRequested: true, ReworkRounds: rounds, ReworkRoundsBase: base}
	}
	triage := Task{Identifier: "T-1", Status: StatusTodo, AssigneeInProgress: 5}
	tests := []struct {
		name    string
		task    Task
		lim     limits
		reason  string // "" when start is allowed
		actions []Action
	}{
		{"todo, no cap", todo(9), limits{}, "", []Action{ActionStart}},
		{"todo, below the cap", todo(1), limits{maxInProgress: 2}, "", []Action{ActionStart}},
		{"todo, at the cap", todo(2), limits{maxInProgress: 2}, "max_in_progress_per_agent", []Action{}},
		{"todo, over the cap", todo(3), limits{maxInProgress: 2}, "max_in_progress_per_agent", []Action{}},
		{"todo in triage, no assignee", triage, limits{maxInProgress: 1}, "", []Action{ActionStart}},
		{"in progress, at the cap", Task{Status: StatusInProgress, AssigneeAgentID: &agent, AssigneeInProgress: 2}, limits{maxInProgress: 2}, "not_startable", []Action{}},
		{"rework, below both caps", rework(1, 0, 0), limits{maxInProgress: 1, maxRework: 2}, "", []Action{ActionStart, ActionViewCIStatus, ActionViewReviewFeedback}},
		{"rework, at the agent cap", rework(1, 0, 1), limits{maxInProgress: 1, maxRework: 2}, "max_in_progress_per_agent", []Action{ActionViewCIStatus, ActionViewReviewFeedback}},
		{"rework, rounds used", rework(2, 0, 0), limits{maxRework: 2}, "max_rework_rounds", []Action{ActionViewCIStatus, ActionViewReviewFeedback}},
		{"rework, rounds used, at the agent cap too", rework(2, 0, 1), limits{maxInProgress: 1, maxRework: 2}, "max_rework_rounds", []Action{ActionViewCIStatus, ActionViewReviewFeedback}},
		{"rework, rounds granted again", rework(2, 2, 0), limits{maxRework: 2}, "", []Action{ActionStart, ActionViewCIStatus, ActionViewReviewFeedback}},
		{"rework, rounds used, no cap", rework(7, 0, 0), limits{}, "", []Action{ActionStart, ActionViewCIStatus, ActionViewReviewFeedback}},
		{"in review without rework, rounds used", Task{Status: StatusInReview, ReworkRounds: 3}, limits{maxRework: 2}, "not_startable", []Action{ActionViewCIStatus, ActionViewReviewFeedback}},
	}
	for _, tt := range tests {
		st := stateOf(&tt.task, 0, false, false, tt.lim)
		err := st.answer(&tt.task, ask{cmd: cmdStart})
		var c *ConflictError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("%s: start refused: %v", tt.name, err)
		case tt.reason != "" && (!errors.As(err, &c) || c.Reason != tt.reason):
			t.Errorf("%s: start answered %v, want reason %s", tt.name, err, tt.reason)
		}
		if got := st.actions(); !slices.Equal(got, tt.actions) {
			t.Errorf("%s: actions %v, want %v", tt.name, got, tt.actions)
		}
		if c != nil && !slices.Equal(c.AvailableActions, tt.actions) {
			t.Errorf("%s: refused with actions %v, want %v", tt.name, c.AvailableActions, tt.actions)
		}
	}
	// The refusal of the agent cap names the cap, the agent and its count.
	task := todo(3)
	err := stateOf(&task, 0, false, false, limits{maxInProgress: 3}).answer(&task, ask{cmd: cmdStart})
	for _, want := range []string{"agent-1", "3 tasks in progress", "(3)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v does not say %q", err, want)
		}
	}
}

// TestCapRework checks the block of a task that needs rework again after
// its rounds, and the rounds a resolve grants.
func TestCapRework(t *testing.T) {
	t.Parallel()
	now := NewTimestamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	head := "1111111111111111111111111111111111111111"
	needs := Task{Identifier: "T-1", Status: StatusInReview, HeadSHA: &head, Facts: Facts{CI: CIFailed}, ReworkRounds: 2}
	tests := []struct {
		name    string
		task    Task
		max     int
		blocked bool
	}{
		{"no cap", needs, 0, false},
		{"rounds left", needs, 3, false},
		{"rounds used", needs, 2, true},
		{"more used than the cap", needs, 1, true},
		{"rounds granted", func() Task { t := needs; t.ReworkRoundsBase = 2; return t }(), 2, false},
		{"no rework needed", func() Task { t := needs; t.Facts.CI = CIPassed; return t }(), 2, false},
		{"shipping", func() Task { t := needs; t.ActiveShipID = "shp_1"; return t }(), 2, false},
		{"in progress", func() Task { t := needs; t.Status = StatusInProgress; return t }(), 2, false},
	}
	for _, tt := range tests {
		task := tt.task
		if got := capRework(&task, tt.max, now); got != tt.blocked {
			t.Errorf("%s: capRework = %v, want %v", tt.name, got, tt.blocked)
			continue
		}
		if !tt.blocked {
			if task.Status != tt.task.Status || task.Blocker != nil {
				t.Errorf("%s: changed the task: %s, %+v", tt.name, task.Status, task.Blocker)
			}
			continue
		}
		b := task.Blocker
		if task.Status != StatusBlocked || task.StatusBeforeBlocker != StatusInReview || b == nil || b.Reason != BlockerMaxReworkRounds ||
			b.Kind != BlockerKindAwaitingUser || !b.CreatedAt.Equal(now.Time) || !strings.Contains(b.ActionRequired, "ci_failed") || b.ResumeInstructions == "" {
			t.Errorf("%s: blocked as %s (before %s) with %+v", tt.name, task.Status, task.StatusBeforeBlocker, b)
		}
		moveTask(&task, moveResolve)
		if task.Status != StatusInReview || task.Blocker != nil || task.ReworkRoundsBase != task.ReworkRounds {
			t.Errorf("%s: resolved to %s, base %d of %d rounds", tt.name, task.Status, task.ReworkRoundsBase, task.ReworkRounds)
		}
		if capRework(&task, tt.max, now) {
			t.Errorf("%s: blocked again right after the resolve", tt.name)
		}
		moveTask(&task, moveStart)
		if task.ReworkRounds != tt.task.ReworkRounds+1 {
			t.Errorf("%s: a rework start counted %d rounds, want %d", tt.name, task.ReworkRounds, tt.task.ReworkRounds+1)
		}
	}
	// A resolve of another blocker grants nothing.
	task := Task{Status: StatusBlocked, StatusBeforeBlocker: StatusInProgress, ReworkRounds: 4,
		Blocker: &Blocker{Kind: BlockerKindAwaitingUser, Reason: "missing_token"}}
	moveTask(&task, moveResolve)
	if task.ReworkRoundsBase != 0 {
		t.Errorf("resolving another blocker granted rounds: base %d", task.ReworkRoundsBase)
	}
	// A start from todo is not a rework round.
	task = Task{Status: StatusTodo}
	moveTask(&task, moveStart)
	if task.ReworkRounds != 0 {
		t.Errorf("a first start counted %d rework rounds", task.ReworkRounds)
	}
}
