package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle"
)

// TaskColumns are the columns of a task, in the order ScanTask reads them.
const TaskColumns = `pos, id, identifier, title, description, status, priority, labels,
	acceptance_criteria, issue_url, parent_issue_url, project, goal, assignee_agent_id,
	assignee_name, assignment_source, routing_decision_id, routing_reason, routing_confidence,
	triage_queue_id, submission_id, pr_url, pr_number, branch, base_branch, head_sha, blocker,
	status_before_blocker, version, created_at, updated_at, submission_mode, pr_owner, pr_repo,
	review_policy, review_decision, rework_requested, active_ship_id, facts, reconcile_at, active_ship_merging,
	depends_on, waiting_on, waiting_count, rework_rounds, rework_rounds_base, last_activity_at, stalled_at`

// taskColumnList is TaskColumns split, without pos.
var taskColumnList = strings.Split(strings.Join(strings.Fields(strings.TrimPrefix(TaskColumns, "pos, ")), " "), ", ")

// createdAtArg is the index of created_at among the values of taskArgs.
var createdAtArg = slices.Index(taskColumnList, "created_at")

// createTaskSQL inserts a task unless its ID or identifier is taken.
var createTaskSQL = "INSERT INTO tasks (" + strings.Join(taskColumnList, ", ") + ") VALUES (" + Params(1, len(taskColumnList)) + ") ON CONFLICT DO NOTHING"

// updateTaskSQL sets every column but id and created_at; $1 is the ID,
// the others follow in column order.
var updateTaskSQL = func() string {
	var sets []string
	for _, c := range taskColumnList {
		if c == "id" || c == "created_at" {
			continue
		}
		sets = append(sets, c+" = $"+strconv.Itoa(len(sets)+2))
	}
	return "UPDATE tasks SET " + strings.Join(sets, ", ") + ", rev = rev + 1 WHERE id = $1"
}()

// Params returns n numbered placeholders from $first: "$3, $4, $5".
func Params(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(first+i))
	}
	return b.String()
}

// taskRow holds the scanned columns of a task. Scanning into the fields
// of one value costs one allocation instead of one per column.
type taskRow struct {
	task                                    lifecycle.Task
	pos, created, updated                   int64
	labels, criteria                        string
	dependsOn, waitingOn                    string
	waitingCount                            int64
	reason, blocker                         []byte
	assigneeName, source                    sql.NullString
	parent, project, agentID, decisionID    sql.NullString
	triage, submission, prURL, branch, base sql.NullString
	headSHA                                 sql.NullString
	facts                                   []byte
	reconcileAt, lastActivity, stalledAt    int64
	confidence                              sql.NullFloat64
	prNumber                                sql.NullInt64
	status, priority, statusBefore          string
	mode, policy, decision                  string
}

