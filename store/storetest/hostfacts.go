package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tasklifecycle/lifecycle"
)

// This file holds the tests of what the Store keeps of code hosts: the
// facts stored with tasks, host reviews, checks replaced per source,
// provider deliveries, and the claims that processes sharing one store
// divide work by.

// readTask returns the task with the given ID as Store.Task, Tx.Task and
// ListTasks read it, in that order.
func readTask(t *testing.T, s lifecycle.Store, id string) []lifecycle.Task {
	t.Helper()
	var out []lifecycle.Task
	got, err := s.Task(t.Context(), id)
	if err != nil {
		t.Fatalf("Task(%s): %v", id, err)
	}
	out = append(out, got)
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Task(t.Context(), id)
		out = append(out, got)
		return err
	})
	page, err := s.ListTasks(t.Context(), lifecycle.TaskFilter{Limit: 1000})
	if err != nil {
		t.Fatalf("ListTasks: %v", err)
	}
	i := slices.IndexFunc(page.Tasks, func(task lifecycle.Task) bool { return task.ID == id })
	if i < 0 {
		t.Fatalf("ListTasks does not list %s", id)
	}
	return append(out, page.Tasks[i])
}

// checkTasks fails t unless every read of each task gives want.
func checkTasks(t *testing.T, s lifecycle.Store, when string, want ...lifecycle.Task) {
	t.Helper()
	for _, w := range want {
		for i, got := range readTask(t, s, w.ID) {
			if diff := cmp.Diff(w, got, taskOpts); diff != "" {
				t.Errorf("%s, %s read by %s (-want +got):\n%s", when, w.ID, []string{"Task", "Tx.Task", "ListTasks"}[i], diff)
			}
		}
	}
}

func testHostFactsRoundTrip(t *testing.T, h Harness) {
	s := open(t, h)
	full := fullTask(1) // every fact set
	partial := minimalTask(2)
	partial.Status = lifecycle.StatusInReview
	partial.Facts = lifecycle.Facts{PRState: lifecycle.PullRequestOpen, CI: lifecycle.CIRunning}
	partial.ReconcileAt = ts(time.Hour)
	create(t, s, full, partial)
	checkTasks(t, s, "after CreateTask", full, partial)

	// Every fact changes, to another value or to zero.
	full.Facts = lifecycle.Facts{
		PRState: lifecycle.PullRequestOpen, CI: lifecycle.CIPassed, CICheckedAt: ptr(ts(2 * time.Hour)),
		HostDecision: lifecycle.DecisionChangesRequested, CheckedAt: ptr(ts(3 * time.Hour)),
	}
	full.ReconcileAt, full.ShipMerging, full.Version = ts(4*time.Hour), false, full.Version+1
	partial.Facts = fullTask(2).Facts
	partial.ReconcileAt, partial.ShipMerging, partial.ActiveShipID = lifecycle.Timestamp{}, true, "shp_x"
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(tx.UpdateTask(t.Context(), full), tx.UpdateTask(t.Context(), partial))
	})
	checkTasks(t, s, "after UpdateTask", full, partial)
}

func testReviewHostFields(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	reviews := []lifecycle.Review{
		{ID: "rev_host", TaskID: task.ID, SubmissionID: "sub_1", Reviewer: lifecycle.Actor{ID: "octocat", Role: lifecycle.RoleReviewer},
			Outcome: lifecycle.ReviewApproved, SubmittedAt: ts(time.Minute), HeadSHA: "1111111111111111111111111111111111111111", HostID: "PRR_kwDOA1"},
		{ID: "rev_posted", TaskID: task.ID, SubmissionID: "sub_1", Reviewer: lifecycle.Actor{ID: "r1", Role: lifecycle.RoleReviewer},
			Outcome: lifecycle.ReviewCommented, Body: "nit", SubmittedAt: ts(2 * time.Minute), HeadSHA: "2222222222222222222222222222222222222222"},
		{ID: "rev_bare", TaskID: task.ID, SubmissionID: "sub_1", Reviewer: lifecycle.Actor{ID: "r2", Role: lifecycle.RoleReviewer},
			Outcome: lifecycle.ReviewCommented, SubmittedAt: ts(3 * time.Minute)},
	}
	update(t, s, func(tx lifecycle.Tx) error {
		errs := []error{tx.CreateSubmission(t.Context(), submission(task.ID, "sub_1"))}
		for _, r := range reviews {
			errs = append(errs, tx.CreateReview(t.Context(), r))
		}
		return errors.Join(errs...)
	})
	got, err := s.Reviews(t.Context(), "sub_1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reviews, got, equateEmpty); diff != "" {
		t.Errorf("Reviews (-want +got):\n%s", diff)
	}
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Reviews(t.Context(), "sub_1")
		if diff := cmp.Diff(reviews, got, equateEmpty); err == nil && diff != "" {
			t.Errorf("Tx.Reviews (-want +got):\n%s", diff)
		}
		return err
	})
}

