package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/backoff"
	"github.com/tasklifecycle/lifecycle/internal/claimrun"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// WaitMergeabilityUnknown is the [TemporaryError.Reason] of an adapter
// whose host refused a merge while it was still working out whether it
// can merge the pull request: the ship runner waits and tries again,
// within Config.ShipRetryBudget, and shows the wait in
// [ShipOperation.Wait].
const WaitMergeabilityUnknown = "mergeability_unknown"

// WaitMergeTrain is the [TemporaryError.Reason] of an adapter whose pull
// request is on its host's merge train (GitLab's), whose pipeline tests it
// before the host merges it: the ship runner follows it, however long the
// train takes, outside Config.ShipRetryBudget, and shows the wait in
// [ShipOperation.Wait]. The train itself ends it: merged, or dropped with
// the host's reason.
const WaitMergeTrain = "merge_train"

// waitReason returns the Reason of err's TemporaryError, or "".
func waitReason(err error) string {
	var te *TemporaryError
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}

// shipRoute is the route of POST /tasks/{id}/ship, the scope of its keys.
const shipRoute = "/tasks/{id}/ship"

// ShipParams asks for a task to be shipped. Its JSON form is the body of
// POST /tasks/{id}/ship; every member is required.
type ShipParams struct {
	// Mode is merge_only or merge_and_deploy.
	Mode ShipMode `json:"mode"`
	// TargetEnvironment is staging or production.
	TargetEnvironment Environment `json:"targetEnvironment"`
	// ExpectedHeadSHA is the full 40-hex-digit commit expected at the head
	// of the task's branch: the task's headSha.
	ExpectedHeadSHA string `json:"expectedHeadSha"`
	// Actor asks for the ship.
	Actor Actor `json:"-"`
	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent as POST /tasks/{id}/ship is: see [Service.Ship].
	IdempotencyKey string `json:"-"`
}

func (p *ShipParams) validate() error {
	var v lifecycletype.Validator
	if !p.Mode.Valid() {
		v.Add("mode", "is required: merge_only or merge_and_deploy")
	}
	if !p.TargetEnvironment.Valid() {
		v.Add("targetEnvironment", "is required: staging or production")
	}
	if !shaRE.MatchString(p.ExpectedHeadSHA) {
		v.Add("expectedHeadSha", "must be a full 40-character hex commit SHA")
	}
	return v.Err()
}

// Ship accepts a ship of a task: when `ship` is available, CI passed, the
// review decision allows it and expectedHeadSha is the task's head, all as
// last learned from the host (no host is called: the runner reads the host
// again right before it merges), a ship operation is queued for the runner
// and returned, and task.updated is emitted (ship is no longer available).
// It returns a *ConflictError whose Reason names the failed precondition
// (not_shippable, ship_in_progress, draft, not_mergeable, ci_not_passed,
// review_not_approved, head_sha_mismatch, deployer_not_configured).
//
// With p.IdempotencyKey set, a retry with the same key and parameters
// returns the operation the first call queued, and the same key with other
// parameters is a *ConflictError (idempotency_key_reused).
func (s *Service) Ship(ctx context.Context, taskID string, p ShipParams) (ShipOperation, error) {
	if err := p.validate(); err != nil {
		return ShipOperation{}, err
	}
	var op ShipOperation
	replayed, err := s.goIdempotent(ctx, p.Actor, shipRoute, taskID, p.IdempotencyKey, p, func(ctx context.Context, respond func(Tx, any) error) error {
		var err error
		op, err = s.ship(ctx, taskID, p, func(tx Tx, op *ShipOperation) error {
			return respond(tx, shipResponse(op))
		})
		return err
	})
	if err != nil {
		return ShipOperation{}, err
	}
	if replayed != nil {
		var env struct{ Data shipAccepted }
		if err := json.Unmarshal(replayed, &env); err != nil {
			return ShipOperation{}, fmt.Errorf("replay ship of task %s: %w", taskID, err)
		}
		return s.ShipOperation(ctx, env.Data.OperationID)
	}
	return op, nil
}

