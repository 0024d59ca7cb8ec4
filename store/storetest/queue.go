package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// mergeQueueStore returns s as a lifecycletype.MergeQueueStore, skipping
// the test when the Store does not keep merge queues.
func mergeQueueStore(t *testing.T, h Harness) (lifecycle.Store, lifecycletype.MergeQueueStore) {
	t.Helper()
	implements[lifecycletype.MergeQueueStore](t, h, "the Store does not implement lifecycletype.MergeQueueStore: Services on it run no merge queue of their own")
	s := open(t, h)
	return s, s.(lifecycletype.MergeQueueStore)
}

// queueTx returns tx as a lifecycletype.MergeQueueTx, or an error when
// the Tx of a MergeQueueStore is not one. It returns an error rather than
// failing the test, as fn may run on a goroutine of the Store.
func queueTx(tx lifecycle.Tx) (lifecycletype.MergeQueueTx, error) {
	q, ok := tx.(lifecycletype.MergeQueueTx)
	if !ok {
		return nil, fmt.Errorf("the Store implements lifecycletype.MergeQueueStore, but its Tx %T is no lifecycletype.MergeQueueTx", tx)
	}
	return q, nil
}

// updateQueues runs fn in a transaction of s, with its Tx as a
// MergeQueueTx.
func updateQueues(s lifecycle.Store, fn func(ctx context.Context, tx lifecycletype.MergeQueueTx) error) error {
	ctx := context.Background()
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		q, err := queueTx(tx)
		if err != nil {
			return err
		}
		return fn(ctx, q)
	})
}

// mergeQueue returns a merge queue with every member set, holding state.
func mergeQueue(id string, state []byte) lifecycletype.MergeQueueRecord {
	return lifecycletype.MergeQueueRecord{
		ID: id, Mode: lifecycle.ModeAdapterManaged, Project: "web",
		Owner: "acme", Repo: "widgets", Base: "main",
		State: state, Version: 1,
		LeaseOwner: "web-1", LeaseUntil: ts(time.Minute), UpdatedAt: ts(0),
	}
}

// queueOpts compare merge queues; a State stored nil may come back empty.
var queueOpts = cmpopts.EquateEmpty()

// testMergeQueues checks lifecycletype.MergeQueueStore and MergeQueueTx,
// when the Store implements them: queues round-trip (State byte for
// byte, whatever the bytes), a second create of an ID conflicts, an
// update replaces the queue, a missing queue is not found, the list
// comes in byte order of the IDs, a failed transaction keeps nothing, and
// no caller shares State with the Store.
func testMergeQueues(t *testing.T, h Harness) {
	s, qs := mergeQueueStore(t, h)
	ctx := t.Context()
	read := func(id string) lifecycletype.MergeQueueRecord {
		t.Helper()
		q, err := qs.MergeQueue(ctx, id)
		if err != nil {
			t.Fatalf("MergeQueue(%s): %v", id, err)
		}
		return q
	}
	check := func(what string, want lifecycletype.MergeQueueRecord) {
		t.Helper()
		if diff := cmp.Diff(want, read(want.ID), queueOpts); diff != "" {
			t.Errorf("MergeQueue(%s) after %s (-want +got):\n%s", want.ID, what, diff)
		}
		var got lifecycletype.MergeQueueRecord
		err := updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
			var err error
			got, err = tx.MergeQueue(ctx, want.ID)
			return err
		})
		if err != nil {
			t.Fatalf("Tx.MergeQueue(%s) after %s: %v", want.ID, what, err)
		}
		if diff := cmp.Diff(want, got, queueOpts); diff != "" {
			t.Errorf("Tx.MergeQueue(%s) after %s (-want +got):\n%s", want.ID, what, diff)
		}
	}

	// An empty store has none.
	if got, err := qs.MergeQueues(ctx); err != nil || len(got) != 0 {
		t.Fatalf("MergeQueues of an empty store = %v, %v; want none", got, err)
	}
	if _, err := qs.MergeQueue(ctx, "mq_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("MergeQueue(mq_missing) error = %v, want ErrNotFound", err)
	}
	err := updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		_, err := tx.MergeQueue(ctx, "mq_missing")
		return err
	})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tx.MergeQueue(mq_missing) error = %v, want ErrNotFound", err)
	}
	err = updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		return tx.UpdateMergeQueue(ctx, mergeQueue("mq_missing", []byte("{}")))
	})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("UpdateMergeQueue(mq_missing) error = %v, want ErrNotFound", err)
	}

	// Create three, out of order: State of any bytes (a NUL, bytes that
	// are no UTF-8), nil, and JSON; a lease never taken.
	a := mergeQueue("mq_a", []byte("{\"heads\":[]}\x00\xff\xfe"))
	upper := mergeQueue("mq_B", nil) // "mq_B" < "mq_a" in byte order
	upper.Base, upper.Mode, upper.Project = "release/1.x", lifecycle.ModeArtifact, "api"
	c := mergeQueue("mq_c", []byte(`{"entries":[{"task":"tsk_1","head":"abc"}],"note":"é"}`))
	c.LeaseOwner, c.LeaseUntil, c.Version = "", lifecycletype.Timestamp{}, 0
	given := a.State
	err = updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		for _, q := range []lifecycletype.MergeQueueRecord{c, a, upper} {
			if err := tx.CreateMergeQueue(ctx, q); err != nil {
				return err
			}
		}
		// Created in this transaction, read back in it.
		got, err := tx.MergeQueue(ctx, a.ID)
		if err != nil {
			return fmt.Errorf("read in the transaction that created it: %w", err)
		}
		if diff := cmp.Diff(a, got, queueOpts); diff != "" {
			return fmt.Errorf("read in the transaction that created it (-want +got):\n%s", diff)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("create merge queues: %v", err)
	}
	a.State = []byte("{\"heads\":[]}\x00\xff\xfe")
	given[0] = 'X' // the caller's slice, changed after the create
	for _, q := range []lifecycletype.MergeQueueRecord{a, upper, c} {
		check("create", q)
	}
	got := read(a.ID)
	got.State[0] = 'Y' // a slice read, changed by its reader
	check("a reader changed its copy", a)

	// A second create of an ID conflicts, and leaves the queue.
	err = updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		return tx.CreateMergeQueue(ctx, mergeQueue(a.ID, []byte("{}")))
	})
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("second CreateMergeQueue(%s) error = %v, want ErrConflict", a.ID, err)
	}
	check("a conflicting create", a)

	// An update replaces every member.
	next := a
	next.State = []byte(`{"heads":[{"task":"tsk_2"}],"tested":"def"}`)
	next.Version++
	next.Mode, next.Project = lifecycle.ModeArtifact, "api"
	next.LeaseOwner, next.LeaseUntil, next.UpdatedAt = "web-2", ts(2*time.Minute), ts(time.Second)
	err = updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		cur, err := tx.MergeQueue(ctx, a.ID)
		if err != nil {
			return err
		}
		if cur.Version != a.Version {
			return fmt.Errorf("read for update: version %d, want %d", cur.Version, a.Version)
		}
		return tx.UpdateMergeQueue(ctx, next)
	})
	if err != nil {
		t.Fatalf("UpdateMergeQueue(%s): %v", a.ID, err)
	}
	check("an update", next)
	a = next

	// A transaction that fails keeps none of its changes.
	boom := errors.New("boom")
	err = updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
		if err := tx.CreateMergeQueue(ctx, mergeQueue("mq_dropped", []byte("{}"))); err != nil {
			return err
		}
		changed := a
		changed.State, changed.Version = []byte(`{"lost":true}`), a.Version+1
		if err := tx.UpdateMergeQueue(ctx, changed); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update whose fn fails: error = %v, want fn's", err)
	}
	if _, err := qs.MergeQueue(ctx, "mq_dropped"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("MergeQueue created by a failed transaction: error = %v, want ErrNotFound", err)
	}
	check("a failed transaction", a)

	// Every queue, in byte order of the IDs.
	all, err := qs.MergeQueues(ctx)
	if err != nil {
		t.Fatalf("MergeQueues: %v", err)
	}
	if diff := cmp.Diff([]lifecycletype.MergeQueueRecord{upper, a, c}, all, queueOpts); diff != "" {
		t.Errorf("MergeQueues (-want +got):\n%s", diff)
	}
}

