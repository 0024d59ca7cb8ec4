package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// These tests cover what the Service learns from a code host (issue 10):
// each fact changed at the scripted host reaches the task through a
// provider event or the reconciler, with the event it causes, and the
// ship runner copes with a host that fails, forgets to answer, or a
// deploy that outlasts its lease.

// webPR names pull request n of the env's "web" repository.
func webPR(n int) lifecycle.PullRequestRef {
	return lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: n}
}

// hostEvent applies a provider event about pull request n of the web
// repository, delivered as delivery.
func (e *env) hostEvent(kind lifecycle.ProviderEventKind, n int, delivery string) {
	e.T.Helper()
	e.applyEvent(lifecycle.ProviderEvent{Source: "memory", DeliveryID: delivery, Kind: kind, PullRequest: webPR(n)})
}

// applyEvent applies ev and fails the test if that fails.
func (e *env) applyEvent(ev lifecycle.ProviderEvent) {
	e.T.Helper()
	if err := e.Svc.ApplyProviderEvent(e.T.Context(), ev); err != nil {
		e.T.Fatalf("apply %s event %s: %v", ev.Kind, ev.DeliveryID, err)
	}
}

// lastEvent returns the newest event of a task, decoded.
func (e *env) lastEvent(taskID string) map[string]any {
	e.T.Helper()
	evs := e.EventsOf(taskID)
	if len(evs) == 0 {
		e.T.Fatalf("task %s has no events", taskID)
	}
	return evs[len(evs)-1]
}

// eventData returns an event's data member.
func eventData(ev map[string]any) map[string]any {
	d, _ := ev["data"].(map[string]any)
	return d
}

// strings returns the strings of a decoded JSON array.
func stringsOf(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// hasString reports whether the decoded JSON array v holds s.
func hasString(v any, s string) bool { return slices.Contains(stringsOf(v), s) }

// submittedTask creates a task of project web, starts and submits it, and
// returns it with its head.
func (e *env) submittedTask(ident string) (id, sha string) {
	e.T.Helper()
	id = e.startedTask(ident)
	return id, e.SubmitOK(id, "submit-"+ident, apitest.SubmitBody())["headSha"].(string)
}

// reportCI posts a passing build check for sha.
func (e *env) reportCI(taskID, sha string) {
	e.T.Helper()
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + taskID + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}},
	}}, http.StatusOK)
}

// conflictReason returns error.details.reason of a 409 response.
func conflictReason(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d %s, want 409", rec.Code, rec.Body)
	}
	d, _ := apitest.Decode(t, rec)["error"].(map[string]any)["details"].(map[string]any)
	r, _ := d["reason"].(string)
	return r
}

// shipOpID returns the operation ID of a 202 ship response.
func shipOpID(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if rec.Code != http.StatusAccepted {
		t.Fatalf("ship = %d %s, want 202", rec.Code, rec.Body)
	}
	return apitest.Decode(t, rec)["data"].(map[string]any)["operationId"].(string)
}

// A push after the submission moves the task's head: GET and the event say
// so, the old head can no longer be shipped, and the new one can once its
// CI is reported.
func TestHostPushMovesTheHead(t *testing.T) {
	t.Parallel()
	e, a, _ := newShipEnv(t)
	id, oldSHA := e.shippableTask("ENG-1")
	newSHA := a.web.Push(1)
	e.hostEvent(lifecycle.ProviderHeadChanged, 1, "push-1")

	task := e.Task(id)
	if task["headSha"] != newSHA {
		t.Fatalf("headSha after the push = %v, want %s", task["headSha"], newSHA)
	}
	ev := e.lastEvent(id)
	if ev["type"] != "task.updated" || !hasString(eventData(ev)["changedFields"], "headSha") {
		t.Errorf("event after the push = %v, want task.updated with headSha among changedFields", ev)
	}
	if diff := cmp.Diff(task["availableActions"], eventData(ev)["availableActions"]); diff != "" {
		t.Errorf("event and GET disagree on availableActions (-GET +event):\n%s", diff)
	}
	if r := conflictReason(t, e.ship(id, "push-ship-old-1", apitest.ShipBody("merge_only", "staging", oldSHA))); r != "ci_not_passed" {
		t.Errorf("ship of the old head before CI of the new = reason %q, want ci_not_passed", r)
	}
	e.reportCI(id, newSHA)
	if r := conflictReason(t, e.ship(id, "push-ship-old-2", apitest.ShipBody("merge_only", "staging", oldSHA))); r != "head_sha_mismatch" {
		t.Errorf("ship of the old head = reason %q, want head_sha_mismatch", r)
	}
	op := e.waitShip(shipOpID(t, e.ship(id, "push-ship-new", apitest.ShipBody("merge_only", "staging", newSHA))))["data"].(map[string]any)
	if op["status"] != "succeeded" || op["expectedHeadSha"] != newSHA {
		t.Errorf("ship of the new head = %v", op)
	}
	pr, _ := a.web.PullRequest(t.Context(), webPR(1))
	if pr.State != lifecycle.PullRequestMerged || pr.HeadSHA != newSHA {
		t.Errorf("pull request %s at %s, want merged at %s", pr.State, pr.HeadSHA, newSHA)
	}
}

