package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// ciFailureStore returns s as a lifecycletype.CIFailureStore, skipping
// the test when the Store keeps no CI failures.
func ciFailureStore(t *testing.T, h Harness) (lifecycle.Store, lifecycletype.CIFailureStore) {
	t.Helper()
	implements[lifecycletype.CIFailureStore](t, h, "the Store does not implement lifecycletype.CIFailureStore: Services on it serve no CI failure details")
	s := open(t, h)
	return s, s.(lifecycletype.CIFailureStore)
}

// updateCIFailures runs fn in a transaction of s, with its Tx as a
// CIFailureTx.
func updateCIFailures(s lifecycle.Store, fn func(ctx context.Context, tx lifecycletype.CIFailureTx) error) error {
	ctx := context.Background()
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		c, ok := tx.(lifecycletype.CIFailureTx)
		if !ok {
			return fmt.Errorf("the Store implements lifecycletype.CIFailureStore, but its Tx %T is no lifecycletype.CIFailureTx", tx)
		}
		return fn(ctx, c)
	})
}

// ciFailureRecord returns a record of check name of taskID at sha: due at
// next when failure is nil, else holding it.
func ciFailureRecord(taskID, sha string, source lifecycle.CheckSource, name string, next time.Duration, failure *lifecycletype.CIFailure) lifecycletype.CIFailureRecord {
	r := lifecycletype.CIFailureRecord{TaskID: taskID, HeadSHA: sha, Source: source, Name: name, UpdatedAt: ts(0)}
	if failure == nil {
		r.Due, r.NextAttemptAt = true, ts(next)
	} else {
		r.Attempts, r.Failure = 1, failure
	}
	return r
}

// fullFailure returns a failure with every member set, in characters a
// store may mangle.
func fullFailure() *lifecycletype.CIFailure {
	return &lifecycletype.CIFailure{
		Title: "2 tests failed", Summary: "TestA: «expected 1, got 2»\nTestB: timeout", Excerpt: "--- FAIL: TestA\n\tx_test.go:12: 日本語\n",
		Truncated: true, LogURL: ptr("https://ci.example.com/jobs/7/raw"),
		Annotations: []lifecycletype.CIAnnotation{
			{Path: "x_test.go", StartLine: 12, EndLine: 14, Level: lifecycletype.AnnotationFailure, Message: "expected 1, got 2"},
			{Path: "y.go", StartLine: 3, EndLine: 3, Level: lifecycletype.AnnotationWarning, Message: "unused"},
		},
		FetchedAt: ts(time.Second),
	}
}

