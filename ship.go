package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/shiprun"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

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
func (s *Service) wakeShipRunner() { s.ships.Wake() }

// shipTasks is the Service as the ship runner sees it (shiprun.Tasks):
// the task, the adapter of its pull request, a reading of the host, the
// table's answers to cmdRun and cmdMerge, and the change of the task when
// its operation ends.
type shipTasks struct{ s *Service }

var _ shiprun.Tasks = shipTasks{}

func (d shipTasks) ReadTask(ctx context.Context, taskID string) (Task, error) {
	return d.s.readTask(ctx, taskID)
}

func (d shipTasks) AdapterFor(t *Task, mode SubmitMode) (ProviderAdapter, error) {
	return d.s.shipAdapter(t, mode)
}

func (d shipTasks) ReadHost(ctx context.Context, adapter ProviderAdapter, t Task, ref PullRequestRef) (shiprun.Reading, error) {
	got, err := d.s.readHost(ctx, adapter, []Task{t}, ReadMerge)
	if err == nil {
		err = got[0].err
	}
	if err != nil {
		return nil, err
	}
	return shipReading{d.s, t.ID, ref, got[0].obs}, nil
}

func (d shipTasks) MayRun(t *Task, operationID string) *shiprun.Refusal {
	return runnerRefusal(d.s.answer(t, ask{cmd: cmdRun, operation: operationID}))
}

func (d shipTasks) MayMerge(t *Task, head, operationID string) *shiprun.Refusal {
	return runnerRefusal(d.s.answer(t, ask{cmd: cmdMerge, head: head, operation: operationID}))
}

// runnerRefusal is the table's refusal err of a step of the ship runner, or nil.
func runnerRefusal(err error) *shiprun.Refusal {
	if err == nil {
		return nil
	}
	var c *ConflictError
	if !errors.As(err, &c) { // run's and merge's refusals are all conflicts
		return &shiprun.Refusal{Reason: "conflict", Message: err.Error()}
	}
	return &shiprun.Refusal{Reason: c.Reason, Message: c.Message}
}

// FinishShip moves the task of the operation end records as it ended, and
// emits task.shipped.
func (d shipTasks) FinishShip(ctx context.Context, taskID string, end func(tx Tx) (*shiprun.Ending, error)) error {
	_, err := d.s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		e, err := end(tx)
		if e == nil || err != nil {
			return taskEvent{}, err // nil: the operation is another runner's
		}
		op := e.Operation
		ev := taskEvent{typ: EventTaskShipped, actor: op.Actor, operationID: op.OperationID, environment: op.TargetEnvironment, shipStatus: op.Status}
		if t.ActiveShipID == op.OperationID {
			t.ActiveShipID = ""
			t.ShipMerging = false
		}
		if op.Status == ShipSucceeded {
			moveTask(t, moveShipped)
			t.Facts.PRState, t.Facts.MergeCommitSHA = PullRequestMerged, e.MergeSHA
			ev.summary = fmt.Sprintf("Task %s shipped to %s", t.Identifier, op.TargetEnvironment)
			if op.Mode == ShipMergeOnly {
				ev.summary = fmt.Sprintf("Task %s merged (%s)", t.Identifier, op.TargetEnvironment)
			}
		} else {
			ev.summary = fmt.Sprintf("Shipping task %s failed: %s", t.Identifier, op.Error.Code)
			if e.Refusal != "" {
				t.Facts.MergeRefusal = &MergeRefusal{Message: e.Refusal, Facts: mergeFacts(t), Hints: t.Facts.Hints, At: *op.FinishedAt}
			}
			if e.Rework != nil {
				t.Facts.QueueRework = e.Rework
			}
			settle(t, t.Facts.PRState)
		}
		return ev, nil
	})
	return err
}

func (d shipTasks) ReconcileSoon(ctx context.Context, taskID string) { d.s.reconcileSoon(ctx, taskID) }

// shipReading is a reading of the host for a task about to be merged.
type shipReading struct {
	s      *Service
	taskID string
	ref    PullRequestRef
	obs    observation
}

func (r shipReading) PullRequest() PullRequest { return r.obs.pr }

// Store applies the reading as any reading is (applyObservation), with
// the operation under way: a merged or closed pull request moves the task
// when the operation ends.
func (r shipReading) Store(ctx context.Context) error {
	_, err := r.s.applyObservation(ctx, r.taskID, r.ref, r.obs, hint{}, schedule{})
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
