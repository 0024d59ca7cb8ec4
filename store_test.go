package lifecycle_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// maxStoreMethods is the most methods a user's Store may have to
// implement, Store and Tx together (Update and Close included). A Store
// is what a host writes to keep the Service's data in its own database:
// it should be a day's work, not a week's. What only some features need
// belongs in an optional interface found by type assertion
// (lifecycle.InstanceLeaser, lifecycle.Notifier, ...), not here.
const maxStoreMethods = 45

func TestStoreStaysSmall(t *testing.T) {
	t.Parallel()
	var names []string
	for _, typ := range []reflect.Type{reflect.TypeFor[lifecycle.Store](), reflect.TypeFor[lifecycle.Tx]()} {
		for i := range typ.NumMethod() {
			names = append(names, typ.Name()+"."+typ.Method(i).Name)
		}
	}
	t.Logf("Store and Tx: %d methods", len(names))
	if n := len(names); n > maxStoreMethods {
		t.Errorf("Store and Tx have %d methods a user's Store must implement, more than %d: a Store should stay short work for a host to write; "+
			"make what only some deployments need an optional interface found by type assertion, or fold a method into another's params.\n%v",
			n, maxStoreMethods, names)
	}
}

// PruneDeleters.Prune runs the deletions whose cutoff is set, goes on
// after one fails, and joins the failures.
func TestPruneDeletersGoOnAfterAFailure(t *testing.T) {
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
	d := lifecycle.PruneDeleters{
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
