package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/tasklifecycle/lifecycle"
)

// storedTask returns the copy of t the Store keeps: without
// AvailableActions, which the Service computes, with empty lists for nil
// ones and no routing reason for a JSON null, as the SQL Stores give
// them back.
func storedTask(t lifecycle.Task) lifecycle.Task {
	t = clone(t)
	t.AvailableActions = nil
	t.AssigneeInProgress = 0
	t.Labels, t.AcceptanceCriteria = nonNil(t.Labels), nonNil(t.AcceptanceCriteria)
	t.DependsOn, t.WaitingOn = nonNil(t.DependsOn), nonNil(t.WaitingOn)
	if string(t.RoutingReason) == "null" || len(t.RoutingReason) == 0 {
		t.RoutingReason = nil
	}
	if t.Stalled != nil {
		t.Stalled.LastActivityAt = t.LastActivityAt // as the SQL Stores keep it
	}
	return t
}

// Task implements lifecycle.Store.
func (s *Store) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	var task lifecycle.Task
	err := s.read(func(t *tables) error {
		var err error
		task, err = getTask(t.tasks, id)
		return err
	})
	return task, err
}

// TaskRevision implements lifecycle.TaskRevisioner.
func (s *Store) TaskRevision(ctx context.Context, id string) (int64, error) {
	var rev int64
	err := s.read(func(t *tables) error {
		if _, err := getTask(t.tasks, id); err != nil {
			return err
		}
		rev, _ = t.revisions.get(id)
		return nil
	})
	return rev, err
}

// wroteTask counts a write of the task id in its revision.
func (x *txn) wroteTask(id string) {
	rev, _ := x.revisions.get(id)
	x.revisions.set(id, rev+1)
}

// CountInProgress implements lifecycle.Store.
func (s *Store) CountInProgress(ctx context.Context, agentID string) (int, error) {
	var n int
	err := s.read(func(t *tables) error {
		n, _ = t.inProgress.get(agentID)
		return nil
	})
	return n, err
}

// CountInProgress implements lifecycle.Tx. The transaction runs alone, so
// no other counts the agent's tasks before it ends.
func (x *txn) CountInProgress(ctx context.Context, agentID string) (int, error) {
	n, _ := x.inProgress.get(agentID)
	return n, nil
}

// working returns the agent whose tasks in progress t counts among, or "".
func working(t *lifecycle.Task) string {
	if t.Status != lifecycle.StatusInProgress || t.AssigneeAgentID == nil {
		return ""
	}
	return *t.AssigneeAgentID
}

// countWorking moves the count of tasks in progress from the agent old
// counted among to the one t counts among.
func (x *txn) countWorking(old, t *lifecycle.Task) {
	from, to := "", working(t)
	if old != nil {
		from = working(old)
	}
	if from == to {
		return
	}
	if from != "" {
		if n, _ := x.inProgress.get(from); n > 1 {
			x.inProgress.set(from, n-1)
		} else {
			x.inProgress.remove(from)
		}
	}
	if to != "" {
		n, _ := x.inProgress.get(to)
		x.inProgress.set(to, n+1)
	}
}

// Task implements lifecycle.Tx. The transaction runs alone, so no other
// changes the task before it ends.
func (x *txn) Task(ctx context.Context, id string) (lifecycle.Task, error) {
	return getTask(x.tasks, id)
}

// getTask returns a copy of the task with the given ID.
func getTask(tasks records[lifecycle.Task], id string) (lifecycle.Task, error) {
	task, ok := tasks.get(id)
	if !ok {
		return lifecycle.Task{}, fmt.Errorf("memory: task %s: %w", id, lifecycle.ErrNotFound)
	}
	return clone(task), nil
}

// ListTasks implements lifecycle.Store. Positions are those of the tasks'
// creation.
func (s *Store) ListTasks(ctx context.Context, f lifecycle.TaskFilter) (lifecycle.TaskPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	var page lifecycle.TaskPage
	err := s.read(func(t *tables) error {
		var last int64
		for pos, task := range t.tasks.after(f.After) {
			if !taskMatches(&task, &f) {
				continue
			}
			if len(page.Tasks) == limit {
				page.Next = last
				break
			}
			page.Tasks = append(page.Tasks, clone(task))
			last = pos
		}
		return nil
	})
	return page, err
}

// taskMatches reports whether task passes the filter f.
func taskMatches(task *lifecycle.Task, f *lifecycle.TaskFilter) bool {
	project := ""
	if task.Context.Project != nil {
		project = *task.Context.Project
	}
	number := 0
	if task.PRNumber != nil {
		number = *task.PRNumber
	}
	head := ""
	if task.HeadSHA != nil {
		head = *task.HeadSHA
	}
	return (len(f.Statuses) == 0 || slices.Contains(f.Statuses, task.Status)) &&
		(f.AssigneeAgentID == "" || task.AssigneeAgentID != nil && *task.AssigneeAgentID == f.AssigneeAgentID) &&
		(f.Project == "" || project == f.Project) &&
		(f.PullRequest == lifecycle.PullRequestRef{} || task.PRNumber != nil &&
			f.PullRequest == lifecycle.PullRequestRef{Owner: task.PROwner, Repo: task.PRRepo, Number: number}) &&
		(f.HeadSHA == "" || head == f.HeadSHA) &&
		(!f.Ready || task.Ready()) &&
		(!f.Stalled || task.Stalled != nil)
}