// ship is Ship with a hook run in the transaction that queues the operation.
// p has been validated: by Ship, or by the HTTP layer's decoding.
func (s *Service) ship(ctx context.Context, taskID string, p ShipParams, onCommit func(tx Tx, op *ShipOperation) error) (ShipOperation, error) {
	expected := lowerHex(p.ExpectedHeadSHA)
	var op ShipOperation
	_, err := s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if err := s.answer(t, ask{cmd: cmdShip, head: expected, deploy: p.Mode == ShipMergeAndDeploy}); err != nil {
			return taskEvent{}, err
		}
		now := s.now()
		op = ShipOperation{
			TaskID:            t.ID,
			OperationID:       id.New("shp_"),
			Status:            ShipQueued,
			QueuedAt:          now,
			Mode:              p.Mode,
			TargetEnvironment: p.TargetEnvironment,
			ExpectedHeadSHA:   expected,
			SubmissionMode:    t.SubmissionMode,
			PullRequest:       t.PullRequestRef(),
			Actor:             p.Actor,
			TraceID:           httpapi.TraceIDFrom(ctx),
			LeaseUntil:        now,
		}
		if err := tx.CreateShipOperation(ctx, op); err != nil {
			return taskEvent{}, fmt.Errorf("queue ship operation: %w", err)
		}
		t.ActiveShipID = op.OperationID
		return taskEvent{typ: EventTaskUpdated, actor: p.Actor,
			summary: fmt.Sprintf("Ship of task %s queued as operation %s (%s, %s)", t.Identifier, op.OperationID, op.Mode, op.TargetEnvironment),
			after: func(tx Tx, t *Task) error {
				op.AvailableActions = t.AvailableActions
				if onCommit != nil {
					return onCommit(tx, &op)
				}
				return nil
			}}, nil
	})
	if err != nil {
		return ShipOperation{}, err
	}
	s.wakeShipRunner()
	return op, nil
}

// ShipOperation returns a ship operation with the task's current actions.
// It returns an error matching ErrNotFound when there is none.
func (s *Service) ShipOperation(ctx context.Context, operationID string) (ShipOperation, error) {
	if !id.Valid(operationID, "shp_") {
		return ShipOperation{}, notFound("ship operation", operationID)
	}
	op, err := s.store.ShipOperation(ctx, operationID)
	if errors.Is(err, ErrNotFound) {
		return ShipOperation{}, notFound("ship operation", operationID)
	}
	if err != nil {
		return ShipOperation{}, fmt.Errorf("get ship operation %s: %w", operationID, err)
	}
	t, err := s.Task(ctx, op.TaskID)
	if err != nil {
		return ShipOperation{}, err
	}
	op.AvailableActions = t.AvailableActions
	return op, nil
}

// wakeShipRunner tells the runner that work may be waiting.
func (s *Service) wakeShipRunner() { s.ships.wake() }

// shipRunner works ship operations: it claims the runnable ones from the
// Store, up to ShipConcurrency at a time, and for each reads the host
// again, asks the table, merges (once), deploys, and records how it
// ended, renewing the operation's lease meanwhile.
type shipRunner struct {
	cfg    shipRunnerConfig
	runner *claimrun.Runner[ShipOperation]
}

// hostFacts learns facts from the code hosts: the adapter of a task, a
// reading of the host for tasks, and a reading stored with the events it
// causes. The Service implements it (facts.go, hostread.go).
type hostFacts interface {
	// adapterFor returns the adapter that handles t's pull request when
	// submitted in mode.
	adapterFor(t *Task, mode SubmitMode) (ProviderAdapter, error)
	// readHost reads the host for tasks, which all have adapter.
	readHost(ctx context.Context, adapter ProviderAdapter, tasks []Task, purpose ReadPurpose) ([]hostRead, error)
	// applyObservation stores what a reading of the host found for a
	// task, with its events, and reports whether to read again.
	applyObservation(ctx context.Context, taskID string, ref PullRequestRef, obs observation, h hint, sc schedule) (bool, error)
}

// shipTasks is what the ship runner asks of the domain: the host's facts,
// a task read with its available actions, the table's answer to a
// command, and a change of a task with its event in one transaction. The
// Service implements it.
type shipTasks interface {
	hostFacts
	// readTask returns a task with its available actions.
	readTask(ctx context.Context, taskID string) (Task, error)
	// answer asks the table whether t may have a: nil, or the refusal.
	answer(t *Task, a ask) error
	// changeTask changes a task and appends the event fn describes, in
	// one transaction.
	changeTask(ctx context.Context, taskID string, fn func(tx Tx, t *Task) (taskEvent, error)) (Task, error)
	// reconcileSoon makes a task due for a reading in full now.
	reconcileSoon(ctx context.Context, taskID string)
}

