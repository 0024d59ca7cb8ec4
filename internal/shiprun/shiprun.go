package shiprun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/backoff"
	"github.com/tasklifecycle/lifecycle/internal/claimrun"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tasks is what the ship runner asks of the domain: the task shipped, the
// adapter of its pull request, a reading of the host, the state table's
// answers, and the change of the task when its operation ends. Package
// lifecycle implements it.
type Tasks interface {
	// ReadTask returns a task with its available actions. Its error
	// matches lifecycletype.ErrNotFound when there is no such task.
	ReadTask(ctx context.Context, taskID string) (lifecycletype.Task, error)
	// AdapterFor returns the adapter that handles t's pull request when
	// submitted in mode, or an error when none does.
	AdapterFor(t *lifecycletype.Task, mode lifecycletype.SubmitMode) (lifecycletype.ProviderAdapter, error)
	// ReadHost reads the host for t's pull request ref, with its CI and
	// review state at its head, right before a merge
	// (lifecycletype.ReadMerge). Its error is the adapter's, matching
	// lifecycletype.ErrTemporary when the host may answer later.
	ReadHost(ctx context.Context, adapter lifecycletype.ProviderAdapter, t lifecycletype.Task, ref lifecycletype.PullRequestRef) (Reading, error)
	// MayRun asks the table whether the runner may take up operationID
	// for t: nil, or the refusal.
	MayRun(t *lifecycletype.Task, operationID string) *Refusal
	// MayMerge asks the table whether operationID may merge t's pull
	// request at head now: nil, or the refusal.
	MayMerge(t *lifecycletype.Task, head, operationID string) *Refusal
	// FinishShip ends a ship operation and moves its task, in one
	// transaction that emits task.shipped. end runs in the transaction,
	// records the operation's end and returns it; when it returns a nil
	// Ending (the operation is another runner's now), the task is left
	// as it was. The error is end's, or the Store's.
	FinishShip(ctx context.Context, taskID string, end func(tx lifecycletype.Tx) (*Ending, error)) error
	// ReconcileSoon makes a task due for a reading of the host in full
	// now. It logs what fails.
	ReconcileSoon(ctx context.Context, taskID string)
}

// Reading is what one reading of the host found for a task (see
// Tasks.ReadHost).
type Reading interface {
	// PullRequest returns the pull request as read.
	PullRequest() lifecycletype.PullRequest
	// Store records the reading in the task, with the events it causes,
	// if the task is still in review on the pull request read. The error
	// is the Store's.
	Store(ctx context.Context) error
}

// Refusal is the state table's refusal of a step of the runner: a
// *lifecycle.ConflictError's Reason and Message.
type Refusal struct {
	// Reason is the code the operation fails with, such as
	// "head_sha_mismatch".
	Reason string
	// Message is the table's sentence, without a final full stop.
	Message string
}

// Ending is how a ship operation ended, as Tasks.FinishShip records it in
// its task.
type Ending struct {
	// Operation is the operation as it ended: ShipSucceeded or
	// ShipFailed, with its FinishedAt and Error.
	Operation lifecycletype.ShipOperation
	// MergeSHA is the merge commit, or "" when nothing was merged.
	MergeSHA string
	// Refusal is the host's words when it refused the merge for a reason
	// of its own, or "": ship is then not offered until the facts change
	// (Facts.MergeRefusal).
	Refusal string
	// Rework is why the merge queue sent the change back, or nil
	// (Facts.QueueRework).
	Rework *lifecycletype.QueueRework
}

