package queuerun_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/internal/queuerun"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// host is a code host in memory: a commit is the set of changes it
// holds. Its calls fail at random, before or after they take effect, as
// a host whose answers are lost does.
type host struct {
	mu      sync.Mutex
	rng     *rand.Rand
	fail    float64
	commits map[string][]string // commit → the heads it holds, sorted
	base    string
	moves   []string // every commit the base moved to
	broken  map[string]bool
	checks  map[string]lifecycletype.CheckStatus // the CI of candidates
	tested  map[string]bool                      // candidates whose CI passed
	// apart are commits the host lands as another commit, of another
	// tree (a host that rewrote what it landed); treeFails counts the next
	// Tree calls that fail.
	apart     map[string]bool
	treeFails int
	// early counts the moves of the base made while the trees of the
	// move before were still to be compared.
	early int
	// refuse, when set, is why the host refuses every move of the base
	// (its rules, the token's rights); refused counts those refusals.
	// refuseBuilds does the same for candidates' branches.
	refuse       string
	refused      int
	refuseBuilds string
}

func newHost(seed uint64, fail float64) *host {
	h := &host{rng: rand.New(rand.NewPCG(seed, 1)), fail: fail, commits: map[string][]string{"c0": nil}, base: "c0",
		broken: map[string]bool{}, checks: map[string]lifecycletype.CheckStatus{}, tested: map[string]bool{}}
	return h
}

var errLost = &lifecycletype.TemporaryError{Err: errors.New("the host's answer was lost")}

// flaky reports whether a call fails; after says whether it fails after
// taking effect.
func (h *host) flaky() (fail, after bool) {
	if h.rng.Float64() >= h.fail {
		return false, false
	}
	return true, h.rng.IntN(2) == 0
}

func (h *host) commitOf(heads []string) string {
	heads = slices.Clone(heads)
	sort.Strings(heads)
	sha := "c:" + strings.Join(heads, ",")
	h.commits[sha] = heads
	return sha
}

func (h *host) NativeQueue(context.Context, lifecycletype.RepoRef, string) (bool, error) {
	return false, nil
}

func (h *host) BranchHead(_ context.Context, _ lifecycletype.RepoRef, branch string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fail, _ := h.flaky(); fail {
		return "", errLost
	}
	return h.base, nil
}

func (h *host) BuildCandidate(_ context.Context, req lifecycletype.CandidateRequest) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuseBuilds != "" {
		h.refused++
		return "", &lifecycletype.RefusedError{Message: h.refuseBuilds}
	}
	fail, after := h.flaky()
	if fail && !after {
		return "", errLost
	}
	heads := slices.Clone(h.commits[req.Parent])
	for _, c := range req.Heads {
		if !slices.Contains(heads, c.SHA) {
			heads = append(heads, c.SHA)
		}
	}
	sha := h.commitOf(heads)
	if fail {
		return "", errLost
	}
	return sha, nil
}

func (h *host) AdvanceBranch(_ context.Context, req lifecycletype.AdvanceRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	fail, after := h.flaky()
	if fail && !after {
		return errLost
	}
	switch {
	case h.base == req.To:
		return nil
	case h.base != req.From:
		return lifecycletype.ErrBranchMoved
	case h.refuse != "":
		h.refused++
		return &lifecycletype.RefusedError{Message: h.refuse}
	}
	if h.treeFails > 0 && len(h.moves) > 0 {
		h.early++
	}
	h.base = req.To
	if h.apart[req.To] {
		h.base = req.To + "'"
		h.commits[h.base] = h.commits[req.To]
	}
	h.moves = append(h.moves, req.To)
	if fail {
		return errLost
	}
	return nil
}

func (h *host) Tree(_ context.Context, _ lifecycletype.RepoRef, sha string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.treeFails > 0 {
		h.treeFails--
		return "", errLost
	}
	return "tree of " + strings.TrimSuffix(sha, "'") + strings.Repeat(", rewritten", strings.Count(sha, "'")), nil
}

func (h *host) DeleteBranch(context.Context, lifecycletype.RepoRef, string) error { return nil }

func (h *host) Name() string             { return "fake" }
func (h *host) CountsSelfReported() bool { return false }

