package lifecycle_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// These tests cover what a code host decides on its own: a merge it
// blocks for a requirement the lifecycle does not model, a merge it
// refused, and a wait it asks for while it works out mergeability.

// offersShip reports whether task id offers ship, read through the Go API.
func (e *env) offersShip(id string) bool {
	e.T.Helper()
	task, err := e.Svc.Task(e.T.Context(), id)
	if err != nil {
		e.T.Fatalf("get task %s: %v", id, err)
	}
	return slices.Contains(task.AvailableActions, lifecycle.ActionShip)
}

// shipRefusal asks to ship task id at sha through the Go API and returns
// the refusal, failing the test if the ship was accepted.
func (e *env) shipRefusal(id, sha string) *lifecycle.ConflictError {
	e.T.Helper()
	_, err := e.Svc.Ship(e.T.Context(), id, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
		ExpectedHeadSHA: sha, Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}})
	var c *lifecycle.ConflictError
	if !errors.As(err, &c) {
		e.T.Fatalf("ship of task %s = %v, want a refusal", id, err)
	}
	return c
}

// A pull request the host blocks for a requirement of its own is not
// offered ship, and a ship names the host's reason; once the host no
// longer blocks it, ship is offered again.
func TestHostBlockedMergeIsNotOffered(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t)
	id, sha := e.shippableTask("ENG-1")
	if !e.offersShip(id) {
		t.Fatal("a task whose CI passed does not offer ship")
	}
	const reason = "the base branch requires every conversation to be resolved"
	a.web.SetBlocked(1, reason)
	e.hostEvent(lifecycle.ProviderPullRequestEdited, 1, "blocked-1")
	if e.offersShip(id) {
		t.Error("a pull request the host blocks offers ship")
	}
	c := e.shipRefusal(id, sha)
	if c.Reason != "not_mergeable" || !strings.Contains(c.Message, reason) {
		t.Errorf("ship of a blocked pull request = %s %q, want not_mergeable naming %q", c.Reason, c.Message, reason)
	}
	a.web.SetMergeable(1, lifecycle.MergeabilityMergeable)
	e.hostEvent(lifecycle.ProviderPullRequestEdited, 1, "unblocked-1")
	if !e.offersShip(id) {
		t.Error("ship is not offered once the host no longer blocks the merge")
	}
}

