package lifecycle

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/taskjson"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// BlockerKindAwaitingUser is the kind of every blocker: the agent waits for
// a user to act.
const BlockerKindAwaitingUser = "awaiting_user"

// Limits on the members of a new task.
const (
	maxIdentifierLen  = 100
	maxTitleLen       = 300
	maxDescriptionLen = 20000
	maxCriteria       = 50
	maxCriterionLen   = 1000
	maxLabels         = 50
	maxLabelLen       = 100
	maxURLLen         = 2048
	maxProjectLen     = 200
	maxGoalLen        = 2000
	maxAgentIDLen     = 200
	maxReasonLen      = 2000
)

// CreateTaskParams describes a task to create. Its JSON form is the body of
// POST /tasks.
type CreateTaskParams struct {
	// Identifier is the human-readable issue identifier, unique among
	// tasks, such as "ENG-123". Required.
	Identifier string `json:"identifier"`
	// Title is required.
	Title string `json:"title"`
	// Description is optional.
	Description string `json:"description"`
	// Priority defaults to medium.
	Priority Priority `json:"priority"`
	// AcceptanceCriteria are optional.
	AcceptanceCriteria []string `json:"acceptanceCriteria"`
	// Links.Issue is required; Links.ParentIssue is optional.
	Links TaskLinks `json:"links"`
	// Context is optional.
	Context TaskContext `json:"context"`
	// Labels feed routing rules.
	Labels []string `json:"labels"`
	// AssigneeAgentID, when set, assigns the task by hand (manual_triage)
	// instead of routing it.
	AssigneeAgentID string `json:"assigneeAgentId"`
	// DependsOn are the IDs of the tasks the new task depends on, at most
	// 50, each once, all in its project; it waits on those not done. See
	// [Service.SetDependencies].
	DependsOn []string `json:"dependsOn"`

	// Actor is who creates the task; events name it. Empty means the
	// system actor.
	Actor Actor `json:"-"`
}

// validate checks p and fills its defaults.
func (p *CreateTaskParams) validate() error {
	var v lifecycletype.Validator
	if p.Identifier == "" {
		v.Add("identifier", "is required")
	}
	v.MaxLen("identifier", p.Identifier, maxIdentifierLen)
	if p.Title == "" {
		v.Add("title", "is required")
	}
	v.MaxLen("title", p.Title, maxTitleLen)
	v.MaxLen("description", p.Description, maxDescriptionLen)
	switch {
	case p.Priority == "":
		p.Priority = PriorityMedium
	case !p.Priority.Valid():
		v.Add("priority", "must be one of low, medium, high, critical")
	}
	if len(p.AcceptanceCriteria) > maxCriteria {
		v.Add("acceptanceCriteria", fmt.Sprintf("at most %d entries", maxCriteria))
	}
	for i, c := range p.AcceptanceCriteria {
		if c == "" {
			v.Add(fmt.Sprintf("acceptanceCriteria[%d]", i), "must not be empty")
		}
		v.MaxLen(fmt.Sprintf("acceptanceCriteria[%d]", i), c, maxCriterionLen)
	}
	if len(p.Labels) > maxLabels {
		v.Add("labels", fmt.Sprintf("at most %d entries", maxLabels))
	}
	for i, l := range p.Labels {
		if l == "" {
			v.Add(fmt.Sprintf("labels[%d]", i), "must not be empty")
		}
		v.MaxLen(fmt.Sprintf("labels[%d]", i), l, maxLabelLen)
	}
	if p.Links.Issue == "" {
		v.Add("links.issue", "is required")
	} else if !validURL(p.Links.Issue) {
		v.Add("links.issue", fmt.Sprintf("must be an absolute http or https URL of at most %d characters", maxURLLen))
	}
	if p.Links.ParentIssue != nil && !validURL(*p.Links.ParentIssue) {
		v.Add("links.parentIssue", fmt.Sprintf("must be an absolute http or https URL of at most %d characters, or null", maxURLLen))
	}
	if p.Context.Project != nil {
		if *p.Context.Project == "" {
			v.Add("context.project", "must not be empty; use null for no project")
		}
		v.MaxLen("context.project", *p.Context.Project, maxProjectLen)
	}
	v.MaxLen("context.goal", p.Context.Goal, maxGoalLen)
	v.MaxLen("assigneeAgentId", p.AssigneeAgentID, maxAgentIDLen)
	checkDependencyIDs(&v, p.DependsOn)
	return v.Err()
}

