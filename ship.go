package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/id"
)

// ShipStatus is the state of a ship operation.
type ShipStatus string

// The ship operation statuses.
const (
	ShipQueued    ShipStatus = "queued"
	ShipRunning   ShipStatus = "running"
	ShipSucceeded ShipStatus = "succeeded"
	ShipFailed    ShipStatus = "failed"
)

// Environment is where a shipped task is deployed.
type Environment string

// The deployment environments.
const (
	EnvironmentStaging    Environment = "staging"
	EnvironmentProduction Environment = "production"
)

// ShipMode says whether a ship deploys after merging.
type ShipMode string

// The ship modes.
const (
	ShipMergeOnly      ShipMode = "merge_only"
	ShipMergeAndDeploy ShipMode = "merge_and_deploy"
)

// ShipError says why a ship operation failed.
type ShipError struct {
	// Code is machine-readable: head_sha_mismatch, merge_failed,
	// deploy_failed or not_shippable.
	Code string `json:"code"`
	// Message says what happened, in words.
	Message string `json:"message"`
}

// ShipOperation is an asynchronous, durable operation that merges a task's
// pull request at an expected head commit and optionally deploys it. Its
// JSON encoding is the one of GET /ship-operations/{operationId}; POST
// /tasks/{id}/ship answers with its first five members.
type ShipOperation struct {
	TaskID            string      `json:"taskId"`
	OperationID       string      `json:"operationId"`
	Status            ShipStatus  `json:"status"`
	QueuedAt          Timestamp   `json:"queuedAt"`
	AvailableActions  []Action    `json:"availableActions"`
	Mode              ShipMode    `json:"mode"`
	TargetEnvironment Environment `json:"targetEnvironment"`
	ExpectedHeadSHA   string      `json:"expectedHeadSha"`
	StartedAt         *Timestamp  `json:"startedAt"`
	FinishedAt        *Timestamp  `json:"finishedAt"`
	MergeCommitSHA    *string     `json:"mergeCommitSha"`
	Deployment        *Deployment `json:"deployment"`
	Error             *ShipError  `json:"error"`

	// SubmissionMode and PullRequest say which adapter merges what.
	SubmissionMode SubmitMode     `json:"-"`
	PullRequest    PullRequestRef `json:"-"`
	// Actor asked for the ship; TraceID is its request's trace.
	Actor   Actor   `json:"-"`
	TraceID *string `json:"-"`
	// Attempts counts the times a runner took the operation up.
	Attempts int `json:"-"`
	// LeaseUntil is when a running operation whose runner went silent may
	// be taken over.
	LeaseUntil Timestamp `json:"-"`
}

// Valid reports whether m is one of the ship modes.
func (m ShipMode) Valid() bool { return m == ShipMergeOnly || m == ShipMergeAndDeploy }

// Valid reports whether e is one of the environments.
func (e Environment) Valid() bool { return e == EnvironmentStaging || e == EnvironmentProduction }

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
}

func (p *ShipParams) validate() error {
	var v validator
	if !p.Mode.Valid() {
		v.add("mode", "is required: merge_only or merge_and_deploy")
	}
	if !p.TargetEnvironment.Valid() {
		v.add("targetEnvironment", "is required: staging or production")
	}
	if !shaRE.MatchString(p.ExpectedHeadSHA) {
		v.add("expectedHeadSha", "must be a full 40-character hex commit SHA")
	}
	return v.err()
}

// Ship accepts a ship of a task: when `ship` is available, CI passed, the
// review decision allows it and expectedHeadSha is the pull request's
// current head, a ship operation is queued for the runner and returned. It
// returns a *ConflictError whose Reason names the failed precondition
// (not_shippable, ci_not_passed, review_not_approved, head_sha_mismatch,
// deployer_not_configured) and a *ProviderError when the host cannot be
// asked for the pull request's head.
func (s *Service) Ship(ctx context.Context, taskID string, p ShipParams) (ShipOperation, error) {
	return s.ship(ctx, taskID, p, nil)
}

