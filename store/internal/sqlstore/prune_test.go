package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// Deleters.Prune runs the deletions whose cutoff is set, goes on
// after one fails, and joins the failures.
func TestDeletersGoOnAfterAFailure(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var ran []string
	del := func(name string, n int64, err error) func(context.Context, time.Time) (int64, error) {
		return func(_ context.Context, before time.Time) (int64, error) {
			if !before.Equal(at) {
				t.Errorf("%s: cutoff %v, want %v", name, before, at)
			}
			ran = append(ran, name)
			return n, err
		}
	}
	failed := errors.New("disk full")
	d := sqlstore.Deleters{
		IdempotencyRecords: del("idempotency", 1, nil),
		ProviderDeliveries: del("provider deliveries", 0, failed),
		Deliveries:         del("deliveries", 3, nil),
		Events:             del("events", 4, nil),
	}
	got, err := d.Prune(t.Context(), lifecycle.PruneParams{Before: at, ExpiredBefore: at})
	if !errors.Is(err, failed) {
		t.Errorf("Prune error %v, want %v joined", err, failed)
	}
	if want := (lifecycle.PruneResult{IdempotencyRecords: 1, Deliveries: 3, Events: 4}); got != want {
		t.Errorf("Prune = %+v, want %+v", got, want)
	}
	if want := []string{"idempotency", "provider deliveries", "deliveries", "events"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	ran = nil
	if _, err := d.Prune(t.Context(), lifecycle.PruneParams{ExpiredBefore: at}); err != nil || !slices.Equal(ran, []string{"idempotency"}) {
		t.Errorf("with Before zero: ran %v, %v; want idempotency records alone", ran, err)
	}
}