// Under github_rules, changes requested at the host let the agent start
// again, with a task.reviewed event.
func TestHostChangesRequestedOffersStart(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t) // ReviewRules{}: github_rules
	id, _ := e.submittedTask("ENG-1")
	if got := e.Task(id)["availableActions"]; hasString(got, "start") {
		t.Fatalf("start offered before any review: %v", got)
	}
	a.web.SetReviewDecision(1, lifecycle.DecisionChangesRequested)
	a.web.AddReview(1, lifecycle.HostReview{Reviewer: "octocat", Outcome: lifecycle.ReviewChangesRequested, Body: "Add a test", SubmittedAt: apitest.Epoch})
	e.hostEvent(lifecycle.ProviderReviewSubmitted, 1, "review-1")

	task := e.Task(id)
	if diff := cmp.Diff([]any{"start", "view_ci_status", "view_review_feedback"}, task["availableActions"]); diff != "" {
		t.Errorf("actions after changes requested at the host (-want +got):\n%s", diff)
	}
	ev := e.lastEvent(id)
	data := eventData(ev)
	if ev["type"] != "task.reviewed" || data["reviewOutcome"] != "changes_requested" || data["reviewer"].(map[string]any)["id"] != "octocat" {
		t.Errorf("event after the host review = %v, want task.reviewed changes_requested by octocat", ev)
	}
	if diff := cmp.Diff(task["availableActions"], data["availableActions"]); diff != "" {
		t.Errorf("event and GET disagree (-GET +event):\n%s", diff)
	}
	fb := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if fb["decision"] != "changes_requested" || len(fb["reviews"].([]any)) != 1 {
		t.Errorf("review feedback = %v, want changes_requested with the host's review", fb)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
}

