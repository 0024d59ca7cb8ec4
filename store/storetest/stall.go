package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
)

const noStallMarker = "the Store does not implement lifecycle.StallMarker: Config.StallAfter cannot be set"

// stallTask returns a task in status st whose last activity was at
// offset from base, not stalled.
func stallTask(n int, st lifecycle.Status, offset time.Duration) lifecycle.Task {
	task := minimalTask(n)
	task.Status, task.LastActivityAt, task.UpdatedAt = st, ts(offset), ts(offset)
	return task
}

// stallRules are the rules of the stall tests: in progress for an hour,
// in review for two.
func stallRules(now time.Time) []lifecycle.StallRule {
	return []lifecycle.StallRule{
		{Status: lifecycle.StatusInProgress, Before: now.Add(-time.Hour)},
		{Status: lifecycle.StatusInReview, Before: now.Add(-2 * time.Hour)},
	}
}

// markStalled calls MarkStalled and returns the IDs of the tasks it
// marked, sorted, after checking that each was marked as the contract
// says.
func markStalled(t *testing.T, s lifecycle.Store, p lifecycle.MarkStalledParams) []string {
	t.Helper()
	var marked []lifecycle.Task
	err := s.(lifecycle.StallMarker).MarkStalled(t.Context(), p, func(tx lifecycle.Tx, m []lifecycle.Task) error {
		marked = m
		for _, task := range m {
			// The transaction reads the marked task as it returned it.
			got, err := tx.Task(t.Context(), task.ID)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(task, got, taskOpts); diff != "" {
				t.Errorf("Tx.Task(%s) in the marking transaction (-marked +read):\n%s", task.ID, diff)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("MarkStalled: %v", err)
	}
	now := lifecycle.NewTimestamp(p.Now)
	var ids []string
	for _, task := range marked {
		want := lifecycle.Stall{Since: now, LastActivityAt: task.LastActivityAt}
		if task.Stalled == nil || *task.Stalled != want || !task.UpdatedAt.Equal(now.Time) {
			t.Errorf("marked %s: Stalled %+v, UpdatedAt %v; want %+v, %v", task.ID, task.Stalled, task.UpdatedAt, want, now)
		}
		stored, err := s.Task(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(task, stored, taskOpts); diff != "" {
			t.Errorf("stored %s differs from the marked task (-marked +stored):\n%s", task.ID, diff)
		}
		ids = append(ids, task.ID)
	}
	slices.Sort(ids)
	return ids
}

// testMarkStalled checks which tasks MarkStalled marks: those of a status
// a rule names whose last activity is before the rule's time, not
// stalled already, up to the limit; and what it writes.
func testMarkStalled(t *testing.T, h Harness) {
	implements[lifecycle.StallMarker](t, h, noStallMarker)
	s := open(t, h)
	now := base.Add(24 * time.Hour)
	stalled := stallTask(6, lifecycle.StatusInProgress, 0)
	stalled.Stalled = &lifecycle.Stall{Since: ts(time.Hour), LastActivityAt: ts(0)}
	shipping := stallTask(10, lifecycle.StatusInReview, 0)
	shipping.ActiveShipID = "op_shipping"
	tasks := []lifecycle.Task{
		stallTask(1, lifecycle.StatusInProgress, 22*time.Hour),                  // due: more than an hour
		stallTask(2, lifecycle.StatusInProgress, 23*time.Hour+time.Minute),      // not due yet
		stallTask(3, lifecycle.StatusInReview, 22*time.Hour-time.Second),        // due: more than two hours
		stallTask(4, lifecycle.StatusInReview, 22*time.Hour+time.Second),        // not due yet
		stallTask(5, lifecycle.StatusTodo, 0),                                   // no rule
		stalled,                                                                 // marked already
		stallTask(7, lifecycle.StatusBlocked, 0),                                // no rule
		stallTask(8, lifecycle.StatusInProgress, 23*time.Hour-time.Millisecond), // due, just
		stallTask(9, lifecycle.StatusInProgress, 23*time.Hour),                  // exactly an hour: not before
		shipping, // due but for its ship operation, which has timeouts of its own
	}
	create(t, s, tasks...)
	var revs map[string]int64
	revisioner, _ := s.(lifecycle.TaskRevisioner)
	if revisioner != nil {
		revs = map[string]int64{}
		for _, task := range tasks {
			rev, err := revisioner.TaskRevision(t.Context(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			revs[task.ID] = rev
		}
	}

	// Only in review watched: the in-progress tasks stay.
	got := markStalled(t, s, lifecycle.MarkStalledParams{Now: now, Rules: stallRules(now)[1:], Limit: 10})
	if want := []string{tasks[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("MarkStalled with the in_review rule marked %v, want %v", got, want)
	}
	// A limit of one marks one of the two due in progress.
	first := markStalled(t, s, lifecycle.MarkStalledParams{Now: now, Rules: stallRules(now), Limit: 1})
	if len(first) != 1 || (first[0] != tasks[0].ID && first[0] != tasks[7].ID) {
		t.Fatalf("MarkStalled with limit 1 marked %v, want one of %s, %s", first, tasks[0].ID, tasks[7].ID)
	}
	rest := markStalled(t, s, lifecycle.MarkStalledParams{Now: now.Add(time.Second), Rules: stallRules(now), Limit: 10})
	all := append(append(got, first...), rest...)
	slices.Sort(all)
	if want := []string{tasks[0].ID, tasks[2].ID, tasks[7].ID}; !slices.Equal(all, want) {
		t.Fatalf("MarkStalled marked %v in all, want %v", all, want)
	}
	if again := markStalled(t, s, lifecycle.MarkStalledParams{Now: now.Add(time.Hour), Rules: stallRules(now), Limit: 10}); len(again) != 0 {
		t.Errorf("a second sweep marked %v again", again)
	}
	for _, task := range tasks {
		stored, err := s.Task(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		isMarked := slices.Contains(all, task.ID)
		wantVersion := task.Version
		if isMarked {
			wantVersion++
		}
		if stored.Version != wantVersion {
			t.Errorf("%s: version %d, want %d", task.ID, stored.Version, wantVersion)
		}
		if !isMarked && !cmp.Equal(task.Stalled, stored.Stalled) {
			t.Errorf("%s, not marked: Stalled %+v, want %+v", task.ID, stored.Stalled, task.Stalled)
		}
		if revisioner != nil {
			rev, err := revisioner.TaskRevision(t.Context(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if changed := rev != revs[task.ID]; changed != isMarked {
				t.Errorf("%s: revision %d -> %d; marked %v", task.ID, revs[task.ID], rev, isMarked)
			}
		}
	}

	// Activity: the task is written without its mark, with its new last
	// activity; it may stall again.
	act, err := s.Task(t.Context(), tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	act.Stalled, act.LastActivityAt = nil, ts(24*time.Hour)
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.UpdateTask(t.Context(), act) }); err != nil {
		t.Fatal(err)
	}
	// An hour and a half later, it is due again, with those not due before.
	later := now.Add(90 * time.Minute)
	want := []string{act.ID, tasks[1].ID, tasks[3].ID, tasks[8].ID}
	if got := markStalled(t, s, lifecycle.MarkStalledParams{Now: later, Rules: stallRules(later), Limit: 10}); !slices.Equal(got, want) {
		t.Errorf("after activity and an hour and a half, MarkStalled marked %v, want %v", got, want)
	}
}

// testMarkStalledRollsBack checks that nothing MarkStalled marked is kept
// when fn fails.
func testMarkStalledRollsBack(t *testing.T, h Harness) {
	implements[lifecycle.StallMarker](t, h, noStallMarker)
	s := open(t, h)
	task := stallTask(1, lifecycle.StatusInProgress, 0)
	create(t, s, task)
	now := base.Add(24 * time.Hour)
	boom := errors.New("boom")
	err := s.(lifecycle.StallMarker).MarkStalled(t.Context(), lifecycle.MarkStalledParams{Now: now, Rules: stallRules(now), Limit: 10},
		func(tx lifecycle.Tx, marked []lifecycle.Task) error {
			if len(marked) != 1 {
				t.Errorf("marked %d tasks, want 1", len(marked))
			}
			return boom
		})
	if !errors.Is(err, boom) {
		t.Fatalf("MarkStalled error = %v, want fn's", err)
	}
	stored, err := s.Task(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Stalled != nil || stored.Version != task.Version {
		t.Errorf("after a failed fn: Stalled %+v, version %d; want nil, %d", stored.Stalled, stored.Version, task.Version)
	}
}

// testConcurrentMarkStalled has several processes mark the same due tasks
// at once, in small batches: each task is marked by exactly one of them.
func testConcurrentMarkStalled(t *testing.T, h Harness) {
	implements[lifecycle.StallMarker](t, h, noStallMarker)
	s := open(t, h)
	marker := s.(lifecycle.StallMarker)
	tasks := make([]lifecycle.Task, concurrentItems)
	ids := make([]string, len(tasks))
	for i := range tasks {
		st := lifecycle.StatusInProgress
		if i%2 == 1 {
			st = lifecycle.StatusInReview
		}
		tasks[i] = stallTask(i, st, time.Duration(i)*time.Millisecond)
		ids[i] = tasks[i].ID
	}
	create(t, s, tasks...)
	now := base.Add(24 * time.Hour)
	claims := make([][]string, concurrentClaimers)
	var wg sync.WaitGroup
	for c := range concurrentClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(claims[c]) <= concurrentItems {
				var n int
				err := marker.MarkStalled(t.Context(), lifecycle.MarkStalledParams{Now: now, Rules: stallRules(now), Limit: concurrentBatch},
					func(tx lifecycle.Tx, marked []lifecycle.Task) error {
						if len(marked) > concurrentBatch {
							return fmt.Errorf("marked %d with limit %d", len(marked), concurrentBatch)
						}
						n = len(marked)
						claims[c] = append(claims[c], taskIDs(marked)...)
						return nil
					})
				if err != nil {
					t.Errorf("marker %d: %v", c, err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	claimedOnce(t, 0, ids, claims)
	for _, task := range tasks {
		stored, err := s.Task(t.Context(), task.ID)
		if err != nil || stored.Stalled == nil || stored.Version != task.Version+1 {
			t.Errorf("%s after the markers: Stalled %+v, version %d, %v; want marked once", task.ID, stored.Stalled, stored.Version, err)
		}
	}
}

// testListStalledTasks checks TaskFilter.Stalled.
func testListStalledTasks(t *testing.T, h Harness) {
	s := open(t, h)
	var tasks []lifecycle.Task
	var want []string
	for i := range 7 {
		task := stallTask(i, lifecycle.StatusInProgress, 0)
		if i%3 == 0 {
			task.Stalled = &lifecycle.Stall{Since: ts(time.Hour), LastActivityAt: task.LastActivityAt}
			want = append(want, task.ID)
		}
		if i == 3 {
			task.Status = lifecycle.StatusInReview
		}
		tasks = append(tasks, task)
	}
	create(t, s, tasks...)
	var got []string
	f := lifecycle.TaskFilter{Stalled: true, Limit: 2}
	for {
		page, err := s.ListTasks(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if task.Stalled == nil {
				t.Errorf("listed %s, which is not stalled", task.ID)
			}
			got = append(got, task.ID)
		}
		if page.Next == 0 {
			break
		}
		f.After = page.Next
	}
	if !slices.Equal(got, want) {
		t.Errorf("stalled tasks listed %v, want %v in creation order", got, want)
	}
	page, err := s.ListTasks(t.Context(), lifecycle.TaskFilter{Stalled: true, Statuses: []lifecycle.Status{lifecycle.StatusInReview}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ids := taskIDs(page.Tasks); !slices.Equal(ids, []string{tasks[3].ID}) {
		t.Errorf("stalled tasks in review: %v, want %s", ids, tasks[3].ID)
	}
}