// Dependents implements lifecycle.Tx. The memory Store keeps no index of
// the edges: it looks through every task, in creation order.
func (x *txn) Dependents(ctx context.Context, taskID string) ([]string, error) {
	var out []string
	for _, task := range x.tasks.all() {
		if slices.Contains(task.DependsOn, taskID) {
			out = append(out, task.ID)
		}
	}
	return out, nil
}

var _ lifecycle.StallMarker = (*Store)(nil)

// MarkStalled implements lifecycle.StallMarker. The transaction runs
// alone, so a task is marked once; the memory Store looks at every task,
// having no index.
func (s *Store) MarkStalled(ctx context.Context, p lifecycle.MarkStalledParams, fn func(tx lifecycle.Tx, marked []lifecycle.Task) error) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		x := tx.(*txn)
		now := lifecycle.NewTimestamp(p.Now)
		var marked []lifecycle.Task
		for _, task := range x.tasks.all() {
			if len(marked) >= p.Limit {
				break
			}
			if task.Stalled != nil || !stallDue(&task, p.Rules) {
				continue
			}
			task.Stalled = &lifecycle.Stall{Since: now, LastActivityAt: task.LastActivityAt}
			task.UpdatedAt = now
			task.Version++
			x.tasks.replace(task.ID, task)
			x.wroteTask(task.ID)
			marked = append(marked, clone(task))
		}
		return fn(tx, marked)
	})
}

// stallDue reports whether a task not stalled is due to stall by rules.
func stallDue(task *lifecycle.Task, rules []lifecycle.StallRule) bool {
	if task.Status != lifecycle.StatusInProgress && task.Status != lifecycle.StatusInReview || task.ActiveShipID != "" {
		return false // as the SQL Stores' index tasks_stall_due
	}
	for _, r := range rules {
		if r.Status == task.Status {
			return task.LastActivityAt.Before(r.Before)
		}
	}
	return false
}

// CreateTask implements lifecycle.Tx.
func (x *txn) CreateTask(ctx context.Context, task lifecycle.Task) error {
	if _, ok := x.identifiers.get(task.Identifier); ok {
		return fmt.Errorf("memory: create task %s: identifier %s: %w", task.ID, task.Identifier, lifecycle.ErrConflict)
	}
	if _, ok := x.tasks.insert(task.ID, storedTask(task)); !ok {
		return fmt.Errorf("memory: create task %s: %w", task.ID, lifecycle.ErrConflict)
	}
	x.identifiers.set(task.Identifier, task.ID)
	x.countWorking(nil, &task)
	return nil
}

// UpdateTask implements lifecycle.Tx. A task's ID, Identifier and
// CreatedAt never change: those of the stored task are kept.
func (x *txn) UpdateTask(ctx context.Context, task lifecycle.Task) error {
	old, ok := x.tasks.get(task.ID)
	if !ok {
		return fmt.Errorf("memory: update task %s: %w", task.ID, lifecycle.ErrNotFound)
	}
	task = storedTask(task)
	task.CreatedAt = old.CreatedAt
	if task.Identifier != old.Identifier {
		if _, taken := x.identifiers.get(task.Identifier); taken {
			return fmt.Errorf("memory: update task %s: identifier %s: %w", task.ID, task.Identifier, lifecycle.ErrConflict)
		}
		x.identifiers.remove(old.Identifier)
		x.identifiers.set(task.Identifier, task.ID)
	}
	x.tasks.replace(task.ID, task)
	x.wroteTask(task.ID)
	x.countWorking(&old, &task)
	return nil
}

// ClaimReconciliations implements lifecycle.Tx. The transaction runs
// alone, so the claim is atomic with respect to every other.
func (x *txn) ClaimReconciliations(ctx context.Context, p lifecycle.ClaimReconciliationsParams) ([]lifecycle.Task, error) {
	var due []lifecycle.Task
	for _, task := range x.tasks.all() {
		reviewing := task.Status == lifecycle.StatusInReview
		reopening := task.Status == lifecycle.StatusInProgress && !task.ReconcileAt.IsZero()
		if (reviewing || reopening) && !task.ReconcileAt.After(p.Now) {
			due = append(due, task)
		}
	}
	slices.SortStableFunc(due, func(a, b lifecycle.Task) int { return a.ReconcileAt.Compare(b.ReconcileAt.Time) })
	var claimed []lifecycle.Task
	for _, task := range due[:min(len(due), max(p.Limit, 0))] {
		task.ReconcileAt = lifecycle.NewTimestamp(p.Until)
		x.tasks.replace(task.ID, task)
		x.wroteTask(task.ID)
		claimed = append(claimed, clone(task))
	}
	return claimed, nil
}