func testShipLeaseOwner(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	op := shipOp(task.ID, "shp_1", lifecycle.ShipRunning, 0)
	op.LeaseOwner, op.Attempts, op.StartedAt = "runner-a", 1, ptr(ts(0))
	opts := cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.ShipOperation{}, "AvailableActions")}
	check := func(when string) {
		t.Helper()
		got, err := s.ShipOperation(t.Context(), op.OperationID)
		if diff := cmp.Diff(op, got, opts); err != nil || diff != "" {
			t.Errorf("%s: ShipOperation = %v (-want +got):\n%s", when, err, diff)
		}
		update(t, s, func(tx lifecycle.Tx) error {
			got, err := tx.ShipOperation(t.Context(), op.OperationID)
			if diff := cmp.Diff(op, got, opts); err == nil && diff != "" {
				t.Errorf("%s: Tx.ShipOperation (-want +got):\n%s", when, diff)
			}
			return err
		})
	}
	update(t, s, func(tx lifecycle.Tx) error { return tx.CreateShipOperation(t.Context(), op) })
	check("created")
	for _, owner := range []string{"runner-b", ""} {
		op.LeaseOwner, op.LeaseUntil = owner, ts(time.Minute)
		update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateShipOperation(t.Context(), op) })
		check("owner " + owner)
	}
}

func testListTasksByPullRequestAndHead(t *testing.T, h Harness) {
	s := open(t, h)
	const sha1, sha2, sha3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	task := func(n int, st lifecycle.Status, owner, repo string, number int, head string) lifecycle.Task {
		task := fullTask(n)
		task.Status, task.PROwner, task.PRRepo, task.PRNumber, task.HeadSHA = st, owner, repo, ptr(number), ptr(head)
		return task
	}
	a := task(1, lifecycle.StatusInReview, "acme", "web", 7, sha1)
	b := task(2, lifecycle.StatusInReview, "acme", "web", 8, sha1) // another number
	c := task(3, lifecycle.StatusInReview, "acme", "api", 7, sha2) // another repo
	d := task(4, lifecycle.StatusDone, "other", "web", 7, sha2)    // another owner
	e := task(5, lifecycle.StatusDone, "acme", "web", 7, sha3)     // the same pull request, done
	f := minimalTask(6)                                            // no pull request, no head
	create(t, s, a, b, c, d, e, f)
	pr := lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 7}
	inReview := []lifecycle.Status{lifecycle.StatusInReview}
	checkFilters(t, s, []filterCase{
		{"pull request", lifecycle.TaskFilter{PullRequest: pr}, []string{a.ID, e.ID}},
		{"pull request in review", lifecycle.TaskFilter{PullRequest: pr, Statuses: inReview}, []string{a.ID}},
		{"pull request done", lifecycle.TaskFilter{PullRequest: pr, Statuses: []lifecycle.Status{lifecycle.StatusDone}}, []string{e.ID}},
		{"unknown number", lifecycle.TaskFilter{PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: 9}}, nil},
		{"unknown repo", lifecycle.TaskFilter{PullRequest: lifecycle.PullRequestRef{Owner: "other", Repo: "api", Number: 7}}, nil},
		{"head", lifecycle.TaskFilter{HeadSHA: sha1}, []string{a.ID, b.ID}},
		{"head in review", lifecycle.TaskFilter{HeadSHA: sha2, Statuses: inReview}, []string{c.ID}},
		{"head and pull request", lifecycle.TaskFilter{HeadSHA: sha3, PullRequest: pr}, []string{e.ID}},
		{"head of another pull request", lifecycle.TaskFilter{HeadSHA: sha2, PullRequest: pr}, nil},
		{"unknown head", lifecycle.TaskFilter{HeadSHA: "4444444444444444444444444444444444444444"}, nil},
	})
}

