package lifecycletype

import (
	"encoding/json"
)

// Status is the lifecycle state of a task.
type Status string

// The task statuses.
const (
	StatusTodo       Status = "todo"
	StatusInProgress Status = "in_progress"
	StatusInReview   Status = "in_review"
	StatusBlocked    Status = "blocked"
	StatusDone       Status = "done"
	StatusCancelled  Status = "cancelled"
)

// Valid reports whether s is one of the task statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled:
		return true
	}
	return false
}

// Priority is the urgency of a task.
type Priority string

// The task priorities.
const (
	PriorityLow      Priority = "low"
	PriorityMedium   Priority = "medium"
	PriorityHigh     Priority = "high"
	PriorityCritical Priority = "critical"
)

// Valid reports whether p is one of the priorities.
func (p Priority) Valid() bool {
	switch p {
	case PriorityLow, PriorityMedium, PriorityHigh, PriorityCritical:
		return true
	}
	return false
}

// Action is a next step a client may take on a task. Every mutating call is
// gated on the task's available actions.
type Action string

// The actions, in the order they are listed in availableActions.
const (
	ActionStart              Action = "start"
	ActionSubmit             Action = "submit"
	ActionShip               Action = "ship"
	ActionViewCIStatus       Action = "view_ci_status"
	ActionViewReviewFeedback Action = "view_review_feedback"
	ActionResolveBlocker     Action = "resolve_blocker"
)

// AssignmentSource says how a task came to its assignee.
type AssignmentSource string

// The assignment sources.
const (
	AssignmentDeterministicRule       AssignmentSource = "deterministic_rule"
	AssignmentClassifier              AssignmentSource = "classifier"
	AssignmentClassifierBestEffort    AssignmentSource = "classifier_best_effort"
	AssignmentManualTriage            AssignmentSource = "manual_triage"
	AssignmentProviderAssigneeMapping AssignmentSource = "provider_assignee_mapping"
)

// Agent is an automated worker that tasks are assigned to.
type Agent struct {
	// ID identifies the agent; it appears as assigneeAgentId.
	ID string `json:"id"`
	// Name is the agent's display name.
	Name string `json:"name"`
}

// TaskLinks are the issue tracker links of a task.
type TaskLinks struct {
	// Issue is the URL of the task's issue; always set.
	Issue string `json:"issue"`
	// ParentIssue is the URL of the parent issue, or nil.
	ParentIssue *string `json:"parentIssue"`
}

// TaskContext places a task in its project.
type TaskContext struct {
	// Project names the project, or is nil.
	Project *string `json:"project"`
	// Goal says what the task is for.
	Goal string `json:"goal"`
}

// Blocker records why a task is blocked and what unblocks it.
type Blocker struct {
	// Kind is always "awaiting_user".
	Kind string `json:"kind"`
	// SourceRunID identifies the agent run that recorded the blocker.
	SourceRunID string `json:"sourceRunId"`
	// SourceAgentID identifies the agent that recorded the blocker.
	SourceAgentID string `json:"sourceAgentId"`
	// Reason is a machine-readable code.
	Reason string `json:"reason"`
	// ActionRequired says what the user must do.
	ActionRequired string `json:"actionRequired"`
	// ResumeInstructions say how the agent resumes afterwards.
	ResumeInstructions string `json:"resumeInstructions"`
	// CreatedAt is when the blocker was recorded.
	CreatedAt Timestamp `json:"createdAt"`
}