// ship is Ship with a hook run in the transaction that queues the operation.
func (s *Service) ship(ctx context.Context, taskID string, p ShipParams, onCommit func(tx Tx, op *ShipOperation) error) (ShipOperation, error) {
	if err := p.validate(); err != nil {
		return ShipOperation{}, err
	}
	unlock := s.taskLocks.lock(taskID)
	defer unlock()
	t, err := s.readTask(ctx, taskID)
	if err != nil {
		return ShipOperation{}, err
	}
	ci, decision := CIStatus{Overall: CINone}, recordedDecision(&t)
	if t.Status == StatusInReview {
		if ci, decision, err = s.liveReview(ctx, &t); err != nil {
			return ShipOperation{}, err
		}
	}
	t.AvailableActions = actionsOf(&t, facts{ci: ci.Overall, decision: decision})
	refuse := func(reason, format string, args ...any) (ShipOperation, error) {
		return ShipOperation{}, &ConflictError{Reason: reason, Message: fmt.Sprintf(format, args...), AvailableActions: t.AvailableActions}
	}
	expected := lowerHex(p.ExpectedHeadSHA)
	switch {
	case t.Status != StatusInReview || t.PRNumber == nil || t.HeadSHA == nil:
		return refuse("not_shippable", "Task %s is %s; only a submitted task in review can be shipped", t.Identifier, t.Status)
	case t.ActiveShipID != "":
		return refuse("not_shippable", "Task %s is already being shipped by operation %s", t.Identifier, t.ActiveShipID)
	case ci.Overall != CIPassed:
		return refuse("ci_not_passed", "CI of task %s is %s, not passed", t.Identifier, ci.Overall)
	case !decision.allowsShip():
		return refuse("review_not_approved", "The review decision on task %s is %s, not approved", t.Identifier, decision)
	case expected != *t.HeadSHA:
		return refuse("head_sha_mismatch", "expectedHeadSha %s is not the head of task %s (%s); read the task again", expected, t.Identifier, *t.HeadSHA)
	case p.Mode == ShipMergeAndDeploy && s.cfg.Deployer == nil:
		return refuse("deployer_not_configured", "This service has no deployer; ship task %s with mode merge_only", t.Identifier)
	}
	adapter, err := s.adapterFor(&t, t.SubmissionMode)
	if err != nil {
		return ShipOperation{}, err
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	pr, err := adapter.PullRequest(actx, t.pullRequestRef())
	cancel()
	if err != nil {
		return ShipOperation{}, s.providerError(ctx, "read the pull request", err)
	}
	// A pull request merged at the expected head is accepted too: a ship
	// whose deploy failed is retried, and the runner recognises the merge.
	switch {
	case pr.State == PullRequestClosed:
		return refuse("not_shippable", "Pull request #%d of task %s is closed", pr.Number, t.Identifier)
	case lowerHex(pr.HeadSHA) != expected:
		return refuse("head_sha_mismatch", "The head of pull request #%d moved to %s; submit the task again", pr.Number, lowerHex(pr.HeadSHA))
	}

	now := s.now()
	op := ShipOperation{
		TaskID:            t.ID,
		OperationID:       id.New("shp_"),
		Status:            ShipQueued,
		QueuedAt:          now,
		Mode:              p.Mode,
		TargetEnvironment: p.TargetEnvironment,
		ExpectedHeadSHA:   expected,
		SubmissionMode:    t.SubmissionMode,
		PullRequest:       t.pullRequestRef(),
		Actor:             p.Actor,
		TraceID:           traceIDFrom(ctx),
		LeaseUntil:        now,
	}
	err = s.update(ctx, func(tx Tx) error {
		cur, err := tx.Task(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("get task %s: %w", t.ID, err)
		}
		if cur.Version != t.Version || cur.ActiveShipID != "" {
			return &ConflictError{Reason: "not_shippable", Message: fmt.Sprintf("Task %s changed while the ship was checked; read it again", t.Identifier),
				AvailableActions: t.AvailableActions}
		}
		if err := tx.CreateShipOperation(ctx, op); err != nil {
			return fmt.Errorf("queue ship operation: %w", err)
		}
		// Not a change of the task's state: no version, no event. It only
		// keeps a second ship out until this one finishes.
		cur.ActiveShipID = op.OperationID
		if err := tx.UpdateTask(ctx, cur); err != nil {
			return fmt.Errorf("update task %s: %w", t.ID, err)
		}
		if op.AvailableActions, err = s.txActions(ctx, tx, &cur); err != nil {
			return err
		}
		if onCommit != nil {
			return onCommit(tx, &op)
		}
		return nil
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
func (s *Service) wakeShipRunner() {
	select {
	case s.shipWake <- struct{}{}:
	default:
	}
}

// shipLease is how long a runner holds an operation before another may
// take it over.
func (s *Service) shipLease() time.Duration {
	return s.cfg.ShipLease
}

// runShips is the ship runner: it takes up to ShipConcurrency operations
// at a time and works them, until ctx ends. Operations it is working when
// ctx ends stay running; their lease runs out and a runner (this process
// restarted, or another) resumes them.
func (s *Service) runShips(ctx context.Context) {
	slots := make(chan struct{}, s.cfg.ShipConcurrency)
	for {
		if free := cap(slots) - len(slots); free > 0 {
			ops, err := s.claimShips(ctx, free)
			if err != nil && ctx.Err() == nil {
				s.log.Error("claim ship operations", "err", err)
			}
			for _, op := range ops {
				slots <- struct{}{}
				s.goBackground(func() {
					defer func() {
						<-slots
						s.wakeShipRunner()
					}()
					s.runShip(ctx, op)
				})
			}
			if len(ops) == free {
				continue // there may be more
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.shipWake:
		case <-s.clock.After(s.cfg.ShipPollInterval):
		}
	}
}

// claimShips marks up to limit runnable operations running under a new
// lease and returns them.
func (s *Service) claimShips(ctx context.Context, limit int) ([]ShipOperation, error) {
	var claimed []ShipOperation
	// A claim lost in a power cut leaves the operation queued, to be
	// claimed again: it need not wait for the disk.
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		now := s.now()
		ops, err := tx.RunnableShipOperations(ctx, now.Time, limit)
		if err != nil {
			return err
		}
		claimed = claimed[:0]
		for _, op := range ops {
			if op.Status == ShipRunning {
				s.log.Warn("resuming a ship operation whose runner went silent", "operation", op.OperationID, "attempt", op.Attempts+1)
			}
			op.Status = ShipRunning
			op.Attempts++
			if op.StartedAt == nil {
				op.StartedAt = &now
			}
			op.LeaseUntil = NewTimestamp(now.Add(s.shipLease()))
			if err := tx.UpdateShipOperation(ctx, op); err != nil {
				return err
			}
			claimed = append(claimed, op)
		}
		return nil
	})
	return claimed, err
}

// shipOutcome is what working an operation came to.
type shipOutcome struct {
	mergeSHA   string
	deployment *Deployment
	err        *ShipError
}

// runShip works one claimed operation and records how it ended.
func (s *Service) runShip(ctx context.Context, op ShipOperation) {
	out := s.workShip(ctx, op)
	if ctx.Err() != nil {
		return // shutting down: the lease runs out and the operation resumes
	}
	if err := s.finishShip(context.WithoutCancel(ctx), op, out); err != nil {
		s.log.Error("finish ship operation; it resumes when its lease ends", "operation", op.OperationID, "err", err)
	}
}

// workShip merges (once) and deploys.
func (s *Service) workShip(ctx context.Context, op ShipOperation) shipOutcome {
	fail := func(code, msg string, err error) shipOutcome {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("ship operation failed", "operation", op.OperationID, "task", op.TaskID, "code", code, "err", err)
		}
		return shipOutcome{err: &ShipError{Code: code, Message: msg}}
	}
	t, err := s.readTask(ctx, op.TaskID)
	if err != nil {
		return fail("not_shippable", "The task could not be read.", err)
	}
	if t.Status != StatusInReview || t.ActiveShipID != op.OperationID {
		return fail("not_shippable", fmt.Sprintf("Task %s is %s and no longer waits for this operation.", t.Identifier, t.Status), nil)
	}
	adapter, err := s.adapterFor(&t, op.SubmissionMode)
	if err != nil {
		return fail("merge_failed", "No adapter handles the task's pull request any more.", err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	// A merge that already happened (before a crash, say) is recognised,
	// not repeated.
	pr, err := adapter.PullRequest(pctx, op.PullRequest)
	if err != nil {
		return fail("merge_failed", "The code host could not be asked for the pull request.", err)
	}
	var out shipOutcome
	switch {
	case pr.State == PullRequestMerged && lowerHex(pr.HeadSHA) == op.ExpectedHeadSHA:
		out.mergeSHA = pr.MergeCommitSHA
	case pr.State == PullRequestMerged:
		return fail("head_sha_mismatch", fmt.Sprintf("Pull request #%d was merged at %s, not %s.", pr.Number, pr.HeadSHA, op.ExpectedHeadSHA), nil)
	case pr.State == PullRequestClosed:
		return fail("not_shippable", fmt.Sprintf("Pull request #%d is closed.", pr.Number), nil)
	default:
		res, err := adapter.Merge(pctx, MergeRequest{Ref: op.PullRequest, ExpectedHeadSHA: op.ExpectedHeadSHA,
			CommitTitle: fmt.Sprintf("Merge #%d: %s %s", pr.Number, t.Identifier, t.Title)})
		switch {
		case errors.Is(err, ErrHeadMismatch):
			return fail("head_sha_mismatch", fmt.Sprintf("The head of pull request #%d is no longer %s.", pr.Number, op.ExpectedHeadSHA), err)
		case err != nil:
			return fail("merge_failed", "The code host failed to merge the pull request; the service log has the details.", err)
		}
		out.mergeSHA = res.MergeCommitSHA
	}
	if op.Mode != ShipMergeAndDeploy {
		return out
	}
	if s.cfg.Deployer == nil {
		return shipOutcome{mergeSHA: out.mergeSHA, err: &ShipError{Code: "deploy_failed", Message: "This service has no deployer any more."}}
	}
	dctx, dcancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer dcancel()
	dep, err := s.cfg.Deployer.Deploy(dctx, DeployRequest{Task: t, OperationID: op.OperationID, Environment: op.TargetEnvironment,
		PullRequest: op.PullRequest, CommitSHA: out.mergeSHA})
	if err != nil {
		o := fail("deploy_failed", "The deployer failed; the merge stands and a new ship deploys it again.", err)
		o.mergeSHA = out.mergeSHA
		return o
	}
	out.deployment = &dep
	return out
}

// finishShip records the outcome of an operation: the operation ends, the
// task is done (or stays in review) and task.shipped is emitted, in one
// transaction. An operation another runner finished or took over is left
// alone.
func (s *Service) finishShip(ctx context.Context, op ShipOperation, out shipOutcome) error {
	var stale bool
	_, err := s.changeTask(ctx, op.TaskID, func(tx Tx, t *Task) (taskEvent, error) {
		cur, err := tx.ShipOperation(ctx, op.OperationID)
		if err != nil {
			return taskEvent{}, fmt.Errorf("get ship operation %s: %w", op.OperationID, err)
		}
		if cur.Status != ShipRunning || cur.Attempts != op.Attempts {
			stale = true
			return taskEvent{}, nil
		}
		now := s.now()
		cur.FinishedAt, cur.LeaseUntil = &now, now
		if out.mergeSHA != "" {
			cur.MergeCommitSHA = &out.mergeSHA
		}
		cur.Deployment, cur.Error = out.deployment, out.err
		ev := taskEvent{typ: EventTaskShipped, actor: op.Actor, operationID: op.OperationID, environment: op.TargetEnvironment}
		if out.err == nil {
			cur.Status, ev.shipStatus = ShipSucceeded, ShipSucceeded
			t.Status = StatusDone
			ev.summary = fmt.Sprintf("Task %s shipped to %s", t.Identifier, op.TargetEnvironment)
			if op.Mode == ShipMergeOnly {
				ev.summary = fmt.Sprintf("Task %s merged (%s)", t.Identifier, op.TargetEnvironment)
			}
		} else {
			cur.Status, ev.shipStatus = ShipFailed, ShipFailed
			ev.summary = fmt.Sprintf("Shipping task %s failed: %s", t.Identifier, out.err.Code)
		}
		if t.ActiveShipID == op.OperationID {
			t.ActiveShipID = ""
		}
		if err := tx.UpdateShipOperation(ctx, cur); err != nil {
			return taskEvent{}, fmt.Errorf("update ship operation %s: %w", op.OperationID, err)
		}
		return ev, nil
	})
	if err == nil && stale {
		s.log.Warn("a ship operation was finished by another runner", "operation", op.OperationID)
	}
	return err
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
	return s.serveIdempotent(w, r, p, shipRoute, taskID, &params, params.validate, http.StatusAccepted, s.actionsOrNil(taskID),
		func(ctx context.Context, key string, respond func(Tx, any) error) error {
			params.Actor = p.Actor
			_, err := s.ship(ctx, taskID, params, func(tx Tx, op *ShipOperation) error {
				return respond(tx, struct {
					Data             shipAccepted `json:"data"`
					AvailableActions []Action     `json:"availableActions"`
				}{shipAccepted{op.TaskID, op.OperationID, op.Status, op.QueuedAt, op.AvailableActions}, op.AvailableActions})
			})
			return err
		})
}

func (s *Service) handleGetShipOperation(w http.ResponseWriter, r *http.Request, p *Principal) error {
	op, err := s.ShipOperation(r.Context(), r.PathValue("operationId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Data             ShipOperation `json:"data"`
		AvailableActions []Action      `json:"availableActions"`
	}{op, op.AvailableActions})
	return nil
}