// testPutChecksReplace checks PutChecks with Replace: the checks of one
// source at one commit become those given, and nothing else changes.
func testPutChecksReplace(t *testing.T, h Harness) {
	s := open(t, h)
	task, other := minimalTask(1), minimalTask(2)
	create(t, s, task, other)
	const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	check := func(taskID, sha string, source lifecycle.CheckSource, name string, st lifecycle.CheckStatus) lifecycle.Check {
		return lifecycle.Check{TaskID: taskID, HeadSHA: sha, Source: source, Name: name, Status: st, UpdatedAt: ts(0)}
	}
	var (
		build    = check(task.ID, sha1, lifecycle.SourceProvider, "build", lifecycle.CheckRunning)
		lint     = check(task.ID, sha1, lifecycle.SourceProvider, "lint", lifecycle.CheckPassed)
		unit     = check(task.ID, sha1, lifecycle.SourceReported, "unit", lifecycle.CheckPassed)
		oldHead  = check(task.ID, sha2, lifecycle.SourceProvider, "build", lifecycle.CheckFailed)
		elsewise = check(other.ID, sha1, lifecycle.SourceProvider, "build", lifecycle.CheckPassed)
	)
	put := func(replace bool, checks ...lifecycle.Check) func(tx lifecycle.Tx) error {
		return func(tx lifecycle.Tx) error {
			c := checks[0]
			return tx.PutChecks(t.Context(), lifecycle.PutChecksParams{TaskID: c.TaskID, HeadSHA: c.HeadSHA, Source: c.Source, Checks: checks, Replace: replace})
		}
	}
	update(t, s, func(tx lifecycle.Tx) error {
		var errs []error
		for _, c := range []lifecycle.Check{build, lint, unit, oldHead, elsewise} {
			errs = append(errs, put(false, c)(tx))
		}
		return errors.Join(errs...)
	})
	expect := func(when, taskID, sha string, want ...lifecycle.Check) {
		t.Helper()
		got, err := s.Checks(t.Context(), taskID, sha)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("%s: Checks(%s, %s) (-want +got):\n%s", when, taskID, sha, diff)
		}
	}
	// build is replaced, lint is dropped, e2e is added; the reported check,
	// the other head and the other task keep theirs.
	passed := check(task.ID, sha1, lifecycle.SourceProvider, "build", lifecycle.CheckPassed)
	passed.URL, passed.UpdatedAt = ptr("https://ci.example.com/2"), ts(time.Minute)
	e2e := check(task.ID, sha1, lifecycle.SourceProvider, "e2e", lifecycle.CheckRunning)
	update(t, s, func(tx lifecycle.Tx) error {
		if err := put(true, e2e, passed)(tx); err != nil {
			return err
		}
		got, err := tx.Checks(t.Context(), task.ID, sha1)
		if diff := cmp.Diff([]lifecycle.Check{passed, e2e, unit}, got, equateEmpty); err == nil && diff != "" {
			t.Errorf("Tx.Checks after PutChecks(Replace) in the same transaction (-want +got):\n%s", diff)
		}
		return err
	})
	expect("after replacing", task.ID, sha1, passed, e2e, unit)
	expect("after replacing", task.ID, sha2, oldHead)
	expect("after replacing", other.ID, sha1, elsewise)

	// An empty set deletes the source's checks, and only them.
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.PutChecks(t.Context(), lifecycle.PutChecksParams{TaskID: task.ID, HeadSHA: sha1, Source: lifecycle.SourceProvider, Checks: []lifecycle.Check{}, Replace: true})
	})
	expect("after replacing with none", task.ID, sha1, unit)
	expect("after replacing with none", task.ID, sha2, oldHead)
	expect("after replacing with none", other.ID, sha1, elsewise)
	update(t, s, func(tx lifecycle.Tx) error {
		return tx.PutChecks(t.Context(), lifecycle.PutChecksParams{TaskID: other.ID, HeadSHA: sha1, Source: lifecycle.SourceProvider, Replace: true})
	})
	expect("after replacing with nil", other.ID, sha1)
	expect("after replacing with nil", task.ID, sha1, unit)
}