// CI turning green at the host offers ship, in the event of the change.
func TestHostCIGreenOffersShip(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	a.web.SetReviewDecision(1, lifecycle.DecisionApproved) // the host approves the pull request the submission opens
	id, sha := e.submittedTask("ENG-1")
	if got := e.Task(id)["availableActions"]; hasString(got, "ship") {
		t.Fatalf("ship offered before CI: %v", got)
	}
	a.web.SetChecks(sha, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	// The host names only the commit, as GitHub's check_suite does.
	e.applyEvent(lifecycle.ProviderEvent{Source: "memory", DeliveryID: "ci-1", Kind: lifecycle.ProviderChecksChanged, HeadSHA: sha})

	ev := e.lastEvent(id)
	data := eventData(ev)
	if ev["type"] != "task.updated" || !hasString(data["availableActions"], "ship") || !hasString(data["changedFields"], "ciStatus") {
		t.Errorf("event after CI passed = %v, want task.updated offering ship with ciStatus changed", ev)
	}
	if diff := cmp.Diff(e.Task(id)["availableActions"], data["availableActions"]); diff != "" {
		t.Errorf("event and GET disagree (-GET +event):\n%s", diff)
	}
	ci := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if ci["overall"] != "passed" || ci["checkedAt"] == nil {
		t.Errorf("ci-status = %v, want passed with checkedAt", ci)
	}
}

// A pull request merged by hand at the host makes the task done.
func TestHostManualMergeMakesTheTaskDone(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id, _ := e.submittedTask("ENG-1")
	a.web.MergeByHand(1)
	e.hostEvent(lifecycle.ProviderPullRequestMerged, 1, "merge-1")

	task := e.Task(id)
	if task["status"] != "done" || cmp.Diff([]any{}, task["availableActions"]) != "" {
		t.Errorf("task after a merge by hand: %v %v, want done with no actions", task["status"], task["availableActions"])
	}
	ev := e.lastEvent(id)
	data := eventData(ev)
	if ev["type"] != "task.updated" || data["status"] != "done" || data["previousStatus"] != "in_review" ||
		!hasString(data["changedFields"], "status") || !hasString(data["changedFields"], "prState") {
		t.Errorf("event after the merge = %v, want task.updated in_review -> done changing status and prState", ev)
	}
}

// A pull request closed without merging sends the task back to work; a new
// submission reopens it.
func TestHostCloseSendsTheTaskBack(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id, _ := e.submittedTask("ENG-1")
	a.web.SetState(1, lifecycle.PullRequestClosed)
	e.hostEvent(lifecycle.ProviderPullRequestClosed, 1, "close-1")

	task := e.Task(id)
	if task["status"] != "in_progress" || cmp.Diff([]any{"submit"}, task["availableActions"]) != "" {
		t.Errorf("task after its pull request was closed: %v %v, want in_progress offering submit", task["status"], task["availableActions"])
	}
	ev := e.lastEvent(id)
	if data := eventData(ev); ev["type"] != "task.updated" || data["status"] != "in_progress" || !hasString(data["changedFields"], "prState") {
		t.Errorf("event after the close = %v", ev)
	}
	sub := e.SubmitOK(id, "host-close-2", apitest.SubmitBody())
	if sub["prNumber"] != float64(1) || e.Task(id)["status"] != "in_review" {
		t.Errorf("resubmission = %v, want pull request #1 reopened and the task in review", sub)
	}
}

// A fact whose webhook was lost is learned by the background reconciler
// once the task's interval has passed.
func TestLostWebhookIsReconciled(t *testing.T) {
	t.Parallel()
	// A poll interval no other loop of the Service uses: the reconciler's
	// waiter at now+poll says it has swept at now and parked again.
	const interval, poll = time.Minute, 7 * time.Second
	e, a := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.ReconcileInterval, c.ReconcilePollInterval = interval, poll
	})
	startService(t, e.Svc)
	id, oldSHA := e.submittedTask("ENG-1")
	newSHA := a.web.Push(1) // no webhook arrives
	a.web.SetChecks(newSHA, lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}})
	reads := a.web.Calls(memory.OpPullRequest)

	e.Clock.Advance(interval / 3) // not due yet: first readings fall in the second half of the interval
	if !e.Clock.WaitForWaiterAt(e.Clock.Now().Add(poll), 5*time.Second) {
		t.Fatal("the reconciler did not sweep and park again after the clock moved")
	}
	if got := e.Task(id)["headSha"]; got != oldSHA || a.web.Calls(memory.OpPullRequest) != reads {
		t.Fatalf("task read before its reconciliation was due: head %v, %d reads", got, a.web.Calls(memory.OpPullRequest)-reads)
	}
	e.Clock.Advance(interval)
	apitest.WaitFor(t, func() bool {
		if e.Task(id)["headSha"] == newSHA {
			return true
		}
		e.Clock.Advance(time.Second) // the reconciler's poll
		return false
	})
	var found bool
	for _, ev := range e.EventsOf(id) {
		data := eventData(ev)
		if ev["type"] == "task.updated" && hasString(data["changedFields"], "headSha") {
			found = data["actor"].(map[string]any)["role"] == "system" && hasString(data["changedFields"], "ciStatus")
		}
	}
	if !found {
		t.Errorf("no task.updated by the system with headSha and ciStatus changed: %v", e.EventsOf(id))
	}
}

// A delivery applied once is ignored when it comes again: no event, no
// host read.
func TestDuplicateDeliveryIsAppliedOnce(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id, _ := e.submittedTask("ENG-1")
	a.web.Push(1)
	before := len(e.EventsOf(id))
	e.hostEvent(lifecycle.ProviderHeadChanged, 1, "delivery-42")
	if n := len(e.EventsOf(id)) - before; n != 1 {
		t.Fatalf("%d events after the first delivery, want 1", n)
	}
	calls := a.web.TotalCalls()
	a.web.Push(1) // the host moved again: a second reading would see it
	e.hostEvent(lifecycle.ProviderHeadChanged, 1, "delivery-42")
	if n := len(e.EventsOf(id)) - before; n != 1 {
		t.Errorf("%d events after the delivery came twice, want 1", n)
	}
	if n := a.web.TotalCalls() - calls; n != 0 {
		t.Errorf("the second delivery made %d host calls, want 0", n)
	}
	// The same ID from another source is another delivery.
	e.applyEvent(lifecycle.ProviderEvent{Source: "other", DeliveryID: "delivery-42", Kind: lifecycle.ProviderHeadChanged, PullRequest: webPR(1)})
	if n := len(e.EventsOf(id)) - before; n != 2 {
		t.Errorf("%d events after a delivery of another source, want 2", n)
	}
}