// ScanTask reads one row of TaskColumns, and returns the task and its
// position.
func ScanTask(row Row) (lifecycle.Task, int64, error) {
	r := new(taskRow)
	t := &r.task
	err := row.Scan(&r.pos, &t.ID, &t.Identifier, &t.Title, &t.Description, &r.status, &r.priority, &r.labels,
		&r.criteria, &t.Links.Issue, &r.parent, &r.project, &t.Context.Goal, &r.agentID,
		&r.assigneeName, &r.source, &r.decisionID, &r.reason, &r.confidence,
		&r.triage, &r.submission, &r.prURL, &r.prNumber, &r.branch, &r.base, &r.headSHA, &r.blocker,
		&r.statusBefore, &t.Version, &r.created, &r.updated, &r.mode, &t.PROwner, &t.PRRepo,
		&r.policy, &r.decision, &t.ReworkRequested, &t.ActiveShipID, &r.facts, &r.reconcileAt, &t.ShipMerging,
		&r.dependsOn, &r.waitingOn, &r.waitingCount, &t.ReworkRounds, &t.ReworkRoundsBase, &r.lastActivity, &r.stalledAt)
	if err != nil {
		return *t, 0, err
	}
	t.Status, t.Priority, t.StatusBeforeBlocker = lifecycle.Status(r.status), lifecycle.Priority(r.priority), lifecycle.Status(r.statusBefore)
	t.CreatedAt, t.UpdatedAt = FromMillis(r.created), FromMillis(r.updated)
	t.SubmissionMode, t.ReviewPolicy, t.ReviewDecision = lifecycle.SubmitMode(r.mode), lifecycle.CodeReviewPolicy(r.policy), lifecycle.ReviewDecision(r.decision)
	if err := unmarshalStrings(r.labels, &t.Labels); err != nil {
		return *t, 0, fmt.Errorf("task %s labels: %w", t.ID, err)
	}
	if err := unmarshalStrings(r.criteria, &t.AcceptanceCriteria); err != nil {
		return *t, 0, fmt.Errorf("task %s acceptance criteria: %w", t.ID, err)
	}
	if err := unmarshalStrings(r.dependsOn, &t.DependsOn); err != nil {
		return *t, 0, fmt.Errorf("task %s dependencies: %w", t.ID, err)
	}
	if err := unmarshalStrings(r.waitingOn, &t.WaitingOn); err != nil {
		return *t, 0, fmt.Errorf("task %s waiting dependencies: %w", t.ID, err)
	}
	if len(r.reason) > 0 {
		t.RoutingReason = json.RawMessage(r.reason)
	}
	if len(r.facts) > 2 { // not "{}"
		if err := json.Unmarshal(r.facts, &t.Facts); err != nil {
			return *t, 0, fmt.Errorf("task %s facts: %w", t.ID, err)
		}
	}
	if r.reconcileAt != 0 {
		t.ReconcileAt = FromMillis(r.reconcileAt)
	}
	if r.lastActivity != 0 {
		t.LastActivityAt = FromMillis(r.lastActivity)
	}
	if r.stalledAt != 0 {
		t.Stalled = &lifecycle.Stall{Since: FromMillis(r.stalledAt), LastActivityAt: t.LastActivityAt}
	}
	if len(r.blocker) > 0 {
		t.Blocker = new(lifecycle.Blocker)
		if err := json.Unmarshal(r.blocker, t.Blocker); err != nil {
			return *t, 0, fmt.Errorf("task %s blocker: %w", t.ID, err)
		}
	}
	t.Links.ParentIssue = NullString(&r.parent)
	t.Context.Project = NullString(&r.project)
	if r.agentID.Valid {
		t.AssigneeAgentID = &r.agentID.String
		t.Assignee = &lifecycle.Agent{ID: r.agentID.String, Name: r.assigneeName.String}
	}
	if r.source.Valid {
		t.AssignmentSource = (*lifecycle.AssignmentSource)(&r.source.String)
	}
	t.RoutingDecisionID = NullString(&r.decisionID)
	if r.confidence.Valid {
		t.RoutingConfidence = &r.confidence.Float64
	}
	t.TriageQueueID = NullString(&r.triage)
	t.SubmissionID = NullString(&r.submission)
	t.PRURL = NullString(&r.prURL)
	if r.prNumber.Valid {
		n := int(r.prNumber.Int64)
		t.PRNumber = &n
	}
	t.Branch, t.BaseBranch, t.HeadSHA = NullString(&r.branch), NullString(&r.base), NullString(&r.headSHA)
	return *t, r.pos, nil
}

// ScanTaskOnly is ScanTask without the position.
func ScanTaskOnly(row Row) (lifecycle.Task, error) {
	t, _, err := ScanTask(row)
	return t, err
}