func testProviderDeliveries(t *testing.T, h Harness) {
	s := open(t, h)
	record := func(d lifecycle.ProviderDelivery) error {
		return s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.RecordProviderDelivery(t.Context(), d) })
	}
	expect := func(when string, want lifecycle.ProviderDelivery) {
		t.Helper()
		got, err := s.ProviderDelivery(t.Context(), want.Source, want.ID)
		if err != nil || got.Source != want.Source || got.ID != want.ID || !got.ReceivedAt.Equal(want.ReceivedAt) {
			t.Errorf("%s: ProviderDelivery(%s, %s) = %+v, %v; want %+v", when, want.Source, want.ID, got, err, want)
		}
	}
	gone := func(when, source, id string) {
		t.Helper()
		if _, err := s.ProviderDelivery(t.Context(), source, id); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("%s: ProviderDelivery(%s, %s) error = %v, want ErrNotFound", when, source, id, err)
		}
	}
	first := lifecycle.ProviderDelivery{Source: "github", ID: "d1", ReceivedAt: base}
	second := lifecycle.ProviderDelivery{Source: "github", ID: "d2", ReceivedAt: base.Add(time.Hour)}
	sameID := lifecycle.ProviderDelivery{Source: "gitlab", ID: "d1", ReceivedAt: base.Add(2 * time.Hour)}
	for _, d := range []lifecycle.ProviderDelivery{first, second, sameID} {
		if err := record(d); err != nil {
			t.Fatalf("RecordProviderDelivery(%s, %s): %v", d.Source, d.ID, err)
		}
	}
	for _, d := range []lifecycle.ProviderDelivery{first, second, sameID} {
		expect("recorded", d)
	}
	gone("never recorded", "github", "d9")
	gone("never recorded", "bitbucket", "d1")

	again := first
	again.ReceivedAt = base.Add(3 * time.Hour)
	if err := record(again); !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("RecordProviderDelivery(recorded) error = %v, want ErrConflict", err)
	}
	expect("recorded again", first)

	// A delivery recorded by a transaction that failed is not recorded.
	boom := errors.New("boom")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		if err := tx.RecordProviderDelivery(t.Context(), lifecycle.ProviderDelivery{Source: "github", ID: "d9", ReceivedAt: base}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want the function's error", err)
	}
	gone("rolled back", "github", "d9")

	// Pruning before the second's time deletes the first only.
	prune := func(before time.Time, want int64) {
		t.Helper()
		if n, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: before}); err != nil || n != (lifecycle.PruneResult{ProviderDeliveries: want}) {
			t.Errorf("Prune(%v) = %+v, %v; want %d provider deliveries", before, n, err, want)
		}
	}
	prune(second.ReceivedAt, 1)
	gone("deleted", "github", "d1")
	expect("kept", second)
	expect("kept", sameID)
	prune(base.Add(3*time.Hour), 2)
	prune(base.Add(3*time.Hour), 0)
	gone("deleted", "gitlab", "d1")
	// A delivery forgotten may be recorded again.
	if err := record(again); err != nil {
		t.Errorf("RecordProviderDelivery(deleted) error = %v", err)
	}
	expect("recorded after deletion", again)
}

// testConcurrentProviderDeliveries records one delivery from many
// transactions at once: exactly one records it, the others get
// ErrConflict, as when a host delivers a webhook twice to two processes.
func testConcurrentProviderDeliveries(t *testing.T, h Harness) {
	s := open(t, h)
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := lifecycle.ProviderDelivery{Source: "github", ID: "d1", ReceivedAt: base.Add(time.Duration(w) * time.Millisecond)}
			errs[w] = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.RecordProviderDelivery(t.Context(), d) })
		}()
	}
	wg.Wait()
	recorded := 0
	for w, err := range errs {
		switch {
		case err == nil:
			recorded++
		case !errors.Is(err, lifecycle.ErrConflict):
			t.Errorf("writer %d: error %v, want nil or ErrConflict", w, err)
		}
	}
	if recorded != 1 {
		t.Errorf("%d of %d concurrent records of one delivery succeeded, want 1", recorded, writers)
	}
}