// shipRunnerConfig is what a shipRunner is built from: its dependencies,
// and the Config fields of shipping.
type shipRunnerConfig struct {
	// Owner is the holder of the operations' leases: Config.InstanceID.
	Owner string
	// Tasks reads, judges and changes the tasks shipped.
	Tasks shipTasks
	// Update runs a Store transaction and then wakes the stream broker;
	// UpdateRelaxed runs one that need not wait for the disk, for what
	// emits no event.
	Update, UpdateRelaxed func(ctx context.Context, fn func(tx Tx) error) error
	Clock                 Clock
	Log                   *slog.Logger
	Tel                   *telemetry.Telemetry
	// Deployer deploys merge_and_deploy operations; nil when none.
	Deployer Deployer
	// Go runs the work of an operation in a goroutine that Service.Close
	// waits for.
	Go func(f func())

	// The Config fields of the same names, their defaults filled in.
	ShipConcurrency  int
	ShipPollInterval time.Duration
	ShipLease        time.Duration
	ShipRetryBudget  time.Duration
	ShipRetryBackoff time.Duration
	ProviderTimeout  time.Duration
	DeployTimeout    time.Duration
}

// newShipRunner returns the ship runner. It does nothing until run.
func newShipRunner(cfg shipRunnerConfig) *shipRunner {
	r := &shipRunner{cfg: cfg}
	r.runner = claimrun.New(claimrun.Config[ShipOperation]{Clock: cfg.Clock, Slots: cfg.ShipConcurrency, Poll: cfg.ShipPollInterval,
		Claim: r.claimShips, Work: r.runShip, Go: cfg.Go})
	return r
}

// run takes up to ShipConcurrency operations at a time and works them,
// until ctx ends. Operations it is working then stay running; their lease
// runs out and a runner (this process restarted, or another) resumes them.
func (r *shipRunner) run(ctx context.Context) { r.runner.Run(ctx) }

// wake tells the runner that work may be waiting.
func (r *shipRunner) wake() { r.runner.Wake() }

// claimShips claims up to limit runnable operations for this Service;
// resume also takes back those it held before a restart.
func (r *shipRunner) claimShips(ctx context.Context, limit int, resume bool) ([]ShipOperation, error) {
	var claimed []ShipOperation
	// A claim lost in a power cut leaves the operation as it was, to be
	// claimed again: it need not wait for the disk.
	err := r.cfg.UpdateRelaxed(ctx, func(tx Tx) error {
		now := r.cfg.Clock.Now()
		ops, err := tx.ClaimShipOperations(ctx, ClaimShipOperationsParams{
			Owner: r.cfg.Owner, Now: now, Until: now.Add(r.cfg.ShipLease), Limit: limit, Resume: resume,
		})
		claimed = ops
		return err
	})
	if err != nil && ctx.Err() == nil {
		r.cfg.Log.Error("claim ship operations", "err", err)
	}
	for _, op := range claimed {
		if op.Attempts == 1 {
			r.cfg.Tel.ShipStarted(ctx, string(op.Mode))
		}
		if op.Attempts > 1 {
			r.cfg.Log.Warn("resuming a ship operation whose runner stopped", "operation", op.OperationID, "attempt", op.Attempts)
		}
	}
	return claimed, err
}

// shipOutcome is what working an operation came to.
type shipOutcome struct {
	mergeSHA   string
	deployment *Deployment
	err        *ShipError
	// abandon leaves the operation running: its lease ends and it is
	// resumed, as after a crash (the Store failed, or the lease was lost).
	abandon bool
	// refusal is the host's words when it refused the merge for a reason
	// of its own; the facts are then read again once the operation ended
	// (they may not show the reason yet), and ship is not offered until
	// they change (Facts.MergeRefusal).
	refusal string
}

// storeRetryWait is how long the ship runner waits before it tries
// again what the Store failed, holding on to the operation meanwhile.
const storeRetryWait = time.Second