// taskArgs returns the values of every column but pos, in column order.
func taskArgs(t *lifecycle.Task) ([]any, error) {
	labels, err := json.Marshal(NonNil(t.Labels))
	if err != nil {
		return nil, err
	}
	criteria, err := json.Marshal(NonNil(t.AcceptanceCriteria))
	if err != nil {
		return nil, err
	}
	dependsOn, err := json.Marshal(NonNil(t.DependsOn))
	if err != nil {
		return nil, err
	}
	waitingOn, err := json.Marshal(NonNil(t.WaitingOn))
	if err != nil {
		return nil, err
	}
	var blocker any
	if t.Blocker != nil {
		b, err := json.Marshal(t.Blocker)
		if err != nil {
			return nil, err
		}
		blocker = string(b)
	}
	var reason any
	if len(t.RoutingReason) > 0 && string(t.RoutingReason) != "null" {
		reason = string(t.RoutingReason)
	}
	var assigneeName any
	if t.Assignee != nil {
		assigneeName = t.Assignee.Name
	}
	facts, err := json.Marshal(t.Facts)
	if err != nil {
		return nil, err
	}
	var reconcileAt int64
	if !t.ReconcileAt.IsZero() {
		reconcileAt = Millis(t.ReconcileAt.Time)
	}
	var lastActivity, stalledAt int64
	if !t.LastActivityAt.IsZero() {
		lastActivity = Millis(t.LastActivityAt.Time)
	}
	if t.Stalled != nil {
		stalledAt = Millis(t.Stalled.Since.Time)
	}
	var prNumber any
	if t.PRNumber != nil {
		prNumber = int64(*t.PRNumber)
	}
	return []any{
		t.ID, t.Identifier, t.Title, t.Description, string(t.Status), string(t.Priority), string(labels),
		string(criteria), t.Links.Issue, t.Links.ParentIssue, t.Context.Project, t.Context.Goal, t.AssigneeAgentID,
		assigneeName, (*string)(t.AssignmentSource), t.RoutingDecisionID, reason, t.RoutingConfidence,
		t.TriageQueueID, t.SubmissionID, t.PRURL, prNumber, t.Branch, t.BaseBranch, t.HeadSHA, blocker,
		string(t.StatusBeforeBlocker), t.Version, Millis(t.CreatedAt.Time), Millis(t.UpdatedAt.Time),
		string(t.SubmissionMode), t.PROwner, t.PRRepo, string(t.ReviewPolicy), string(t.ReviewDecision), t.ReworkRequested,
		t.ActiveShipID, string(facts), reconcileAt, t.ShipMerging,
		string(dependsOn), string(waitingOn), int64(len(t.WaitingOn)),
		t.ReworkRounds, t.ReworkRoundsBase,
		lastActivity, stalledAt,
	}, nil
}

// NullString returns a pointer to the string of s, or nil. The pointer
// points into s, which must outlive it.
func NullString(s *sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// Task implements lifecycle.Store.
func (s *Reads) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	if err := s.Open(); err != nil {
		return lifecycle.Task{}, err
	}
	t, _, err := ScanTask(s.X.QueryRow(ctx, "SELECT "+TaskColumns+" FROM tasks WHERE id = $1", id))
	if err != nil {
		return t, s.F.errorf("task %s: %w", id, err)
	}
	return t, nil
}

// TaskRevision implements lifecycle.TaskRevisioner: every write of a
// task's row adds one to its rev column.
func (s *Reads) TaskRevision(ctx context.Context, id string) (int64, error) {
	if err := s.Open(); err != nil {
		return 0, err
	}
	var rev int64
	if err := s.X.QueryRow(ctx, "SELECT rev FROM tasks WHERE id = $1", id).Scan(&rev); err != nil {
		return 0, s.F.errorf("revision of task %s: %w", id, err)
	}
	return rev, nil
}

// Task implements lifecycle.Tx: a read for update. It notes the task's
// dependencies, so that UpdateTask rewrites its edges only when they
// change.
func (x *Tx) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	t, _, err := ScanTask(x.X.QueryRow(ctx, "SELECT "+TaskColumns+" FROM tasks WHERE id = $1"+x.F.ForUpdate, id))
	if err != nil {
		return t, x.F.errorf("task %s: %w", id, err)
	}
	if x.edges == nil {
		x.edges = make(map[string][]string)
	}
	x.edges[t.ID] = slices.Clone(t.DependsOn)
	return t, nil
}

