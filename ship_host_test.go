package lifecycle_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// These tests cover the Service at a fleet's scale (issue 20): the
// reconciler's sweeps read every task of a host in one batch, the ship
// runner reads the host again right before it merges, and a rate limit is
// waited out. The host is the in-memory one read through its BatchReader.

// fleetInterval is the fleet envs' ReconcileInterval.
const fleetInterval = time.Minute

// newFleetEnv builds a started env whose project "web" is bound to an
// in-memory host read in batches, under github_rules: the host decides
// reviews, and approves every pull request unless a test says otherwise.
func newFleetEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, *memory.Adapter) {
	t.Helper()
	host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	e := newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Project: "web", Adapter: host.Batch()}}
		c.Deployer = &fakeDeployer{}
		c.ReconcileInterval, c.ReconcilePollInterval = fleetInterval, time.Second
		c.ShipLease = time.Hour // longer than the clock's jumps: a jump past it would be a frozen runner
	}}, mutate...)...)
	startService(t, e.Svc)
	return e, host
}

// greenTask submits a task of project web as pull request n, with CI
// passed and approved at the host, and learns it: ship is offered.
func (e *env) greenTask(host *memory.Adapter, ident string, n int) (id, sha string) {
	e.T.Helper()
	host.SetReviewDecision(n, lifecycle.DecisionApproved)
	id, sha = e.submittedTask(ident)
	host.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	if err := e.Svc.Reconcile(e.T.Context(), id); err != nil {
		e.T.Fatal(err)
	}
	if acts := e.Task(id)["availableActions"]; !hasString(acts, "ship") {
		e.T.Fatalf("task %s offers %v, want ship", id, acts)
	}
	return id, sha
}

// nextBeat moves the clock to the reconciler's next beat and waits until
// cond holds. The reconciler may not wait on the clock yet when it moves,
// and then waits its poll from there: while cond does not hold, the clock
// moves on a second every 50 ms, far from the beat after.
func (e *env) nextBeat(cond func() bool) {
	e.T.Helper()
	e.Clock.Set(e.Clock.Now().Truncate(fleetInterval).Add(fleetInterval))
	nudged := time.Now()
	apitest.WaitFor(e.T, func() bool {
		if cond() {
			return true
		}
		if time.Since(nudged) > 50*time.Millisecond {
			e.Clock.Advance(time.Second)
			nudged = time.Now()
		}
		return false
	})
}

// swept reports whether the last sweep read the tasks ids: each is due at
// the next beat, no longer claimed.
func (e *env) swept(ids ...string) bool {
	e.T.Helper()
	beat := e.Clock.Now().Truncate(fleetInterval).Add(fleetInterval)
	for _, id := range ids {
		t, err := e.Store.Task(e.T.Context(), id)
		if err != nil {
			e.T.Fatal(err)
		}
		if !t.ReconcileAt.Equal(beat) {
			return false
		}
	}
	return true
}

// shipOp reads a ship operation's data.
func (e *env) shipOp(opID string) map[string]any {
	e.T.Helper()
	return e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
}

// What changed at the host without a webhook after the facts the ship was
// accepted on is read right before the merge: the operation fails with a
// code that says why, nothing is merged, and the task shows the new facts
// with the actions they allow, in an event.
func TestShipReadsTheHostBeforeMerging(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		change     func(host *memory.Adapter, sha string)
		code       string
		fact       string // a changedFields member of the event of the reading
		wantAction lifecycle.Action
	}{
		{"CI turned red", func(h *memory.Adapter, sha string) {
			h.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckFailed}}})
		}, "ci_not_passed", "ciStatus", ""},
		{"changes requested", func(h *memory.Adapter, sha string) {
			h.SetReviewDecision(1, lifecycle.DecisionChangesRequested)
		}, "review_not_approved", "reviewDecision", lifecycle.ActionStart},
		{"new commits", func(h *memory.Adapter, sha string) { h.Push(1) }, "head_moved", "headSha", ""},
		{"marked draft", func(h *memory.Adapter, sha string) { h.SetDraft(1, true) }, "draft", "draft", ""},
		{"conflict with the base", func(h *memory.Adapter, sha string) {
			h.SetMergeable(1, lifecycle.MergeabilityConflicting)
		}, "not_mergeable", "mergeable", lifecycle.ActionStart},
		{"behind a base required up to date", func(h *memory.Adapter, sha string) {
			h.SetMergeable(1, lifecycle.MergeabilityBehind)
		}, "not_mergeable", "mergeable", lifecycle.ActionStart},
		{"closed", func(h *memory.Adapter, sha string) { h.SetState(1, lifecycle.PullRequestClosed) }, "not_shippable", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, host := newFleetEnv(t)
			id, sha := e.greenTask(host, "ENG-1", 1)
			tt.change(host, sha) // no webhook: the stored facts still allow ship
			op := e.waitShip(shipOpID(t, e.ship(id, "ship-first", apitest.ShipBody("merge_only", "staging", sha))))["data"].(map[string]any)
			if op["status"] != "failed" || apitest.ErrorCode(op) != tt.code || op["mergeCommitSha"] != nil {
				t.Fatalf("operation = %v, want failed with %s and no merge", op, tt.code)
			}
			if n := host.Calls(memory.OpMerge); n != 0 {
				t.Errorf("%d merge calls, want none", n)
			}
			task := e.Task(id)
			if hasString(task["availableActions"], "ship") {
				t.Errorf("task offers %v after the operation failed on facts that forbid ship", task["availableActions"])
			}
			if tt.wantAction != "" && !hasString(task["availableActions"], string(tt.wantAction)) {
				t.Errorf("task offers %v, want %s", task["availableActions"], tt.wantAction)
			}
			if tt.fact == "" {
				return
			}
			var seen bool
			for _, ev := range e.EventsOf(id) {
				seen = seen || (ev["type"] == "task.updated" && hasString(eventData(ev)["changedFields"], tt.fact))
			}
			if !seen {
				t.Errorf("no task.updated naming %s among its changedFields: %v", tt.fact, e.EventsOf(id))
			}
		})
	}
}