// runShip works one claimed operation, renewing its lease meanwhile, and
// records how it ended. While the Store fails, it keeps the operation and
// tries again every storeRetryWait, so that the operation goes on within
// a second or so of the Store's return rather than when its lease ends.
func (r *shipRunner) runShip(ctx context.Context, op ShipOperation) {
	finished := false
	var out shipOutcome
	ctx, span := r.cfg.Tel.Start(r.cfg.Tel.InTrace(ctx, op.TraceID), "ship.run", trace.WithAttributes(attribute.String("lifecycle.ship.mode", string(op.Mode))))
	defer func() {
		if out.err != nil {
			span.SetAttributes(attribute.String("lifecycle.failure.code", out.err.Code))
			span.SetStatus(codes.Error, out.err.Code)
		}
		span.End()
	}()
	lost := claimrun.Hold(ctx, r.cfg.Clock, r.cfg.ShipLease/3, func(ctx context.Context) bool { return r.renewShipLease(ctx, op) }, func(wctx context.Context) {
		out = r.workShip(wctx, op)
		for out.abandon && wctx.Err() == nil && r.pause(wctx, storeRetryWait) {
			out = r.workShip(wctx, op)
		}
		for !out.abandon && wctx.Err() == nil {
			err := r.finishShip(context.WithoutCancel(wctx), op, out)
			if err == nil {
				finished = true
				return
			}
			r.cfg.Log.Warn("finish ship operation; trying again", "operation", op.OperationID, "err", err)
			if !r.pause(wctx, storeRetryWait) {
				return
			}
		}
	})
	if !finished {
		// Shutting down, or the lease was lost: the lease runs out (or
		// has) and the operation resumes.
		if lost {
			r.cfg.Log.Warn("lost the lease of a ship operation; another runner resumes it", "operation", op.OperationID)
		}
		return
	}
	if out.refusal != "" {
		// The host refused the merge for a reason of its own (a review it
		// requires, an unresolved conversation): what it decided is read
		// again at once.
		r.cfg.Tasks.reconcileSoon(context.WithoutCancel(ctx), op.TaskID)
	}
}

// pause waits d on the runner's clock and reports whether ctx is still
// alive.
func (r *shipRunner) pause(ctx context.Context, d time.Duration) bool {
	return backoff.Pause(ctx, r.cfg.Clock, d)
}

// renewShipLease renews op's lease (the runner does every third of
// ShipLease) and reports false when another runner holds it. A renewal
// that fails is logged and tried again at the next tick; the lease has two
// more thirds to run.
func (r *shipRunner) renewShipLease(ctx context.Context, op ShipOperation) bool {
	err := r.cfg.UpdateRelaxed(ctx, func(tx Tx) error {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return err
		}
		if !cur.HeldBy(r.cfg.Owner, op.Attempts) {
			return ErrConflict
		}
		cur.LeaseUntil = NewTimestamp(r.cfg.Clock.Now().Add(r.cfg.ShipLease))
		return tx.UpdateShipOperation(ctx, cur)
	})
	switch {
	case errors.Is(err, ErrConflict):
		return false
	case err != nil && ctx.Err() == nil:
		r.cfg.Log.Warn("renew the lease of a ship operation", "operation", op.OperationID, "err", err)
	}
	return true
}

