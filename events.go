package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// taskEvent describes the event a task change emits; the common members
// are filled from the task itself.
type taskEvent struct {
	typ     EventType
	summary string
	actor   Actor

	// reviewOutcome is set for task.reviewed.
	reviewOutcome ReviewOutcome
	// operationID, shipStatus and environment are set for task.shipped.
	operationID string
	shipStatus  ShipStatus
	environment Environment
	// stallAfter is set for task.stalled: Config.StallAfter of the status.
	stallAfter time.Duration

	// activity, on a taskEvent with no type, says the change fn made is
	// activity all the same (a reported check that left the task's CI as
	// it was): the task's last activity moves, quietly, unless that
	// clears a stall mark, which task.updated then announces.
	activity bool
	// notActivity says the change is not the task's activity (a person
	// set its dependencies): its last activity and stall mark stay.
	notActivity bool

	// headSHA and failedChecks are set for task.ci_failed.
	headSHA      string
	failedChecks []FailedCheck

	// after, when set, runs in the transaction once the task is stored and
	// the event appended, with the task as it now is.
	after func(tx Tx, t *Task) error
	// extra are more events of the same change, appended after this one,
	// each with its own taskVersion; their data show the task as it is
	// after the whole change.
	extra []taskEvent
}

// updateRelaxed runs fn in a Store transaction that need not wait for the
// disk, when the Store can do that (see [RelaxedUpdater]).
func (s *Service) updateRelaxed(ctx context.Context, fn func(tx Tx) error) error {
	if s.caps.relaxed == nil {
		return s.update(ctx, fn)
	}
	return s.transact(ctx, true, fn)
}

// update runs fn in a Store transaction, then wakes the stream broker to
// fan out the events the transaction committed.
func (s *Service) update(ctx context.Context, fn func(tx Tx) error) error {
	if err := s.transact(ctx, false, fn); err != nil {
		return err
	}
	s.broker.Wake()
	return nil
}

// transact runs fn in a Store transaction (relaxed: one that need not
// wait for the disk, when the Store can do that), in a span "store.tx",
// and counts the events it commits in lifecycle.outbox.events.
func (s *Service) transact(ctx context.Context, relaxed bool, fn func(tx Tx) error) error {
	run := s.store.Update
	if relaxed && s.caps.relaxed != nil {
		run = s.caps.relaxed.UpdateRelaxed
	}
	return s.transactOn(ctx, run, fn)
}

// transactOn is transact with the transaction run by run: Store.Update,
// or a method of an optional interface that runs one as Update does.
func (s *Service) transactOn(ctx context.Context, run func(ctx context.Context, fn func(tx Tx) error) error, fn func(tx Tx) error) error {
	ctx, span := s.tel.Start(ctx, "store.tx", trace.WithSpanKind(trace.SpanKindInternal))
	var (
		appended []EventType
		ciDue    bool
	)
	count := s.tel.CountingOutbox(ctx)
	err := run(ctx, func(tx Tx) error {
		appended, ciDue = appended[:0], false // a Store may run fn again
		return fn(outboxTx{Tx: tx, count: count, appended: &appended, ciDue: &ciDue})
	})
	telemetry.End(span, err)
	if err == nil {
		for _, typ := range appended {
			s.tel.OutboxEvent(ctx, string(typ))
		}
		if ciDue {
			s.ciFetch.Wake() // details of failed checks to fetch
		}
	}
	return err
}

// storeTx returns the Store's own transaction under the Service's
// wrappers of it (outboxTx, newSubmissionTx): the one whose optional
// interfaces (DependencyTx, MergeQueueTx, CIFailureTx, InProgressCounter)
// a feature asks for.
func storeTx(tx Tx) Tx {
	for {
		switch w := tx.(type) {
		case outboxTx:
			tx = w.Tx
		case *newSubmissionTx:
			tx = w.Tx
		default:
			return tx
		}
	}
}

// outboxTx is a transaction that notes the types of the events appended
// through it, counted once it commits when count is set, and whether it
// marked failed checks whose details are to be fetched (ciDue).
type outboxTx struct {
	Tx
	count    bool
	appended *[]EventType
	ciDue    *bool
}

func (t outboxTx) AppendEvent(ctx context.Context, e *Event) error {
	if err := t.Tx.AppendEvent(ctx, e); err != nil {
		return err
	}
	if t.count {
		*t.appended = append(*t.appended, e.Type)
	}
	return nil
}