// A pull request that conflicts with its base offers the agent rework,
// with the reason in the event, and ship is refused until it is rebased.
func TestConflictOffersRework(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, sha := e.greenTask(host, "ENG-1", 1)
	host.SetMergeable(1, lifecycle.MergeabilityConflicting)
	e.hostEvent(lifecycle.ProviderPullRequestEdited, 1, "conflict-1")

	task := e.Task(id)
	if diff := cmp.Diff([]any{"start", "view_ci_status", "view_review_feedback"}, task["availableActions"]); diff != "" {
		t.Errorf("actions of a conflicting pull request (-want +got):\n%s", diff)
	}
	data := eventData(e.lastEvent(id))
	if data["reworkReason"] != "merge_conflict" || !hasString(data["changedFields"], "mergeable") {
		t.Errorf("event of the conflict = %v, want reworkReason merge_conflict and mergeable changed", data)
	}
	if r := conflictReason(t, e.ship(id, "ship-conflict", apitest.ShipBody("merge_only", "staging", sha))); r != "not_mergeable" {
		t.Errorf("ship of a conflicting pull request = %q, want not_mergeable", r)
	}
	// The agent rebases and submits again: the conflict is gone.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	host.SetMergeable(1, lifecycle.MergeabilityMergeable)
	e.SubmitOK(id, "resubmit-1", apitest.SubmitBody())
	if data := eventData(e.lastEvent(id)); data["reworkReason"] != nil {
		t.Errorf("event of the resubmission carries reworkReason %v", data["reworkReason"])
	}
}

// Mergeability the host has not worked out yet is read again, a bounded
// number of times, before the merge.
func TestShipReadsUnknownMergeabilityAgain(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, sha := e.greenTask(host, "ENG-1", 1)
	host.SetMergeable(1, lifecycle.MergeabilityUnknown)
	reads := host.Calls(memory.OpBatch)
	opID := shipOpID(t, e.ship(id, "ship-first", apitest.ShipBody("merge_only", "staging", sha)))
	apitest.WaitFor(t, func() bool {
		if st := e.shipOp(opID)["status"]; st == "succeeded" || st == "failed" {
			return true
		}
		e.Clock.Advance(time.Second) // the runner's waits between readings
		return false
	})
	if op := e.shipOp(opID); op["status"] != "succeeded" {
		t.Fatalf("operation = %v, want succeeded: the host decides once the readings are spent", op)
	}
	if n := host.Calls(memory.OpBatch) - reads; n != 3 {
		t.Errorf("the runner read the host %d times, want 3 (one, and two more while mergeability was unknown)", n)
	}
}

// A merge refused by the host for a reason of its own ends the operation
// with the host's words, and the task is read again.
func TestMergeRefusedForAReviewReasonIsReadAgain(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, sha := e.greenTask(host, "ENG-1", 1)
	const msg = "At least 1 approving review is required by reviewers with write access."
	host.FailNext(memory.OpMerge, &lifecycle.RefusedError{Message: msg})
	reads := host.Calls(memory.OpBatch)
	op := e.waitShip(shipOpID(t, e.ship(id, "ship-first", apitest.ShipBody("merge_only", "staging", sha))))["data"].(map[string]any)
	if op["status"] != "failed" || apitest.ErrorCode(op) != "merge_failed" || op["error"].(map[string]any)["message"] != msg {
		t.Fatalf("operation = %v, want failed with the host's message", op)
	}
	// The runner's reading before the merge, then one more once it ended.
	apitest.WaitFor(t, func() bool { return host.Calls(memory.OpBatch)-reads == 2 })
}