// workShip reads the host again, merges (once) if the task is still
// shippable, and deploys.
func (r *shipRunner) workShip(ctx context.Context, op ShipOperation) shipOutcome {
	fail := func(code, msg string, err error) shipOutcome {
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("ship operation failed", "operation", op.OperationID, "task", op.TaskID, "code", code, "err", err)
		}
		return shipOutcome{err: &ShipError{Code: code, Message: msg}}
	}
	t, err := r.cfg.Tasks.readTask(ctx, op.TaskID)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Log.Error("read the task of a ship operation", "operation", op.OperationID, "err", err)
		}
		return shipOutcome{abandon: true}
	}
	if err := r.cfg.Tasks.answer(&t, ask{cmd: cmdRun, operation: op.OperationID}); err != nil {
		var c *ConflictError
		errors.As(err, &c) // run's refusals are all conflicts
		return fail(c.Reason, c.Message+".", nil)
	}
	adapter, err := r.cfg.Tasks.adapterFor(&t, op.SubmissionMode)
	if err != nil {
		return fail("merge_failed", "No adapter handles the task's pull request any more.", err)
	}
	// The facts at merge time, read from the host: a check that turned
	// red or a review that arrived without a webhook is seen here. A merge
	// that already happened (before a crash, say) is recognised, not
	// repeated.
	vctx, span := r.cfg.Tel.Start(ctx, "ship.verify")
	pr, err := r.verify(vctx, adapter, &op, t)
	telemetry.End(span, err)
	if err != nil {
		if errors.Is(err, errStoreFailed) {
			if ctx.Err() == nil {
				r.cfg.Log.Error("record the facts read before a merge", "operation", op.OperationID, "err", err)
			}
			return shipOutcome{abandon: true}
		}
		return fail("merge_failed", "The code host could not be asked for the pull request.", err)
	}
	var out shipOutcome
	switch {
	case pr.State == PullRequestMerged && lowerHex(pr.HeadSHA) == op.ExpectedHeadSHA:
		out.mergeSHA = pr.MergeCommitSHA
	case pr.State == PullRequestMerged:
		return fail("head_sha_mismatch", fmt.Sprintf("Pull request #%d was merged at %s, not %s.", pr.Number, pr.HeadSHA, op.ExpectedHeadSHA), nil)
	default:
		// The table judges the facts just read (a closed pull request,
		// new commits, CI or reviews no longer allowing it) as it judges
		// a ship.
		if refusal, err := r.beginMerge(ctx, op); err != nil {
			if ctx.Err() == nil {
				r.cfg.Log.Error("check the preconditions of a ship operation", "operation", op.OperationID, "err", err)
			}
			return shipOutcome{abandon: true}
		} else if refusal != nil {
			return fail(refusal.Reason, refusal.Message+"; nothing was merged.", nil)
		}
		mctx, span := r.cfg.Tel.Start(ctx, "ship.merge")
		res, err := r.merge(mctx, adapter, &op, MergeRequest{Ref: op.PullRequest, ExpectedHeadSHA: op.ExpectedHeadSHA,
			CommitTitle: fmt.Sprintf("Merge #%d: %s %s", pr.Number, t.Identifier, t.Title)})
		telemetry.End(span, err)
		var refused *RefusedError
		switch {
		case errors.Is(err, ErrHeadMismatch):
			return fail("head_sha_mismatch", fmt.Sprintf("The head of pull request #%d is no longer %s.", pr.Number, op.ExpectedHeadSHA), err)
		case errors.As(err, &refused):
			o := fail("merge_failed", refused.Message, err)
			o.refusal = refused.Message
			return o
		case err != nil:
			return fail("merge_failed", "The code host failed to merge the pull request; the service log has the details.", err)
		}
		out.mergeSHA = res.MergeCommitSHA
	}
	if op.Mode != ShipMergeAndDeploy {
		return out
	}
	if r.cfg.Deployer == nil {
		return shipOutcome{mergeSHA: out.mergeSHA, err: &ShipError{Code: "deploy_failed", Message: "This service has no deployer any more."}}
	}
	req := DeployRequest{Task: t, OperationID: op.OperationID, Environment: op.TargetEnvironment, PullRequest: op.PullRequest, CommitSHA: out.mergeSHA}
	var dep Deployment
	dctx, span := r.cfg.Tel.Start(ctx, "ship.deploy", trace.WithAttributes(attribute.String("lifecycle.ship.environment", string(op.TargetEnvironment))))
	err = r.retryTemporary(dctx, &op, "deploy", r.cfg.DeployTimeout, func(ctx context.Context) error {
		var err error
		dep, err = r.cfg.Deployer.Deploy(ctx, req)
		return err
	})
	telemetry.End(span, err)
	if err != nil {
		msg := "The deployer failed; the merge stands and a new ship deploys it again."
		var refused *RefusedError
		if errors.As(err, &refused) {
			msg = refused.Message
		}
		o := fail("deploy_failed", msg, err)
		o.mergeSHA = out.mergeSHA
		return o
	}
	out.deployment = &dep
	return out
}

// errStoreFailed marks a failure to record facts read from the host.
var errStoreFailed = errors.New("the store failed")

// Mergeability the host has not worked out yet is read again this many
// times, mergeabilityWait and then twice as long apart, before the merge
// is tried anyway (and the host decides).
const (
	mergeabilityReads = 2
	mergeabilityWait  = 250 * time.Millisecond
)