// Dependents implements lifecycle.Tx, from the table of edges.
func (x *Tx) Dependents(ctx context.Context, taskID string) ([]string, error) {
	ids, err := QueryAll(ctx, x.X, scanString, `SELECT d.task_id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id
		WHERE d.depends_on_id = $1 ORDER BY t.pos`, taskID)
	if err != nil {
		return nil, x.F.errorf("dependents of task %s: %w", taskID, err)
	}
	return ids, nil
}

// scanString reads a row of one text column.
func scanString(row Row) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}

// writeEdges makes the edges of task id those of dependsOn, unless the
// transaction read them as they are.
func (x *Tx) writeEdges(ctx context.Context, id string, dependsOn []string, created bool) error {
	if read, ok := x.edges[id]; ok && slices.Equal(read, dependsOn) {
		return nil
	}
	if !created {
		if _, err := x.X.Exec(ctx, "DELETE FROM task_dependencies WHERE task_id = $1", id); err != nil {
			return x.F.errorf("dependencies of task %s: %w", id, err)
		}
	}
	for _, dep := range dependsOn {
		if _, err := x.X.Exec(ctx, "INSERT INTO task_dependencies (task_id, depends_on_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", id, dep); err != nil {
			return x.F.errorf("dependency of task %s on %s: %w", id, dep, err)
		}
	}
	if x.edges == nil {
		x.edges = make(map[string][]string)
	}
	x.edges[id] = slices.Clone(dependsOn)
	return nil
}

// ListTasks implements lifecycle.Store.
func (s *Reads) ListTasks(ctx context.Context, f lifecycle.TaskFilter) (lifecycle.TaskPage, error) {
	if err := s.Open(); err != nil {
		return lifecycle.TaskPage{}, err
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where = append(where, "pos > "+arg(f.After))
	if len(f.Statuses) > 0 {
		in := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			in[i] = arg(string(st))
		}
		where = append(where, "status IN ("+strings.Join(in, ", ")+")")
	}
	if f.AssigneeAgentID != "" {
		where = append(where, "assignee_agent_id = "+arg(f.AssigneeAgentID))
	}
	if f.Project != "" {
		where = append(where, "project = "+arg(f.Project))
	}
	if f.PullRequest != (lifecycle.PullRequestRef{}) {
		where = append(where, "pr_number = "+arg(int64(f.PullRequest.Number)), "pr_repo = "+arg(f.PullRequest.Repo), "pr_owner = "+arg(f.PullRequest.Owner))
	}
	if f.HeadSHA != "" {
		where = append(where, "head_sha = "+arg(f.HeadSHA))
	}
	if f.Ready {
		// Literals, not parameters: the partial index tasks_ready serves
		// a query whose terms are its own.
		where = append(where, "status = 'todo'", "waiting_count = 0")
	}
	if f.Stalled {
		where = append(where, "stalled_at <> 0") // the partial index tasks_stalled
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.X.Query(ctx, "SELECT "+TaskColumns+" FROM tasks WHERE "+strings.Join(where, " AND ")+" ORDER BY pos LIMIT "+arg(limit+1), args...)
	if err != nil {
		return lifecycle.TaskPage{}, s.F.errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var (
		page lifecycle.TaskPage
		last int64
	)
	for rows.Next() {
		t, pos, err := ScanTask(rows)
		if err != nil {
			return lifecycle.TaskPage{}, s.F.errorf("list tasks: %w", err)
		}
		if len(page.Tasks) == limit {
			page.Next = last
			break
		}
		page.Tasks = append(page.Tasks, t)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.TaskPage{}, s.F.errorf("list tasks: %w", err)
	}
	return page, nil
}

// CreateTask implements lifecycle.Tx.
func (x *Tx) CreateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return x.F.errorf("encode task %s: %w", t.ID, err)
	}
	n, err := x.X.Exec(ctx, createTaskSQL, args...)
	if err != nil {
		return x.F.errorf("create task %s: %w", t.ID, err)
	}
	if n == 0 {
		return x.F.errorf("create task %s: a task with this ID or identifier %q exists: %w", t.ID, t.Identifier, lifecycle.ErrConflict)
	}
	return x.writeEdges(ctx, t.ID, t.DependsOn, true)
}