// A temporary merge failure is retried after a backoff on the Service's
// clock (or the wait the host asked for) and then succeeds.
func TestShipRetriesATemporaryMergeError(t *testing.T) {
	t.Parallel()
	for _, retryAfter := range []time.Duration{0, 2 * time.Minute} {
		t.Run(fmt.Sprintf("retry after %s", retryAfter), func(t *testing.T) {
			t.Parallel()
			// A lease longer than the test's jumps of the clock: a jump
			// past it would be a frozen runner, rightly taken over.
			e, a, _ := newShipEnv(t, func(c *lifecycle.Config) { c.ShipRetryBackoff, c.ShipLease = 5*time.Second, time.Hour })
			id, sha := e.shippableTask("ENG-1")
			a.web.FailNext(memory.OpMerge, &lifecycle.TemporaryError{Err: errors.New("base branch was modified"), RetryAfter: retryAfter})
			opID := shipOpID(t, e.ship(id, "temp-merge-1", apitest.ShipBody("merge_only", "staging", sha)))
			apitest.WaitFor(t, func() bool { return a.web.Calls(memory.OpMerge) == 1 })
			wait := 5 * time.Second
			if retryAfter > 0 {
				wait = retryAfter
			}
			// The runner pauses on the clock for exactly the wait before
			// its second try; moving the clock short of it leaves the
			// pause pending and the merge untried.
			retryAt := e.Clock.Now().Add(wait)
			if !e.Clock.WaitForWaiterAt(retryAt, 5*time.Second) {
				t.Fatalf("the ship runner did not pause %s on the clock after the temporary error", wait)
			}
			e.Clock.Advance(wait - time.Second)
			if !e.Clock.PendingAt(retryAt) {
				t.Fatal("the runner's pause ended before the wait was over")
			}
			if n := a.web.Calls(memory.OpMerge); n != 1 {
				t.Fatalf("%d merges before the wait was over, want 1", n)
			}
			apitest.WaitFor(t, func() bool {
				e.Clock.Advance(time.Second)
				return a.web.Calls(memory.OpMerge) == 2
			})
			op := e.waitShip(opID)["data"].(map[string]any)
			pr, _ := a.web.PullRequest(t.Context(), webPR(1))
			if op["status"] != "succeeded" || op["mergeCommitSha"] != pr.MergeCommitSHA {
				t.Errorf("operation = %v, want succeeded with the merge commit %s", op, pr.MergeCommitSHA)
			}
			if n := a.web.Calls(memory.OpMerge); n != 2 {
				t.Errorf("%d merge calls, want 2", n)
			}
			if n := len(e.shippedEvents(id)); n != 1 {
				t.Errorf("%d task.shipped events, want 1", n)
			}
		})
	}
}

// A merge that took effect but whose answer was lost is recognised by
// reading the pull request again: the operation succeeds with one merge.
func TestShipRecognisesAMergeWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	for _, lost := range []error{errors.New("read tcp: i/o timeout"), &lifecycle.TemporaryError{Err: errors.New("502 bad gateway")}} {
		t.Run(lost.Error(), func(t *testing.T) {
			t.Parallel()
			e, a, _ := newShipEnv(t)
			id, sha := e.shippableTask("ENG-1")
			a.web.LoseNextAnswer(memory.OpMerge, lost)
			op := e.waitShip(shipOpID(t, e.ship(id, "lost-merge-1", apitest.ShipBody("merge_only", "staging", sha))))["data"].(map[string]any)
			pr, _ := a.web.PullRequest(t.Context(), webPR(1))
			if op["status"] != "succeeded" || op["mergeCommitSha"] != pr.MergeCommitSHA {
				t.Errorf("operation = %v, want succeeded with %s", op, pr.MergeCommitSHA)
			}
			if n := a.web.Calls(memory.OpMerge); n != 1 {
				t.Errorf("%d merge calls, want exactly 1", n)
			}
			if task := e.Task(id); task["status"] != "done" {
				t.Errorf("task = %v, want done", task["status"])
			}
		})
	}
}

// blockingDeployer blocks in Deploy until released.
type blockingDeployer struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (d *blockingDeployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	d.mu.Lock()
	d.calls++
	first := d.calls == 1
	d.mu.Unlock()
	if first {
		close(d.entered)
	}
	select {
	case <-d.release:
	case <-ctx.Done():
		return lifecycle.Deployment{}, ctx.Err()
	}
	return lifecycle.Deployment{ID: "dep-1", Environment: req.Environment, CommitSHA: req.CommitSHA, DeployedAt: lifecycle.NewTimestamp(apitest.Epoch)}, nil
}