// Config is what a Runner is built from: its dependencies, and the Config
// fields of shipping.
type Config struct {
	// Owner is the holder of the operations' leases: Config.InstanceID.
	Owner string
	// Tasks reads, judges and changes the tasks shipped.
	Tasks Tasks
	// Update runs a Store transaction and then wakes the stream broker;
	// UpdateRelaxed runs one that need not wait for the disk, for what
	// emits no event.
	Update, UpdateRelaxed func(ctx context.Context, fn func(tx lifecycletype.Tx) error) error
	// Clock tells the time and times the waits.
	Clock lifecycletype.Clock
	// Log receives what fails.
	Log *slog.Logger
	// Tel records the runner's spans and metrics.
	Tel *telemetry.Telemetry
	// Deployer deploys merge_and_deploy operations; nil when none.
	Deployer lifecycletype.Deployer
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

// Runner works ship operations: it claims the runnable ones from the
// Store, up to ShipConcurrency at a time, and for each reads the host
// again, asks the table, merges (once), deploys, and records how it
// ended, renewing the operation's lease meanwhile.
type Runner struct {
	cfg    Config
	runner *claimrun.Runner[lifecycletype.ShipOperation]
}

// New returns the ship runner. It does nothing until Run.
func New(cfg Config) *Runner {
	r := &Runner{cfg: cfg}
	r.runner = claimrun.New(claimrun.Config[lifecycletype.ShipOperation]{Clock: cfg.Clock, Slots: cfg.ShipConcurrency, Poll: cfg.ShipPollInterval,
		Claim: r.claimShips, Work: r.runShip, Go: cfg.Go})
	return r
}

// Run takes up to ShipConcurrency operations at a time and works them,
// until ctx ends. Operations it is working then stay running; their lease
// runs out and a runner (this process restarted, or another) resumes them.
func (r *Runner) Run(ctx context.Context) { r.runner.Run(ctx) }

// Wake tells the runner that work may be waiting.
func (r *Runner) Wake() { r.runner.Wake() }

// claimShips claims up to limit runnable operations for this Service;
// resume also takes back those it held before a restart.
func (r *Runner) claimShips(ctx context.Context, limit int, resume bool) ([]lifecycletype.ShipOperation, error) {
	var claimed []lifecycletype.ShipOperation
	// A claim lost in a power cut leaves the operation as it was, to be
	// claimed again: it need not wait for the disk.
	err := r.cfg.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
		now := r.cfg.Clock.Now()
		ops, err := tx.ClaimShipOperations(ctx, lifecycletype.ClaimShipOperationsParams{
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
	deployment *lifecycletype.Deployment
	err        *lifecycletype.ShipError
	// abandon leaves the operation running: its lease ends and it is
	// resumed, as after a crash (the Store failed, or the lease was lost).
	abandon bool
	// refusal is the host's words when it refused the merge for a reason
	// of its own; the facts are then read again once the operation ended
	// (they may not show the reason yet), and ship is not offered until
	// they change (Facts.MergeRefusal).
	refusal string
	// rework is why the merge queue sent the change back.
	rework *lifecycletype.QueueRework
}

// storeRetryWait is how long the ship runner waits before it tries
// again what the Store failed, holding on to the operation meanwhile.
const storeRetryWait = time.Second

// runShip works one claimed operation, renewing its lease meanwhile, and
// records how it ended. While the Store fails, it keeps the operation and
// tries again every storeRetryWait, so that the operation goes on within
// a second or so of the Store's return rather than when its lease ends.
func (r *Runner) runShip(ctx context.Context, op lifecycletype.ShipOperation) {
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
		r.cfg.Tasks.ReconcileSoon(context.WithoutCancel(ctx), op.TaskID)
	}
}

// pause waits d on the runner's clock and reports whether ctx is still
// alive.
func (r *Runner) pause(ctx context.Context, d time.Duration) bool {
	return backoff.Pause(ctx, r.cfg.Clock, d)
}

// renewShipLease renews op's lease (the runner does every third of
// ShipLease) and reports false when another runner holds it. A renewal
// that fails is logged and tried again at the next tick; the lease has two
// more thirds to run.
func (r *Runner) renewShipLease(ctx context.Context, op lifecycletype.ShipOperation) bool {
	err := r.cfg.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return err
		}
		if !cur.HeldBy(r.cfg.Owner, op.Attempts) {
			return lifecycletype.ErrConflict
		}
		cur.LeaseUntil = lifecycletype.NewTimestamp(r.cfg.Clock.Now().Add(r.cfg.ShipLease))
		return tx.UpdateShipOperation(ctx, cur)
	})
	switch {
	case errors.Is(err, lifecycletype.ErrConflict):
		return false
	case err != nil && ctx.Err() == nil:
		r.cfg.Log.Warn("renew the lease of a ship operation", "operation", op.OperationID, "err", err)
	}
	return true
}

