package lifecycle

import (
	"errors"
	"slices"
	"testing"
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
					for bits := range 16 {
						rework, shipping, canSubmit, submitted := bits&1 != 0, bits&2 != 0, bits&4 != 0, bits&8 != 0
						in := taskState{status: st, ci: ci, decision: d, rework: rework, prState: pr, shipping: shipping, submitted: submitted}
						if canSubmit {
							in.adapters = managedAdapter
						}
						var want []Action
						switch st {
						case StatusTodo:
							if !shipping {
								want = []Action{ActionStart}
							}
						case StatusInProgress:
							if canSubmit && !shipping {
								want = []Action{ActionSubmit}
							}
						case StatusInReview:
							if rework && !shipping {
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
	if n != 6*5*4*4*16 {
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
