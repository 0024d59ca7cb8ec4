package mcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/tasklifecycle/lifecycle"
)

// The arguments of the tools. Optional members are omitempty: the schema
// of each is derived from its type, then given its limits and enums.
type (
	listTasksIn struct {
		Status          []lifecycle.Status `json:"status,omitempty" jsonschema:"keep tasks in any of these statuses"`
		AssigneeAgentID string             `json:"assigneeAgentId,omitempty" jsonschema:"keep tasks assigned to this agent ID"`
		Project         string             `json:"project,omitempty" jsonschema:"keep tasks of this project"`
		Ready           bool               `json:"ready,omitempty" jsonschema:"keep only the tasks ready to start: in todo, waiting on no dependency (waitingOn empty)"`
		Stalled         bool               `json:"stalled,omitempty" jsonschema:"true keeps stalled tasks only: tasks that stayed in progress or in review without activity for longer than the server allows (each has a stalled member saying since when)"`
		Limit           int                `json:"limit,omitempty" jsonschema:"page size"`
		Cursor          string             `json:"cursor,omitempty" jsonschema:"the nextCursor of the previous page"`
	}
	getTaskIn struct {
		TaskID      string `json:"taskId"`
		TokenBudget string `json:"tokenBudget,omitempty" jsonschema:"compact (the default) leaves out the long description and the routing explanation, listed in meta.truncatedFields; standard has everything"`
	}
	taskIDIn struct {
		TaskID string `json:"taskId"`
	}
	startTaskIn struct {
		TaskID         string `json:"taskId"`
		IdempotencyKey string `json:"idempotencyKey,omitempty"`
	}
	pullRequestIn struct {
		Title     string   `json:"title,omitempty" jsonschema:"the pull request's title"`
		Body      string   `json:"body,omitempty" jsonschema:"the pull request's description"`
		Draft     bool     `json:"draft,omitempty" jsonschema:"open it as a draft"`
		Head      string   `json:"head,omitempty" jsonschema:"the source branch, when not the configured one"`
		Base      string   `json:"base,omitempty" jsonschema:"the target branch, when not the configured one"`
		Reviewers []string `json:"reviewers,omitempty" jsonschema:"login names of reviewers to request"`
	}
	checkIn struct {
		Name   string                `json:"name"`
		Status lifecycle.CheckStatus `json:"status"`
	}
	submitWorkIn struct {
		TaskID         string               `json:"taskId"`
		Summary        string               `json:"summary" jsonschema:"what was done, for the reviewers"`
		Mode           lifecycle.SubmitMode `json:"mode,omitempty" jsonschema:"adapter_managed (the default) opens or reuses the pull request of the task's branch; artifact records work made elsewhere"`
		PullRequest    *pullRequestIn       `json:"pullRequest,omitempty" jsonschema:"wishes for the pull request"`
		Checks         []checkIn            `json:"checks,omitempty" jsonschema:"checks you ran yourself, with their results"`
		Notes          string               `json:"notes,omitempty" jsonschema:"internal notes"`
		IdempotencyKey string               `json:"idempotencyKey,omitempty"`
	}
	recordBlockerIn struct {
		TaskID             string `json:"taskId"`
		Reason             string `json:"reason" jsonschema:"a code such as missing_credentials"`
		ActionRequired     string `json:"actionRequired" jsonschema:"what a person must do before you can go on"`
		ResumeInstructions string `json:"resumeInstructions,omitempty" jsonschema:"how the work resumes afterwards"`
		SourceRunID        string `json:"sourceRunId,omitempty" jsonschema:"your run's ID, if you have one"`
		IdempotencyKey     string `json:"idempotencyKey,omitempty"`
	}
	resolveBlockerIn struct {
		TaskID         string `json:"taskId"`
		Resolution     string `json:"resolution,omitempty" jsonschema:"how the blocker was resolved"`
		IdempotencyKey string `json:"idempotencyKey,omitempty"`
	}
	shipIn struct {
		TaskID            string                `json:"taskId"`
		Mode              lifecycle.ShipMode    `json:"mode" jsonschema:"merge_only, or merge_and_deploy to deploy after the merge"`
		TargetEnvironment lifecycle.Environment `json:"targetEnvironment" jsonschema:"staging or production"`
		ExpectedHeadSHA   string                `json:"expectedHeadSha" jsonschema:"the task's headSha, the full 40-hex-digit commit you expect to merge"`
		IdempotencyKey    string                `json:"idempotencyKey,omitempty"`
	}
	shipOperationIn struct {
		OperationID string `json:"operationId" jsonschema:"the operation's ID, shp_ followed by letters and digits"`
	}
	waitIn struct {
		TaskID         string `json:"taskId"`
		TimeoutSeconds int    `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait for an event"`
		AfterSequence  *int64 `json:"afterSequence,omitempty" jsonschema:"the sequence of the last event of this task you saw (from a previous answer): the task's first event after it is answered at once if it is already committed, so nothing is missed between two calls; 0 starts from the task's first event. Without it, only an event committed after the call counts"`
	}
)

