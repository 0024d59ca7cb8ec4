package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
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

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// taskRow holds the scanned columns of a task. Scanning into the fields
// of one value costs one allocation instead of one per column.
type taskRow struct {
	task                                    lifecycle.Task
	pos, created, updated                   int64
	labels, criteria                        string
	reason, blocker                         []byte
	assigneeName, source                    sql.NullString
	parent, project, agentID, decisionID    sql.NullString
	triage, submission, prURL, branch, base sql.NullString
	headSHA                                 sql.NullString
	facts                                   []byte
	reconcileAt                             int64
	confidence                              sql.NullFloat64
	prNumber                                sql.NullInt64
	status, priority, statusBefore          string
	mode, policy, decision                  string
}

// scanTask reads one row of taskColumns.
func scanTask(row scanner) (lifecycle.Task, int64, error) {
	r := new(taskRow)
	t := &r.task
	err := row.Scan(&r.pos, &t.ID, &t.Identifier, &t.Title, &t.Description, &r.status, &r.priority, &r.labels,
		&r.criteria, &t.Links.Issue, &r.parent, &r.project, &t.Context.Goal, &r.agentID,
		&r.assigneeName, &r.source, &r.decisionID, &r.reason, &r.confidence,
		&r.triage, &r.submission, &r.prURL, &r.prNumber, &r.branch, &r.base, &r.headSHA, &r.blocker,
		&r.statusBefore, &t.Version, &r.created, &r.updated, &r.mode, &t.PROwner, &t.PRRepo,
		&r.policy, &r.decision, &t.ReworkRequested, &t.ActiveShipID, &r.facts, &r.reconcileAt, &t.ShipMerging)
	if err != nil {
		return *t, 0, translate(err)
	}
	t.Status, t.Priority, t.StatusBeforeBlocker = lifecycle.Status(r.status), lifecycle.Priority(r.priority), lifecycle.Status(r.statusBefore)
	t.CreatedAt, t.UpdatedAt = fromMillis(r.created), fromMillis(r.updated)
	t.SubmissionMode, t.ReviewPolicy, t.ReviewDecision = lifecycle.SubmitMode(r.mode), lifecycle.CodeReviewPolicy(r.policy), lifecycle.ReviewDecision(r.decision)
	if err := unmarshalStrings(r.labels, &t.Labels); err != nil {
		return *t, 0, fmt.Errorf("sqlite: task %s labels: %w", t.ID, err)
	}
	if err := unmarshalStrings(r.criteria, &t.AcceptanceCriteria); err != nil {
		return *t, 0, fmt.Errorf("sqlite: task %s acceptance criteria: %w", t.ID, err)
	}
	if len(r.reason) > 0 {
		t.RoutingReason = json.RawMessage(r.reason)
	}
	if len(r.facts) > 2 { // not "{}"
		if err := json.Unmarshal(r.facts, &t.Facts); err != nil {
			return *t, 0, fmt.Errorf("sqlite: task %s facts: %w", t.ID, err)
		}
	}
	if r.reconcileAt != 0 {
		t.ReconcileAt = fromMillis(r.reconcileAt)
	}
	if len(r.blocker) > 0 {
		t.Blocker = new(lifecycle.Blocker)
		if err := json.Unmarshal(r.blocker, t.Blocker); err != nil {
			return *t, 0, fmt.Errorf("sqlite: task %s blocker: %w", t.ID, err)
		}
	}
	t.Links.ParentIssue = nullString(&r.parent)
	t.Context.Project = nullString(&r.project)
	if r.agentID.Valid {
		t.AssigneeAgentID = &r.agentID.String
		t.Assignee = &lifecycle.Agent{ID: r.agentID.String, Name: r.assigneeName.String}
	}
	if r.source.Valid {
		t.AssignmentSource = (*lifecycle.AssignmentSource)(&r.source.String)
	}
	t.RoutingDecisionID = nullString(&r.decisionID)
	if r.confidence.Valid {
		t.RoutingConfidence = &r.confidence.Float64
	}
	t.TriageQueueID = nullString(&r.triage)
	t.SubmissionID = nullString(&r.submission)
	t.PRURL = nullString(&r.prURL)
	if r.prNumber.Valid {
		n := int(r.prNumber.Int64)
		t.PRNumber = &n
	}
	t.Branch, t.BaseBranch, t.HeadSHA = nullString(&r.branch), nullString(&r.base), nullString(&r.headSHA)
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
	var blocker []byte
	if t.Blocker != nil {
		if blocker, err = json.Marshal(t.Blocker); err != nil {
			return nil, err
		}
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
		reconcileAt = millis(t.ReconcileAt.Time)
	}
	return []any{
		t.ID, t.Identifier, t.Title, t.Description, string(t.Status), string(t.Priority), string(labels),
		string(criteria), t.Links.Issue, t.Links.ParentIssue, t.Context.Project, t.Context.Goal, t.AssigneeAgentID,
		assigneeName, (*string)(t.AssignmentSource), t.RoutingDecisionID, reason, t.RoutingConfidence,
		t.TriageQueueID, t.SubmissionID, t.PRURL, t.PRNumber, t.Branch, t.BaseBranch, t.HeadSHA, nullBytes(blocker),
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
	return getTask(ctx, s.r, id)
}

// TaskRevision implements lifecycle.TaskRevisioner: every write of a
// task's row adds one to its rev column.
func (s *Store) TaskRevision(ctx context.Context, id string) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var rev int64
	if err := s.r.QueryRowContext(ctx, "SELECT rev FROM tasks WHERE id = ?", id).Scan(&rev); err != nil {
		return 0, fmt.Errorf("sqlite: revision of task %s: %w", id, translate(err))
	}
	return rev, nil
}