func (d *blockingDeployer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// watchClock tells when a wait of d begins: the lease renewer is the only
// loop of the Service that waits a third of the lease.
type watchClock struct {
	lifecycle.Clock
	d       time.Duration
	waiting chan struct{}
}

func (c *watchClock) After(d time.Duration) <-chan time.Time {
	ch := c.Clock.After(d)
	if d == c.d {
		c.waiting <- struct{}{}
	}
	return ch
}

// A deploy that lasts several leases keeps its lease: a second Service
// polling the same store never takes the operation over, and it runs once.
func TestShipLeaseIsRenewedThroughALongDeploy(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	d := &blockingDeployer{entered: make(chan struct{}), release: make(chan struct{})}
	renewer := make(chan struct{}, 1)
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) {
		c.Deployer, c.ShipLease = d, lease
		c.Clock = &watchClock{Clock: c.Clock, d: lease / 3, waiting: renewer}
	})
	id, sha := e.shippableTask("ENG-1")
	other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger(),
		Adapters:     []lifecycle.AdapterBinding{{Project: "web", Adapter: a.web}},
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}},
		Deployer:     d, ShipLease: lease, ShipPollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opID := shipOpID(t, e.ship(id, "long-deploy-1", apitest.ShipBody("merge_and_deploy", "production", sha)))
	<-d.entered
	startService(t, other) // once the first runner holds the operation
	// Four leases pass, a third at a time, each once the renewer waits;
	// the other Service polls the store every second of them.
	for i := range 12 {
		select {
		case <-renewer:
		case <-time.After(5 * time.Second):
			t.Fatalf("the lease renewer is not waiting after %d thirds of the lease", i)
		}
		for range 10 {
			e.Clock.Advance(lease / 30)
		}
		apitest.WaitFor(t, func() bool {
			op, err := e.Store.ShipOperation(t.Context(), opID)
			return err == nil && op.LeaseUntil.Equal(e.Clock.Now().Add(lease))
		})
		if op, _ := e.Store.ShipOperation(t.Context(), opID); op.Attempts != 1 || op.Status != lifecycle.ShipRunning || op.LeaseOwner == "" {
			t.Fatalf("after %d thirds of the lease: operation %s, attempt %d; want running, attempt 1", i+1, op.Status, op.Attempts)
		}
	}
	close(d.release)
	op := e.waitShip(opID)["data"].(map[string]any)
	if op["status"] != "succeeded" || op["deployment"] == nil {
		t.Errorf("operation = %v, want succeeded with a deployment", op)
	}
	stored, _ := e.Store.ShipOperation(t.Context(), opID)
	if d.count() != 1 || a.web.Calls(memory.OpMerge) != 1 || stored.Attempts != 1 {
		t.Errorf("%d deploys, %d merges, %d attempts; want 1 of each", d.count(), a.web.Calls(memory.OpMerge), stored.Attempts)
	}
	if n := len(e.shippedEvents(id)); n != 1 {
		t.Errorf("%d task.shipped events, want 1", n)
	}
	if strings.Contains(e.LogText(), "lost the lease") {
		t.Error("the runner logged that it lost its lease")
	}
}

// Reads answer from stored facts: GET /tasks/{id}, GET /tasks and the CI
// and review reads call no host, even for tasks in review.
func TestReadsCallNoHost(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	var ids []string
	for i := range 3 {
		id := e.startedTask(fmt.Sprintf("ENG-%d", i+1))
		e.SubmitOK(id, fmt.Sprintf("reads-key-%d", i), apitest.SubmitBody())
		ids = append(ids, id)
	}
	a.web.Push(1) // the host knows more than the Service: a read that asked would learn it
	before := a.web.TotalCalls()
	for _, id := range ids {
		if st := e.Task(id)["status"]; st != "in_review" {
			t.Fatalf("task %s is %v, want in_review", id, st)
		}
		e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "?tokenBudget=compact", Key: e.Admin}, http.StatusOK)
		e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/ci-status", Key: e.Admin}, http.StatusOK)
		e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + id + "/review-feedback", Key: e.Admin}, http.StatusOK)
	}
	list := e.Call(apitest.Request{Method: "GET", Path: "/tasks?status=in_review", Key: e.Admin}, http.StatusOK)
	if n := len(list["data"].([]any)); n != 3 {
		t.Errorf("GET /tasks listed %d tasks in review, want 3", n)
	}
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin}, http.StatusOK)
	if n := a.web.TotalCalls() - before; n != 0 {
		t.Errorf("reads made %d host calls, want 0", n)
	}
}