// verify reads the pull request of op from the host, with its CI and
// review state at its head, right before the merge, and stores what
// changed (with its events, as any reading does), so that the check of
// the preconditions that follows judges the facts as they are now. While
// the host has not worked out whether it can merge the pull request, it
// reads again, a bounded number of times. It returns the pull request as
// last read; an error wrapping errStoreFailed when what was read could not
// be stored.
func (r *shipRunner) verify(ctx context.Context, adapter ProviderAdapter, op *ShipOperation, t Task) (PullRequest, error) {
	wait := mergeabilityWait
	for reads := 0; ; reads++ {
		var obs observation
		err := r.retryTemporary(ctx, op, "read pull request", r.cfg.ProviderTimeout, func(ctx context.Context) error {
			got, err := r.cfg.Tasks.readHost(ctx, adapter, []Task{t}, ReadMerge)
			if err == nil {
				obs, err = got[0].obs, got[0].err
			}
			return err
		})
		if err != nil {
			return PullRequest{}, err
		}
		// Stored with the operation under way: a merged or closed pull
		// request moves the task when the operation ends.
		if _, err := r.cfg.Tasks.applyObservation(ctx, t.ID, op.PullRequest, obs, hint{}, schedule{}); err != nil {
			return PullRequest{}, fmt.Errorf("%w: %w", errStoreFailed, err)
		}
		if obs.pr.State != PullRequestOpen || obs.pr.Mergeable != MergeabilityUnknown || reads == mergeabilityReads {
			return obs.pr, nil
		}
		if !r.pause(ctx, wait) {
			return PullRequest{}, ctx.Err()
		}
		wait *= 2
		if t, err = r.cfg.Tasks.readTask(ctx, t.ID); err != nil {
			return PullRequest{}, fmt.Errorf("%w: %w", errStoreFailed, err)
		}
	}
}

// merge merges through the adapter, retrying temporary failures. After a
// failure whose answer may have been lost (a timeout after the host
// merged, say) it reads the pull request again: merged at the expected
// head is a success, never a second merge.
func (r *shipRunner) merge(ctx context.Context, adapter ProviderAdapter, op *ShipOperation, req MergeRequest) (MergeResult, error) {
	var res MergeResult
	err := r.retryTemporary(ctx, op, "merge", r.cfg.ProviderTimeout, func(ctx context.Context) error {
		var err error
		res, err = adapter.Merge(ctx, req)
		if err == nil || errors.Is(err, ErrHeadMismatch) {
			return err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ProviderTimeout)
		defer cancel()
		if pr, rerr := adapter.PullRequest(rctx, req.Ref); rerr == nil && pr.State == PullRequestMerged && lowerHex(pr.HeadSHA) == req.ExpectedHeadSHA {
			r.cfg.Log.Warn("a merge reported an error but the pull request is merged at the expected head", "operation", op.OperationID, "err", err)
			res = MergeResult{MergeCommitSHA: pr.MergeCommitSHA, AlreadyMerged: true}
			return nil
		}
		return err
	})
	return res, err
}

// retryTemporary calls f for op, each call bounded by timeout, until it
// succeeds, fails for good, or fails temporarily (ErrTemporary) past the
// retry budget. Between tries it waits the host's Retry-After, or a
// backoff that doubles from ShipRetryBackoff. A rate limit is waited out
// however long it lasts, outside the budget: the operation says so in its
// Wait meanwhile.
func (r *shipRunner) retryTemporary(ctx context.Context, op *ShipOperation, what string, timeout time.Duration, f func(ctx context.Context) error) error {
	shown := false // a wait for a TemporaryError's Reason is shown in op
	defer func() {
		if shown {
			r.setShipWait(context.WithoutCancel(ctx), op, nil)
		}
	}()
	err := backoff.Retry(ctx, backoff.Policy{Clock: r.cfg.Clock, Timeout: timeout, Budget: r.cfg.ShipRetryBudget, First: r.cfg.ShipRetryBackoff, Max: time.Minute}, f,
		func(err error) backoff.Verdict {
			if !errors.Is(err, ErrTemporary) {
				return backoff.Verdict{}
			}
			if wait, ok := rateLimited(err); ok {
				return backoff.Verdict{Retry: true, Hold: max(wait, time.Second)}
			}
			if waitReason(err) == WaitMergeTrain {
				return backoff.Verdict{Retry: true, Hold: max(retryAfter(err), time.Second)}
			}
			return backoff.Verdict{Retry: true, After: retryAfter(err)}
		}, backoff.Hooks{
			Holding: func(wait time.Duration, until time.Time, err error) {
				at := NewTimestamp(until)
				if w := temporaryWait(err, what, at); w != nil {
					r.setShipWait(ctx, op, w)
					return
				}
				r.cfg.Log.Warn("rate limited; the ship operation waits", "op", what, "operation", op.OperationID, "wait", wait, "err", err)
				r.setShipWait(ctx, op, &ShipWait{Reason: "rate_limited", Until: at,
					Message: fmt.Sprintf("The rate limit of the code host is spent; the %s waits until %s.", what, at)})
			},
			Held: func() { r.setShipWait(ctx, op, nil) },
			Retrying: func(attempt int, wait time.Duration, err error) {
				r.cfg.Log.Warn("temporary failure; retrying", "op", what, "operation", op.OperationID, "attempt", attempt, "wait", wait, "err", err)
				if w := temporaryWait(err, what, NewTimestamp(r.cfg.Clock.Now().Add(wait))); w != nil {
					r.setShipWait(ctx, op, w)
					shown = true
				}
			},
		})
	if gaveUp := (*backoff.GaveUpError)(nil); errors.As(err, &gaveUp) {
		return fmt.Errorf("%s gave up after %d tries: %w", what, gaveUp.Tries, gaveUp.Err)
	}
	return err
}