// A merge the host refused for a reason of its own is not offered again
// until a fact changes or the host sends a webhook about the pull
// request; a reading that finds the same facts keeps it refused.
func TestHostRefusedMergeIsNotOfferedUntilAChange(t *testing.T) {
	t.Parallel()
	const words = "Changes must be made through the merge queue"
	for _, tc := range []struct {
		name   string
		change func(e *env, a adapters, id, sha string)
	}{
		{"a check changes", func(e *env, a adapters, id, sha string) {
			a.web.SetCheck(sha, lifecycle.CICheck{Name: "lint", Status: lifecycle.CheckRunning})
			if err := e.Svc.Reconcile(e.T.Context(), id); err != nil {
				e.T.Fatal(err)
			}
		}},
		{"a webhook", func(e *env, a adapters, id, sha string) {
			e.hostEvent(lifecycle.ProviderPullRequestEdited, 1, "edited-1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, a, _ := newShipEnv(t)
			id, sha := e.shippableTask("ENG-1")
			a.web.FailNext(memory.OpMerge, &lifecycle.RefusedError{Message: words})
			op := e.waitShip(shipOpID(t, e.ship(id, "refused-1", apitest.ShipBody("merge_only", "staging", sha))))["data"].(map[string]any)
			if op["status"] != "failed" || op["error"].(map[string]any)["code"] != "merge_failed" {
				t.Fatalf("operation = %v, want failed merge_failed", op)
			}
			if e.offersShip(id) {
				t.Fatal("ship is offered again right after the host refused the merge")
			}
			// The refusal makes the Service read the host again; the same
			// facts keep it.
			if err := e.Svc.Reconcile(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if e.offersShip(id) {
				t.Fatal("ship is offered again after a reading that found the same facts")
			}
			c := e.shipRefusal(id, sha)
			if c.Reason != "not_mergeable" || !strings.Contains(c.Message, words) {
				t.Errorf("ship after the refusal = %s %q, want not_mergeable with the host's words", c.Reason, c.Message)
			}
			tc.change(e, a, id, sha)
			if tc.name == "a check changes" {
				// CI is running now: ship waits for it, and not for the
				// refusal any more.
				a.web.SetCheck(sha, lifecycle.CICheck{Name: "lint", Status: lifecycle.CheckPassed})
				if err := e.Svc.Reconcile(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
			if !e.offersShip(id) {
				t.Errorf("ship is not offered again after %s", tc.name)
			}
		})
	}
}

// While the host works out mergeability, a refused merge is waited for
// and tried again, and the operation says so in its wait.
func TestShipWaitsWhileTheHostWorksOutMergeability(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) { c.ShipRetryBackoff, c.ShipLease = 5*time.Second, time.Hour })
	id, sha := e.shippableTask("ENG-1")
	a.web.FailNext(memory.OpMerge, &lifecycle.TemporaryError{Reason: lifecycle.WaitMergeabilityUnknown,
		Err: &lifecycle.RefusedError{Message: "Pull Request is not mergeable"}})
	opID := shipOpID(t, e.ship(id, "mergeability-1", apitest.ShipBody("merge_only", "staging", sha)))
	var op lifecycle.ShipOperation
	apitest.WaitFor(t, func() bool {
		var err error
		if op, err = e.Svc.ShipOperation(t.Context(), opID); err != nil {
			t.Fatal(err)
		}
		return op.Wait != nil
	})
	retryAt := lifecycle.NewTimestamp(e.Clock.Now().Add(5 * time.Second))
	if op.Status != lifecycle.ShipRunning || op.Wait.Reason != lifecycle.WaitMergeabilityUnknown || !op.Wait.Until.Equal(retryAt.Time) {
		t.Fatalf("operation while the host works out mergeability = %s with wait %+v, want running with wait %s until %s",
			op.Status, op.Wait, lifecycle.WaitMergeabilityUnknown, retryAt)
	}
	apitest.WaitFor(t, func() bool {
		e.Clock.Advance(time.Second)
		return a.web.Calls(memory.OpMerge) == 2
	})
	done := e.waitShip(opID)["data"].(map[string]any)
	if done["status"] != "succeeded" || done["wait"] != nil {
		t.Errorf("operation = %v, want succeeded with no wait", done)
	}
}

// A pull request on the host's merge train is followed however long the
// train takes, beyond the retry budget, and the operation says so.
func TestShipFollowsAMergeTrainBeyondTheRetryBudget(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) { c.ShipRetryBudget, c.ShipLease = 30*time.Second, 24*time.Hour })
	id, sha := e.shippableTask("ENG-1")
	const rounds = 10 // 10 × 10 s: more than the 30 s budget
	for range rounds {
		a.web.FailNext(memory.OpMerge, &lifecycle.TemporaryError{Reason: lifecycle.WaitMergeTrain, RetryAfter: 10 * time.Second,
			Err: errors.New("the merge request is on the merge train")})
	}
	opID := shipOpID(t, e.ship(id, "train-key-1", apitest.ShipBody("merge_only", "staging", sha)))
	apitest.WaitFor(t, func() bool {
		op, err := e.Svc.ShipOperation(t.Context(), opID)
		if err != nil {
			t.Fatal(err)
		}
		return op.Wait != nil && op.Wait.Reason == lifecycle.WaitMergeTrain
	})
	apitest.WaitFor(t, func() bool {
		e.Clock.Advance(time.Second)
		op, err := e.Svc.ShipOperation(t.Context(), opID)
		return err == nil && op.Status != lifecycle.ShipRunning
	})
	op := e.waitShip(opID)["data"].(map[string]any)
	if op["status"] != "succeeded" || op["wait"] != nil {
		t.Errorf("operation = %v, want succeeded with no wait", op)
	}
	if n := a.web.Calls(memory.OpMerge); n != rounds+1 {
		t.Errorf("%d merge calls, want %d", n, rounds+1)
	}
}
