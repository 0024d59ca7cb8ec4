package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tasklifecycle/lifecycle"
)

// taskColumns are the columns of a task, in the order scanTask reads them.
const taskColumns = `pos, id, identifier, title, description, status, priority, labels,
	acceptance_criteria, issue_url, parent_issue_url, project, goal, assignee_agent_id,
	assignee_name, assignment_source, routing_decision_id, routing_reason, routing_confidence,
	triage_queue_id, submission_id, pr_url, pr_number, branch, base_branch, head_sha, blocker,
	status_before_blocker, version, created_at, updated_at, submission_mode, pr_owner, pr_repo,
	review_policy, review_decision, rework_requested, active_ship_id, facts, reconcile_at, active_ship_merging`

// taskColumnList is taskColumns split, without pos.
var taskColumnList = strings.Split(strings.Join(strings.Fields(strings.TrimPrefix(taskColumns, "pos, ")), " "), ", ")

// taskRow holds the scanned columns of a task. Scanning into the fields
// of one value costs one allocation instead of one per column.
type taskRow struct {
	task                                  lifecycle.Task
	pos, created, updated, reconcileAt    int64
	labels, criteria, facts               string
	reason, blocker, assigneeName, source *string
	prNumber                              *int64
	status, priority, statusBefore        string
	mode, policy, decision                string
}

// scanTask reads one row of taskColumns.
func scanTask(row scanner) (lifecycle.Task, int64, error) {
	r := new(taskRow)
	t := &r.task
	err := row.Scan(&r.pos, &t.ID, &t.Identifier, &t.Title, &t.Description, &r.status, &r.priority, &r.labels,
		&r.criteria, &t.Links.Issue, &t.Links.ParentIssue, &t.Context.Project, &t.Context.Goal, &t.AssigneeAgentID,
		&r.assigneeName, &r.source, &t.RoutingDecisionID, &r.reason, &t.RoutingConfidence,
		&t.TriageQueueID, &t.SubmissionID, &t.PRURL, &r.prNumber, &t.Branch, &t.BaseBranch, &t.HeadSHA, &r.blocker,
		&r.statusBefore, &t.Version, &r.created, &r.updated, &r.mode, &t.PROwner, &t.PRRepo,
		&r.policy, &r.decision, &t.ReworkRequested, &t.ActiveShipID, &r.facts, &r.reconcileAt, &t.ShipMerging)
	if err != nil {
		return *t, 0, err
	}
	t.Status, t.Priority, t.StatusBeforeBlocker = lifecycle.Status(r.status), lifecycle.Priority(r.priority), lifecycle.Status(r.statusBefore)
	t.CreatedAt, t.UpdatedAt = fromMillis(r.created), fromMillis(r.updated)
	t.SubmissionMode, t.ReviewPolicy, t.ReviewDecision = lifecycle.SubmitMode(r.mode), lifecycle.CodeReviewPolicy(r.policy), lifecycle.ReviewDecision(r.decision)
	if err := json.Unmarshal([]byte(r.labels), &t.Labels); err != nil {
		return *t, 0, fmt.Errorf("task %s labels: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(r.criteria), &t.AcceptanceCriteria); err != nil {
		return *t, 0, fmt.Errorf("task %s acceptance criteria: %w", t.ID, err)
	}
	if r.reason != nil {
		t.RoutingReason = json.RawMessage(*r.reason)
	}
	if len(r.facts) > 2 { // not "{}"
		if err := json.Unmarshal([]byte(r.facts), &t.Facts); err != nil {
			return *t, 0, fmt.Errorf("task %s facts: %w", t.ID, err)
		}
	}
	if r.reconcileAt != 0 {
		t.ReconcileAt = fromMillis(r.reconcileAt)
	}
	if r.blocker != nil {
		t.Blocker = new(lifecycle.Blocker)
		if err := json.Unmarshal([]byte(*r.blocker), t.Blocker); err != nil {
			return *t, 0, fmt.Errorf("task %s blocker: %w", t.ID, err)
		}
	}
	if t.AssigneeAgentID != nil {
		name := ""
		if r.assigneeName != nil {
			name = *r.assigneeName
		}
		t.Assignee = &lifecycle.Agent{ID: *t.AssigneeAgentID, Name: name}
	}
	if r.source != nil {
		t.AssignmentSource = (*lifecycle.AssignmentSource)(r.source)
	}
	if r.prNumber != nil {
		n := int(*r.prNumber)
		t.PRNumber = &n
	}
	return *t, r.pos, nil
}

// taskArgs returns the values of every column but pos, in column order.
func taskArgs(t *lifecycle.Task) ([]any, error) {
	labels, err := json.Marshal(nonNil(t.Labels))
	if err != nil {
		return nil, err
	}
	criteria, err := json.Marshal(nonNil(t.AcceptanceCriteria))
	if err != nil {
		return nil, err
	}
	var blocker *string
	if t.Blocker != nil {
		b, err := json.Marshal(t.Blocker)
		if err != nil {
			return nil, err
		}
		s := string(b)
		blocker = &s
	}
	var reason *string
	if len(t.RoutingReason) > 0 && string(t.RoutingReason) != "null" {
		s := string(t.RoutingReason)
		reason = &s
	}
	var assigneeName *string
	if t.Assignee != nil {
		assigneeName = &t.Assignee.Name
	}
	facts, err := json.Marshal(t.Facts)
	if err != nil {
		return nil, err
	}
	var reconcileAt int64
	if !t.ReconcileAt.IsZero() {
		reconcileAt = millis(t.ReconcileAt.Time)
	}
	var prNumber *int64
	if t.PRNumber != nil {
		n := int64(*t.PRNumber)
		prNumber = &n
	}
	return []any{
		t.ID, t.Identifier, t.Title, t.Description, string(t.Status), string(t.Priority), string(labels),
		string(criteria), t.Links.Issue, t.Links.ParentIssue, t.Context.Project, t.Context.Goal, t.AssigneeAgentID,
		assigneeName, (*string)(t.AssignmentSource), t.RoutingDecisionID, reason, t.RoutingConfidence,
		t.TriageQueueID, t.SubmissionID, t.PRURL, prNumber, t.Branch, t.BaseBranch, t.HeadSHA, blocker,
		string(t.StatusBeforeBlocker), t.Version, millis(t.CreatedAt.Time), millis(t.UpdatedAt.Time),
		string(t.SubmissionMode), t.PROwner, t.PRRepo, string(t.ReviewPolicy), string(t.ReviewDecision), t.ReworkRequested,
		t.ActiveShipID, string(facts), reconcileAt, t.ShipMerging,
	}, nil
}

// Task implements lifecycle.Store.
func (s *Store) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	if s.closed.Load() {
		return lifecycle.Task{}, errClosed
	}
	t, _, err := scanTask(s.pool.QueryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = $1", id))
	if err != nil {
		return t, fmt.Errorf("postgres: task %s: %w", id, s.translate(err))
	}
	return t, nil
}

// TaskRevision implements lifecycle.TaskRevisioner: every write of a
// task's row adds one to its rev column.
func (s *Store) TaskRevision(ctx context.Context, id string) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var rev int64
	if err := s.pool.QueryRow(ctx, "SELECT rev FROM tasks WHERE id = $1", id).Scan(&rev); err != nil {
		return 0, fmt.Errorf("postgres: revision of task %s: %w", id, s.translate(err))
	}
	return rev, nil
}