// addTools builds the lifecycle's tools, once, into h.tools and h.toolSet.
func (h *Handler) addTools() error {
	listIn := schemaOf[listTasksIn]()
	setEnum(listIn, "status", nil, statusValues...)
	setRange(listIn, "limit", 1, 200, 20)
	getIn := schemaOf[getTaskIn]()
	setEnum(getIn, "tokenBudget", "compact", "compact", "standard")
	startIn := schemaOf[startTaskIn]()
	setKey(startIn)
	submitIn := schemaOf[submitWorkIn]()
	setKey(submitIn)
	setEnum(submitIn, "mode", "adapter_managed", "adapter_managed", "artifact")
	setEnum(property(submitIn, "checks").Items, "status", nil, "passed", "failed", "running", "skipped")
	blockerIn := schemaOf[recordBlockerIn]()
	setKey(blockerIn)
	property(blockerIn, "reason").Pattern = "^[a-z0-9][a-z0-9_.-]*$"
	resolveIn := schemaOf[resolveBlockerIn]()
	setKey(resolveIn)
	shipArgs := schemaOf[shipIn]()
	setKey(shipArgs)
	setEnum(shipArgs, "mode", nil, "merge_only", "merge_and_deploy")
	setEnum(shipArgs, "targetEnvironment", nil, "staging", "production")
	property(shipArgs, "expectedHeadSha").Pattern = "^[0-9a-fA-F]{40}$"
	wait := schemaOf[waitIn]()
	setRange(wait, "timeoutSeconds", 1, maxWaitSeconds, defaultWaitSeconds)
	property(wait, "afterSequence").Minimum = new(float64)
	for _, in := range []*jsonschema.Schema{getIn, startIn, submitIn, blockerIn, resolveIn, shipArgs, wait} {
		property(in, "taskId").Description = taskIDDescription
	}
	taskIDOnly := func() *jsonschema.Schema {
		s := schemaOf[taskIDIn]()
		property(s, "taskId").Description = taskIDDescription
		return s
	}

	errs := []error{
		addTool(h, toolDef{name: "list_tasks", title: "List tasks", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Lists tasks in creation order, a page at a time, each in compact form with its availableActions. " +
				"Filter by status, assignee or project, ready: true for the tasks you can start now (in todo, every " +
				"dependency done), or stalled: true for stalled tasks only; pass nextCursor as cursor for the next page.",
			in: listIn, out: listOutSchema()}, h.listTasks),
		addTool(h, toolDef{name: "get_task", title: "Read a task", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Reads one task: its status, what is asked (title, acceptanceCriteria, context), its pull request " +
				"and headSha once submitted, any blocker, and availableActions, the only next steps the server accepts. " +
				"Compact by default; tokenBudget standard adds the description and routing explanation.",
			in: getIn, out: taskOutSchema()}, h.getTask),
		addTool(h, toolDef{name: "start_task", title: "Start a task", scope: lifecycle.ScopeTasksWrite, idempotent: true,
			description: "Starts a task when start is among its availableActions: from todo, or back to in_progress for " +
				"rework after a reviewer requested changes, CI failed or the branch must be rebased (each start from review " +
				"counts one of the task's reworkRounds). Refused (error.details.reason) dependency_not_done while the task's " +
				"waitingOn is not empty, max_in_progress_per_agent while the assignee has as many tasks in progress as the " +
				"server allows, max_rework_rounds once the task used its rework rounds. Answers the task, compact.",
			in: startIn, out: taskOutSchema()}, h.startTask),
		addTool(h, toolDef{name: "submit_work", title: "Submit work for review", scope: lifecycle.ScopeTasksWrite, idempotent: true,
			description: "Submits finished work when submit is among the task's availableActions: opens or reuses the pull " +
				"request of the task's branch (or records an artifact submission), routes reviewers, reads CI and moves " +
				"the task to in_review. Then watch review and CI with wait_for_task_change.",
			in: submitIn, out: schemaOf[submissionOut]()}, h.submitWork),
		addTool(h, toolDef{name: "get_ci_status", title: "Read CI status", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Reads the CI of the task's head commit as last learned: overall passed, failed, running, pending " +
				"or none, each check with its status and URL, and when CI was last asked (checkedAt). A failed check's failure " +
				"says why it failed (title, summary, the end of its log as excerpt, annotations with file and lines, logUrl), or " +
				"is null while not known yet: it is fetched soon after the failure, once.",
			in: taskIDOnly(), out: schemaOf[ciOut]()}, h.ciStatus),
		addTool(h, toolDef{name: "get_review_feedback", title: "Read review feedback", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Reads the review decision on the task's latest submission (approved, changes_requested, pending, " +
				"not_required) and every review with its body: what to change when changes were requested.",
			in: taskIDOnly(), out: schemaOf[reviewOut]()}, h.reviewFeedback),
		addTool(h, toolDef{name: "record_blocker", title: "Record a blocker", scope: lifecycle.ScopeTasksWrite, idempotent: true,
			description: "Blocks an in-progress task on something only a person can do (a secret, an access, a decision): " +
				"the task waits in blocked until resolve_blocker. Say in actionRequired exactly what is needed.",
			in: blockerIn, out: taskOutSchema()}, h.recordBlocker),
		addTool(h, toolDef{name: "resolve_blocker", title: "Resolve a blocker", scope: lifecycle.ScopeTasksWrite, idempotent: true,
			description: "Resolves the blocker of a blocked task once what it asked for is done: the task goes back to the " +
				"status it had. Answers the task, compact.",
			in: resolveIn, out: taskOutSchema()}, h.resolveBlocker),
		addTool(h, toolDef{name: "ship", title: "Ship a task", scope: lifecycle.ScopeShipWrite, destructive: true, idempotent: true,
			description: "Merges the task's pull request at expectedHeadSha (the task's headSha) and, with mode " +
				"merge_and_deploy, deploys it, when ship is among its availableActions (CI passed and review allows it). " +
				"It cannot be undone. It queues a ship operation and answers it at once; follow it with " +
				"get_ship_operation or wait_for_task_change until it succeeded or failed.",
			in: shipArgs, out: schemaOf[shipOut]()}, h.shipTask),
		addTool(h, toolDef{name: "get_ship_operation", title: "Read a ship operation", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Reads a ship operation: queued, running, succeeded or failed, with its merge commit, deployment, " +
				"or error (a code saying which precondition failed) and, while it waits out a rate limit, until when.",
			in: schemaOf[shipOperationIn](), out: schemaOf[shipOut]()}, h.shipOperation),
		addTool(h, toolDef{name: "get_merge_queue_status", title: "Where is my change in the merge queue", scope: lifecycle.ScopeTasksRead, readOnly: true, idempotent: true,
			description: "Says where the task's change is once shipped through a merge queue: the queue (repository, base " +
				"branch, paused and why), the change's entry (position in landing order, state, the candidate it is " +
				"tested in, when it entered) and that candidate's CI checks with their links. When the change is in no " +
				"queue, it answers the task's last ship operation instead: succeeded when it landed, failed with " +
				"error.code merge_conflict or checks_failed when the queue sent it back, with reworkReason and the " +
				"failed checks (rework): then call start_task, fix the change and submit_work again.",
			in: taskIDOnly(), out: schemaOf[mergeQueueStatusOut]()}, h.mergeQueueStatus),
		addTool(h, toolDef{name: "wait_for_task_change", title: "Wait for a task to change", scope: lifecycle.ScopeEventsRead,
			readOnly: true, idempotent: true, waits: true,
			description: "Waits until the task's next event (a review, CI, a status change, a ship's end, its change's " +
				"progress in a merge queue) or until " +
				"timeoutSeconds pass (at most 60), and answers the event: its type, sequence and data with the task's " +
				"status and availableActions. Pass the sequence of the last event you saw as afterSequence so that " +
				"nothing is missed between calls. Same scope as the event stream (GET /task-events/stream).",
			in: wait, out: schemaOf[waitOut]()}, h.waitForTaskChange),
	}
	return errors.Join(errs...)
}

