package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// runnerKey marks the context a gated Service is started with: the calls
// its background work makes to a gatedHost carry it.
type runnerKey struct{}

// gatedHost is a memory host at which every pull request read and merge
// made by background work (a ship runner) waits until the test lets it
// through, one call at a time. Calls made for requests and provider
// events pass at once. The test thus decides when the runner progresses.
type gatedHost struct {
	*memory.Adapter
	pass chan struct{}

	mu     sync.Mutex
	parked int // calls waiting at the gate
}

func newGatedHost(h *memory.Adapter) *gatedHost {
	return &gatedHost{Adapter: h, pass: make(chan struct{})}
}

// gate holds a call of background work until release lets it through.
func (g *gatedHost) gate(ctx context.Context) error {
	if ctx.Value(runnerKey{}) == nil {
		return nil
	}
	g.mu.Lock()
	g.parked++
	g.mu.Unlock()
	select {
	case <-g.pass: // release counted it out
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		g.parked--
		g.mu.Unlock()
		return ctx.Err()
	}
}

// waiting returns how many calls wait at the gate.
func (g *gatedHost) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parked
}

// release lets one waiting call through and reports whether there was one.
func (g *gatedHost) release() bool {
	g.mu.Lock()
	if g.parked == 0 {
		g.mu.Unlock()
		return false
	}
	g.parked--
	g.mu.Unlock()
	select {
	case g.pass <- struct{}{}:
		return true
	case <-time.After(5 * time.Second):
		panic("gatedHost: a call counted as waiting did not take its pass")
	}
}

func (g *gatedHost) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	if err := g.gate(ctx); err != nil {
		return lifecycle.PullRequest{}, err
	}
	return g.Adapter.PullRequest(ctx, ref)
}

func (g *gatedHost) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	if err := g.gate(ctx); err != nil {
		return lifecycle.MergeResult{}, err
	}
	return g.Adapter.Merge(ctx, req)
}

// newGatedEnv is an env whose tasks (every project) go to a gated memory
// host, with its background work started and no reconciler, so that only
// the test makes the ship runner progress.
func newGatedEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, *gatedHost) {
	t.Helper()
	g := newGatedHost(memory.New(memory.Config{Owner: "acme", Repo: "web"}))
	e := newEnv(t, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: g}}
		c.ReconcileInterval = -1
	}}, mutate...)...)
	startServiceWith(t, context.WithValue(t.Context(), runnerKey{}, true), e.Svc)
	return e, g
}

// settleRunner waits until every unfinished operation of ops has its
// runner waiting at the gate: until the runner can do nothing more
// without the test.
func (e *env) settleRunner(g *gatedHost, ops []string) {
	e.T.Helper()
	unfinished := 0
	settled := testenv.WaitUntil(5*time.Second, func() bool {
		unfinished = 0
		for _, id := range ops {
			op, err := e.Store.ShipOperation(e.T.Context(), id)
			if err != nil {
				e.T.Fatal(err)
			}
			if op.Status == lifecycle.ShipQueued || op.Status == lifecycle.ShipRunning {
				unfinished++
			}
		}
		return g.waiting() == unfinished
	})
	if !settled {
		e.T.Fatalf("the runner did not settle: %d calls wait at the gate for %d unfinished operations", g.waiting(), unfinished)
	}
}

// drainRunner lets the runner finish every operation of ops.
func (e *env) drainRunner(g *gatedHost, ops []string) {
	e.T.Helper()
	for {
		e.settleRunner(g, ops)
		if !g.release() {
			return
		}
	}
}

// approvedTask is a task of project web in review under always_require,
// with CI passed and approved by reviewerKey: ship is offered.
func (e *env) approvedTask(ident, reviewerKey string) (id, sha string) {
	e.T.Helper()
	id, sha = e.shippableTask(ident)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewerKey, Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	if acts := e.Task(id)["availableActions"]; !hasString(acts, "ship") {
		e.T.Fatalf("approved task offers %v, want ship", acts)
	}
	return id, sha
}

// alwaysRequire routes every submission to always_require review by
// anyone.
func alwaysRequire(c *lifecycle.Config) {
	c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
}

// A ship accepted, then changes requested before the runner merges: the
// operation fails with review_not_approved, nothing is merged, and the
// agent may start the rework.
func TestChangesRequestedAfterShipAcceptedPreventsTheMerge(t *testing.T) {
	t.Parallel()
	e, g := newGatedEnv(t, alwaysRequire)
	reviewer := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	id, sha := e.approvedTask("ENG-1", reviewer)
	opID := shipOpID(t, e.ship(id, "ship-then-review", apitest.ShipBody("merge_only", "staging", sha)))
	e.settleRunner(g, []string{opID}) // the runner waits to read the pull request
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "changes_requested", "body": "Not yet"}}, http.StatusCreated)
	e.drainRunner(g, []string{opID})

	op := e.waitShip(opID)["data"].(map[string]any)
	if op["status"] != "failed" || op["error"].(map[string]any)["code"] != "review_not_approved" || op["mergeCommitSha"] != nil {
		t.Errorf("operation = %v, want failed with review_not_approved and no merge", op)
	}
	if n := g.Calls(memory.OpMerge); n != 0 {
		t.Errorf("%d merge calls, want 0", n)
	}
	task := e.Task(id)
	if task["status"] != "in_review" || !hasString(task["availableActions"], "start") || hasString(task["availableActions"], "ship") {
		t.Errorf("task = %v %v, want in_review offering start and not ship", task["status"], task["availableActions"])
	}
	shipped := e.shippedEvents(id)
	if len(shipped) != 1 || eventData(shipped[0])["shipStatus"] != "failed" {
		t.Errorf("task.shipped events = %v, want one failed", shipped)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
}