// Checks reports a candidate's CI: running the first time it is asked,
// then failed if it holds a broken change, else passed.
func (h *host) Checks(_ context.Context, q lifecycletype.CIQuery) (lifecycletype.CIReport, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fail, _ := h.flaky(); fail {
		return lifecycletype.CIReport{}, errLost
	}
	st, ok := h.checks[q.HeadSHA]
	switch {
	case !ok:
		st = lifecycletype.CheckRunning
	case st == lifecycletype.CheckRunning:
		st = lifecycletype.CheckPassed
		for _, c := range h.commits[q.HeadSHA] {
			if h.broken[c] {
				st = lifecycletype.CheckFailed
			}
		}
		if st == lifecycletype.CheckPassed {
			h.tested[q.HeadSHA] = true
		}
	}
	h.checks[q.HeadSHA] = st
	return lifecycletype.CIReport{Checks: []lifecycletype.CICheck{{Name: "build", Status: st}}}, nil
}

// domain is the lifecycle as the driver sees it, in memory.
type domain struct {
	store  *memory.Store
	h      *host
	mu     sync.Mutex
	live   map[string]bool // the tasks whose ship operation runs
	events []emitted       // what was emitted, in order
}

// emitted is an event the driver emitted for a task.
type emitted struct {
	task string
	data lifecycletype.TaskMergeQueueData
}

func (d *domain) Host(lifecycletype.MergeQueueRecord) (lifecycletype.QueueHost, lifecycletype.CIProvider, error) {
	return d.h, d.h, nil
}

func (d *domain) Task(ctx context.Context, id string) (lifecycletype.Task, error) {
	return d.store.Task(ctx, id)
}

func (d *domain) EntryLive(_ context.Context, taskID, _, _ string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live[taskID], nil
}

func (d *domain) Emit(_ context.Context, _ lifecycletype.Tx, task string, data lifecycletype.TaskMergeQueueData) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, emitted{task, data})
	return nil
}

// flakyUpdate fails a transaction at random, before it commits.
type flakyUpdate struct {
	mu    sync.Mutex
	rng   *rand.Rand
	fail  float64
	store *memory.Store
}

var errStoreDown = errors.New("the store is down")

func (u *flakyUpdate) update(ctx context.Context, fn func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error) error {
	u.mu.Lock()
	down := u.rng.Float64() < u.fail
	u.mu.Unlock()
	if down {
		return errStoreDown
	}
	return u.store.Update(ctx, func(tx lifecycletype.Tx) error { return fn(tx, tx.(lifecycletype.MergeQueueTx)) })
}

