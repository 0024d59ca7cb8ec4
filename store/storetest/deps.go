package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tasklifecycle/lifecycle"
)

// dependents returns Tx.Dependents of id, read in a transaction of its own.
func dependents(t *testing.T, s lifecycle.Store, id string) []string {
	t.Helper()
	var out []string
	update(t, s, func(tx lifecycle.Tx) error {
		d, ok := tx.(lifecycle.DependencyTx)
		if !ok {
			t.Fatal("the Store's Tx is not a lifecycle.DependencyTx")
		}
		var err error
		out, err = d.Dependents(t.Context(), id)
		return err
	})
	return out
}

// checkDependents compares the dependents of each task of want with its
// IDs, in creation order.
func checkDependents(t *testing.T, s lifecycle.Store, when string, want map[string][]string) {
	t.Helper()
	for id, ids := range want {
		if diff := cmp.Diff(ids, dependents(t, s, id), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Dependents(%s) (-want +got):\n%s", when, id, diff)
		}
	}
}

// testDependencyEdges: the edges CreateTask and UpdateTask keep from each
// task's DependsOn give Dependents, in creation order, whether or not the
// transaction read the task first; a rolled back change keeps the edges it
// changed.
func testDependencyEdges(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := t.Context()
	a, b, c, d, e := minimalTask(1), minimalTask(2), minimalTask(3), minimalTask(4), minimalTask(5)
	d.DependsOn, d.WaitingOn = []string{a.ID, b.ID}, []string{b.ID}
	e.DependsOn, e.WaitingOn = []string{a.ID}, []string{a.ID}
	create(t, s, a, b, c)
	create(t, s, d, e)

	got, err := s.Task(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got, taskOpts); diff != "" {
		t.Errorf("a task with dependencies read back (-want +got):\n%s", diff)
	}
	got, err = s.Task(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DependsOn == nil || got.WaitingOn == nil || len(got.DependsOn)+len(got.WaitingOn) != 0 {
		t.Errorf("a task without dependencies read back with DependsOn %#v, WaitingOn %#v; want empty lists, not nil", got.DependsOn, got.WaitingOn)
	}
	checkDependents(t, s, "created", map[string][]string{a.ID: {d.ID, e.ID}, b.ID: {d.ID}, c.ID: nil, d.ID: nil, "tsk_unknown": nil})

	// Read for update, then changed.
	update(t, s, func(tx lifecycle.Tx) error {
		cur, err := tx.Task(ctx, d.ID)
		if err != nil {
			return err
		}
		cur.DependsOn, cur.WaitingOn = []string{b.ID, c.ID}, []string{c.ID}
		cur.Version++
		return tx.UpdateTask(ctx, cur)
	})
	checkDependents(t, s, "after an update read first", map[string][]string{a.ID: {e.ID}, b.ID: {d.ID}, c.ID: {d.ID}})

	// Changed without a read in the transaction: a task read before.
	stale, err := s.Task(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	stale.DependsOn, stale.WaitingOn = []string{c.ID}, []string{}
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateTask(ctx, stale) })
	checkDependents(t, s, "after an update without a read", map[string][]string{a.ID: nil, c.ID: {d.ID, e.ID}})

	// Other changes keep the edges.
	update(t, s, func(tx lifecycle.Tx) error {
		cur, err := tx.Task(ctx, d.ID)
		if err != nil {
			return err
		}
		cur.Title = "retitled"
		return tx.UpdateTask(ctx, cur)
	})
	checkDependents(t, s, "after an update of another member", map[string][]string{b.ID: {d.ID}, c.ID: {d.ID, e.ID}})

	// A change rolled back keeps the edges as they were, and so does a
	// second change of the same task in the transaction.
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx lifecycle.Tx) error {
		cur, err := tx.Task(ctx, d.ID)
		if err != nil {
			return err
		}
		cur.DependsOn, cur.WaitingOn = []string{a.ID}, []string{a.ID}
		if err := tx.UpdateTask(ctx, cur); err != nil {
			return err
		}
		if ids, err := tx.(lifecycle.DependencyTx).Dependents(ctx, a.ID); err != nil || !cmp.Equal(ids, []string{d.ID}) {
			t.Errorf("Dependents(a) in the transaction that made d depend on it = %v, %v; want [%s]", ids, err, d.ID)
		}
		cur.DependsOn, cur.WaitingOn = []string{a.ID, b.ID}, []string{a.ID}
		if err := tx.UpdateTask(ctx, cur); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	checkDependents(t, s, "after a rollback", map[string][]string{a.ID: nil, b.ID: {d.ID}, c.ID: {d.ID, e.ID}})

	// Every dependency removed.
	update(t, s, func(tx lifecycle.Tx) error {
		cur, err := tx.Task(ctx, d.ID)
		if err != nil {
			return err
		}
		cur.DependsOn, cur.WaitingOn = []string{}, []string{}
		return tx.UpdateTask(ctx, cur)
	})
	checkDependents(t, s, "after removing them", map[string][]string{b.ID: nil, c.ID: {e.ID}})
}