func testClaimReconciliations(t *testing.T, h Harness) {
	s := open(t, h)
	task := func(n int, st lifecycle.Status, at lifecycle.Timestamp) lifecycle.Task {
		task := fullTask(n)
		task.Status, task.ReconcileAt = st, at
		return task
	}
	var (
		second = task(1, lifecycle.StatusInReview, ts(time.Minute))
		fourth = task(2, lifecycle.StatusInReview, ts(5*time.Minute)) // due exactly at the claim
		later  = task(3, lifecycle.StatusInReview, ts(10*time.Minute))
		third  = task(4, lifecycle.StatusInReview, ts(2*time.Minute))
		// A zero ReconcileAt is not after any claim's Now: due at once.
		first = task(5, lifecycle.StatusInReview, lifecycle.Timestamp{})
		// In progress with a ReconcileAt: its pull request was closed at
		// the host, and is read for a reopen.
		closed = task(6, lifecycle.StatusInProgress, ts(3*time.Minute))
	)
	tasks := []lifecycle.Task{second, fourth, later, closed, third, first} // not in ReconcileAt order
	for i, st := range []lifecycle.Status{lifecycle.StatusTodo, lifecycle.StatusBlocked, lifecycle.StatusDone, lifecycle.StatusCancelled} {
		tasks = append(tasks, task(10+i, st, ts(0)))
	}
	// In progress with no ReconcileAt: its agent works on it.
	tasks = append(tasks, task(20, lifecycle.StatusInProgress, lifecycle.Timestamp{}))
	create(t, s, tasks...)

	claim := func(now, until time.Time, limit int) []lifecycle.Task {
		t.Helper()
		var got []lifecycle.Task
		update(t, s, func(tx lifecycle.Tx) error {
			var err error
			got, err = tx.ClaimReconciliations(t.Context(), lifecycle.ClaimReconciliationsParams{Now: now, Until: until, Limit: limit})
			return err
		})
		return got
	}
	// expect checks that claimed are want, claimed until until, both as
	// returned and as stored, and nothing else of them changed.
	expect := func(when string, claimed []lifecycle.Task, until time.Time, want ...lifecycle.Task) {
		t.Helper()
		for i := range want {
			want[i].ReconcileAt = lifecycle.NewTimestamp(until)
		}
		if diff := cmp.Diff(want, claimed, taskOpts); diff != "" {
			t.Errorf("%s: claimed (-want +got):\n%s", when, diff)
		}
		for _, w := range want {
			got, err := s.Task(t.Context(), w.ID)
			if diff := cmp.Diff(w, got, taskOpts); err != nil || diff != "" {
				t.Errorf("%s: stored %s = %v (-want +got):\n%s", when, w.ID, err, diff)
			}
		}
	}
	now, until := base.Add(5*time.Minute), base.Add(time.Hour)

	// A claim in a transaction that fails is no claim.
	boom := errors.New("boom")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		got, err := tx.ClaimReconciliations(t.Context(), lifecycle.ClaimReconciliationsParams{Now: now, Until: until, Limit: 10})
		if err == nil && len(got) != 5 {
			t.Errorf("claim in a failing transaction took %d tasks, want 5", len(got))
		}
		return errors.Join(err, boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want the function's error", err)
	}

	// Earliest first, up to the limit; only tasks in review (or in
	// progress with a ReconcileAt) that are due.
	expect("claim at +5m, limit 2", claim(now, until, 2), until, first, second)
	expect("claim at +5m, limit 10", claim(now, until, 10), until, third, closed, fourth)
	if got := claim(now, until, 10); len(got) != 0 {
		t.Errorf("claim at +5m again = %v, want none", taskIDs(got))
	}
	expect("claim at +30m", claim(base.Add(30*time.Minute), base.Add(2*time.Hour), 10), base.Add(2*time.Hour), later)
	// A claimed task is not claimed again before its claim's Until.
	if got := claim(until.Add(-time.Millisecond), base.Add(3*time.Hour), 10); len(got) != 0 {
		t.Errorf("claim just before the claims end = %v, want none", taskIDs(got))
	}
	again := claim(until, base.Add(3*time.Hour), 10)
	slices.SortFunc(again, func(a, b lifecycle.Task) int { return strings.Compare(a.ID, b.ID) })
	expect("claim when the claims end", again, base.Add(3*time.Hour), second, fourth, third, first, closed)
	// The others were never claimed.
	for _, task := range tasks[6:] {
		if got, err := s.Task(t.Context(), task.ID); err != nil || !got.ReconcileAt.Equal(task.ReconcileAt.Time) {
			t.Errorf("task %s in %s: ReconcileAt %v, %v; want unchanged %v", task.ID, task.Status, got.ReconcileAt, err, task.ReconcileAt)
		}
	}
}

// updater returns s.Update, or UpdateRelaxed when relaxed is set and s
// has it: the Service claims through UpdateRelaxed.
func updater(s lifecycle.Store, relaxed bool) func(context.Context, func(lifecycle.Tx) error) error {
	if r, ok := s.(lifecycle.RelaxedUpdater); ok && relaxed {
		return r.UpdateRelaxed
	}
	return s.Update
}