// taskAnswer is the task envelope a task's tools answer, as GET
// /tasks/{id} answers it.
type taskAnswer struct {
	Data             any                `json:"data"`
	AvailableActions []lifecycle.Action `json:"availableActions"`
	Meta             taskMeta           `json:"meta"`
}

// compactTask encodes a task without the members compactLeftOut names:
// its own members of those names, zero and omitted, hide the task's.
type compactTask struct {
	*lifecycle.Task
	Description   struct{} `json:"description,omitzero"`
	RoutingReason struct{} `json:"routingReason,omitzero"`
}

// answerTask is the envelope of t, compact or in full.
func answerTask(t *lifecycle.Task, compact bool) taskAnswer {
	actions := nonNil(t.AvailableActions)
	if compact {
		return taskAnswer{Data: compactTask{Task: t}, AvailableActions: actions, Meta: taskMeta{TokenBudgetHint: "compact", TruncatedFields: compactLeftOut}}
	}
	return taskAnswer{Data: t, AvailableActions: actions, Meta: taskMeta{TokenBudgetHint: "standard", TruncatedFields: []string{}}}
}

// nonNil returns s, or an empty slice when s is nil, so it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// dataAnswer is the {data, availableActions} envelope of the other reads.
type dataAnswer[T any] struct {
	Data             T                  `json:"data"`
	AvailableActions []lifecycle.Action `json:"availableActions"`
}