// Task is a unit of work done by an agent, as stored and as served by GET
// /tasks/{id}. Its JSON encoding is the API's: nullable members are present
// as null, never left out. Members tagged "-" are kept by the Store but not
// served.
type Task struct {
	ID                 string            `json:"id"`
	Identifier         string            `json:"identifier"`
	Title              string            `json:"title"`
	Description        string            `json:"description"`
	Status             Status            `json:"status"`
	Priority           Priority          `json:"priority"`
	UpdatedAt          Timestamp         `json:"updatedAt"`
	AvailableActions   []Action          `json:"availableActions"`
	Assignee           *Agent            `json:"assignee"`
	AssigneeAgentID    *string           `json:"assigneeAgentId"`
	AssignmentSource   *AssignmentSource `json:"assignmentSource"`
	RoutingDecisionID  *string           `json:"routingDecisionId"`
	RoutingReason      json.RawMessage   `json:"routingReason"`
	RoutingConfidence  *float64          `json:"routingConfidence"`
	TriageQueueID      *string           `json:"triageQueueId"`
	SubmissionID       *string           `json:"submissionId"`
	PRURL              *string           `json:"prUrl"`
	PRNumber           *int              `json:"prNumber"`
	Branch             *string           `json:"branch"`
	BaseBranch         *string           `json:"baseBranch"`
	HeadSHA            *string           `json:"headSha"`
	AcceptanceCriteria []string          `json:"acceptanceCriteria"`
	Links              TaskLinks         `json:"links"`
	Context            TaskContext       `json:"context"`
	Blocker            *Blocker          `json:"blocker"`
	// DependsOn are the IDs of the tasks this task depends on, in the
	// order they were given; never nil.
	DependsOn []string `json:"dependsOn"`
	// WaitingOn are the IDs in DependsOn whose task is not done, in the
	// order of DependsOn; never nil. It is kept with the task (the
	// Service updates it when a dependency becomes done), so that reads
	// and availableActions never read another task.
	WaitingOn []string `json:"waitingOn"`

	// Labels are the labels given at creation; routing rules match them.
	Labels []string `json:"-"`
	// Version is the task's version: 1 at creation, bumped by every change.
	// Events carry it as taskVersion.
	Version int64 `json:"-"`
	// CreatedAt is when the task was created.
	CreatedAt Timestamp `json:"-"`
	// StatusBeforeBlocker is the status a blocked task returns to when its
	// blocker is resolved; empty unless the task is blocked.
	StatusBeforeBlocker Status `json:"-"`
	// SubmissionMode is the mode of the latest submission, or empty.
	SubmissionMode SubmitMode `json:"-"`
	// PROwner and PRRepo name the repository of the latest submission's
	// pull request.
	PROwner string `json:"-"`
	PRRepo  string `json:"-"`
	// ReviewPolicy is the codeReviewPolicy of the latest submission.
	ReviewPolicy CodeReviewPolicy `json:"-"`
	// ReviewDecision is the decision on the latest submission reached by
	// the reviews posted to the Service.
	ReviewDecision ReviewDecision `json:"-"`
	// ReworkRequested is set when the latest decisive review of the latest
	// submission requested changes: the agent may start again.
	ReworkRequested bool `json:"-"`
	// ActiveShipID is the ship operation queued or running for the task,
	// or empty. While it is set the task cannot be shipped again, started
	// or submitted.
	ActiveShipID string `json:"-"`
	// ShipMerging is set once the runner of the active ship operation has
	// checked its preconditions and asks the host to merge; reviews are
	// then refused until the operation ends.
	ShipMerging bool `json:"-"`
	// Facts are what the Service last learned from the code host and CI
	// about the latest submission. Reads and availableActions are computed
	// from them and never call a host.
	Facts Facts `json:"-"`
	// ReconcileAt is when the reconciler next reads the host for the task
	// while it is in review.
	ReconcileAt Timestamp `json:"-"`
}

// PullRequestRef returns the reference of the latest submission's pull request.
func (t *Task) PullRequestRef() PullRequestRef {
	ref := PullRequestRef{Owner: t.PROwner, Repo: t.PRRepo}
	if t.PRNumber != nil {
		ref.Number = *t.PRNumber
	}
	return ref
}

// Project returns the task's project name, or "".
func (t *Task) Project() string {
	if t.Context.Project == nil {
		return ""
	}
	return *t.Context.Project
}

// TaskFilter selects tasks for [Store.ListTasks]. Zero fields match every task.
type TaskFilter struct {
	// Statuses, when not empty, keeps tasks in one of these statuses.
	Statuses []Status
	// AssigneeAgentID, when not empty, keeps tasks assigned to this agent.
	AssigneeAgentID string
	// Project, when not empty, keeps tasks of this project.
	Project string
	// PullRequest, when not zero, keeps tasks whose latest submission's
	// pull request it is.
	PullRequest PullRequestRef
	// HeadSHA, when not empty, keeps tasks whose head commit it is.
	HeadSHA string
	// Ready, when set, keeps tasks ready to start: in status todo with an
	// empty WaitingOn.
	Ready bool
	// After, when not zero, keeps tasks listed after the task with this
	// position (see [TaskPage.Next]).
	After int64
	// Limit is the most tasks to return; the Store may assume 1..1000.
	Limit int
}

// TaskPage is one page of a task listing.
type TaskPage struct {
	// Tasks are in creation order.
	Tasks []Task
	// Next is the position to pass as TaskFilter.After for the next page,
	// or 0 when there is none.
	Next int64
}

// Ready reports whether t is ready to start: in status todo, waiting on
// no dependency.
func (t *Task) Ready() bool { return t.Status == StatusTodo && len(t.WaitingOn) == 0 }

// CI returns the overall CI state of the task's head commit, as last
// learned: none before a submission or before CI reported.
func (t *Task) CI() CIOverall { return ciOf(t) }

// Decision returns the review decision that counts for the task:
// not_required when its policy requires none, the code host's when its
// policy defers to the host and the host decided, else the one reached by
// the reviews posted to the Service (pending before any).
func (t *Task) Decision() ReviewDecision { return decisionOf(t) }

// Shipping reports whether a ship operation of the task is queued or
// running.
func (t *Task) Shipping() bool { return t.ActiveShipID != "" }