// validURL reports whether s is an absolute http(s) URL of sensible length.
func validURL(s string) bool {
	if len(s) > maxURLLen {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// CreateTask validates p, routes the task (or takes its manual assignee),
// stores it in status todo and emits task.updated. It returns a
// *ValidationError for bad parameters (a dependency that is not a task of
// the same project among them) and a *ConflictError when the identifier
// is taken.
func (s *Service) CreateTask(ctx context.Context, p CreateTaskParams) (Task, error) {
	if err := p.validate(); err != nil {
		return Task{}, err
	}
	routing, err := s.route(ctx, &p)
	if err != nil {
		return Task{}, err
	}
	reason, err := marshalReason(routing.Reason)
	if err != nil {
		return Task{}, fmt.Errorf("route task %s: %w", p.Identifier, err)
	}
	now := s.now()
	t := Task{
		ID:                 id.New("tsk_"),
		Identifier:         p.Identifier,
		Title:              p.Title,
		Description:        p.Description,
		Status:             moves[moveCreate],
		Priority:           p.Priority,
		UpdatedAt:          now,
		RoutingDecisionID:  ptr(id.New("rtd_")),
		RoutingReason:      reason,
		RoutingConfidence:  routing.Confidence,
		AcceptanceCriteria: httpapi.NonNil(slices.Clone(p.AcceptanceCriteria)),
		Links:              p.Links,
		Context:            p.Context,
		Labels:             httpapi.NonNil(slices.Clone(p.Labels)),
		DependsOn:          httpapi.NonNil(slices.Clone(p.DependsOn)),
		WaitingOn:          []string{},
		Version:            1,
		CreatedAt:          now,
		LastActivityAt:     now,
	}
	summary := fmt.Sprintf("Task %s created", t.Identifier)
	if routing.Agent != nil {
		agent := *routing.Agent
		t.Assignee, t.AssigneeAgentID, t.AssignmentSource = &agent, &agent.ID, &routing.Source
		summary += fmt.Sprintf(" and assigned to %s (%s)", agent.Name, routing.Source)
	} else {
		t.TriageQueueID = &routing.TriageQueueID
		summary += " and sent to triage queue " + routing.TriageQueueID
	}
	s.setActions(&t)

	err = s.update(ctx, func(tx Tx) error {
		if len(t.DependsOn) > 0 {
			waiting, _, err := resolveDependencies(ctx, tx, &t, t.DependsOn)
			if err != nil {
				return err
			}
			t.WaitingOn = waiting
			s.setActions(&t)
		}
		if err := tx.CreateTask(ctx, t); err != nil {
			if errors.Is(err, ErrConflict) {
				return &ConflictError{Reason: "identifier_taken", Message: fmt.Sprintf("A task with identifier %s already exists", t.Identifier)}
			}
			return fmt.Errorf("create task: %w", err)
		}
		if err := s.countAgent(ctx, tx, &t, nil); err != nil {
			return err
		}
		s.setActions(&t)
		return s.appendTaskEvent(ctx, tx, taskEvent{typ: EventTaskUpdated, summary: summary, actor: p.Actor}, nil, &t)
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// route decides the assignee of a new task.
func (s *Service) route(ctx context.Context, p *CreateTaskParams) (Routing, error) {
	if p.AssigneeAgentID != "" {
		agent, ok := s.agents[p.AssigneeAgentID]
		if !ok {
			if len(s.agents) > 0 {
				return Routing{}, lifecycletype.Invalid("assigneeAgentId", "is not a known agent")
			}
			agent = Agent{ID: p.AssigneeAgentID, Name: p.AssigneeAgentID}
		}
		reason := map[string]any{"manual": map[string]any{"assignedBy": p.Actor}}
		return Routing{Agent: &agent, Source: AssignmentManualTriage, Reason: reason}, nil
	}
	req := RouteRequest{
		Identifier:         p.Identifier,
		Title:              p.Title,
		Description:        p.Description,
		Priority:           p.Priority,
		Labels:             p.Labels,
		Goal:               p.Context.Goal,
		AcceptanceCriteria: p.AcceptanceCriteria,
	}
	if p.Context.Project != nil {
		req.Project = *p.Context.Project
	}
	r, err := s.cfg.Router.Route(ctx, req)
	if err != nil {
		return Routing{}, fmt.Errorf("route task %s: %w", p.Identifier, err)
	}
	switch {
	case r.Agent != nil && r.Agent.ID == "":
		return Routing{}, fmt.Errorf("route task %s: the router chose an agent with no ID", p.Identifier)
	case r.Agent == nil && r.TriageQueueID == "":
		return Routing{}, fmt.Errorf("route task %s: the router chose neither an agent nor a triage queue", p.Identifier)
	case r.Confidence != nil && (*r.Confidence < 0 || *r.Confidence > 1):
		return Routing{}, fmt.Errorf("route task %s: the router's confidence %v is outside 0..1", p.Identifier, *r.Confidence)
	}
	if r.Agent != nil && r.Agent.Name == "" {
		agent := *r.Agent
		if known, ok := s.agents[agent.ID]; ok {
			agent.Name = known.Name
		} else {
			agent.Name = agent.ID
		}
		r.Agent = &agent
	}
	return r, nil
}

// Task returns the task with the given ID and its available actions. It
// returns an error matching ErrNotFound when there is none.
func (s *Service) Task(ctx context.Context, taskID string) (Task, error) {
	return s.readTask(ctx, taskID)
}

// validTaskID reports whether s has the form of a task ID.
func validTaskID(s string) bool { return id.Valid(s, "tsk_") }

// ListTasksParams selects tasks for [Service.ListTasks].
type ListTasksParams struct {
	// Statuses, when not empty, keeps tasks in one of these statuses.
	Statuses []Status
	// AssigneeAgentID, when not empty, keeps tasks assigned to this agent.
	AssigneeAgentID string
	// Project, when not empty, keeps tasks of this project.
	Project string
	// Ready, when set, keeps the tasks ready to start: in status todo,
	// waiting on no dependency.
	Ready bool
	// Stalled, when set, keeps stalled tasks (see Config.StallAfter).
	Stalled bool
	// Limit is the page size, 1 to 200. Defaults to 50.
	Limit int
	// Cursor continues a listing from the NextCursor of a previous page.
	Cursor string
}

// TaskList is a page of tasks.
type TaskList struct {
	// Tasks are in creation order, each with its available actions.
	Tasks []Task
	// NextCursor continues the listing, or is "" on the last page.
	NextCursor string
}

// ListTasks returns a page of tasks in creation order.
func (s *Service) ListTasks(ctx context.Context, p ListTasksParams) (TaskList, error) {
	var v lifecycletype.Validator
	for _, st := range p.Statuses {
		if !st.Valid() {
			v.Add("status", fmt.Sprintf("%q is not a status; use todo, in_progress, in_review, blocked, done or cancelled", st))
		}
	}
	page := ListParams{Limit: p.Limit, Cursor: p.Cursor}
	after := page.check(&v)
	if err := v.Err(); err != nil {
		return TaskList{}, err
	}
	p.Limit = page.Limit
	tasks, err := s.store.ListTasks(ctx, TaskFilter{
		Statuses:        p.Statuses,
		AssigneeAgentID: p.AssigneeAgentID,
		Project:         p.Project,
		Ready:           p.Ready,
		Stalled:         p.Stalled,
		After:           after,
		Limit:           p.Limit,
	})
	if err != nil {
		return TaskList{}, fmt.Errorf("list tasks: %w", err)
	}
	if err := s.countAgents(ctx, s.store, tasks.Tasks); err != nil {
		return TaskList{}, fmt.Errorf("list tasks: %w", err)
	}
	for i := range tasks.Tasks {
		s.setActions(&tasks.Tasks[i])
	}
	return TaskList{Tasks: httpapi.NonNil(tasks.Tasks), NextCursor: encodeCursor(tasks.Next)}, nil
}

// encodeCursor makes an opaque cursor of a listing position.
func encodeCursor(pos int64) string {
	if pos == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte("p" + strconv.FormatInt(pos, 10)))
}

// decodeCursor reads a cursor made by encodeCursor; "" is the start.
func decodeCursor(c string) (int64, bool) {
	if c == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 'p' {
		return 0, false
	}
	pos, err := strconv.ParseInt(string(b[1:]), 10, 64)
	// One spelling per cursor: base64 decoding skips line breaks and
	// ignores stray bits, and ParseInt takes "+1" and "01".
	return pos, err == nil && pos > 0 && encodeCursor(pos) == c
}

// readTask returns a stored task with its available actions.
func (s *Service) readTask(ctx context.Context, taskID string) (Task, error) {
	if !validTaskID(taskID) {
		return Task{}, notFound("task", taskID)
	}
	t, err := s.store.Task(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return Task{}, notFound("task", taskID)
	}
	if err != nil {
		return Task{}, fmt.Errorf("get task %s: %w", taskID, err)
	}
	if err := s.countAgent(ctx, s.store, &t, nil); err != nil {
		return Task{}, err
	}
	s.setActions(&t)
	return t, nil
}

// countAgent sets t.AssigneeInProgress: the tasks in progress of t's
// assignee other than t, counted by r (the Store, or a Tx, which also
// locks the count until it ends; see InProgressCounter) when the table's
// answer to start depends on them (needsCount), else 0. stored is t as r has it stored,
// when it may differ (in a transaction that changed it), or nil: its row
// counts when it is in progress.
func (s *Service) countAgent(ctx context.Context, r any, t, stored *Task) error {
	t.AssigneeInProgress = 0
	if !needsCount(t, s.cfg.MaxInProgressPerAgent) {
		return nil
	}
	agent := *t.AssigneeAgentID
	if tx, ok := r.(Tx); ok {
		r = storeTx(tx) // the Store's transaction counts, and locks the agent's count
	}
	c, ok := r.(InProgressCounter)
	if !ok { // New refuses the cap with a Store that does not count
		return fmt.Errorf("count the tasks in progress of agent %s: %T does not implement lifecycle.InProgressCounter", agent, r)
	}
	n, err := c.CountInProgress(ctx, agent)
	if err != nil {
		return fmt.Errorf("count the tasks in progress of agent %s: %w", agent, err)
	}
	if stored != nil && stored.Status == StatusInProgress && stored.AssigneeAgentID != nil && *stored.AssigneeAgentID == agent {
		n-- // t itself, no longer in progress
	}
	t.AssigneeInProgress = n
	return nil
}

// countAgents is countAgent for each of tasks, stored as r has them, with
// one count per agent.
func (s *Service) countAgents(ctx context.Context, r any, tasks []Task) error {
	counts := map[string]int{}
	for i := range tasks {
		t := &tasks[i]
		if !needsCount(t, s.cfg.MaxInProgressPerAgent) {
			continue
		}
		n, ok := counts[*t.AssigneeAgentID]
		if !ok {
			if err := s.countAgent(ctx, r, t, nil); err != nil {
				return err
			}
			n = t.AssigneeInProgress
			counts[*t.AssigneeAgentID] = n
		}
		t.AssigneeInProgress = n
	}
	return nil
}

// setActions sets t's available actions from its stored state and
// t.AssigneeInProgress (see countAgent).
func (s *Service) setActions(t *Task) {
	t.AvailableActions = s.stateOf(t).actions()
}

// StartTaskParams says who starts a task.
type StartTaskParams struct {
	// Actor is the agent (or person) that starts it.
	Actor Actor `json:"-"`
	// IdempotencyKey, when set (8 to 128 visible ASCII characters), makes
	// the call idempotent with the rules of the HTTP API's
	// Idempotency-Key, as [SubmitParams.IdempotencyKey] does.
	IdempotencyKey string `json:"-"`
}

// StartTask moves a task to in_progress: from todo, or from in_review when
// it needs rework (a reviewer requested changes, CI failed, the pull
// request must be rebased), which counts one of its ReworkRounds. It
// returns a *ConflictError listing the available actions when start is not
// one of them: among its reasons max_in_progress_per_agent and
// max_rework_rounds (see Config.MaxInProgressPerAgent and MaxReworkRounds).
func (s *Service) StartTask(ctx context.Context, taskID string, p StartTaskParams) (Task, error) {
	return s.taskOnce(ctx, p.Actor, startRoute, taskID, p.IdempotencyKey, p, func(ctx context.Context, record recordFunc) (Task, error) {
		return s.changeTaskRecorded(ctx, taskID, record, func(tx Tx, t *Task) (taskEvent, error) {
			if err := s.answer(t, ask{cmd: cmdStart}); err != nil {
				return taskEvent{}, wordDependencyRefusal(ctx, tx, t, err)
			}
			summary := fmt.Sprintf("Task %s started", t.Identifier)
			if t.ReworkReason() != "" {
				summary = fmt.Sprintf("Task %s back in progress for rework", t.Identifier)
			}
			moveTask(t, moveStart)
			return taskEvent{typ: EventTaskUpdated, summary: summary, actor: p.Actor}, nil
		})
	})
}

// CancelTaskParams says why a task is cancelled.
type CancelTaskParams struct {
	// Reason is optional, at most 2000 characters; it is kept in the event.
	Reason string `json:"reason"`
	// Actor is who cancels. Empty means the system actor.
	Actor Actor `json:"-"`
}

// CancelTask moves a task in any status but done to cancelled. It returns a
// *ConflictError when the task is done or already cancelled.
func (s *Service) CancelTask(ctx context.Context, taskID string, p CancelTaskParams) (Task, error) {
	var v lifecycletype.Validator
	v.MaxLen("reason", p.Reason, maxReasonLen)
	if err := v.Err(); err != nil {
		return Task{}, err
	}
	return s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if err := s.answer(t, ask{cmd: cmdCancel}); err != nil {
			return taskEvent{}, err
		}
		moveTask(t, moveCancel)
		summary := fmt.Sprintf("Task %s cancelled", t.Identifier)
		if p.Reason != "" {
			summary += ": " + p.Reason
		}
		return taskEvent{typ: EventTaskUpdated, summary: summary, actor: p.Actor}, nil
	})
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// writeTask writes a task envelope; compact leaves out the long members.
// It encodes by hand (see taskjson.Writer.AppendEnvelope) the bytes
// encodeTaskJSON encodes by reflection, and falls back to it when the task
// does not encode.
func writeTask(w http.ResponseWriter, status int, t *Task, compact bool) error {
	return taskjson.Use(func(e *taskjson.Writer) error {
		body, err := envelope(e, t, compact)
		if err == nil {
			httpapi.WriteRaw(w, status, body)
		}
		return err
	})
}

// encodeTask returns the body writeTask writes, in a slice of its own.
func encodeTask(t *Task, compact bool) ([]byte, error) {
	var body []byte
	err := taskjson.Use(func(e *taskjson.Writer) error {
		b, err := envelope(e, t, compact)
		body = bytes.Clone(b)
		return err
	})
	return body, err
}

// envelope returns the task envelope of t: e's bytes, or encodeTaskJSON's
// when the hand-written encoder gives up.
func envelope(e *taskjson.Writer, t *Task, compact bool) ([]byte, error) {
	if e.AppendEnvelope(t, compact) {
		return e.Bytes(), nil
	}
	return encodeTaskJSON(t, compact)
}

// encodeTaskJSON is the body of writeTask by encoding/json.
func encodeTaskJSON(t *Task, compact bool) ([]byte, error) {
	env, err := taskjson.ReflectEnvelope(t, compact)
	if err != nil {
		return nil, err
	}
	return httpapi.EncodeJSON(env), nil
}

// tokenBudget reads the tokenBudget query parameter.
func tokenBudget(r *http.Request) (compact bool, err error) {
	switch v := r.URL.Query().Get("tokenBudget"); v {
	case "", "standard":
		return false, nil
	case "compact":
		return true, nil
	default:
		return false, lifecycletype.Invalid("tokenBudget", "must be compact or standard")
	}
}

func (s *Service) handleGetTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	compact := false
	if r.URL.RawQuery != "" {
		var err error
		if compact, err = tokenBudget(r); err != nil {
			return err
		}
	}
	form, encode := formStandard, encodeStandard
	if compact {
		form, encode = formCompact, encodeCompact
	}
	answer, err := s.encodedTask(r.Context(), r.PathValue("id"), form, encode)
	if err != nil {
		return err
	}
	httpapi.WriteRaw(w, http.StatusOK, answer)
	return nil
}

// boolFilter reads the filter of GET /tasks named name: true keeps the
// tasks it names; false or left out keeps every task (as MCP's
// list_tasks takes false); any other value is a validation error.
func boolFilter(q url.Values, name string) (bool, error) {
	if !q.Has(name) {
		return false, nil
	}
	switch q.Get(name) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, lifecycletype.Invalid(name, "must be true or false")
}

func (s *Service) handleListTasks(w http.ResponseWriter, r *http.Request, p *Principal) error {
	page, err := listParams(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	params := ListTasksParams{
		AssigneeAgentID: q.Get("assigneeAgentId"),
		Project:         q.Get("project"),
		Limit:           page.Limit,
		Cursor:          page.Cursor,
	}
	if params.Ready, err = boolFilter(q, "ready"); err != nil {
		return err
	}
	if params.Stalled, err = boolFilter(q, "stalled"); err != nil {
		return err
	}
	if st := q.Get("status"); st != "" {
		for _, part := range strings.Split(st, ",") {
			params.Statuses = append(params.Statuses, Status(strings.TrimSpace(part)))
		}
	}
	list, err := s.ListTasks(r.Context(), params)
	if err != nil {
		return err
	}
	writeTaskList(w, list)
	return nil
}

// writeTaskList writes a page of tasks. It encodes by hand (see
// taskjson.Writer.AppendList) the bytes encodeTaskListJSON encodes by
// reflection, and falls back to it when a task does not encode.
func writeTaskList(w http.ResponseWriter, list TaskList) {
	_ = taskjson.Use(func(e *taskjson.Writer) error {
		if e.AppendList(list.Tasks, list.NextCursor) {
			httpapi.WriteRaw(w, http.StatusOK, e.Bytes())
		} else {
			httpapi.WriteRaw(w, http.StatusOK, encodeTaskListJSON(list))
		}
		return nil
	})
}

// encodeTaskListJSON is the body of writeTaskList by encoding/json.
func encodeTaskListJSON(list TaskList) []byte {
	return httpapi.EncodeJSON(taskjson.ReflectList(list.Tasks, list.NextCursor))
}

func (s *Service) handleCreateTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params CreateTaskParams
	if err := httpapi.DecodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Actor = p.Actor
	t, err := s.CreateTask(httpapi.RequestContext(r), params)
	if err != nil {
		return err
	}
	w.Header().Set("Location", s.link("/tasks/"+t.ID))
	return writeTask(w, http.StatusCreated, &t, false)
}

func (s *Service) handleStartTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if err := httpapi.DecodeJSON(w, r, &struct{}{}, true); err != nil {
		return err
	}
	t, err := s.StartTask(httpapi.RequestContext(r), r.PathValue("id"), StartTaskParams{Actor: p.Actor})
	if err != nil {
		return err
	}
	return writeTask(w, http.StatusOK, &t, false)
}

func (s *Service) handleCancelTask(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params CancelTaskParams
	if err := httpapi.DecodeJSON(w, r, &params, true); err != nil {
		return err
	}
	params.Actor = p.Actor
	t, err := s.CancelTask(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	return writeTask(w, http.StatusOK, &t, false)
}