// Changes shipped through a queue whose host loses answers and whose
// Store fails transactions at random, some of them broken: every change
// that is not broken lands exactly once, every broken one is sent back,
// and the base only ever moves to candidates whose CI passed.
func TestFaultsLoseNothingAndLandNothingUntested(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := fakeclock.New(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
			store := memory.New()
			t.Cleanup(func() { store.Close() })
			h := newHost(seed, 0.15)
			d := &domain{store: store, h: h, live: map[string]bool{}}
			u := &flakyUpdate{rng: rand.New(rand.NewPCG(seed, 2)), fail: 0.1, store: store}
			tel, err := telemetry.New(noop.NewMeterProvider(), tracenoop.NewTracerProvider(), clock)
			if err != nil {
				t.Fatal(err)
			}
			r := queuerun.New(queuerun.Config{Owner: "p1", Store: store, Update: u.update, Domain: d, Clock: clock,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tel: tel, Engine: mergequeue.Config{Depth: 4},
				Poll: time.Second, Lease: time.Minute, CITimeout: time.Hour, BranchPrefix: "q/", HostTimeout: time.Second})
			const n = 12
			rng := rand.New(rand.NewPCG(seed, 3))
			changes := make([]queuerun.Change, n)
			for i := range changes {
				head := fmt.Sprintf("h%02d", i)
				if rng.IntN(5) == 0 {
					h.broken[head] = true
				}
				tk := lifecycletype.Task{ID: fmt.Sprintf("tsk_%02d", i), Identifier: fmt.Sprintf("T-%d", i), HeadSHA: &head}
				if err := store.Update(ctx, func(tx lifecycletype.Tx) error { return tx.CreateTask(ctx, tk) }); err != nil {
					t.Fatal(err)
				}
				changes[i] = queuerun.Change{Mode: lifecycletype.ModeAdapterManaged, Base: "main", Task: tk, OperationID: "shp_" + tk.ID,
					PullRequest: lifecycletype.PullRequestRef{Owner: "o", Repo: "r", Number: i + 1}, Head: head}
				d.live[tk.ID] = true
			}
			landed := map[string]string{}
			reworked := map[string]bool{}
			for step := 0; len(landed)+len(reworked) < n; step++ {
				if step > 2000 {
					t.Fatalf("after %d steps: %d landed, %d reworked of %d", step, len(landed), len(reworked), n)
				}
				// Each ship follows its entry, as the ship runner does.
				for _, c := range changes {
					if _, done := landed[c.Task.ID]; done || reworked[c.Task.ID] {
						continue
					}
					res, err := r.Enter(ctx, c, h)
					var rw *lifecycletype.QueueReworkError
					switch {
					case err == nil:
						landed[c.Task.ID] = res.MergeCommitSHA
						d.mu.Lock()
						d.live[c.Task.ID] = false
						d.mu.Unlock()
					case errors.As(err, &rw):
						reworked[c.Task.ID] = true
						d.mu.Lock()
						d.live[c.Task.ID] = false
						d.mu.Unlock()
					case errors.Is(err, lifecycletype.ErrTemporary), errors.Is(err, errStoreDown):
					default:
						t.Fatalf("Enter(%s): %v", c.Task.ID, err)
					}
				}
				qs, err := store.MergeQueues(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range qs {
					_ = r.Step(ctx, q.ID) // failures are the faults: the next step goes on
				}
				clock.Advance(time.Second)
			}
			for _, c := range changes {
				switch {
				case h.broken[c.Head] && !reworked[c.Task.ID]:
					t.Errorf("broken %s landed in %s", c.Head, landed[c.Task.ID])
				case !h.broken[c.Head] && reworked[c.Task.ID]:
					t.Errorf("%s, not broken, was sent back", c.Head)
				case !h.broken[c.Head] && !slices.Contains(h.commits[h.base], c.Head):
					t.Errorf("%s landed in %s, but the base %s lacks it", c.Head, landed[c.Task.ID], h.base)
				}
			}
			for _, m := range h.moves {
				if !h.tested[m] {
					t.Errorf("the base moved to %s, which CI did not pass", m)
				}
			}
			seen := map[string]int{}
			for _, m := range h.moves {
				for _, c := range h.commits[m] {
					seen[c]++
				}
			}
			// Each move holds everything before it: a change is new in
			// exactly one move.
			prev := 0
			for i, m := range h.moves {
				if len(h.commits[m]) < prev {
					t.Errorf("move %d to %s lost changes", i, m)
				}
				prev = len(h.commits[m])
			}
		})
	}
}

// rig is a driver over a fake host and an in-memory Store, on a fake
// clock, whose transactions never fail.
type rig struct {
	t     *testing.T
	r     *queuerun.Runner
	h     *host
	d     *domain
	store *memory.Store
	clock *fakeclock.Clock
}

// newRig builds a rig driving queues with engine, measuring into mp.
func newRig(t *testing.T, engine mergequeue.Config, mp metric.MeterProvider) *rig {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	h := newHost(1, 0)
	d := &domain{store: store, h: h, live: map[string]bool{}}
	tel, err := telemetry.New(mp, tracenoop.NewTracerProvider(), clock)
	if err != nil {
		t.Fatal(err)
	}
	update := func(ctx context.Context, fn func(tx lifecycletype.Tx, qtx lifecycletype.MergeQueueTx) error) error {
		return store.Update(ctx, func(tx lifecycletype.Tx) error { return fn(tx, tx.(lifecycletype.MergeQueueTx)) })
	}
	r := queuerun.New(queuerun.Config{Owner: "p1", Store: store, Update: update, Domain: d, Clock: clock,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tel: tel, Engine: engine,
		Poll: time.Second, Lease: time.Minute, CITimeout: time.Hour, BranchPrefix: "q/", HostTimeout: time.Second})
	return &rig{t: t, r: r, h: h, d: d, store: store, clock: clock}
}

// enter makes task i with head h<i>, ships it into the queue of main,
// and returns its change.
func (g *rig) enter(i int) queuerun.Change {
	g.t.Helper()
	ctx := context.Background()
	head := fmt.Sprintf("h%d", i)
	tk := lifecycletype.Task{ID: fmt.Sprintf("tsk_%d", i), Identifier: fmt.Sprintf("T-%d", i), HeadSHA: &head}
	if err := g.store.Update(ctx, func(tx lifecycletype.Tx) error { return tx.CreateTask(ctx, tk) }); err != nil {
		g.t.Fatal(err)
	}
	c := queuerun.Change{Mode: lifecycletype.ModeAdapterManaged, Base: "main", Task: tk, OperationID: "shp_" + tk.ID,
		PullRequest: lifecycletype.PullRequestRef{Owner: "o", Repo: "r", Number: i + 1}, Head: head}
	g.d.mu.Lock()
	g.d.live[tk.ID] = true
	g.d.mu.Unlock()
	g.where(c)
	return c
}

