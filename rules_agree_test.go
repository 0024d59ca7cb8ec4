package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// TestCommandsAgreeWithAvailableActions puts tasks in every kind of state
// the lifecycle has, reads each task's availableActions, and then asks the
// Service for each command: an action listed must be accepted, one not
// listed refused, and every refusal must carry the same availableActions.
// Commands that are not actions (cancel, block, review) are checked for
// the availableActions of their refusals.
func TestCommandsAgreeWithAvailableActions(t *testing.T) {
	t.Parallel()
	const head = "1111111111111111111111111111111111111111"
	submitted := func(t *lifecycle.Task) {
		n, h, sub := 7, head, "sub_x"
		t.Status, t.PRNumber, t.HeadSHA, t.SubmissionID = lifecycle.StatusInReview, &n, &h, &sub
		t.SubmissionMode = lifecycle.ModeAdapterManaged
		t.ReviewPolicy = lifecycle.PolicyNeverRequire
		t.Facts = lifecycle.Facts{PRState: lifecycle.PullRequestOpen, CI: lifecycle.CIPassed}
	}
	with := func(changes ...func(*lifecycle.Task)) func(*lifecycle.Task) {
		return func(t *lifecycle.Task) {
			for _, c := range changes {
				c(t)
			}
		}
	}
	shipping := func(t *lifecycle.Task) { t.ActiveShipID = "shp_x" }
	states := []struct {
		name  string
		state func(*lifecycle.Task)
	}{
		{"todo", func(*lifecycle.Task) {}},
		{"todo, shipping", shipping},
		{"todo, waiting on a dependency", func(t *lifecycle.Task) { t.DependsOn, t.WaitingOn = []string{"tsk_dep"}, []string{"tsk_dep"} }},
		{"todo, every dependency done", func(t *lifecycle.Task) { t.DependsOn, t.WaitingOn = []string{"tsk_dep"}, []string{} }},
		{"in progress", func(t *lifecycle.Task) { t.Status = lifecycle.StatusInProgress }},
		{"in progress, closed at the host", with(submitted, func(t *lifecycle.Task) {
			t.Status, t.Facts.PRState = lifecycle.StatusInProgress, lifecycle.PullRequestClosed
		})},
		{"in progress, shipping", func(t *lifecycle.Task) { t.Status, t.ActiveShipID = lifecycle.StatusInProgress, "shp_x" }},
		{"in review, shippable", submitted},
		{"in review, CI failed", with(submitted, func(t *lifecycle.Task) { t.Facts.CI = lifecycle.CIFailed })},
		{"in review, CI running", with(submitted, func(t *lifecycle.Task) { t.Facts.CI = lifecycle.CIRunning })},
		{"in review, review pending", with(submitted, func(t *lifecycle.Task) { t.ReviewPolicy = lifecycle.PolicyAlwaysRequire })},
		{"in review, changes requested", with(submitted, func(t *lifecycle.Task) {
			t.ReviewPolicy, t.ReviewDecision, t.ReworkRequested = lifecycle.PolicyAlwaysRequire, lifecycle.DecisionChangesRequested, true
		})},
		{"in review, changes requested, waiting on a dependency", with(submitted, func(t *lifecycle.Task) {
			t.ReviewPolicy, t.ReviewDecision, t.ReworkRequested = lifecycle.PolicyAlwaysRequire, lifecycle.DecisionChangesRequested, true
			t.DependsOn, t.WaitingOn = []string{"tsk_dep"}, []string{"tsk_dep"}
		})},
		{"in review, changes requested, shipping", with(submitted, shipping, func(t *lifecycle.Task) { t.ReworkRequested = true })},
		{"in review, host requests changes", with(submitted, func(t *lifecycle.Task) {
			t.ReviewPolicy, t.Facts.HostDecision = lifecycle.PolicyGitHubRules, lifecycle.DecisionChangesRequested
		})},
		{"in review, draft", with(submitted, func(t *lifecycle.Task) { t.Facts.Draft = true })},
		{"in review, conflicting", with(submitted, func(t *lifecycle.Task) { t.Facts.Mergeable = lifecycle.MergeabilityConflicting })},
		{"in review, behind", with(submitted, func(t *lifecycle.Task) { t.Facts.Mergeable = lifecycle.MergeabilityBehind })},
		{"in review, merged at the host", with(submitted, func(t *lifecycle.Task) { t.Facts.PRState = lifecycle.PullRequestMerged })},
		{"in review, closed at the host", with(submitted, func(t *lifecycle.Task) { t.Facts.PRState = lifecycle.PullRequestClosed })},
		{"in review, shipping", with(submitted, shipping)},
		{"in review, merging", with(submitted, shipping, func(t *lifecycle.Task) { t.ShipMerging = true })},
		{"blocked", func(t *lifecycle.Task) {
			t.Status, t.StatusBeforeBlocker = lifecycle.StatusBlocked, lifecycle.StatusInProgress
			t.Blocker = &lifecycle.Blocker{Kind: lifecycle.BlockerKindAwaitingUser, Reason: "needs a token", ActionRequired: "add it"}
		}},
		{"done", with(submitted, func(t *lifecycle.Task) { t.Status, t.Facts.PRState = lifecycle.StatusDone, lifecycle.PullRequestMerged })},
		{"cancelled", func(t *lifecycle.Task) { t.Status = lifecycle.StatusCancelled }},
	}
	type command struct {
		name   string
		action lifecycle.Action // "" for a command that is not an action
		run    func(ctx context.Context, svc *lifecycle.Service, id string) error
	}
	commands := []command{
		{"start", lifecycle.ActionStart, func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: lifecycle.Actor{}})
			return err
		}},
		{"submit", lifecycle.ActionSubmit, func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.Submit(ctx, id, lifecycle.SubmitParams{Summary: "Fixed it.", IdempotencyKey: "submit-" + id})
			return err
		}},
		{"ship", lifecycle.ActionShip, func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.Ship(ctx, id, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
				ExpectedHeadSHA: head, IdempotencyKey: "ship-" + id})
			return err
		}},
		{"resolve", lifecycle.ActionResolveBlocker, func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.ResolveBlocker(ctx, id, lifecycle.ResolveBlockerParams{})
			return err
		}},
		{"cancel", "", func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.CancelTask(ctx, id, lifecycle.CancelTaskParams{})
			return err
		}},
		{"block", "", func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, err := svc.RecordBlocker(ctx, id, lifecycle.RecordBlockerParams{Reason: "missing_token", ActionRequired: "add it"})
			return err
		}},
		{"review", "", func(ctx context.Context, svc *lifecycle.Service, id string) error {
			_, _, err := svc.PostReview(ctx, id, lifecycle.PostReviewParams{Outcome: lifecycle.ReviewApproved, Reviewer: lifecycle.Actor{ID: "alice"}})
			return err
		}},
	}
	withoutAdapter := newEnv(t)
	withAdapter, _ := newSubmitEnv(t)
	envs := []struct {
		name string
		e    *env
	}{{"no adapter", withoutAdapter}, {"an adapter", withAdapter}}
	ctx := t.Context()
	n := 0
	for _, en := range envs {
		for _, st := range states {
			for _, c := range commands {
				n++
				e := en.e
				id := e.CreateTask(apitest.TaskBody(fmt.Sprintf("AGREE-%d", n)))["id"].(string)
				dep := e.CreateTask(apitest.TaskBody(fmt.Sprintf("AGREE-%d-DEP", n)))["id"].(string)
				err := e.Store.Update(ctx, func(tx lifecycle.Tx) error {
					task, err := tx.Task(ctx, id)
					if err != nil {
						return err
					}
					st.state(&task)
					for _, ids := range [][]string{task.DependsOn, task.WaitingOn} {
						for i := range ids {
							ids[i] = dep // the states name "tsk_dep": a task of the store
						}
					}
					if task.SubmissionID != nil {
						sub := lifecycle.Submission{SubmissionID: "sub_" + id, TaskID: id, Status: lifecycle.StatusInReview, PRNumber: *task.PRNumber,
							HeadSHA: task.HeadSHA, Mode: task.SubmissionMode, CodeReviewPolicy: task.ReviewPolicy, AcceptedAt: task.CreatedAt}
						task.SubmissionID = &sub.SubmissionID
						if err := tx.CreateSubmission(ctx, sub); err != nil {
							return err
						}
					}
					return tx.UpdateTask(ctx, task)
				})
				if err != nil {
					t.Fatal(err)
				}
				task, err := e.Svc.Task(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				err = c.run(ctx, e.Svc, id)
				where := fmt.Sprintf("%s, %s: %s (availableActions %v)", en.name, st.name, c.name, task.AvailableActions)
				if c.action != "" {
					if offered := slices.Contains(task.AvailableActions, c.action); offered != (err == nil) {
						t.Errorf("%s: offered %v, but the command answered %v", where, offered, err)
					}
				}
				var conflict *lifecycle.ConflictError
				switch {
				case err == nil:
				case errors.As(err, &conflict):
					if !slices.Equal(conflict.AvailableActions, task.AvailableActions) {
						t.Errorf("%s: refused (%s) with availableActions %v", where, conflict.Reason, conflict.AvailableActions)
					}
				case errors.Is(err, lifecycle.ErrNotFound) && c.name == "submit" && en.e == withoutAdapter:
					// No adapter takes the submission: 404, as the contract says.
				default:
					t.Errorf("%s: answered %v, want nil or a *ConflictError", where, err)
				}
			}
		}
	}
}