func (h *Handler) listTasks(ctx context.Context, _ *call, in *listTasksIn) (any, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 20
	}
	list, err := h.svc.ListTasks(ctx, lifecycle.ListTasksParams{Statuses: in.Status, AssigneeAgentID: in.AssigneeAgentID,
		Project: in.Project, Ready: in.Ready, Stalled: in.Stalled, Limit: limit, Cursor: in.Cursor})
	if err != nil {
		return nil, err
	}
	tasks := make([]compactTask, len(list.Tasks))
	for i := range list.Tasks {
		tasks[i] = compactTask{Task: &list.Tasks[i]}
	}
	var next *string
	if list.NextCursor != "" {
		next = &list.NextCursor
	}
	return struct {
		Tasks           []compactTask `json:"tasks"`
		NextCursor      *string       `json:"nextCursor"`
		TruncatedFields []string      `json:"truncatedFields"`
	}{tasks, next, compactLeftOut}, nil
}

// The forms of get_task's answers among the Service's encodings of tasks
// (lifecycle.Service.EncodedTask), which it keeps while the task is the
// same: each packs the answer with its CallToolResult (see packAnswer).
const (
	formCompact  = "mcp:get_task:compact"
	formStandard = "mcp:get_task:standard"
)

func encodeCompact(t *lifecycle.Task) ([]byte, error)  { return packAnswer(answerTask(t, true)) }
func encodeStandard(t *lifecycle.Task) ([]byte, error) { return packAnswer(answerTask(t, false)) }

// encodedAnswer is a tool's answer encoded already: the structured
// content and the CallToolResult of it (appendToolResult's encoding).
type encodedAnswer struct {
	raw, result []byte
}

// packAnswer encodes an answer and its CallToolResult into one slice,
// which unpackAnswer splits without copying: the length of the answer
// in 8 bytes, the answer, the result.
func packAnswer(answer any) ([]byte, error) {
	raw, err := encodeJSON(answer)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+3*len(raw)+64), uint64(len(raw)))
	b = append(b, raw...)
	return appendToolResult(b, raw, false), nil
}