// workShip reads the host again, merges (once) if the task is still
// shippable, and deploys.
func (r *Runner) workShip(ctx context.Context, op lifecycletype.ShipOperation) shipOutcome {
	fail := func(code, msg string, err error) shipOutcome {
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("ship operation failed", "operation", op.OperationID, "task", op.TaskID, "code", code, "err", err)
		}
		return shipOutcome{err: &lifecycletype.ShipError{Code: code, Message: msg}}
	}
	t, err := r.cfg.Tasks.ReadTask(ctx, op.TaskID)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Log.Error("read the task of a ship operation", "operation", op.OperationID, "err", err)
		}
		return shipOutcome{abandon: true}
	}
	if c := r.cfg.Tasks.MayRun(&t, op.OperationID); c != nil {
		return fail(c.Reason, c.Message+".", nil)
	}
	adapter, err := r.cfg.Tasks.AdapterFor(&t, op.SubmissionMode)
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
	case pr.State == lifecycletype.PullRequestMerged && strings.EqualFold(pr.HeadSHA, op.ExpectedHeadSHA):
		out.mergeSHA = pr.MergeCommitSHA
	case pr.State == lifecycletype.PullRequestMerged:
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
		res, err := r.merge(mctx, adapter, &op, lifecycletype.MergeRequest{Ref: op.PullRequest, ExpectedHeadSHA: op.ExpectedHeadSHA,
			CommitTitle: fmt.Sprintf("Merge #%d: %s %s", pr.Number, t.Identifier, t.Title)})
		telemetry.End(span, err)
		var (
			refused *lifecycletype.RefusedError
			rework  *lifecycletype.QueueReworkError
		)
		switch {
		case errors.Is(err, lifecycletype.ErrHeadMismatch):
			return fail("head_sha_mismatch", fmt.Sprintf("The head of pull request #%d is no longer %s.", pr.Number, op.ExpectedHeadSHA), err)
		case errors.As(err, &rework):
			o := fail(rework.Rework.Reason, rework.Rework.Message, nil)
			o.rework = &rework.Rework
			return o
		case errors.As(err, &refused):
			o := fail("merge_failed", refused.Message, err)
			o.refusal = refused.Message
			return o
		case err != nil:
			return fail("merge_failed", "The code host failed to merge the pull request; the service log has the details.", err)
		}
		out.mergeSHA = res.MergeCommitSHA
	}
	if op.Mode != lifecycletype.ShipMergeAndDeploy {
		return out
	}
	if r.cfg.Deployer == nil {
		return shipOutcome{mergeSHA: out.mergeSHA, err: &lifecycletype.ShipError{Code: "deploy_failed", Message: "This service has no deployer any more."}}
	}
	req := lifecycletype.DeployRequest{Task: t, OperationID: op.OperationID, Environment: op.TargetEnvironment, PullRequest: op.PullRequest, CommitSHA: out.mergeSHA}
	var dep lifecycletype.Deployment
	dctx, span := r.cfg.Tel.Start(ctx, "ship.deploy", trace.WithAttributes(attribute.String("lifecycle.ship.environment", string(op.TargetEnvironment))))
	err = r.retryTemporary(dctx, &op, "deploy", r.cfg.DeployTimeout, func(ctx context.Context) error {
		var err error
		dep, err = r.cfg.Deployer.Deploy(ctx, req)
		return err
	})
	telemetry.End(span, err)
	if err != nil {
		msg := "The deployer failed; the merge stands and a new ship deploys it again."
		var refused *lifecycletype.RefusedError
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
func (r *Runner) verify(ctx context.Context, adapter lifecycletype.ProviderAdapter, op *lifecycletype.ShipOperation, t lifecycletype.Task) (lifecycletype.PullRequest, error) {
	wait := mergeabilityWait
	for reads := 0; ; reads++ {
		var read Reading
		err := r.retryTemporary(ctx, op, "read pull request", r.cfg.ProviderTimeout, func(ctx context.Context) error {
			var err error
			read, err = r.cfg.Tasks.ReadHost(ctx, adapter, t, op.PullRequest)
			return err
		})
		if err != nil {
			return lifecycletype.PullRequest{}, err
		}
		// Stored with the operation under way: a merged or closed pull
		// request moves the task when the operation ends.
		if err := read.Store(ctx); err != nil {
			return lifecycletype.PullRequest{}, fmt.Errorf("%w: %w", errStoreFailed, err)
		}
		if pr := read.PullRequest(); pr.State != lifecycletype.PullRequestOpen || pr.Mergeable != lifecycletype.MergeabilityUnknown || reads == mergeabilityReads {
			return pr, nil
		}
		if !r.pause(ctx, wait) {
			return lifecycletype.PullRequest{}, ctx.Err()
		}
		wait *= 2
		if t, err = r.cfg.Tasks.ReadTask(ctx, t.ID); err != nil {
			return lifecycletype.PullRequest{}, fmt.Errorf("%w: %w", errStoreFailed, err)
		}
	}
}

// merge merges through the adapter, retrying temporary failures. After a
// failure whose answer may have been lost (a timeout after the host
// merged, say) it reads the pull request again: merged at the expected
// head is a success, never a second merge.
func (r *Runner) merge(ctx context.Context, adapter lifecycletype.ProviderAdapter, op *lifecycletype.ShipOperation, req lifecycletype.MergeRequest) (lifecycletype.MergeResult, error) {
	var res lifecycletype.MergeResult
	err := r.retryTemporary(ctx, op, "merge", r.cfg.ProviderTimeout, func(ctx context.Context) error {
		var err error
		res, err = adapter.Merge(ctx, req)
		var rework *lifecycletype.QueueReworkError
		if r := waitReason(err); err == nil || errors.Is(err, lifecycletype.ErrHeadMismatch) || errors.As(err, &rework) ||
			r == lifecycletype.WaitMergeQueue || r == lifecycletype.WaitMergeTrain {
			return err // a queue or train follows its entry itself: no reading of the pull request
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ProviderTimeout)
		defer cancel()
		if pr, rerr := adapter.PullRequest(rctx, req.Ref); rerr == nil && pr.State == lifecycletype.PullRequestMerged && strings.EqualFold(pr.HeadSHA, req.ExpectedHeadSHA) {
			r.cfg.Log.Warn("a merge reported an error but the pull request is merged at the expected head", "operation", op.OperationID, "err", err)
			res = lifecycletype.MergeResult{MergeCommitSHA: pr.MergeCommitSHA, AlreadyMerged: true}
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
func (r *Runner) retryTemporary(ctx context.Context, op *lifecycletype.ShipOperation, what string, timeout time.Duration, f func(ctx context.Context) error) error {
	shown := false // a wait for a TemporaryError's Reason is shown in op
	defer func() {
		if shown {
			r.setShipWait(context.WithoutCancel(ctx), op, nil)
		}
	}()
	err := backoff.Retry(ctx, backoff.Policy{Clock: r.cfg.Clock, Timeout: timeout, Budget: r.cfg.ShipRetryBudget, First: r.cfg.ShipRetryBackoff, Max: time.Minute}, f,
		func(err error) backoff.Verdict {
			if !errors.Is(err, lifecycletype.ErrTemporary) {
				return backoff.Verdict{}
			}
			if wait, ok := lifecycletype.RateLimitWait(err); ok {
				return backoff.Verdict{Retry: true, Hold: max(wait, time.Second)}
			}
			if r := waitReason(err); r == lifecycletype.WaitMergeTrain || r == lifecycletype.WaitMergeQueue {
				return backoff.Verdict{Retry: true, Hold: max(lifecycletype.RetryAfter(err), time.Second)}
			}
			return backoff.Verdict{Retry: true, After: lifecycletype.RetryAfter(err)}
		}, backoff.Hooks{
			Holding: func(wait time.Duration, until time.Time, err error) {
				at := lifecycletype.NewTimestamp(until)
				if w := temporaryWait(err, what, at); w != nil {
					r.setShipWait(ctx, op, w)
					return
				}
				r.cfg.Log.Warn("rate limited; the ship operation waits", "op", what, "operation", op.OperationID, "wait", wait, "err", err)
				r.setShipWait(ctx, op, &lifecycletype.ShipWait{Reason: "rate_limited", Until: at,
					Message: fmt.Sprintf("The rate limit of the code host is spent; the %s waits until %s.", what, at)})
			},
			Held: func() { r.setShipWait(ctx, op, nil) },
			Retrying: func(attempt int, wait time.Duration, err error) {
				r.cfg.Log.Warn("temporary failure; retrying", "op", what, "operation", op.OperationID, "attempt", attempt, "wait", wait, "err", err)
				if w := temporaryWait(err, what, lifecycletype.NewTimestamp(r.cfg.Clock.Now().Add(wait))); w != nil {
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
func temporaryWait(err error, what string, until lifecycletype.Timestamp) *lifecycletype.ShipWait {
	var te *lifecycletype.TemporaryError
	if !errors.As(err, &te) || te.Reason == "" {
		return nil
	}
	msg := fmt.Sprintf("The code host asked to wait (%s); the %s is tried again at %s.", te.Reason, what, until)
	switch te.Reason {
	case lifecycletype.WaitMergeabilityUnknown:
		msg = fmt.Sprintf("The code host is still working out whether it can merge the pull request; the %s is tried again at %s.", what, until)
	case lifecycletype.WaitMergeTrain:
		msg = fmt.Sprintf("The pull request is on the code host's merge train, whose pipeline tests it before it merges; the %s follows it again at %s.", what, until)
	case lifecycletype.WaitMergeQueue:
		msg = fmt.Sprintf("The change is in a merge queue (%v); the %s follows it again at %s.", te.Err, what, until)
	}
	return &lifecycletype.ShipWait{Reason: te.Reason, Message: msg, Until: until}
}

// setShipWait records why op waits (nil: it no longer does), if this
// runner still holds it. A failure is logged: the wait is only shown.
func (r *Runner) setShipWait(ctx context.Context, op *lifecycletype.ShipOperation, w *lifecycletype.ShipWait) {
	err := r.cfg.UpdateRelaxed(ctx, func(tx lifecycletype.Tx) error {
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
func (r *Runner) beginMerge(ctx context.Context, op lifecycletype.ShipOperation) (*Refusal, error) {
	var refusal *Refusal
	err := r.cfg.Update(ctx, func(tx lifecycletype.Tx) error {
		refusal = nil
		t, err := tx.Task(ctx, op.TaskID)
		if err != nil {
			return fmt.Errorf("get task %s: %w", op.TaskID, err)
		}
		if refusal = r.cfg.Tasks.MayMerge(&t, op.ExpectedHeadSHA, op.OperationID); refusal != nil {
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
// transaction (Tasks.FinishShip). An operation another runner finished or
// took over is left alone. A task whose pull request the host merged or
// closed meanwhile settles as the facts say.
func (r *Runner) finishShip(ctx context.Context, op lifecycletype.ShipOperation, out shipOutcome) error {
	var stale bool
	err := r.cfg.Tasks.FinishShip(ctx, op.TaskID, func(tx lifecycletype.Tx) (*Ending, error) {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return nil, fmt.Errorf("get ship operation %s: %w", op.OperationID, err)
		}
		if !cur.HeldBy(r.cfg.Owner, op.Attempts) {
			stale = true
			return nil, nil
		}
		now := lifecycletype.NewTimestamp(r.cfg.Clock.Now())
		cur.FinishedAt, cur.LeaseUntil = &now, now
		if out.mergeSHA != "" {
			cur.MergeCommitSHA = &out.mergeSHA
		}
		cur.Deployment, cur.Error, cur.Wait = out.deployment, out.err, nil
		cur.Status = lifecycletype.ShipSucceeded
		if out.err != nil {
			cur.Status = lifecycletype.ShipFailed
		}
		if err := tx.UpdateShipOperation(ctx, cur); err != nil {
			return nil, fmt.Errorf("update ship operation %s: %w", op.OperationID, err)
		}
		return &Ending{Operation: cur, MergeSHA: out.mergeSHA, Refusal: out.refusal, Rework: out.rework}, nil
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

// waitReason returns the Reason of err's TemporaryError, or "".
func waitReason(err error) string {
	var te *lifecycletype.TemporaryError
	if errors.As(err, &te) {
		return te.Reason
	}
	return ""
}