// claimInParallel runs claimers goroutines, each claiming with claim (in
// transactions of its own, half of them relaxed) until a claim returns
// nothing, and returns what each claimed. A claimer that takes more than
// n items in all stops there, so that a store whose claims take nothing
// fails the test rather than hang it.
func claimInParallel[T any](t *testing.T, s lifecycle.Store, claimers, n int, claim func(ctx context.Context, tx lifecycle.Tx, claimer int) ([]T, error)) [][]T {
	t.Helper()
	got := make([][]T, claimers)
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			update := updater(s, c%2 == 1)
			for len(got[c]) <= n {
				var batch []T
				err := update(t.Context(), func(tx lifecycle.Tx) error {
					var err error
					batch, err = claim(t.Context(), tx, c)
					return err
				})
				if err != nil {
					t.Errorf("claimer %d: %v", c, err)
					return
				}
				if len(batch) == 0 {
					return
				}
				got[c] = append(got[c], batch...)
			}
		}()
	}
	wg.Wait()
	return got
}

// claimedOnce fails t unless the claims hold each of ids exactly once. It
// returns the claimer of each.
func claimedOnce(t *testing.T, round int, ids []string, claims [][]string) map[string]int {
	t.Helper()
	claimer := make(map[string]int, len(ids))
	twice := 0
	for c, claimed := range claims {
		for _, id := range claimed {
			if other, ok := claimer[id]; ok {
				if twice++; twice <= 10 {
					t.Errorf("round %d: %s claimed by claimers %d and %d", round, id, other, c)
				}
			}
			claimer[id] = c
		}
	}
	if twice > 10 {
		t.Errorf("round %d: %d claims in all of items claimed already", round, twice)
	}
	for _, id := range ids {
		if _, ok := claimer[id]; !ok {
			t.Errorf("round %d: %s claimed by none", round, id)
		}
	}
	if len(claimer) != len(ids) {
		t.Errorf("round %d: %d claimed, want %d", round, len(claimer), len(ids))
	}
	return claimer
}

const (
	concurrentItems    = 200
	concurrentClaimers = 4
	concurrentBatch    = 3
)

// testConcurrentClaimShipOperations has several runners claim the same
// operations at once, in small batches: each operation goes to exactly
// one of them, first while queued and again once every lease ended.
func testConcurrentClaimShipOperations(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	ids := make([]string, concurrentItems)
	update(t, s, func(tx lifecycle.Tx) error {
		var errs []error
		for i := range ids {
			ids[i] = fmt.Sprintf("shp_%04d", i)
			errs = append(errs, tx.CreateShipOperation(t.Context(), shipOp(task.ID, ids[i], lifecycle.ShipQueued, time.Duration(i)*time.Millisecond)))
		}
		return errors.Join(errs...)
	})
	owner := func(c int) string { return fmt.Sprintf("runner-%d", c) }
	started := base.Add(time.Hour)
	for round, now := range []time.Time{started, base.Add(2*time.Hour + time.Millisecond)} {
		until := now.Add(time.Hour)
		claims := claimInParallel(t, s, concurrentClaimers, concurrentItems, func(ctx context.Context, tx lifecycle.Tx, c int) ([]lifecycle.ShipOperation, error) {
			ops, err := tx.ClaimShipOperations(ctx, lifecycle.ClaimShipOperationsParams{Owner: owner(c), Now: now, Until: until, Limit: concurrentBatch})
			if len(ops) > concurrentBatch {
				t.Errorf("round %d: a claim with limit %d took %d", round, concurrentBatch, len(ops))
			}
			return ops, err
		})
		claimedIDs := make([][]string, len(claims))
		for c, ops := range claims {
			for _, op := range ops {
				claimedIDs[c] = append(claimedIDs[c], op.OperationID)
				if op.Status != lifecycle.ShipRunning || op.Attempts != round+1 || op.LeaseOwner != owner(c) ||
					!op.LeaseUntil.Equal(until) || op.StartedAt == nil || !op.StartedAt.Equal(started) {
					t.Errorf("round %d: %s claimed by %s = %s, attempt %d, owner %q, lease until %v, started %v; want running, attempt %d, owner %s, lease until %v, started %v",
						round, op.OperationID, owner(c), op.Status, op.Attempts, op.LeaseOwner, op.LeaseUntil, op.StartedAt, round+1, owner(c), until, started)
				}
			}
		}
		claimer := claimedOnce(t, round, ids, claimedIDs)
		for _, id := range ids {
			op, err := s.ShipOperation(t.Context(), id)
			c, ok := claimer[id]
			if err != nil || !ok || op.LeaseOwner != owner(c) || op.Attempts != round+1 || !op.LeaseUntil.Equal(until) {
				t.Errorf("round %d: stored %s = owner %q, attempt %d, lease until %v, %v; want owner %s, attempt %d, lease until %v",
					round, id, op.LeaseOwner, op.Attempts, op.LeaseUntil, err, owner(c), round+1, until)
			}
		}
	}
}