// unpackAnswer splits what packAnswer made.
func unpackAnswer(b []byte) encodedAnswer {
	n := binary.BigEndian.Uint64(b)
	return encodedAnswer{raw: b[8 : 8+n : 8+n], result: b[8+n:]}
}

func (h *Handler) getTask(ctx context.Context, _ *call, in *getTaskIn) (any, error) {
	form, encode := formCompact, encodeCompact
	if in.TokenBudget == "standard" {
		form, encode = formStandard, encodeStandard
	}
	b, err := h.svc.EncodedTask(ctx, in.TaskID, form, encode)
	if err != nil {
		return nil, err
	}
	return unpackAnswer(b), nil
}

func (h *Handler) startTask(ctx context.Context, c *call, in *startTaskIn) (any, error) {
	t, err := once(ctx, h, c, in.IdempotencyKey, startTaskIn{TaskID: in.TaskID}, in.TaskID,
		func(ctx context.Context, key string) (lifecycle.Task, error) {
			return h.svc.StartTask(ctx, in.TaskID, lifecycle.StartTaskParams{Actor: c.p.Actor, IdempotencyKey: key})
		}, taskStillCurrent, taskLink)
	if err != nil {
		return nil, err
	}
	return answerTask(&t, true), nil
}

func (h *Handler) submitWork(ctx context.Context, c *call, in *submitWorkIn) (any, error) {
	args := *in
	args.IdempotencyKey = ""
	p := lifecycle.SubmitParams{Summary: in.Summary, Mode: in.Mode, Notes: in.Notes, Actor: c.p.Actor}
	if pr := in.PullRequest; pr != nil {
		p.PullRequest = lifecycle.PullRequestHints{Title: pr.Title, Body: pr.Body, Draft: pr.Draft, Head: pr.Head, Base: pr.Base, Reviewers: pr.Reviewers}
	}
	for _, ch := range in.Checks {
		p.Checks = append(p.Checks, lifecycle.SubmittedCheck{Name: ch.Name, Status: ch.Status})
	}
	sub, err := once(ctx, h, c, in.IdempotencyKey, args, in.TaskID,
		func(ctx context.Context, key string) (lifecycle.Submission, error) {
			p.IdempotencyKey = key
			return h.svc.Submit(ctx, in.TaskID, p)
		},
		// A submission is the task's present until the task is started
		// again for rework, when the same submission may be made anew.
		func(sub *lifecycle.Submission, t *lifecycle.Task) bool {
			return t.SubmissionID != nil && *t.SubmissionID == sub.SubmissionID && t.Status != lifecycle.StatusInProgress
		},
		func(sub *lifecycle.Submission) string { return sub.SubmissionID })
	if err != nil {
		return nil, err
	}
	return dataAnswer[*lifecycle.Submission]{&sub, nonNil(sub.AvailableActions)}, nil
}

func (h *Handler) ciStatus(ctx context.Context, _ *call, in *taskIDIn) (any, error) {
	st, actions, err := h.svc.CIStatus(ctx, in.TaskID)
	if err != nil {
		return nil, err
	}
	return dataAnswer[*lifecycle.CIStatus]{&st, nonNil(actions)}, nil
}

func (h *Handler) reviewFeedback(ctx context.Context, _ *call, in *taskIDIn) (any, error) {
	fb, actions, err := h.svc.ReviewFeedback(ctx, in.TaskID)
	if err != nil {
		return nil, err
	}
	return dataAnswer[*lifecycle.ReviewFeedback]{&fb, nonNil(actions)}, nil
}

func (h *Handler) recordBlocker(ctx context.Context, c *call, in *recordBlockerIn) (any, error) {
	args := *in
	args.IdempotencyKey = ""
	p := lifecycle.RecordBlockerParams{Reason: in.Reason, ActionRequired: in.ActionRequired,
		ResumeInstructions: in.ResumeInstructions, SourceRunID: in.SourceRunID, Actor: c.p.Actor}
	t, err := once(ctx, h, c, in.IdempotencyKey, args, in.TaskID,
		func(ctx context.Context, key string) (lifecycle.Task, error) {
			p.IdempotencyKey = key
			return h.svc.RecordBlocker(ctx, in.TaskID, p)
		}, taskStillCurrent, taskLink)
	if err != nil {
		return nil, err
	}
	return answerTask(&t, true), nil
}