// where follows c's ship once: it must wait, and says where in words.
func (g *rig) where(c queuerun.Change) string {
	g.t.Helper()
	_, err := g.r.Enter(context.Background(), c, g.h)
	if !errors.Is(err, lifecycletype.ErrTemporary) {
		g.t.Fatalf("Enter(%s) = %v, want a wait", c.Task.ID, err)
	}
	return err.Error()
}

// queue returns the one queue's ID.
func (g *rig) queue() string {
	g.t.Helper()
	qs, err := g.store.MergeQueues(context.Background())
	if err != nil || len(qs) != 1 {
		g.t.Fatalf("queues: %v, %v", qs, err)
	}
	return qs[0].ID
}

// After each landing the base's tree is compared with the tested
// candidate's: when they differ the queue pauses, saying why, and every
// task left in it hears so; when the host cannot tell, the landing
// stands, nothing else lands, and the trees are compared at the next
// steps until it can.
func TestLandedTreeIsTheTestedTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		treeFails int
		apart     bool
	}{
		{"same", 0, false},
		{"apart", 0, true},
		{"same, told late", 30, false},
		{"apart, told late", 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One change per batch: the first lands alone, the second
			// waits behind it.
			g := newRig(t, mergequeue.Config{Depth: 1, MaxBatch: 1}, noop.NewMeterProvider())
			h := g.h
			h.apart, h.treeFails = map[string]bool{}, tc.treeFails
			changes := []queuerun.Change{g.enter(0), g.enter(1)}
			first := "c:h0"
			if tc.apart {
				h.apart[first] = true
			}
			ctx, id := context.Background(), g.queue()
			for range 80 {
				if err := g.r.Step(ctx, id); err != nil {
					t.Fatal(err)
				}
				g.clock.Advance(time.Second)
			}
			view, err := g.r.ViewOf(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wantMoves := []string{first, "c:h0,h1"}
			if tc.apart {
				wantMoves = []string{first}
			}
			if diff := cmp.Diff(wantMoves, h.moves); diff != "" {
				t.Errorf("the base's moves (-want +got):\n%s", diff)
			}
			reason := ""
			if view.PauseReason != nil {
				reason = *view.PauseReason
			}
			if view.Paused != tc.apart || tc.apart != strings.Contains(reason, "is not the tested tree") {
				t.Errorf("paused %v (%q), want paused %v for the trees", view.Paused, reason, tc.apart)
			}
			var paused []string
			g.d.mu.Lock()
			for _, e := range g.d.events {
				if e.data.Change == "paused" {
					paused = append(paused, e.task)
					if !e.data.Queue.Paused || !strings.Contains(e.data.Queue.PauseReason, "is not the tested tree") {
						t.Errorf("paused event of %s: %+v", e.task, e.data.Queue)
					}
				}
			}
			g.d.mu.Unlock()
			var wantPaused []string
			if tc.apart {
				wantPaused = []string{changes[1].Task.ID}
			}
			if diff := cmp.Diff(wantPaused, paused); diff != "" {
				t.Errorf("tasks told of the pause (-want +got):\n%s", diff)
			}
			h.mu.Lock()
			left, early := h.treeFails, h.early
			h.mu.Unlock()
			if left != 0 {
				t.Errorf("%d failing tree reads left: the trees were not compared again", left)
			}
			if early != 0 {
				t.Errorf("the base moved %d times before the trees of the move before were compared", early)
			}
		})
	}
}