// A ship whose merge hits a rate limit longer than the retry budget waits
// for it, running, with the reason on the operation, and then merges.
func TestShipWaitsOutARateLimit(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, sha := e.greenTask(host, "ENG-1", 1)
	const reset = 40 * time.Minute // longer than ShipRetryBudget's 10 minutes
	host.FailNext(memory.OpMerge, &lifecycle.TemporaryError{Err: errors.New("API rate limit exceeded"), RetryAfter: reset, RateLimited: true})
	opID := shipOpID(t, e.ship(id, "ship-first", apitest.ShipBody("merge_only", "staging", sha)))
	var op map[string]any
	apitest.WaitFor(t, func() bool {
		op = e.shipOp(opID)
		return op["wait"] != nil
	})
	wait := op["wait"].(map[string]any)
	want := lifecycle.NewTimestamp(e.Clock.Now().Add(reset)).String()
	if op["status"] != "running" || wait["reason"] != "rate_limited" || wait["until"] != want || wait["message"] == "" {
		t.Fatalf("waiting operation = %v, want running, waiting rate_limited until %s", op, want)
	}
	e.Clock.Advance(reset)
	op = e.waitShip(opID)["data"].(map[string]any)
	if op["status"] != "succeeded" || op["wait"] != nil {
		t.Errorf("operation after the reset = %v, want succeeded and no longer waiting", op)
	}
}

// A pull request closed at the host sends its task back to in_progress;
// reopened, without a webhook, the next sweep puts the task back in
// review. With a webhook it is at once.
func TestReopenedPullRequestReturnsToReview(t *testing.T) {
	t.Parallel()
	for _, webhook := range []bool{false, true} {
		t.Run(fmt.Sprintf("webhook %v", webhook), func(t *testing.T) {
			t.Parallel()
			e, host := newFleetEnv(t)
			id, _ := e.greenTask(host, "ENG-1", 1)
			host.SetState(1, lifecycle.PullRequestClosed)
			e.hostEvent(lifecycle.ProviderPullRequestClosed, 1, "close-1")
			if st := e.Task(id)["status"]; st != "in_progress" {
				t.Fatalf("task after the close is %v, want in_progress", st)
			}
			host.SetState(1, lifecycle.PullRequestOpen)
			if webhook {
				e.hostEvent(lifecycle.ProviderPullRequestReopened, 1, "reopen-1")
			}
			e.nextBeat(func() bool { return e.Task(id)["status"] == "in_review" })
			data := eventData(e.lastEvent(id))
			if data["previousStatus"] != "in_progress" || !hasString(data["changedFields"], "status") || !hasString(data["availableActions"], "ship") {
				t.Errorf("event of the reopen = %v, want in_progress -> in_review offering ship", data)
			}
		})
	}
}

// A pull request retargeted at another base at the host: the task's
// baseBranch follows.
func TestRetargetedBaseIsStored(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, _ := e.greenTask(host, "ENG-1", 1)
	host.SetBase(1, "release-2")
	e.nextBeat(func() bool { return e.Task(id)["baseBranch"] == "release-2" })
	if data := eventData(e.lastEvent(id)); !hasString(data["changedFields"], "baseBranch") {
		t.Errorf("event of the retargeting = %v, want baseBranch among changedFields", data)
	}
}

// Each sweep reads every task of the host in one batch; a change made
// without a webhook shows after the next sweep; a quiet task costs no
// write of an event.
func TestSweepsReadInBatches(t *testing.T) {
	t.Parallel()
	const tasks = 150
	e, host := newFleetEnv(t)
	ids := make([]string, tasks)
	for i := range ids {
		host.SetReviewDecision(i+1, lifecycle.DecisionApproved)
		ids[i], _ = e.submittedTask(fmt.Sprintf("ENG-%d", i+1))
	}
	events := len(e.Events())
	start := host.Calls(memory.OpBatch)
	var pushed string
	for sweep := 1; sweep <= 10; sweep++ {
		if sweep == 5 {
			pushed = host.Push(7) // no webhook
		}
		e.nextBeat(func() bool { return e.swept(ids...) })
		if sweep == 5 {
			if got := e.Task(ids[6])["headSha"]; got != pushed {
				t.Errorf("after the sweep that followed a push: head %v, want %s", got, pushed)
			}
		}
	}
	if n := host.Calls(memory.OpBatch) - start; n != 10 {
		t.Errorf("ten sweeps of %d tasks made %d batch readings, want 10", tasks, n)
	}
	if n := host.Calls(memory.OpPullRequest) + host.Calls(memory.OpChecks) + host.Calls(memory.OpReviews); n != 0 {
		t.Errorf("%d readings of one pull request, want none: every reading is batched", n)
	}
	if n := len(e.Events()) - events; n != 1 {
		t.Errorf("ten sweeps appended %d events, want 1 (the push)", n)
	}
}