func (h *Handler) resolveBlocker(ctx context.Context, c *call, in *resolveBlockerIn) (any, error) {
	args := *in
	args.IdempotencyKey = ""
	p := lifecycle.ResolveBlockerParams{Resolution: in.Resolution, Actor: c.p.Actor}
	t, err := once(ctx, h, c, in.IdempotencyKey, args, in.TaskID,
		func(ctx context.Context, key string) (lifecycle.Task, error) {
			p.IdempotencyKey = key
			return h.svc.ResolveBlocker(ctx, in.TaskID, p)
		}, taskStillCurrent, taskLink)
	if err != nil {
		return nil, err
	}
	return answerTask(&t, true), nil
}

func (h *Handler) shipTask(ctx context.Context, c *call, in *shipIn) (any, error) {
	args := *in
	args.IdempotencyKey = ""
	p := lifecycle.ShipParams{Mode: in.Mode, TargetEnvironment: in.TargetEnvironment, ExpectedHeadSHA: in.ExpectedHeadSHA, Actor: c.p.Actor}
	op, err := once(ctx, h, c, in.IdempotencyKey, args, in.TaskID,
		func(ctx context.Context, key string) (lifecycle.ShipOperation, error) {
			p.IdempotencyKey = key
			return h.svc.Ship(ctx, in.TaskID, p)
		},
		// A ship that failed may be asked again; one queued, running or
		// done is the one a retry means.
		func(op *lifecycle.ShipOperation, _ *lifecycle.Task) bool { return op.Status != lifecycle.ShipFailed },
		func(op *lifecycle.ShipOperation) string { return op.OperationID })
	if err != nil {
		return nil, err
	}
	return dataAnswer[*lifecycle.ShipOperation]{&op, nonNil(op.AvailableActions)}, nil
}

func (h *Handler) shipOperation(ctx context.Context, _ *call, in *shipOperationIn) (any, error) {
	op, err := h.svc.ShipOperation(ctx, in.OperationID)
	if err != nil {
		return nil, err
	}
	return dataAnswer[*lifecycle.ShipOperation]{&op, nonNil(op.AvailableActions)}, nil
}

func (h *Handler) mergeQueueStatus(ctx context.Context, _ *call, in *taskIDIn) (any, error) {
	return h.queueStatus(ctx, in.TaskID)
}