// Task implements lifecycle.Tx: SELECT ... FOR UPDATE.
func (x *txn) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	t, _, err := scanTask(x.tx.QueryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = $1 FOR UPDATE", id))
	if err != nil {
		return t, fmt.Errorf("postgres: task %s: %w", id, x.fail(err))
	}
	return t, nil
}

// ListTasks implements lifecycle.Store.
func (s *Store) ListTasks(ctx context.Context, f lifecycle.TaskFilter) (lifecycle.TaskPage, error) {
	if s.closed.Load() {
		return lifecycle.TaskPage{}, errClosed
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
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(statuses)+")")
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
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE "+strings.Join(where, " AND ")+" ORDER BY pos LIMIT "+arg(limit+1), args...)
	if err != nil {
		return lifecycle.TaskPage{}, fmt.Errorf("postgres: list tasks: %w", s.translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.TaskPage
		last int64
	)
	for rows.Next() {
		t, pos, err := scanTask(rows)
		if err != nil {
			return lifecycle.TaskPage{}, fmt.Errorf("postgres: list tasks: %w", s.translate(err))
		}
		if len(page.Tasks) == limit {
			page.Next = last
			break
		}
		page.Tasks = append(page.Tasks, t)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.TaskPage{}, fmt.Errorf("postgres: list tasks: %w", s.translate(err))
	}
	return page, nil
}

// createTaskSQL inserts a task unless its ID or identifier is taken.
var createTaskSQL = func() string {
	params := make([]string, len(taskColumnList))
	for i := range params {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	return "INSERT INTO tasks (" + strings.Join(taskColumnList, ", ") + ") VALUES (" + strings.Join(params, ", ") + ") ON CONFLICT DO NOTHING"
}()

// CreateTask implements lifecycle.Tx.
func (x *txn) CreateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return fmt.Errorf("postgres: encode task %s: %w", t.ID, err)
	}
	n, err := x.exec(ctx, createTaskSQL, args...)
	if err != nil {
		return fmt.Errorf("postgres: create task %s: %w", t.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create task %s: a task with this ID or identifier %q exists: %w", t.ID, t.Identifier, lifecycle.ErrConflict)
	}
	return nil
}

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

// UpdateTask implements lifecycle.Tx.
func (x *txn) UpdateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return fmt.Errorf("postgres: encode task %s: %w", t.ID, err)
	}
	// id comes first; created_at never changes.
	set := make([]any, 0, len(args)-1)
	for i, a := range args {
		if i != slices.Index(taskColumnList, "created_at") {
			set = append(set, a)
		}
	}
	n, err := x.exec(ctx, updateTaskSQL, set...)
	if err != nil {
		return fmt.Errorf("postgres: update task %s: %w", t.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: update task %s: %w", t.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// ClaimReconciliations implements lifecycle.Tx: one statement selects the
// due tasks with FOR UPDATE SKIP LOCKED and moves their ReconcileAt, so
// claims made at once take different tasks.
func (x *txn) ClaimReconciliations(ctx context.Context, p lifecycle.ClaimReconciliationsParams) ([]lifecycle.Task, error) {
	tasks, err := queryAll(ctx, x.tx, func(row scanner) (lifecycle.Task, error) {
		t, _, err := scanTask(row)
		return t, err
	}, `WITH due AS (
		SELECT pos, reconcile_at AS old FROM tasks WHERE status IN ('in_review', 'in_progress') AND reconcile_at <= $1
		AND (status = 'in_review' OR reconcile_at > 0)
		ORDER BY reconcile_at, pos LIMIT $2 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE tasks SET reconcile_at = $3, rev = tasks.rev + 1 FROM due WHERE tasks.pos = due.pos RETURNING tasks.*, due.old)
	SELECT `+taskColumns+` FROM claimed ORDER BY old, pos`, millis(p.Now), p.Limit, millis(p.Until))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim reconciliations: %w", x.fail(err))
	}
	return tasks, nil
}
