package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// This file holds the dependencies between tasks: a task names the tasks
// it depends on (dependsOn), and keeps those of them not done yet
// (waitingOn) with itself, so that reads and availableActions never read
// another task. While waitingOn is not empty, start is refused
// (dependency_not_done). When a task becomes done, the transaction that
// makes it done takes it out of the waitingOn of every task that depends
// on it, each with a task.updated event. A cancelled dependency keeps its
// dependents waiting, until a person takes it out of their dependsOn.

// maxDependencies is the most tasks a task may depend on.
const maxDependencies = 50

// checkDependencyIDs checks the form of the dependsOn of a request: at
// most maxDependencies task IDs, none twice.
func checkDependencyIDs(v *lifecycletype.Validator, ids []string) {
	if len(ids) > maxDependencies {
		v.Add("dependsOn", fmt.Sprintf("at most %d entries", maxDependencies))
		return
	}
	for i, dep := range ids {
		field := fmt.Sprintf("dependsOn[%d]", i)
		switch {
		case !validTaskID(dep):
			v.Add(field, "must be a task ID (tsk_...)")
		case slices.Index(ids, dep) < i:
			v.Add(field, "names "+dep+" a second time")
		}
	}
}

// dependencyTx returns tx as a DependencyTx, or false when the Store's
// transactions keep no edges.
func dependencyTx(tx Tx) (DependencyTx, bool) {
	d, ok := storeTx(tx).(DependencyTx)
	return d, ok
}

// resolveDependencies checks, in tx, that every task of ids exists, is not
// t and is in t's project, and returns the ones t waits on (those not
// done, in the order of ids) and the tasks of ids, as read.
func resolveDependencies(ctx context.Context, tx Tx, t *Task, ids []string) ([]string, []Task, error) {
	waiting := []string{}
	if _, ok := dependencyTx(tx); !ok && len(ids) > 0 {
		return nil, nil, lifecycletype.Invalid("dependsOn", "is not kept by this Service's Store (lifecycle.DependencyTx); leave it out")
	}
	deps := make([]Task, 0, len(ids))
	for i, dep := range ids {
		field := fmt.Sprintf("dependsOn[%d]", i)
		if dep == t.ID {
			return nil, nil, lifecycletype.Invalid(field, "is the task itself; a task cannot depend on itself")
		}
		d, err := tx.Task(ctx, dep)
		if errors.Is(err, ErrNotFound) {
			return nil, nil, lifecycletype.Invalid(field, "is not a task: no task "+dep)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("get dependency %s of task %s: %w", dep, t.ID, err)
		}
		if d.Project() != t.Project() {
			return nil, nil, lifecycletype.Invalid(field, fmt.Sprintf("task %s is in project %s, not %s: dependencies stay within one project",
				d.Identifier, projectWords(&d), projectWords(t)))
		}
		if d.Status != StatusDone {
			waiting = append(waiting, dep)
		}
		deps = append(deps, d)
	}
	return waiting, deps, nil
}

// projectWords names the project of t in a message.
func projectWords(t *Task) string {
	if p := t.Project(); p != "" {
		return fmt.Sprintf("%q", p)
	}
	return "(none)"
}

// findCycle reports the cycle that making t depend on deps (the tasks, as
// read) would close: the identifiers along it, from t back to t, or nil
// when there is none. It follows the stored dependsOn of the tasks it
// reaches, through tx.
func findCycle(ctx context.Context, tx Tx, t *Task, deps []Task) ([]string, error) {
	// from[x] is the task through which the search reached x; t reaches
	// each of deps, read already, and they reach what they depend on.
	from := map[string]string{}
	names := map[string]string{t.ID: t.Identifier}
	queue := []string{}
	reach := func(next, cur string) {
		if _, seen := from[next]; !seen {
			from[next] = cur
			queue = append(queue, next)
		}
	}
	for _, d := range deps {
		from[d.ID], names[d.ID] = t.ID, d.Identifier
	}
	for _, d := range deps {
		for _, next := range d.DependsOn {
			reach(next, d.ID)
		}
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == t.ID {
			var path []string
			for x := t.ID; ; {
				path = append(path, names[x])
				x = from[x]
				if x == t.ID {
					path = append(path, names[t.ID])
					break
				}
			}
			slices.Reverse(path)
			return path, nil
		}
		d, err := tx.Task(ctx, cur)
		if err != nil {
			return nil, fmt.Errorf("get task %s on the dependencies of task %s: %w", cur, t.ID, err)
		}
		names[cur] = d.Identifier
		for _, next := range d.DependsOn {
			reach(next, cur)
		}
	}
	return nil, nil
}

// SetDependenciesParams replaces the dependencies of a task. Its JSON form
// is the body of PUT /tasks/{id}/dependencies.
type SetDependenciesParams struct {
	// DependsOn are the IDs of the tasks the task depends on, at most 50,
	// each once: tasks of the same project, not the task itself, and none
	// that depends on it, directly or not. Empty (or left out, as every
	// member of the API's bodies may be) removes every dependency.
	DependsOn []string `json:"dependsOn"`

	// Actor is who changes the dependencies; events name it. Empty means
	// the system actor.
	Actor Actor `json:"-"`
}

// validate checks the form of p.
func (p *SetDependenciesParams) validate() error {
	var v lifecycletype.Validator
	checkDependencyIDs(&v, p.DependsOn)
	return v.Err()
}