// Task implements lifecycle.Tx.
func (x *txn) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	return getTask(x.ctx, x.conn, id)
}

func getTask(ctx context.Context, q queryer, id string) (lifecycle.Task, error) {
	t, _, err := scanTask(q.QueryRowContext(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = ?", id))
	if err != nil {
		return t, fmt.Errorf("sqlite: task %s: %w", id, err)
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
	where = append(where, "pos > ?")
	args = append(args, f.After)
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, st := range f.Statuses {
			args = append(args, string(st))
		}
	}
	if f.AssigneeAgentID != "" {
		where = append(where, "assignee_agent_id = ?")
		args = append(args, f.AssigneeAgentID)
	}
	if f.Project != "" {
		where = append(where, "project = ?")
		args = append(args, f.Project)
	}
	if f.PullRequest != (lifecycle.PullRequestRef{}) {
		where = append(where, "pr_number = ? AND pr_repo = ? AND pr_owner = ?")
		args = append(args, f.PullRequest.Number, f.PullRequest.Repo, f.PullRequest.Owner)
	}
	if f.HeadSHA != "" {
		where = append(where, "head_sha = ?")
		args = append(args, f.HeadSHA)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	args = append(args, limit+1)
	rows, err := s.r.QueryContext(ctx, "SELECT "+taskColumns+" FROM tasks WHERE "+strings.Join(where, " AND ")+" ORDER BY pos LIMIT ?", args...)
	if err != nil {
		return lifecycle.TaskPage{}, fmt.Errorf("sqlite: list tasks: %w", translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.TaskPage
		last int64
	)
	for rows.Next() {
		t, pos, err := scanTask(rows)
		if err != nil {
			return lifecycle.TaskPage{}, fmt.Errorf("sqlite: list tasks: %w", err)
		}
		if len(page.Tasks) == limit {
			page.Next = last
			break
		}
		page.Tasks = append(page.Tasks, t)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.TaskPage{}, fmt.Errorf("sqlite: list tasks: %w", translate(err))
	}
	return page, nil
}

// CreateTask implements lifecycle.Tx.
func (x *txn) CreateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return fmt.Errorf("sqlite: encode task %s: %w", t.ID, err)
	}
	_, err = x.conn.ExecContext(x.ctx, `INSERT INTO tasks (`+strings.TrimPrefix(taskColumns, "pos, ")+`)
		VALUES (?`+strings.Repeat(", ?", len(args)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("sqlite: create task %s: %w", t.ID, translate(err))
	}
	return nil
}

// createdAtArg is the index of created_at among the values of taskArgs.
var createdAtArg = slices.Index(strings.Split(strings.Join(strings.Fields(taskColumns), " "), ", "), "created_at") - 1

// updateTaskSQL sets every column but pos, id and created_at.
var updateTaskSQL = func() string {
	cols := strings.Split(strings.Join(strings.Fields(taskColumns), " "), ", ")
	var sets []string
	for _, c := range cols {
		if c == "pos" || c == "id" || c == "created_at" {
			continue
		}
		sets = append(sets, c+" = ?")
	}
	return "UPDATE tasks SET " + strings.Join(sets, ", ") + ", rev = rev + 1 WHERE id = ?"
}()

// UpdateTask implements lifecycle.Tx.
func (x *txn) UpdateTask(ctx context.Context, t lifecycle.Task) error {
	args, err := taskArgs(&t)
	if err != nil {
		return fmt.Errorf("sqlite: encode task %s: %w", t.ID, err)
	}
	// Drop id and created_at, which never change, and add id for WHERE.
	set := make([]any, 0, len(args))
	for i, a := range args {
		if i != 0 && i != createdAtArg {
			set = append(set, a)
		}
	}
	set = append(set, t.ID)
	res, err := x.conn.ExecContext(x.ctx, updateTaskSQL, set...)
	if err != nil {
		return fmt.Errorf("sqlite: update task %s: %w", t.ID, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update task %s: %w", t.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// nullString returns a pointer to the string of s, or nil. The pointer
// points into s, which must outlive it.
func nullString(s *sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ClaimReconciliations implements lifecycle.Tx. SQLite has one writer, so
// the select and the update of this transaction are atomic with respect
// to every other claim.
func (x *txn) ClaimReconciliations(ctx context.Context, p lifecycle.ClaimReconciliationsParams) ([]lifecycle.Task, error) {
	tasks, err := queryAll(x.ctx, x.conn, func(row scanner) (lifecycle.Task, error) {
		t, _, err := scanTask(row)
		return t, err
	}, "SELECT "+taskColumns+` FROM tasks WHERE status IN ('in_review', 'in_progress') AND reconcile_at <= ?
		AND (status = 'in_review' OR reconcile_at > 0) ORDER BY reconcile_at LIMIT ?`, millis(p.Now), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim reconciliations: %w", err)
	}
	until := millis(p.Until)
	for i := range tasks {
		if _, err := x.conn.ExecContext(x.ctx, "UPDATE tasks SET reconcile_at = ?, rev = rev + 1 WHERE id = ?", until, tasks[i].ID); err != nil {
			return nil, fmt.Errorf("sqlite: claim reconciliation of %s: %w", tasks[i].ID, translate(err))
		}
		tasks[i].ReconcileAt = fromMillis(until)
	}
	return tasks, nil
}
