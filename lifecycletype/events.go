package lifecycletype

import (
	"encoding/json"
	"fmt"
)

// EventType names what happened to a task.
type EventType string

// The event types.
const (
	// EventTaskUpdated: a task's status or fields changed (created,
	// started, submitted, cancelled, blocker resolved, ...).
	EventTaskUpdated EventType = "task.updated"
	// EventTaskReviewed: a reviewer approved, requested changes or commented.
	EventTaskReviewed EventType = "task.reviewed"
	// EventTaskShipped: a ship operation finished, successfully or not.
	EventTaskShipped EventType = "task.shipped"
	// EventTaskAwaitingUser: an agent recorded a blocker that needs a user.
	EventTaskAwaitingUser EventType = "task.awaiting_user"
	// EventTaskMergeQueue: the task's change entered a merge queue, was
	// tested there, landed, or left it (see [TaskMergeQueueData]). It
	// does not change the task: its taskVersion is the task's as it was.
	EventTaskMergeQueue EventType = "task.merge_queue"
	// EventTaskStalled: the task stayed in a status watched by
	// lifecycle.Config.StallAfter without activity for longer than that
	// status allows, and is now marked stalled (see [TaskStalledData]).
	// It is emitted once per stall: activity clears the mark.
	EventTaskStalled EventType = "task.stalled"
)

// Valid reports whether t is one of the event types.
func (t EventType) Valid() bool {
	switch t {
	case EventTaskUpdated, EventTaskReviewed, EventTaskShipped, EventTaskAwaitingUser, EventTaskMergeQueue, EventTaskStalled, EventTaskCIFailed:
		return true
	}
	return false
}

// Event is an entry of the lifecycle outbox: the envelope that the event
// stream and webhook deliveries carry. Events are appended in the
// transaction of the change they describe.
type Event struct {
	// ID begins "evt_"; clients deduplicate on it and resume from it.
	ID string `json:"id"`
	// Type says what happened.
	Type EventType `json:"type"`
	// OccurredAt is when the change was committed.
	OccurredAt Timestamp `json:"occurredAt"`
	// Sequence is the event's place in the global outbox order, assigned by
	// the Store when the event is appended.
	Sequence int64 `json:"sequence"`
	// TaskVersion is the task's version after the change.
	TaskVersion int64 `json:"taskVersion"`
	// TraceID is the W3C trace ID of the request that caused the change, or nil.
	TraceID *string `json:"traceId"`
	// Data is the JSON object of the event type: one of TaskUpdatedData,
	// TaskReviewedData, TaskShippedData, TaskAwaitingUserData,
	// TaskMergeQueueData, TaskStalledData or TaskCIFailedData.
	Data json.RawMessage `json:"data"`

	// TaskID is the task the event is about (also in Data).
	TaskID string `json:"-"`
	// Project is the task's project, or "" (for subscription filters).
	Project string `json:"-"`
}

// EventLinks are the absolute URLs an event points to.
type EventLinks struct {
	// Task is the URL of the task; always set.
	Task string `json:"task"`
	// ReviewFeedback is the URL of the task's review feedback.
	ReviewFeedback string `json:"reviewFeedback,omitempty"`
	// ShipOperation is the URL of the ship operation.
	ShipOperation string `json:"shipOperation,omitempty"`
}

// Actor is who performed a change: the actor of an API key, or the system.
type Actor struct {
	// ID identifies the actor.
	ID string `json:"id"`
	// Role is one of "agent", "reviewer", "user" or "system".
	Role Role `json:"role"`
}

// Role is the kind of an Actor.
type Role string

// The actor roles.
const (
	RoleAgent    Role = "agent"
	RoleReviewer Role = "reviewer"
	RoleUser     Role = "user"
	RoleSystem   Role = "system"
)

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool {
	switch r {
	case RoleAgent, RoleReviewer, RoleUser, RoleSystem:
		return true
	}
	return false
}

// SystemActor returns the actor of changes the Service makes by itself, such
// as finishing a ship operation.
func SystemActor() Actor { return Actor{ID: "system", Role: RoleSystem} }

// EventData holds the members common to the data of every event type.
type EventData struct {
	TaskID           string     `json:"taskId"`
	TaskIdentifier   string     `json:"taskIdentifier"`
	Status           Status     `json:"status"`
	Summary          string     `json:"summary"`
	AvailableActions []Action   `json:"availableActions"`
	Links            EventLinks `json:"links"`
}