// A sweep the host's rate limit defers is read once the limit resets.
func TestRateLimitedSweepWaitsForTheReset(t *testing.T) {
	t.Parallel()
	e, host := newFleetEnv(t)
	id, _ := e.greenTask(host, "ENG-1", 1)
	const reset = 10 * time.Minute
	host.FailNext(memory.OpBatch, &lifecycle.TemporaryError{Err: errors.New("the share of the rate limit is spent"), RetryAfter: reset, RateLimited: true})
	start := host.Calls(memory.OpBatch)
	var deferred time.Time
	e.nextBeat(func() bool {
		if host.Calls(memory.OpBatch) == start {
			return false
		}
		deferred = e.Clock.Now().Add(reset)
		return true
	})
	head := host.Push(1)
	// The task is due again when the limit resets, not at the next beats.
	apitest.WaitFor(t, func() bool {
		task, err := e.Store.Task(t.Context(), id)
		return err == nil && !task.ReconcileAt.Before(deferred.Add(-5*time.Second)) && !task.ReconcileAt.After(deferred)
	})
	if n := host.Calls(memory.OpBatch) - start; n != 1 {
		t.Errorf("%d readings before the reset, want the one deferred", n)
	}
	e.Clock.Set(deferred)
	apitest.WaitFor(t, func() bool {
		if e.Task(id)["headSha"] == head {
			return true
		}
		e.Clock.Advance(time.Second)
		return false
	})
}

// A repository declared without CI ships with no check at all.
func TestRepositoryWithoutCIShips(t *testing.T) {
	t.Parallel()
	no := false
	e, host := newFleetEnv(t, func(c *lifecycle.Config) { c.Adapters[0].CIRequired = &no })
	host.SetReviewDecision(1, lifecycle.DecisionApproved)
	id, sha := e.submittedTask("ENG-1")
	if acts := e.Task(id)["availableActions"]; !hasString(acts, "ship") {
		t.Fatalf("task of a repository without CI offers %v, want ship", acts)
	}
	if op := e.waitShip(shipOpID(t, e.ship(id, "ship-first", apitest.ShipBody("merge_only", "staging", sha))))["data"].(map[string]any); op["status"] != "succeeded" {
		t.Errorf("operation = %v, want succeeded", op)
	}
	// A check that runs still holds it.
	e2, host2 := newFleetEnv(t, func(c *lifecycle.Config) { c.Adapters[0].CIRequired = &no })
	host2.SetReviewDecision(1, lifecycle.DecisionApproved)
	id2, sha2 := e2.submittedTask("ENG-2")
	host2.SetChecks(sha2, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckRunning}}})
	if err := e2.Svc.Reconcile(t.Context(), id2); err != nil {
		t.Fatal(err)
	}
	if acts := e2.Task(id2)["availableActions"]; hasString(acts, "ship") {
		t.Errorf("task with a running check offers %v", acts)
	}
}

// A review reading that fails after a push does not keep the host's
// decision on the old head: under dismiss-stale-reviews the approval may
// be gone.
func TestFailedReviewReadingAfterAPushForgetsTheDecision(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t) // one reading at a time, github_rules
	a.web.SetReviewDecision(1, lifecycle.DecisionApproved)
	id, _ := e.submittedTask("ENG-1")
	if fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any); fb["decision"] != "approved" {
		t.Fatalf("decision = %v, want approved", fb["decision"])
	}
	a.web.Push(1)
	a.web.FailNext(memory.OpReviews, errors.New("502 Bad Gateway"))
	a.web.FailNext(memory.OpReviews, errors.New("502 Bad Gateway")) // the reading at the old head, and at the new one
	e.hostEvent(lifecycle.ProviderHeadChanged, 1, "push-1")
	if fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any); fb["decision"] != "pending" {
		t.Errorf("decision after a push whose reviews could not be read = %v, want pending", fb["decision"])
	}
}