// testConcurrentMergeQueueUpdates has many transactions at once each read
// a queue for update and add one to a count in its State: the reads for
// update serialize them, and no update is lost.
func testConcurrentMergeQueueUpdates(t *testing.T, h Harness) {
	s, qs := mergeQueueStore(t, h)
	type state struct {
		N int `json:"n"`
	}
	q := mergeQueue("mq_count", []byte(`{"n":0}`))
	q.Version = 0
	if err := updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error { return tx.CreateMergeQueue(ctx, q) }); err != nil {
		t.Fatalf("CreateMergeQueue: %v", err)
	}
	const n = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
				cur, err := tx.MergeQueue(ctx, q.ID)
				if err != nil {
					return err
				}
				var st state
				if err := json.Unmarshal(cur.State, &st); err != nil {
					return fmt.Errorf("state %q: %w", cur.State, err)
				}
				st.N++
				if cur.State, err = json.Marshal(st); err != nil {
					return err
				}
				cur.Version++
				cur.LeaseOwner = fmt.Sprintf("web-%d", i)
				return tx.UpdateMergeQueue(ctx, cur)
			})
			if err != nil {
				t.Errorf("increment %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	got, err := qs.MergeQueue(t.Context(), q.ID)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(got.State, &st); err != nil {
		t.Fatalf("state %q: %v", got.State, err)
	}
	if st.N != n || got.Version != n {
		t.Errorf("after %d increments: count %d, version %d; want %d, %d", n, st.N, got.Version, n, n)
	}
}

// testConcurrentMergeQueueCreates has many transactions at once each
// create a queue of one ID when they find none: one create wins, and
// each other transaction either finds its queue or fails with
// ErrConflict, even when that queue was committed after it began.
func testConcurrentMergeQueueCreates(t *testing.T, h Harness) {
	s, qs := mergeQueueStore(t, h)
	errFound := errors.New("found a queue")
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []string
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("web-%d", i)
			<-start
			err := updateQueues(s, func(ctx context.Context, tx lifecycletype.MergeQueueTx) error {
				switch _, err := tx.MergeQueue(ctx, "mq_race"); {
				case err == nil:
					return errFound
				case !errors.Is(err, lifecycle.ErrNotFound):
					return err
				}
				q := mergeQueue("mq_race", []byte(`{"by":"`+owner+`"}`))
				q.LeaseOwner = owner
				return tx.CreateMergeQueue(ctx, q)
			})
			switch {
			case err == nil:
				mu.Lock()
				created = append(created, owner)
				mu.Unlock()
			case errors.Is(err, errFound), errors.Is(err, lifecycle.ErrConflict):
			default:
				t.Errorf("create by %s: %v", owner, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(created) != 1 {
		t.Fatalf("created by %v, want exactly one", created)
	}
	got, err := qs.MergeQueue(t.Context(), "mq_race")
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseOwner != created[0] || string(got.State) != `{"by":"`+created[0]+`"}` {
		t.Errorf("stored queue of %s with state %s, want %s's", got.LeaseOwner, got.State, created[0])
	}
}