// UpdateTask implements lifecycle.Tx.
func (x *Tx) UpdateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return x.F.errorf("encode task %s: %w", t.ID, err)
	}
	// id comes first; created_at never changes.
	set := slices.Delete(args, createdAtArg, createdAtArg+1)
	n, err := x.X.Exec(ctx, updateTaskSQL, set...)
	if err != nil {
		return x.F.errorf("update task %s: %w", t.ID, err)
	}
	if n == 0 {
		return x.F.errorf("update task %s: %w", t.ID, lifecycle.ErrNotFound)
	}
	return x.writeEdges(ctx, t.ID, t.DependsOn, false)
}

// countInProgressSQL counts an agent's tasks in progress, from the
// partial index tasks_in_progress_by_assignee.
const countInProgressSQL = "SELECT COUNT(*) FROM tasks WHERE assignee_agent_id = $1 AND status = 'in_progress'"

// CountInProgress implements lifecycle.Store.
func (s *Reads) CountInProgress(ctx context.Context, agentID string) (int, error) {
	if err := s.Open(); err != nil {
		return 0, err
	}
	var n int
	if err := s.X.QueryRow(ctx, countInProgressSQL, agentID).Scan(&n); err != nil {
		return 0, s.F.errorf("count tasks in progress of agent %s: %w", agentID, err)
	}
	return n, nil
}

// CountInProgress implements lifecycle.Tx. Where rows are locked, it
// first locks the agent's key (Flavour.LockKey) until the transaction
// ends, in a statement of its own: the count, a later statement, then
// sees every transaction that held the lock before, committed (at READ
// COMMITTED each statement reads what is committed when it begins).
func (x *Tx) CountInProgress(ctx context.Context, agentID string) (int, error) {
	if x.F.LockKey != "" {
		if _, err := x.X.Exec(ctx, x.F.LockKey, "lifecycle.agent_in_progress:"+agentID); err != nil {
			return 0, x.F.errorf("lock the tasks in progress of agent %s: %w", agentID, err)
		}
	}
	var n int
	if err := x.X.QueryRow(ctx, countInProgressSQL, agentID).Scan(&n); err != nil {
		return 0, x.F.errorf("count tasks in progress of agent %s: %w", agentID, err)
	}
	return n, nil
}

// StallStatuses are the statuses whose tasks the partial index
// tasks_stall_due holds (stalled_at = 0 AND status IN StallStatuses AND
// active_ship_id = ”): those lifecycle.Config.StallAfter may watch. A query names them as
// they are here for the index to serve it.
const StallStatuses = "('in_progress', 'in_review')"

// StallRules returns the condition of each rule of p on the tasks due to
// stall, with the arguments of all, numbered from $first: each condition
// is one the partial index tasks_stall_due serves with a range of
// (status, last_activity_at).
func StallRules(p lifecycle.MarkStalledParams, first int) ([]string, []any) {
	var (
		conds []string
		args  []any
	)
	for _, r := range p.Rules {
		n := first + len(args)
		conds = append(conds, "stalled_at = 0 AND status IN "+StallStatuses+" AND active_ship_id = '' AND status = $"+strconv.Itoa(n)+" AND last_activity_at < $"+strconv.Itoa(n+1))
		args = append(args, string(r.Status), Millis(r.Before))
	}
	return conds, args
}
