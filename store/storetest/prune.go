package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
)

// testPrune prunes every kind in one call: each kind by its own cutoff,
// pending delivery attempts never, and a zero cutoff nothing of its kinds.
func testPrune(t *testing.T, h Harness) {
	s := open(t, h)
	task := minimalTask(1)
	create(t, s, task)
	oldEvent, newEvent := event(task.ID, 1, ts(-2*time.Hour)), event(task.ID, 2, ts(0))
	appendEvents(t, s, &oldEvent, &newEvent)
	sub := bareSubscription(1)
	createSubscriptions(t, s, sub)
	oldPending := pendingAttempt(sub.ID, 3, -2*time.Hour, time.Hour)
	createDeliveries(t, s,
		attempt(sub.ID, 1, lifecycle.DeliverySucceeded, -2*time.Hour),
		attempt(sub.ID, 2, lifecycle.DeliverySucceeded, 0),
		oldPending,
	)
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(
			tx.RecordProviderDelivery(t.Context(), lifecycle.ProviderDelivery{Source: "github", ID: "d1", ReceivedAt: base.Add(-2 * time.Hour)}),
			tx.RecordProviderDelivery(t.Context(), lifecycle.ProviderDelivery{Source: "github", ID: "d2", ReceivedAt: base}),
		)
	})
	key := func(k string) lifecycle.IdempotencyScope {
		return lifecycle.IdempotencyScope{PrincipalID: "key_1", Method: "POST", Route: "/tasks", Key: k}
	}
	for i, expires := range []time.Duration{-time.Hour, 0, time.Hour} {
		r := lifecycle.IdempotencyRecord{IdempotencyScope: key(string(rune('a' + i))), Fingerprint: []byte{1},
			CreatedAt: base.Add(-3 * time.Hour), ExpiresAt: base.Add(expires), LockedUntil: base, Owner: "web-1"}
		update(t, s, func(tx lifecycle.Tx) error {
			return tx.UpdateIdempotencyRecord(t.Context(), r.IdempotencyScope, func(*lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
				return &r, nil
			})
		})
	}

	// Zero cutoffs prune nothing, whatever the records' times.
	if n, err := s.Prune(t.Context(), lifecycle.PruneParams{}); err != nil || n != (lifecycle.PruneResult{}) {
		t.Errorf("Prune(zero) = %+v, %v; want nothing deleted", n, err)
	}
	// Each kind by its cutoff: the records before an hour ago, the
	// idempotency records expired before now (not the one expiring now).
	cutoff := base.Add(-time.Hour)
	n, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: cutoff, ExpiredBefore: base})
	want := lifecycle.PruneResult{Events: 1, ProviderDeliveries: 1, Deliveries: 1, IdempotencyRecords: 1}
	if err != nil || n != want {
		t.Errorf("Prune = %+v, %v; want %+v", n, err, want)
	}
	if evs, err := s.Events(t.Context(), lifecycle.EventFilter{Limit: 10}); err != nil || len(evs) != 1 || evs[0].ID != newEvent.ID {
		t.Errorf("events after Prune = %v, %v; want the new one", ids(evs), err)
	}
	if _, err := s.ProviderDelivery(t.Context(), "github", "d1"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("ProviderDelivery(pruned) error = %v, want ErrNotFound", err)
	}
	if _, err := s.ProviderDelivery(t.Context(), "github", "d2"); err != nil {
		t.Errorf("ProviderDelivery(kept): %v", err)
	}
	got, _ := listDeliveries(t, s, sub.ID, 10)
	if diff := cmp.Diff([]string{oldPending.ID, attempt(sub.ID, 2, "", 0).ID}, deliveryIDs(got)); diff != "" {
		t.Errorf("deliveries after Prune, the old pending one kept (-want +got):\n%s", diff)
	}
	for i, kept := range []bool{false, true, true} {
		k := key(string(rune('a' + i)))
		if got := idempotencyRecord(t, s, k); (got != nil) != kept {
			t.Errorf("idempotency record %s after Prune: %+v, want kept %v", k.Key, got, kept)
		}
	}
	// The idempotency cutoff alone prunes nothing else.
	n, err = s.Prune(t.Context(), lifecycle.PruneParams{ExpiredBefore: base.Add(2 * time.Hour)})
	if err != nil || n != (lifecycle.PruneResult{IdempotencyRecords: 2}) {
		t.Errorf("Prune(ExpiredBefore +2h) = %+v, %v; want 2 idempotency records only", n, err)
	}
}

// idempotencyRecord returns the stored record of key, or nil, read with
// UpdateIdempotencyRecord in a transaction that stores nothing.
func idempotencyRecord(t *testing.T, s lifecycle.Store, key lifecycle.IdempotencyScope) *lifecycle.IdempotencyRecord {
	t.Helper()
	var got *lifecycle.IdempotencyRecord
	errRead := errors.New("read only")
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		return tx.UpdateIdempotencyRecord(t.Context(), key, func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
			got = cur
			return nil, errRead
		})
	})
	if !errors.Is(err, errRead) {
		t.Fatalf("read idempotency record %s: %v", key.Key, err)
	}
	return got
}

// testConcurrentIdempotencyInserts has many transactions insert the record
// of one key at once, each when it finds none: one insert wins, and each
// other transaction either finds its record or fails with ErrConflict.
func testConcurrentIdempotencyInserts(t *testing.T, h Harness) {
	s := open(t, h)
	key := lifecycle.IdempotencyScope{PrincipalID: "key_1", Method: "POST", Route: "/tasks", Key: "race"}
	errFound := errors.New("found a record")
	const n = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted []string
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := "web-" + string(rune('a'+i))
			<-start
			err := s.Update(context.Background(), func(tx lifecycle.Tx) error {
				return tx.UpdateIdempotencyRecord(context.Background(), key, func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
					if cur != nil {
						return nil, errFound
					}
					return &lifecycle.IdempotencyRecord{IdempotencyScope: key, Fingerprint: []byte{1}, CreatedAt: base,
						ExpiresAt: base.Add(time.Hour), LockedUntil: base.Add(time.Minute), Owner: owner}, nil
				})
			})
			switch {
			case err == nil:
				mu.Lock()
				inserted = append(inserted, owner)
				mu.Unlock()
			case errors.Is(err, errFound), errors.Is(err, lifecycle.ErrConflict):
			default:
				t.Errorf("insert of %s: %v", owner, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(inserted) != 1 {
		t.Fatalf("inserted by %v, want exactly one", inserted)
	}
	if got := idempotencyRecord(t, s, key); got == nil || got.Owner != inserted[0] {
		t.Errorf("stored record %+v, want %s's", got, inserted[0])
	}
}