// temporaryWait returns what a ship operation shows while it waits until
// until to try what again after err, a temporary failure: the wait the
// error's Reason names, or nil when it names none.
func temporaryWait(err error, what string, until Timestamp) *ShipWait {
	var te *TemporaryError
	if !errors.As(err, &te) || te.Reason == "" {
		return nil
	}
	msg := fmt.Sprintf("The code host asked to wait (%s); the %s is tried again at %s.", te.Reason, what, until)
	switch te.Reason {
	case WaitMergeabilityUnknown:
		msg = fmt.Sprintf("The code host is still working out whether it can merge the pull request; the %s is tried again at %s.", what, until)
	case WaitMergeTrain:
		msg = fmt.Sprintf("The pull request is on the code host's merge train, whose pipeline tests it before it merges; the %s follows it again at %s.", what, until)
	}
	return &ShipWait{Reason: te.Reason, Message: msg, Until: until}
}

// setShipWait records why op waits (nil: it no longer does), if this
// runner still holds it. A failure is logged: the wait is only shown.
func (r *shipRunner) setShipWait(ctx context.Context, op *ShipOperation, w *ShipWait) {
	err := r.cfg.UpdateRelaxed(ctx, func(tx Tx) error {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return err
		}
		if !cur.HeldBy(r.cfg.Owner, op.Attempts) {
			return nil
		}
		cur.Wait = w
		return tx.UpdateShipOperation(ctx, cur)
	})
	if err != nil && ctx.Err() == nil {
		r.cfg.Log.Warn("record why a ship operation waits", "operation", op.OperationID, "err", err)
	}
}

// beginMerge checks, right before the merge, that the preconditions of
// the ship still hold in the facts just read from the host (verify) and
// anything posted to the Service since (a review), and marks the task as
// merging, in one transaction: from then on reviews are refused, so none
// can be lost to the merge. It returns the refusal when they no longer
// hold.
func (r *shipRunner) beginMerge(ctx context.Context, op ShipOperation) (*ConflictError, error) {
	var refusal *ConflictError
	err := r.cfg.Update(ctx, func(tx Tx) error {
		refusal = nil
		t, err := tx.Task(ctx, op.TaskID)
		if err != nil {
			return fmt.Errorf("get task %s: %w", op.TaskID, err)
		}
		if err := r.cfg.Tasks.answer(&t, ask{cmd: cmdMerge, head: op.ExpectedHeadSHA, operation: op.OperationID}); err != nil {
			errors.As(err, &refusal) // merge's refusals are all conflicts
			return nil
		}
		if t.ShipMerging {
			return nil
		}
		t.ShipMerging = true // not a change a client can see: no version, no event
		return tx.UpdateTask(ctx, t)
	})
	return refusal, err
}