// testConcurrentClaimReconciliations has several reconcilers claim the
// same due tasks at once, in small batches: each task goes to exactly one
// of them per interval.
func testConcurrentClaimReconciliations(t *testing.T, h Harness) {
	s := open(t, h)
	tasks := make([]lifecycle.Task, concurrentItems)
	ids := make([]string, len(tasks))
	for i := range tasks {
		tasks[i] = minimalTask(i)
		tasks[i].Status, tasks[i].ReconcileAt = lifecycle.StatusInReview, ts(time.Duration(i)*time.Millisecond)
		ids[i] = tasks[i].ID
	}
	create(t, s, tasks...)
	// The second interval begins when the claims of the first end.
	now := base.Add(time.Minute)
	for round := range 2 {
		until := now.Add(time.Hour)
		claims := claimInParallel(t, s, concurrentClaimers, concurrentItems, func(ctx context.Context, tx lifecycle.Tx, _ int) ([]string, error) {
			claimed, err := tx.ClaimReconciliations(ctx, lifecycle.ClaimReconciliationsParams{Now: now, Until: until, Limit: concurrentBatch})
			if len(claimed) > concurrentBatch {
				t.Errorf("round %d: a claim with limit %d took %d", round, concurrentBatch, len(claimed))
			}
			for _, task := range claimed {
				if !task.ReconcileAt.Equal(until) {
					t.Errorf("round %d: claimed %s with ReconcileAt %v, want %v", round, task.ID, task.ReconcileAt, until)
				}
			}
			return taskIDs(claimed), err
		})
		claimedOnce(t, round, ids, claims)
		for _, id := range ids {
			if got, err := s.Task(t.Context(), id); err != nil || !got.ReconcileAt.Equal(until) {
				t.Errorf("round %d: stored %s ReconcileAt = %v, %v; want %v", round, id, got.ReconcileAt, err, until)
			}
		}
		now = until
	}
}

// testEventBoundsCommitted checks that EventBounds reports committed
// events only: not those of a transaction still open, nor of one rolled
// back.
func testEventBoundsCommitted(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	committed := event(task.ID, 1, ts(0))
	appendEvents(t, s, &committed)
	expect := func(when string, want int64) {
		t.Helper()
		if b, err := s.EventBounds(t.Context()); err != nil || b != (lifecycle.EventBounds{Last: want}) {
			t.Errorf("%s: EventBounds = %+v, %v; want Last %d", when, b, err, want)
		}
	}
	expect("after a commit", committed.Sequence)

	boom := errors.New("boom")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		e := event(task.ID, 2, ts(time.Second))
		return errors.Join(tx.AppendEvent(t.Context(), &e), boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want the function's error", err)
	}
	expect("after a rollback", committed.Sequence)

	// While a transaction that appended an event is open, neither
	// EventBounds nor Events shows it.
	appended, release := make(chan struct{}), make(chan struct{})
	pending := event(task.ID, 3, ts(2*time.Second))
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx lifecycle.Tx) error {
			err := tx.AppendEvent(context.Background(), &pending)
			close(appended)
			<-release
			return err
		})
	}()
	<-appended
	expect("while a transaction is open", committed.Sequence)
	if evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10}); err != nil || len(evs) != 1 {
		t.Errorf("Events while a transaction is open = %v, %v; want only the committed one", ids(evs), err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Update: %v", err)
	}
	expect("after the commit", pending.Sequence)
}

func testHostFactsClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.ProviderDelivery(t.Context(), "github", "d1"); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("ProviderDelivery after Close: error = %v, want ErrClosed", err)
	}
	if _, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: base, ExpiredBefore: base}); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Prune after Close: error = %v, want ErrClosed", err)
	}
}

// testInstanceLeaser runs the tests of lifecycle.InstanceLeaser, each on
// a fresh store, when the Store implements it; a Store without it keeps
// no instance leases (its Service is the only one), and they are skipped.
func testInstanceLeaser(t *testing.T, h Harness) {
	implements[lifecycle.InstanceLeaser](t, h, "the Store does not implement lifecycle.InstanceLeaser: it keeps no instance leases")
	for _, tt := range []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testInstanceLeases},
		{"Atomic", testInstanceLeaseAtomic},
		{"Closed", testInstanceLeaseClosed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// putLease stores l with UpdateInstanceLease and returns the lease it
// found.
func putLease(t *testing.T, s lifecycle.InstanceLeaser, l lifecycle.InstanceLease, relaxed bool) *lifecycle.InstanceLease {
	t.Helper()
	var found *lifecycle.InstanceLease
	err := s.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: l.ID, Relaxed: relaxed,
		Update: func(cur *lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
			found = cur
			return &l, nil
		}})
	if err != nil {
		t.Fatalf("UpdateInstanceLease(%s): %v", l.ID, err)
	}
	return found
}

