package shiprun_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/shiprun"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/memory"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

const head = "0123456789abcdef0123456789abcdef01234567"

// host is a code host of one pull request. Its Merge merges, and then
// fails as a merge whose answer was lost does when lose is set.
type host struct {
	lifecycletype.ProviderAdapter // nil: what the runner must not call

	mu     sync.Mutex
	pr     lifecycletype.PullRequest
	merges int
	lose   bool
	moved  bool // the head moved before the merge
}

func (h *host) PullRequest(_ context.Context, _ lifecycletype.PullRequestRef) (lifecycletype.PullRequest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pr, nil
}

func (h *host) Merge(_ context.Context, req lifecycletype.MergeRequest) (lifecycletype.MergeResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.merges++
	if h.moved || req.ExpectedHeadSHA != h.pr.HeadSHA {
		return lifecycletype.MergeResult{}, lifecycletype.ErrHeadMismatch
	}
	h.pr.State, h.pr.MergeCommitSHA = lifecycletype.PullRequestMerged, "fedcba9876543210fedcba9876543210fedcba98"
	if h.lose {
		return lifecycletype.MergeResult{}, errors.New("connection reset")
	}
	return lifecycletype.MergeResult{MergeCommitSHA: h.pr.MergeCommitSHA}, nil
}

// tasks is a Tasks whose table allows every step.
type tasks struct {
	store *memory.Store
	host  *host
	ended chan shiprun.Ending
}

func (d *tasks) ReadTask(ctx context.Context, taskID string) (lifecycletype.Task, error) {
	var t lifecycletype.Task
	err := d.store.Update(ctx, func(tx lifecycletype.Tx) error {
		var err error
		t, err = tx.Task(ctx, taskID)
		return err
	})
	return t, err
}

func (d *tasks) AdapterFor(*lifecycletype.Task, lifecycletype.SubmitMode) (lifecycletype.ProviderAdapter, error) {
	return d.host, nil
}

func (d *tasks) ReadHost(ctx context.Context, a lifecycletype.ProviderAdapter, _ lifecycletype.Task, ref lifecycletype.PullRequestRef) (shiprun.Reading, error) {
	pr, err := a.PullRequest(ctx, ref)
	return reading{pr}, err
}

func (d *tasks) MayRun(*lifecycletype.Task, string) *shiprun.Refusal           { return nil }
func (d *tasks) MayMerge(*lifecycletype.Task, string, string) *shiprun.Refusal { return nil }
func (d *tasks) ReconcileSoon(context.Context, string)                         {}

func (d *tasks) FinishShip(ctx context.Context, _ string, end func(tx lifecycletype.Tx) (*shiprun.Ending, error)) error {
	var e *shiprun.Ending
	err := d.store.Update(ctx, func(tx lifecycletype.Tx) error {
		var err error
		e, err = end(tx)
		return err
	})
	if err == nil && e != nil {
		d.ended <- *e
	}
	return err
}

type reading struct{ pr lifecycletype.PullRequest }

func (r reading) PullRequest() lifecycletype.PullRequest { return r.pr }
func (r reading) Store(context.Context) error            { return nil }

// ship queues a merge_only operation of a task in review at head, runs a
// runner until the operation ends, and returns how it ended.
func ship(t *testing.T, h *host) shiprun.Ending {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := fakeclock.New(now)
	store := memory.New()
	ref := lifecycletype.PullRequestRef{Owner: "o", Repo: "r", Number: 7}
	sha := head
	task := lifecycletype.Task{ID: "tsk_1", Identifier: "T-1", Title: "a task", Status: lifecycletype.StatusInReview, HeadSHA: &sha, Version: 1, ActiveShipID: "shp_1"}
	op := lifecycletype.ShipOperation{TaskID: task.ID, OperationID: "shp_1", Status: lifecycletype.ShipQueued, QueuedAt: lifecycletype.NewTimestamp(now),
		Mode: lifecycletype.ShipMergeOnly, TargetEnvironment: lifecycletype.EnvironmentStaging, ExpectedHeadSHA: head, PullRequest: ref, LeaseUntil: lifecycletype.NewTimestamp(now)}
	if err := store.Update(ctx, func(tx lifecycletype.Tx) error {
		if err := tx.CreateTask(ctx, task); err != nil {
			return err
		}
		return tx.CreateShipOperation(ctx, op)
	}); err != nil {
		t.Fatal(err)
	}
	tel, err := telemetry.New(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider(), clock)
	if err != nil {
		t.Fatal(err)
	}
	d := &tasks{store: store, host: h, ended: make(chan shiprun.Ending, 1)}
	var wg sync.WaitGroup
	r := shiprun.New(shiprun.Config{
		Owner: "ins_test", Tasks: d, Update: store.Update, UpdateRelaxed: store.Update,
		Clock: clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tel: tel,
		Go:              func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() },
		ShipConcurrency: 1, ShipPollInterval: time.Second, ShipLease: 30 * time.Second,
		ShipRetryBudget: time.Minute, ShipRetryBackoff: time.Second, ProviderTimeout: 10 * time.Second, DeployTimeout: time.Minute,
	})
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	select {
	case e := <-d.ended:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the operation did not end")
		return shiprun.Ending{}
	}
}

func openPR(sha string) lifecycletype.PullRequest {
	return lifecycletype.PullRequest{PullRequestRef: lifecycletype.PullRequestRef{Owner: "o", Repo: "r", Number: 7}, State: lifecycletype.PullRequestOpen, HeadSHA: sha, Mergeable: lifecycletype.MergeabilityMergeable}
}

// TestShipMergesOnce checks that a merge whose answer was lost is
// recognised by reading the pull request again, and not tried twice.
func TestShipMergesOnce(t *testing.T) {
	for _, lose := range []bool{false, true} {
		h := &host{pr: openPR(head), lose: lose}
		e := ship(t, h)
		if h.merges != 1 {
			t.Errorf("lose=%v: %d merges, want 1", lose, h.merges)
		}
		op := e.Operation
		if op.Status != lifecycletype.ShipSucceeded || e.MergeSHA != h.pr.MergeCommitSHA || op.MergeCommitSHA == nil || *op.MergeCommitSHA != e.MergeSHA || op.FinishedAt == nil || op.Error != nil {
			t.Errorf("lose=%v: ended %+v, operation %+v; want succeeded at merge %s", lose, e, op, h.pr.MergeCommitSHA)
		}
	}
}

// TestShipHeadMismatch checks that a host refusing the merge at the
// expected head fails the operation with head_sha_mismatch, merging
// nothing.
func TestShipHeadMismatch(t *testing.T) {
	h := &host{pr: openPR(head), moved: true}
	e := ship(t, h)
	if op := e.Operation; op.Status != lifecycletype.ShipFailed || op.Error == nil || op.Error.Code != "head_sha_mismatch" || e.MergeSHA != "" || op.MergeCommitSHA != nil {
		t.Errorf("ended %+v, operation %+v; want failed with head_sha_mismatch and no merge", e, op)
	}
	if h.pr.State != lifecycletype.PullRequestOpen {
		t.Errorf("pull request %s, want open", h.pr.State)
	}
}