// SetDependencies replaces the tasks a task depends on, and what it waits
// on with them: those not done. It emits task.updated with changedFields
// dependsOn (and waitingOn when that changed); the same set again changes
// nothing and emits nothing. It returns a *ValidationError naming the bad
// entry for a task that does not exist, is the task itself or is in
// another project, and a *ConflictError with reason dependency_cycle when
// a dependency depends on the task, directly or not.
func (s *Service) SetDependencies(ctx context.Context, taskID string, p SetDependenciesParams) (Task, error) {
	if err := p.validate(); err != nil {
		return Task{}, err
	}
	return s.changeTask(ctx, taskID, func(tx Tx, t *Task) (taskEvent, error) {
		if len(p.DependsOn) == 0 {
			p.DependsOn = []string{}
		}
		if slices.Equal(t.DependsOn, p.DependsOn) {
			return taskEvent{}, nil
		}
		waiting, deps, err := resolveDependencies(ctx, tx, t, p.DependsOn)
		if err != nil {
			return taskEvent{}, err
		}
		cycle, err := findCycle(ctx, tx, t, deps)
		if err != nil {
			return taskEvent{}, err
		}
		if cycle != nil {
			return taskEvent{}, &ConflictError{Reason: "dependency_cycle", AvailableActions: t.AvailableActions,
				Message: fmt.Sprintf("These dependencies would close a cycle: %s", strings.Join(cycle, " → "))}
		}
		t.DependsOn, t.WaitingOn = slices.Clone(p.DependsOn), waiting
		summary := fmt.Sprintf("Dependencies of task %s set: waiting on %d of %d", t.Identifier, len(waiting), len(p.DependsOn))
		if len(p.DependsOn) == 0 {
			summary = fmt.Sprintf("Dependencies of task %s removed", t.Identifier)
		}
		return taskEvent{typ: EventTaskUpdated, summary: summary, actor: p.Actor, notActivity: true}, nil
	})
}

// releaseDependents takes done, a task that just became done, out of the
// waitingOn of every task that depends on it, in tx: each such task gets a
// new version and a task.updated event whose changedFields hold
// waitingOn. actor is who made done done.
func (s *Service) releaseDependents(ctx context.Context, tx Tx, done *Task, actor Actor) error {
	deps, ok := dependencyTx(tx)
	if !ok {
		return nil // no task can depend on another
	}
	ids, err := deps.Dependents(ctx, done.ID)
	if err != nil {
		return fmt.Errorf("dependents of task %s: %w", done.ID, err)
	}
	for _, id := range ids {
		d, err := tx.Task(ctx, id)
		if err != nil {
			return fmt.Errorf("get dependent %s of task %s: %w", id, done.ID, err)
		}
		i := slices.Index(d.WaitingOn, done.ID)
		if i < 0 {
			continue
		}
		if err := s.countAgent(ctx, tx, &d, nil); err != nil {
			return err
		}
		s.setActions(&d)
		before := d
		d.WaitingOn = slices.Delete(slices.Clone(d.WaitingOn), i, i+1)
		d.UpdatedAt = s.now()
		d.Version++
		if err := s.countAgent(ctx, tx, &d, nil); err != nil { // start may come back: its cap counts
			return err
		}
		s.setActions(&d)
		if err := tx.UpdateTask(ctx, d); err != nil {
			return fmt.Errorf("update dependent %s of task %s: %w", id, done.ID, err)
		}
		summary := fmt.Sprintf("Task %s no longer waits for %s, which is done; %d dependencies left", d.Identifier, done.Identifier, len(d.WaitingOn))
		if len(d.WaitingOn) == 0 {
			summary = fmt.Sprintf("Task %s no longer waits for %s, which is done; every dependency is done", d.Identifier, done.Identifier)
		}
		if err := s.appendTaskEvent(ctx, tx, taskEvent{typ: EventTaskUpdated, summary: summary, actor: actor}, &before, &d); err != nil {
			return err
		}
	}
	return nil
}

// wordDependencyRefusal words the refusal of start for a task that waits
// on a dependency, err, with the identifier and status of the first one,
// read through tx: the table words it with the dependency's ID alone. Any
// other error is returned as it is.
func wordDependencyRefusal(ctx context.Context, tx Tx, t *Task, err error) error {
	var c *ConflictError
	if !errors.As(err, &c) || c.Reason != refusals[refDependencyNotDone].code || len(t.WaitingOn) == 0 {
		return err
	}
	d, rerr := tx.Task(ctx, t.WaitingOn[0])
	if rerr != nil {
		return err // the table's words, with the ID
	}
	c.Message = dependencyWords(t, d.Identifier+" ("+d.ID+"), which is "+string(d.Status))
	return c
}

// dependencyWords is the message of dependency_not_done: first names the
// first dependency t waits on.
func dependencyWords(t *Task, first string) string {
	more := ""
	if n := len(t.WaitingOn) - 1; n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("Task %s waits for task %s%s; start it once its dependencies are done (GET /tasks?ready=true lists the tasks that can start)",
		t.Identifier, first, more)
}

func (s *Service) handleSetDependencies(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params SetDependenciesParams
	if err := httpapi.DecodeAndCheck(w, r, &params, false, params.validate); err != nil {
		return err
	}
	params.Actor = p.Actor
	t, err := s.SetDependencies(httpapi.RequestContext(r), r.PathValue("id"), params)
	if err != nil {
		return err
	}
	return writeTask(w, http.StatusOK, &t, false)
}