// changeTask loads a task in a transaction, lets fn change it, bumps its
// version and appends the event fn describes (and its extra ones, each
// with a version of its own), all in one commit. fn sees the task with its
// available actions before the change; it must replace pointer and slice
// members rather than write through them. When fn returns a taskEvent
// with no type, the task is left as it was (what fn wrote through tx is
// still committed).
func (s *Service) changeTask(ctx context.Context, taskID string, fn func(tx Tx, t *Task) (taskEvent, error)) (Task, error) {
	return s.changeTaskRecorded(ctx, taskID, nil, fn)
}

// changeTaskRecorded is changeTask that, when record is not nil, calls
// it in the transaction of the change with the task as it then is (as it
// was, when fn changed nothing): a keyed call records its answer there
// (see taskOnce).
func (s *Service) changeTaskRecorded(ctx context.Context, taskID string, record recordFunc, fn func(tx Tx, t *Task) (taskEvent, error)) (Task, error) {
	if record == nil {
		record = func(Tx, *Task) error { return nil }
	}
	if !validTaskID(taskID) {
		return Task{}, notFound("task", taskID)
	}
	var out Task
	err := s.update(ctx, func(tx Tx) error {
		t, err := tx.Task(ctx, taskID)
		if errors.Is(err, ErrNotFound) {
			return notFound("task", taskID)
		}
		if err != nil {
			return fmt.Errorf("get task %s: %w", taskID, err)
		}
		if err := s.countAgent(ctx, tx, &t, nil); err != nil {
			return err
		}
		s.setActions(&t)
		before := t
		ev, err := fn(tx, &t)
		if err != nil {
			return err
		}
		if ev.typ == "" && ev.activity {
			quiet := before // what fn changed is not kept, as without activity
			if err := s.recordActivity(ctx, tx, &quiet, ev.actor); err != nil {
				return err
			}
			out = quiet
			return record(tx, &quiet)
		}
		if ev.typ == "" {
			out = before
			return record(tx, &before) // a keyed call that changed nothing is answered too
		}
		if h := t.Facts.CIFailedHead; h != "" && h != before.Facts.CIFailedHead && t.HeadSHA != nil && *t.HeadSHA == h {
			failed, err := s.ciFailedEvent(ctx, tx, &t)
			if err != nil {
				return err
			}
			ev.extra = append(slices.Clip(ev.extra), failed)
		}
		t.UpdatedAt = s.now()
		if capRework(&t, s.cfg.MaxReworkRounds, t.UpdatedAt) {
			ev.extra = append(slices.Clip(ev.extra), taskEvent{typ: EventTaskAwaitingUser, actor: SystemActor(),
				summary: fmt.Sprintf("Task %s needs rework again after its %d rework rounds: it waits for a person", t.Identifier, reworkUsed(&t))})
		}
		if c := s.cfg.MaxInProgressPerAgent; needsCount(&t, c) && needsCount(&before, c) && *t.AssigneeAgentID == *before.AssigneeAgentID {
			t.AssigneeInProgress = before.AssigneeInProgress // counted already, and neither is in progress
		} else if err := s.countAgent(ctx, tx, &t, &before); err != nil {
			return err
		}
		if !ev.notActivity {
			t.Touch(t.UpdatedAt) // every other change a task event announces is activity
		}
		s.setActions(&t)
		for i, e := range append([]taskEvent{ev}, ev.extra...) {
			t.Version++
			if i == 0 {
				if err := tx.UpdateTask(ctx, t); err != nil {
					return fmt.Errorf("update task %s: %w", taskID, err)
				}
			}
			if err := s.appendTaskEvent(ctx, tx, e, &before, &t); err != nil {
				return err
			}
		}
		if len(ev.extra) > 0 {
			if err := tx.UpdateTask(ctx, t); err != nil { // the final version
				return fmt.Errorf("update task %s: %w", taskID, err)
			}
		}
		if before.Status != StatusDone && t.Status == StatusDone {
			if err := s.releaseDependents(ctx, tx, &t, ev.actor); err != nil {
				return err
			}
		}
		if ev.after != nil {
			if err := ev.after(tx, &t); err != nil {
				return err
			}
		}
		if err := record(tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	return out, err
}

// recordActivity records activity on t, which tx read, when the activity
// changes nothing else of it (a reported check that leaves its CI as it
// was, a step of its change in the merge queue): its last activity moves
// quietly (no version, no event), unless that clears a stall mark, a
// change of the task that task.updated announces. Without a stall mark,
// a task in a status that cannot stall is left as it is.
func (s *Service) recordActivity(ctx context.Context, tx Tx, t *Task, actor Actor) error {
	if t.Stalled == nil && !s.watchesStall(t.Status) {
		return nil
	}
	before := *t
	now := s.now()
	if t.Touch(now) {
		t.UpdatedAt = now
		t.Version++
		s.setActions(t)
	}
	if err := tx.UpdateTask(ctx, *t); err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	if t.Version == before.Version {
		return nil
	}
	ev := taskEvent{typ: EventTaskUpdated, actor: actor, summary: fmt.Sprintf("Task %s is active again", t.Identifier)}
	return s.appendTaskEvent(ctx, tx, ev, &before, t)
}

// appendTaskEvent appends the event of a change from before (nil for a new
// task) to after.
func (s *Service) appendTaskEvent(ctx context.Context, tx Tx, ev taskEvent, before, after *Task) error {
	if ev.actor.ID == "" {
		ev.actor = SystemActor() // a change made through the Go API naming no actor
	}
	common := EventData{
		TaskID:           after.ID,
		TaskIdentifier:   after.Identifier,
		Status:           after.Status,
		Summary:          ev.summary,
		AvailableActions: httpapi.NonNil(after.AvailableActions),
		Links:            EventLinks{Task: s.link("/tasks/" + after.ID)},
	}
	var prev *Status
	if before != nil {
		prev = &before.Status
	}
	var data any
	switch ev.typ {
	case EventTaskUpdated:
		common.Links.ReviewFeedback = s.link("/tasks/" + after.ID + "/review-feedback")
		data = TaskUpdatedData{EventData: common, PreviousStatus: prev, ChangedFields: changedFields(before, after),
			ReworkReason: after.ReworkReason(), Actor: ev.actor}
	case EventTaskAwaitingUser:
		b := after.Blocker
		if b == nil {
			return fmt.Errorf("task %s: %s event without a blocker", after.ID, ev.typ)
		}
		data = TaskAwaitingUserData{
			EventData: common, PreviousStatus: prev, ChangedFields: changedFields(before, after), Actor: ev.actor,
			Blocker: EventBlocker{Kind: b.Kind, Reason: b.Reason, ActionRequired: b.ActionRequired},
		}
	case EventTaskReviewed:
		common.Links.ReviewFeedback = s.link("/tasks/" + after.ID + "/review-feedback")
		data = TaskReviewedData{EventData: common, ReviewOutcome: ev.reviewOutcome, Reviewer: ev.actor}
	case EventTaskShipped:
		common.Links.ShipOperation = s.link("/ship-operations/" + ev.operationID)
		data = TaskShippedData{EventData: common, ShipStatus: ev.shipStatus, OperationID: ev.operationID, TargetEnvironment: ev.environment,
			ReworkReason: after.ReworkReason()}
	case EventTaskStalled:
		data = TaskStalledData{EventData: common, LastActivityAt: after.LastActivityAt, StallAfterSeconds: int64(ev.stallAfter / time.Second)}
	case EventTaskCIFailed:
		data = TaskCIFailedData{EventData: common, HeadSHA: ev.headSHA, FailedChecks: ev.failedChecks}
	default:
		return fmt.Errorf("task %s: unknown event type %q", after.ID, ev.typ)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.typ, err)
	}
	e := Event{
		ID:          id.New("evt_"),
		Type:        ev.typ,
		OccurredAt:  after.UpdatedAt,
		TaskVersion: after.Version,
		TraceID:     httpapi.TraceIDFrom(ctx),
		Data:        raw,
		TaskID:      after.ID,
		Project:     after.Project(),
	}
	if err := tx.AppendEvent(ctx, &e); err != nil {
		return fmt.Errorf("append %s event: %w", ev.typ, err)
	}
	return nil
}

// diffedMembers are the Task members compared by changedFields, with their
// JSON names: every served member except updatedAt, which every change
// touches.
var diffedMembers = func() []reflect.StructField {
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Task]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "updatedAt" {
			continue
		}
		f.Name = name
		out = append(out, f)
	}
	return out
}()

// changedFields names the members that differ between before (nil for a
// new task, compared with the zero Task) and after, then the facts that
// differ: ciStatus, prState and reviewDecision.
func changedFields(before, after *Task) []string {
	if before == nil {
		before = &Task{}
	}
	b, a := reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()
	out := []string{}
	for _, f := range diffedMembers {
		x, y := b.FieldByIndex(f.Index).Interface(), a.FieldByIndex(f.Index).Interface()
		if !reflect.DeepEqual(x, y) {
			out = append(out, f.Name)
		}
	}
	return append(out, factFields(before, after)...)
}