// TaskUpdatedData is the data of a task.updated event.
type TaskUpdatedData struct {
	EventData
	// PreviousStatus is the status before the change; nil when the task was
	// just created.
	PreviousStatus *Status `json:"previousStatus"`
	// ChangedFields names the Task members the change touched.
	ChangedFields []string `json:"changedFields"`
	// ReworkReason says why the task offers start for rework (see
	// [Task.ReworkReason]), or is empty (and left out) when it offers none.
	ReworkReason string `json:"reworkReason,omitempty"`
	// Actor performed the change.
	Actor Actor `json:"actor"`
}

// TaskReviewedData is the data of a task.reviewed event.
type TaskReviewedData struct {
	EventData
	// ReviewOutcome is "approved", "changes_requested" or "commented".
	ReviewOutcome ReviewOutcome `json:"reviewOutcome"`
	// Reviewer is the actor who reviewed.
	Reviewer Actor `json:"reviewer"`
}

// TaskShippedData is the data of a task.shipped event.
type TaskShippedData struct {
	EventData
	// ShipStatus is "succeeded" or "failed".
	ShipStatus ShipStatus `json:"shipStatus"`
	// OperationID identifies the ship operation ("shp_...").
	OperationID string `json:"operationId"`
	// TargetEnvironment is "staging" or "production".
	TargetEnvironment Environment `json:"targetEnvironment"`
	// ReworkReason says why the task offers start for rework once the
	// operation failed (the merge queue sent the change back:
	// checks_failed or merge_conflict), or is empty (and left out).
	ReworkReason string `json:"reworkReason,omitempty"`
}

// TaskAwaitingUserData is the data of a task.awaiting_user event.
type TaskAwaitingUserData struct {
	EventData
	PreviousStatus *Status      `json:"previousStatus"`
	ChangedFields  []string     `json:"changedFields"`
	Actor          Actor        `json:"actor"`
	Blocker        EventBlocker `json:"blocker"`
}

// TaskStalledData is the data of a task.stalled event. Its status is the
// status the task stalled in.
type TaskStalledData struct {
	EventData
	// LastActivityAt is when the task last saw activity.
	LastActivityAt Timestamp `json:"lastActivityAt"`
	// StallAfterSeconds is how long a task may stay in its status without
	// activity (lifecycle.Config.StallAfter), in seconds.
	StallAfterSeconds int64 `json:"stallAfterSeconds"`
}

// EventBlocker is the part of a Blocker carried by a task.awaiting_user event.
type EventBlocker struct {
	Kind           string `json:"kind"`
	Reason         string `json:"reason"`
	ActionRequired string `json:"actionRequired"`
}

// DecodeData decodes the event's data into the struct of its type and
// returns a pointer to it: *TaskUpdatedData, *TaskReviewedData,
// *TaskShippedData, *TaskAwaitingUserData, *TaskMergeQueueData,
// *TaskStalledData or *TaskCIFailedData.
func (e *Event) DecodeData() (any, error) {
	var v any
	switch e.Type {
	case EventTaskUpdated:
		v = new(TaskUpdatedData)
	case EventTaskReviewed:
		v = new(TaskReviewedData)
	case EventTaskShipped:
		v = new(TaskShippedData)
	case EventTaskAwaitingUser:
		v = new(TaskAwaitingUserData)
	case EventTaskMergeQueue:
		v = new(TaskMergeQueueData)
	case EventTaskStalled:
		v = new(TaskStalledData)
	case EventTaskCIFailed:
		v = new(TaskCIFailedData)
	default:
		return nil, fmt.Errorf("event %s: unknown type %q", e.ID, e.Type)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return nil, fmt.Errorf("event %s: decode %s data: %w", e.ID, e.Type, err)
	}
	return v, nil
}

// EventFilter selects events for [Store.Events].
type EventFilter struct {
	// After keeps events whose sequence is greater than After.
	After int64
	// ID, when not empty, keeps the event with this ID.
	ID string
	// Types, when not empty, keeps events of these types.
	Types []EventType
	// TaskID, when not empty, keeps events of this task.
	TaskID string
	// Limit is the most events to return; the Store may assume 1..10000.
	Limit int
}