// queueStatus is the answer of get_merge_queue_status (and of the
// resource lifecycle://tasks/{id}/merge-queue): the queue, entry and
// candidate of the task's change while it is in a merge queue; otherwise
// the task's last ship operation. The task is read after the queue and
// the operations, so that its availableActions are at least as new as
// they are.
func (h *Handler) queueStatus(ctx context.Context, taskID string) (*mergeQueueStatusOut, error) {
	var out mergeQueueStatusOut
	q, entry, err := h.svc.MergeQueueOf(ctx, taskID)
	switch {
	case err == nil:
		out.InQueue, out.Entry = true, &entry
		out.Queue = &queueSummary{ID: q.ID, Repository: q.Repository, Base: q.Base, BaseSHA: q.BaseSHA, Paused: q.Paused,
			PauseReason: q.PauseReason, Entries: len(q.Entries)}
		for i := range q.Candidates {
			if entry.CandidateID != 0 && q.Candidates[i].ID == entry.CandidateID {
				out.Candidate = &q.Candidates[i]
			}
		}
	case errors.Is(err, lifecycle.ErrNotFound):
		ops, err := h.svc.ShipOperations(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if len(ops) > 0 {
			out.LastShipOperation = &ops[len(ops)-1]
		}
	default:
		return nil, err
	}
	t, err := h.svc.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	out.TaskID, out.AvailableActions, out.Rework = t.ID, nonNil(t.AvailableActions), t.Facts.QueueRework
	if r := t.ReworkReason(); r != "" {
		out.ReworkReason = &r
	}
	if op := out.LastShipOperation; op != nil {
		op.AvailableActions = out.AvailableActions
	}
	return &out, nil
}

// Bounds of wait_for_task_change's timeoutSeconds.
const (
	defaultWaitSeconds = 30
	maxWaitSeconds     = 60
)

func (h *Handler) waitForTaskChange(ctx context.Context, c *call, in *waitIn) (any, error) {
	timeout := time.Duration(in.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = defaultWaitSeconds * time.Second
	}
	release, err := h.waits.acquire(c.p.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	// The watch starts before the reads of the task and of what was
	// missed, so that an event between them is not lost. Without
	// afterSequence, an event the watch hands over that the read of the
	// task already showed (the watch may see one committed just before
	// it started) is not the answer: every event moves the task's version,
	// but task.merge_queue, which does not change the task (see
	// firstEvent.pick).
	read, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	first := newFirstEvent(in.AfterSequence == nil)
	watch, err := h.svc.WatchTask(ctx, in.TaskID, first.offer)
	if err != nil {
		return nil, err
	}
	defer watch.Stop()
	t, err := h.svc.Task(read, in.TaskID)
	if err != nil {
		return nil, err
	}
	first.setFloor(t.Version)
	if in.AfterSequence != nil {
		missed, err := h.svc.TaskEventsAfter(read, in.TaskID, *in.AfterSequence, 1)
		if err != nil {
			return nil, err
		}
		if len(missed) > 0 {
			return waitAnswer(&missed[0]), nil
		}
	}
	select {
	case e := <-first.got:
		return waitAnswer(&e), nil
	case <-h.svc.Clock().After(timeout):
		return struct {
			Event    *struct{} `json:"event"`
			TimedOut bool      `json:"timedOut"`
		}{nil, true}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-watch.Done():
		return nil, fmt.Errorf("the service is shutting down: %w", lifecycle.ErrClosed)
	case <-c.p.Done:
		return nil, fmt.Errorf("the API key of this call was revoked: %w", lifecycle.ErrUnauthorized)
	case <-credentialEnded(ctx):
		return nil, fmt.Errorf("the credentials of this session ended (a revoked key): %w", lifecycle.ErrUnauthorized)
	}
}

// firstEvent picks the answer of a wait from the events its watch hands
// over: the first whose task version is above a floor. Without
// afterSequence the floor is the version the wait's read of the task
// showed, which comes after the watch started; until it is known the
// events are held.
type firstEvent struct {
	mu    sync.Mutex
	known bool                 // the floor is known
	floor int64                // answer only an event of a greater task version
	held  []lifecycle.Event    // handed over before the floor was known
	got   chan lifecycle.Event // the answer, once
}

// newFirstEvent returns a firstEvent whose floor is set later by setFloor
// when needFloor, and is 0 (every event answers) otherwise.
func newFirstEvent(needFloor bool) *firstEvent {
	return &firstEvent{known: !needFloor, got: make(chan lifecycle.Event, 1)}
}

// offer is the watch's function.
func (f *firstEvent) offer(e *lifecycle.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known {
		f.held = append(f.held, *e)
		return
	}
	f.pick(e)
}

// setFloor sets the floor, when one was needed, and weighs the held events.
func (f *firstEvent) setFloor(v int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known {
		return
	}
	f.known, f.floor = true, v
	for i := range f.held {
		f.pick(&f.held[i])
	}
	f.held = nil
}

// pick answers e when its task version is above the floor. A
// task.merge_queue event does not change the task: it carries the
// task's version as it was, so one at the floor is taken too (at worst
// the one the watch may see committed just before it started), or a
// wait would never answer the queue's progress.
func (f *firstEvent) pick(e *lifecycle.Event) {
	if e.TaskVersion < f.floor || (e.TaskVersion == f.floor && e.Type != lifecycle.EventTaskMergeQueue) {
		return
	}
	select {
	case f.got <- *e:
	default: // the first is the answer
	}
}

// waitAnswer is wait_for_task_change's answer with an event.
func waitAnswer(e *lifecycle.Event) any {
	return struct {
		Event    *lifecycle.Event `json:"event"`
		TimedOut bool             `json:"timedOut"`
	}{e, false}
}