// testCIFailures checks lifecycletype.CIFailureStore and CIFailureTx, when
// the Store implements them: records round-trip (a failure member by
// member, a due record with no failure), a put replaces the record of the
// same check, reads come by source and name and only for the commit
// asked, a failed transaction keeps nothing, and claims take due records
// whose time has come, earliest first, up to the limit, leasing them
// until the claim's Until.
func testCIFailures(t *testing.T, h Harness) {
	s, cs := ciFailureStore(t, h)
	ctx := t.Context()
	task, other := minimalTask(1), minimalTask(2)
	create(t, s, task, other)
	const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	noted := ciFailureRecord(task.ID, sha1, lifecycle.SourceReported, "lint", 0, fullFailure())
	noneKnown := ciFailureRecord(task.ID, sha1, lifecycle.SourceProvider, "build", 0, nil)
	noneKnown.Due, noneKnown.NextAttemptAt, noneKnown.Attempts = false, lifecycle.Timestamp{}, 3
	records := []lifecycletype.CIFailureRecord{
		ciFailureRecord(task.ID, sha1, lifecycle.SourceProvider, "unit", time.Minute, nil),
		ciFailureRecord(task.ID, sha1, lifecycle.SourceProvider, "e2e", 0, nil),
		noted, noneKnown,
		ciFailureRecord(task.ID, sha2, lifecycle.SourceProvider, "unit", -time.Minute, nil),
		ciFailureRecord(other.ID, sha1, lifecycle.SourceProvider, "unit", 30*time.Second, nil),
	}
	err := updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
		for _, r := range records {
			if err := tx.PutCIFailure(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("put CI failures: %v", err)
	}
	// A failed transaction keeps nothing.
	boom := errors.New("boom")
	err = updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
		if err := tx.PutCIFailure(ctx, ciFailureRecord(task.ID, sha1, lifecycle.SourceProvider, "gone", 0, nil)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	read := func(taskID, sha string) []lifecycletype.CIFailureRecord {
		t.Helper()
		got, err := cs.CIFailures(ctx, taskID, sha)
		if err != nil {
			t.Fatalf("CIFailures(%s, %s): %v", taskID, sha, err)
		}
		return got
	}
	want := []lifecycletype.CIFailureRecord{noneKnown, records[1], records[0], noted}
	if diff := cmp.Diff(want, read(task.ID, sha1), equateEmpty); diff != "" {
		t.Errorf("CIFailures(sha1), by source and name (-want +got):\n%s", diff)
	}
	if got := read(task.ID, "3333333333333333333333333333333333333333"); len(got) != 0 {
		t.Errorf("CIFailures of an unknown commit = %v, want none", got)
	}
	// A put replaces the record of its check: the fetched details of a
	// due one.
	done := records[0]
	done.Due, done.NextAttemptAt, done.Attempts, done.Failure, done.UpdatedAt = false, lifecycle.Timestamp{}, 1, fullFailure(), ts(2*time.Second)
	done.Failure.Annotations = nil // stored, it reads back empty
	err = updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
		if err := tx.PutCIFailure(ctx, done); err != nil {
			return err
		}
		got, err := tx.CIFailures(ctx, task.ID, sha1)
		if err == nil && (len(got) != 4 || got[2].Due || got[2].Failure == nil) {
			t.Errorf("Tx.CIFailures after a put = %+v, want unit done", got)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	done.Failure.Annotations = []lifecycletype.CIAnnotation{}
	if diff := cmp.Diff(done, read(task.ID, sha1)[2], equateEmpty); diff != "" {
		t.Errorf("replaced record (-want +got):\n%s", diff)
	}

	// Claims at ts(45s): sha2's unit (-1m), e2e (0), other's unit (30s);
	// not unit of sha1 (done), nor the records not due.
	claim := func(now time.Duration, limit int) []lifecycletype.CIFailureRecord {
		t.Helper()
		var got []lifecycletype.CIFailureRecord
		err := updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
			var err error
			got, err = tx.ClaimCIFailures(ctx, lifecycletype.ClaimCIFailuresParams{Now: ts(now).Time, Until: ts(now + time.Hour).Time, Limit: limit})
			return err
		})
		if err != nil {
			t.Fatalf("ClaimCIFailures: %v", err)
		}
		return got
	}
	leased := func(r lifecycletype.CIFailureRecord, until time.Duration) lifecycletype.CIFailureRecord {
		r.NextAttemptAt = ts(until)
		return r
	}
	got := claim(45*time.Second, 2)
	if diff := cmp.Diff([]lifecycletype.CIFailureRecord{leased(records[4], 45*time.Second+time.Hour), leased(records[1], 45*time.Second+time.Hour)}, got, equateEmpty); diff != "" {
		t.Errorf("first claim, limit 2, earliest first (-want +got):\n%s", diff)
	}
	got = claim(45*time.Second, 10)
	if diff := cmp.Diff([]lifecycletype.CIFailureRecord{leased(records[5], 45*time.Second+time.Hour)}, got, equateEmpty); diff != "" {
		t.Errorf("second claim takes what the first left (-want +got):\n%s", diff)
	}
	if got := claim(59*time.Minute, 10); len(got) != 0 {
		t.Errorf("claim while the leases hold = %+v, want none", got)
	}
	if got := claim(2*time.Hour, 10); len(got) != 3 {
		t.Errorf("claim after the leases ended = %+v, want the 3 records claimed before", got)
	}
}

// testConcurrentClaimCIFailures checks the locking contract of
// ClaimCIFailures: claims made at once take each due record once.
func testConcurrentClaimCIFailures(t *testing.T, h Harness) {
	s, _ := ciFailureStore(t, h)
	task := minimalTask(1)
	create(t, s, task)
	const n = 20
	err := updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
		for i := range n {
			r := ciFailureRecord(task.ID, "1111111111111111111111111111111111111111", lifecycle.SourceProvider, fmt.Sprintf("check-%02d", i), 0, nil)
			if err := tx.PutCIFailure(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
		errs    = make(chan error, 4)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var got []lifecycletype.CIFailureRecord
				err := updateCIFailures(s, func(ctx context.Context, tx lifecycletype.CIFailureTx) error {
					var err error
					got, err = tx.ClaimCIFailures(ctx, lifecycletype.ClaimCIFailuresParams{Now: ts(time.Second).Time, Until: ts(time.Hour).Time, Limit: 3})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					claimed[r.Name]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("claim: %v", err)
	}
	if len(claimed) != n {
		t.Errorf("%d records claimed, want %d", len(claimed), n)
	}
	for name, k := range claimed {
		if k != 1 {
			t.Errorf("%s claimed %d times, want once", name, k)
		}
	}
}