// A ship that waits in the queue says where its change is: its position,
// its candidate and that candidate's CI, and whether the queue is paused.
func TestWaitSaysWhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newRig(t, mergequeue.Config{Depth: 1, MaxBatch: 1}, noop.NewMeterProvider())
	changes := []queuerun.Change{g.enter(0), g.enter(1)}
	id := g.queue()
	// The first step builds the first candidate and starts its CI; the
	// second reads its checks, running.
	for range 2 {
		if err := g.r.Step(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	v, err := g.r.ViewOf(ctx, id)
	if err != nil || len(v.Candidates) == 0 {
		t.Fatalf("view: %+v, %v", v, err)
	}
	cand := v.Candidates[0].ID
	for _, tc := range []struct {
		change queuerun.Change
		want   string
	}{
		{changes[0], fmt.Sprintf("position 1 of 2 in the merge queue into main, in candidate %d, testing (1 running)", cand)},
		{changes[1], "position 2 of 2 in the merge queue into main"},
	} {
		if got := g.where(tc.change); !strings.Contains(got, tc.want) || strings.Contains(got, "paused") {
			t.Errorf("%s waits with %q, want %q", tc.change.Task.ID, got, tc.want)
		}
	}
	if _, err := g.r.SetPaused(ctx, id, true, "paused by ops: release freeze"); err != nil {
		t.Fatal(err)
	}
	if got := g.where(changes[1]); !strings.Contains(got, "position 2 of 2 in the merge queue into main; the queue is paused") {
		t.Errorf("%s waits with %q while the queue is paused", changes[1].Task.ID, got)
	}
}

// lifecycle.merge_queue.ci_runs counts the runs started, so that divided
// by the changes landed it is the CI runs per landed change: a run whose
// candidate is dropped before it ends (its change removed) counts, and
// is no tested batch.
func TestCIRunsCountCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	g := newRig(t, mergequeue.Config{Depth: 1}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	c := g.enter(0)
	id := g.queue()
	// Built and under test; then its ship ends, and the run is dropped.
	if err := g.r.Step(ctx, id); err != nil {
		t.Fatal(err)
	}
	g.d.mu.Lock()
	g.d.live[c.Task.ID] = false
	g.d.mu.Unlock()
	if err := g.r.Step(ctx, id); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range sum.DataPoints {
					got[m.Name] += p.Value
				}
			}
		}
	}
	want := map[string]int64{"lifecycle.merge_queue.ci_runs": 1}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k string, _ int64) bool { return !strings.HasPrefix(k, "lifecycle.merge_queue.") })); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

// A landing or a build the host refuses for good (a protected branch,
// say) pauses the queue with the host's words, told to every task in
// it, instead of being asked again at every step; once an operator has
// fixed the host's rules and resumed the queue, the change lands.
func TestRefusedLandingPauses(t *testing.T) {
	t.Parallel()
	for _, build := range []bool{false, true} {
		t.Run(fmt.Sprintf("build=%v", build), func(t *testing.T) {
			t.Parallel()
			testRefusedPauses(t, build)
		})
	}
}

// testRefusedPauses refuses the landings, or the builds, of a queue of
// one change until it is resumed.
func testRefusedPauses(t *testing.T, build bool) {
	g := newRig(t, mergequeue.Config{Depth: 1, MaxBatch: 1}, noop.NewMeterProvider())
	h := g.h
	const why = "You are not allowed to push code to protected branches on this project."
	if build {
		h.refuseBuilds = why
	} else {
		h.refuse = why
	}
	c := g.enter(0)
	ctx, id := context.Background(), g.queue()
	step := func(n int) {
		for range n {
			if err := g.r.Step(ctx, id); err != nil {
				t.Fatal(err)
			}
			g.clock.Advance(time.Second)
		}
	}
	step(40)
	view, err := g.r.ViewOf(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !view.Paused || view.PauseReason == nil || !strings.Contains(*view.PauseReason, why) {
		t.Fatalf("after a refused landing: paused %v, reason %v; want paused with the host's words", view.Paused, view.PauseReason)
	}
	h.mu.Lock()
	refused, moves := h.refused, len(h.moves)
	h.mu.Unlock()
	if refused != 1 || moves != 0 {
		t.Errorf("the host refused %d times and moved the base %d times; want 1 refusal and no move", refused, moves)
	}
	told := false
	g.d.mu.Lock()
	for _, e := range g.d.events {
		told = told || e.task == c.Task.ID && e.data.Change == "paused" && strings.Contains(e.data.Queue.PauseReason, why)
	}
	g.d.mu.Unlock()
	if !told {
		t.Error("the task was not told of the pause and its reason")
	}
	h.mu.Lock()
	h.refuse, h.refuseBuilds = "", ""
	h.mu.Unlock()
	if _, err := g.r.SetPaused(ctx, id, false, ""); err != nil {
		t.Fatal(err)
	}
	step(40)
	h.mu.Lock()
	defer h.mu.Unlock()
	if diff := cmp.Diff([]string{"c:h0"}, h.moves); diff != "" {
		t.Errorf("the base's moves after the resume (-want +got):\n%s", diff)
	}
}