// testListTasksReady: TaskFilter.Ready keeps the tasks in todo with an
// empty WaitingOn, in creation order, page by page, with the other
// filters; a task whose last dependency is done becomes ready.
func testListTasksReady(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := t.Context()
	a, b, c, d, e, f := minimalTask(1), minimalTask(2), minimalTask(3), minimalTask(4), minimalTask(5), minimalTask(6)
	c.Status = lifecycle.StatusInProgress
	b.DependsOn, b.WaitingOn = []string{a.ID}, []string{a.ID}
	d.DependsOn, d.WaitingOn = []string{c.ID}, []string{} // c's status is the Service's business
	e.Context.Project = ptr("api")
	f.Status = lifecycle.StatusDone
	create(t, s, a, c)
	create(t, s, b, d, e, f)
	checkFilters(t, s, []filterCase{
		{"ready", lifecycle.TaskFilter{Ready: true}, []string{a.ID, d.ID, e.ID}},
		{"ready in a project", lifecycle.TaskFilter{Ready: true, Project: "api"}, []string{e.ID}},
		{"ready in progress", lifecycle.TaskFilter{Ready: true, Statuses: []lifecycle.Status{lifecycle.StatusInProgress}}, nil},
		{"ready in todo", lifecycle.TaskFilter{Ready: true, Statuses: []lifecycle.Status{lifecycle.StatusTodo}}, []string{a.ID, d.ID, e.ID}},
	})

	// Page by page.
	var paged []string
	var after int64
	for range 5 {
		page, err := s.ListTasks(ctx, lifecycle.TaskFilter{Ready: true, After: after, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, taskIDs(page.Tasks)...)
		if after = page.Next; after == 0 {
			break
		}
	}
	if diff := cmp.Diff([]string{a.ID, d.ID, e.ID}, paged); diff != "" {
		t.Errorf("ready tasks page by page (-want +got):\n%s", diff)
	}

	// b's dependency is done: b is ready; a started is not.
	update(t, s, func(tx lifecycle.Tx) error {
		cur, err := tx.Task(ctx, b.ID)
		if err != nil {
			return err
		}
		cur.WaitingOn = []string{}
		if err := tx.UpdateTask(ctx, cur); err != nil {
			return err
		}
		cur, err = tx.Task(ctx, a.ID)
		if err != nil {
			return err
		}
		cur.Status = lifecycle.StatusInProgress
		return tx.UpdateTask(ctx, cur)
	})
	checkFilters(t, s, []filterCase{
		{"ready after changes", lifecycle.TaskFilter{Ready: true}, []string{b.ID, d.ID, e.ID}},
		{"not filtered", lifecycle.TaskFilter{}, []string{a.ID, c.ID, b.ID, d.ID, e.ID, f.ID}},
	})
}