// lease returns the stored lease of id, or nil.
func lease(t *testing.T, s lifecycle.InstanceLeaser, id string) *lifecycle.InstanceLease {
	t.Helper()
	var found *lifecycle.InstanceLease
	err := s.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: id,
		Update: func(cur *lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
			found = cur
			return nil, nil // stores nothing
		}})
	if err != nil {
		t.Fatalf("UpdateInstanceLease(%s): %v", id, err)
	}
	return found
}

func testInstanceLeases(t *testing.T, h Harness) {
	s := open(t, h).(lifecycle.InstanceLeaser)
	if found := putLease(t, s, lifecycle.InstanceLease{ID: "web-1", Life: "lif_a", Until: base.Add(3 * time.Second)}, false); found != nil {
		t.Errorf("UpdateInstanceLease(unknown) found %+v, want nil", found)
	}
	putLease(t, s, lifecycle.InstanceLease{ID: "web-2", Life: "lif_b", Until: base.Add(time.Second)}, true)
	// Putting again replaces the lease of that ID only, relaxed or not.
	found := putLease(t, s, lifecycle.InstanceLease{ID: "web-1", Life: "lif_c", Until: base.Add(time.Minute)}, true)
	if found == nil || found.ID != "web-1" || found.Life != "lif_a" || !found.Until.Equal(base.Add(3*time.Second)) {
		t.Errorf("UpdateInstanceLease(web-1) found %+v, want lif_a's lease", found)
	}
	// Storing nothing, or failing, leaves the lease as it is.
	errFn := errors.New("fn failed")
	err := s.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: "web-2",
		Update: func(*lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
			return &lifecycle.InstanceLease{ID: "web-2", Life: "lif_x", Until: base.Add(time.Hour)}, errFn
		}})
	if !errors.Is(err, errFn) {
		t.Errorf("UpdateInstanceLease(fn fails) error = %v, want fn's", err)
	}
	if found := lease(t, s, "web-3"); found != nil {
		t.Errorf("lease of web-3, never stored: %+v", found)
	}
	for _, want := range []lifecycle.InstanceLease{
		{ID: "web-1", Life: "lif_c", Until: base.Add(time.Minute)},
		{ID: "web-2", Life: "lif_b", Until: base.Add(time.Second)},
	} {
		got := lease(t, s, want.ID)
		if got == nil || got.ID != want.ID || got.Life != want.Life || !got.Until.Equal(want.Until) {
			t.Errorf("lease of %s = %+v, want %+v", want.ID, got, want)
		}
	}
	if got := lease(t, s, "web-3"); got != nil {
		t.Errorf("lease of web-3 after reading it = %+v, want none stored", got)
	}
}

// testInstanceLeaseAtomic runs many updates of one lease at once, each
// moving its end a second on from the one it read: none is lost.
func testInstanceLeaseAtomic(t *testing.T, h Harness) {
	s := open(t, h).(lifecycle.InstanceLeaser)
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.UpdateInstanceLease(context.Background(), lifecycle.UpdateInstanceLeaseParams{ID: "web-1", Relaxed: i%2 == 0,
				Update: func(cur *lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
					until := base
					if cur != nil {
						until = cur.Until
					}
					return &lifecycle.InstanceLease{ID: "web-1", Life: "lif_a", Until: until.Add(time.Second)}, nil
				}})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("UpdateInstanceLease: %v", err)
		}
	}
	if got := lease(t, s, "web-1"); got == nil || !got.Until.Equal(base.Add(n*time.Second)) {
		t.Errorf("lease after %d updates at once = %+v, want Until base+%ds", n, got, n)
	}
}

func testInstanceLeaseClosed(t *testing.T, h Harness) {
	st := h.Open(t)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := st.(lifecycle.InstanceLeaser)
	err := s.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: "web-1",
		Update: func(*lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) { return nil, nil }})
	if !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("UpdateInstanceLease after Close: error = %v, want ErrClosed", err)
	}
}