// finishShip records the outcome of an operation: the operation ends, the
// task is done (or stays in review) and task.shipped is emitted, in one
// transaction. An operation another runner finished or took over is left
// alone. A task whose pull request the host merged or closed meanwhile
// settles as the facts say.
func (r *shipRunner) finishShip(ctx context.Context, op ShipOperation, out shipOutcome) error {
	var stale bool
	_, err := r.cfg.Tasks.changeTask(ctx, op.TaskID, func(tx Tx, t *Task) (taskEvent, error) {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return taskEvent{}, fmt.Errorf("get ship operation %s: %w", op.OperationID, err)
		}
		if !cur.HeldBy(r.cfg.Owner, op.Attempts) {
			stale = true
			return taskEvent{}, nil
		}
		now := NewTimestamp(r.cfg.Clock.Now())
		cur.FinishedAt, cur.LeaseUntil = &now, now
		if out.mergeSHA != "" {
			cur.MergeCommitSHA = &out.mergeSHA
		}
		cur.Deployment, cur.Error, cur.Wait = out.deployment, out.err, nil
		ev := taskEvent{typ: EventTaskShipped, actor: op.Actor, operationID: op.OperationID, environment: op.TargetEnvironment}
		if t.ActiveShipID == op.OperationID {
			t.ActiveShipID = ""
			t.ShipMerging = false
		}
		if out.err == nil {
			cur.Status, ev.shipStatus = ShipSucceeded, ShipSucceeded
			moveTask(t, moveShipped)
			t.Facts.PRState, t.Facts.MergeCommitSHA = PullRequestMerged, out.mergeSHA
			ev.summary = fmt.Sprintf("Task %s shipped to %s", t.Identifier, op.TargetEnvironment)
			if op.Mode == ShipMergeOnly {
				ev.summary = fmt.Sprintf("Task %s merged (%s)", t.Identifier, op.TargetEnvironment)
			}
		} else {
			cur.Status, ev.shipStatus = ShipFailed, ShipFailed
			ev.summary = fmt.Sprintf("Shipping task %s failed: %s", t.Identifier, out.err.Code)
			if out.refusal != "" {
				t.Facts.MergeRefusal = &MergeRefusal{Message: out.refusal, Facts: mergeFacts(t), Hints: t.Facts.Hints, At: now}
			}
			settle(t, t.Facts.PRState)
		}
		if err := tx.UpdateShipOperation(ctx, cur); err != nil {
			return taskEvent{}, fmt.Errorf("update ship operation %s: %w", op.OperationID, err)
		}
		return ev, nil
	})
	switch {
	case err == nil && stale:
		r.cfg.Log.Warn("a ship operation was finished by another runner", "operation", op.OperationID)
	case err == nil:
		var code string
		if out.err != nil {
			code = out.err.Code
		}
		r.cfg.Tel.ShipFinished(ctx, string(op.Mode), code, r.cfg.Clock.Now().Sub(op.QueuedAt.Time))
	}
	return err
}

// shipResponse is the body of a ship's 202.
func shipResponse(op *ShipOperation) any {
	return struct {
		Data             shipAccepted `json:"data"`
		AvailableActions []Action     `json:"availableActions"`
	}{shipAccepted{op.TaskID, op.OperationID, op.Status, op.QueuedAt, op.AvailableActions}, op.AvailableActions}
}

// shipAccepted is the operation as POST /tasks/{id}/ship answers it.
type shipAccepted struct {
	TaskID           string     `json:"taskId"`
	OperationID      string     `json:"operationId"`
	Status           ShipStatus `json:"status"`
	QueuedAt         Timestamp  `json:"queuedAt"`
	AvailableActions []Action   `json:"availableActions"`
}

func (s *Service) handleShip(w http.ResponseWriter, r *http.Request, p *Principal) error {
	taskID := r.PathValue("id")
	var params ShipParams
	req := keyedRequest{route: shipRoute, resourceID: taskID, status: http.StatusAccepted, body: &params, check: params.validate, actions: s.actionsOrNil(taskID)}
	return s.serveIdempotent(w, r, p, req,
		func(ctx context.Context, key string, respond func(Tx, any) error) error {
			params.Actor = p.Actor
			_, err := s.ship(ctx, taskID, params, func(tx Tx, op *ShipOperation) error {
				return respond(tx, shipResponse(op))
			})
			return err
		})
}

func (s *Service) handleGetShipOperation(w http.ResponseWriter, r *http.Request, p *Principal) error {
	op, err := s.ShipOperation(r.Context(), r.PathValue("operationId"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, struct {
		Data             ShipOperation `json:"data"`
		AvailableActions []Action      `json:"availableActions"`
	}{op, op.AvailableActions})
	return nil
}