// interleavingSeed fixes the schedules of TestShipAndReviewInterleavings.
const interleavingSeed = 10

// 100 random interleavings of a ship, a changes_requested review and the
// runner's steps, through the HTTP API. A review accepted (201) must
// prevent the merge; a review refused because the runner is merging (409
// ship_in_progress) comes too late to.
func TestShipAndReviewInterleavings(t *testing.T) {
	t.Parallel()
	e, g := newGatedEnv(t, alwaysRequire)
	reviewer := e.KeyAs(lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer}, lifecycle.ScopeReviewsWrite)
	rng := rand.New(rand.NewPCG(interleavingSeed, 0))
	outcomes := map[string]int{}
	for run := range 100 {
		// The runner's steps: read the pull request, merge, and one spare.
		schedule := []string{"ship", "review", "step", "step", "step"}
		rng.Shuffle(len(schedule), func(i, j int) { schedule[i], schedule[j] = schedule[j], schedule[i] })
		settle := rng.IntN(2) == 0 // after a step, wait for the runner or race it
		where := fmt.Sprintf("run %d (seed %d) %v settle=%v", run, interleavingSeed, schedule, settle)

		ident := fmt.Sprintf("RACE-%d", run)
		id, sha := e.approvedTask(ident, reviewer)
		pr := int(e.Task(id)["prNumber"].(float64))
		merges := g.Calls(memory.OpMerge)
		var opID string
		var ops []string
		var reviewStatus int
		var reviewReason string
		for _, step := range schedule {
			switch step {
			case "ship":
				rec := e.ship(id, "race-ship-"+ident, apitest.ShipBody("merge_only", "staging", sha))
				if rec.Code == http.StatusAccepted {
					opID = shipOpID(t, rec)
					ops = []string{opID}
					e.settleRunner(g, ops)
				} else if r := conflictReason(t, rec); r != "review_not_approved" {
					t.Fatalf("%s: ship refused with %q, want review_not_approved", where, r)
				}
			case "review":
				rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: reviewer, Body: map[string]any{"outcome": "changes_requested"}})
				reviewStatus = rec.Code
				if rec.Code == http.StatusConflict {
					reviewReason = conflictReason(t, rec)
				}
			case "step":
				if g.release() && settle {
					e.settleRunner(g, ops)
				}
			}
		}
		e.drainRunner(g, ops)

		var opStatus, opCode string
		if opID != "" {
			op := e.waitShip(opID)["data"].(map[string]any)
			opStatus = op["status"].(string)
			if errObj, ok := op["error"].(map[string]any); ok {
				opCode = errObj["code"].(string)
			}
		}
		host, _ := g.Adapter.PullRequest(t.Context(), webPR(pr))
		merged := host.State == lifecycle.PullRequestMerged
		task := e.Task(id)
		switch {
		case reviewStatus == http.StatusCreated:
			// The review counted: never a merge after it.
			if merged || g.Calls(memory.OpMerge) != merges {
				t.Errorf("%s: the review was accepted, yet the pull request was merged (%d merge calls)", where, g.Calls(memory.OpMerge)-merges)
			}
			if opID != "" && (opStatus != "failed" || opCode != "review_not_approved") {
				t.Errorf("%s: the review was accepted; operation %s %s, want failed review_not_approved", where, opStatus, opCode)
			}
			if !hasString(task["availableActions"], "start") {
				t.Errorf("%s: the review was accepted; task offers %v, want start", where, task["availableActions"])
			}
			outcomes[fmt.Sprintf("review accepted, ship %s", map[bool]string{true: "failed", false: "refused"}[opID != ""])]++
		case reviewStatus == http.StatusConflict && (reviewReason == "ship_in_progress" || reviewReason == "not_in_review"):
			// Too late: the runner was merging (or had merged).
			if opStatus != "succeeded" || !merged || task["status"] != "done" {
				t.Errorf("%s: the review was refused (%s); operation %s, merged %v, task %v; want the ship to succeed", where, reviewReason, opStatus, merged, task["status"])
			}
			outcomes["review refused ("+reviewReason+"), ship succeeded"]++
		default:
			t.Fatalf("%s: review answered %d %s", where, reviewStatus, reviewReason)
		}
		if last := eventData(e.lastEvent(id)); !sameActions(last["availableActions"], task["availableActions"]) {
			t.Errorf("%s: last event offers %v, GET offers %v", where, last["availableActions"], task["availableActions"])
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if len(outcomes) < 3 {
		t.Errorf("the schedules reached only %v; want accepted reviews that stop ships, refused ships and late reviews", outcomes)
	}
}

// sameActions reports whether two decoded availableActions are equal.
func sameActions(a, b any) bool { return slices.Equal(stringsOf(a), stringsOf(b)) }
