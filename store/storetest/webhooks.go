package storetest

import (
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

// subscriptionOpts compare subscriptions as stored: times by instant.
var subscriptionOpts = cmp.Options{equateEmpty, cmpopts.EquateApproxTime(0)}

// deliveryListOpts compare the attempts of a listing, which need not
// carry their bodies.
var deliveryListOpts = cmp.Options{equateEmpty, cmpopts.IgnoreFields(lifecycle.Delivery{}, "Body")}

// fullSubscription returns a subscription with every member set.
func fullSubscription(n int) lifecycle.Subscription {
	return lifecycle.Subscription{
		ID:           fmt.Sprintf("whs_full%04d", n),
		URL:          "https://hooks.example.com/lifecycle?team=web",
		EventTypes:   []lifecycle.EventType{lifecycle.EventTaskShipped, lifecycle.EventTaskUpdated},
		Description:  ptr("Deploy bot ünïcødé ✓"),
		Filters:      lifecycle.SubscriptionFilters{TaskIDs: []string{"tsk_a", "tsk_b"}, Projects: []string{"web"}},
		Status:       lifecycle.SubscriptionActive,
		CreatedAt:    ts(0),
		SealedSecret: []byte{0, 1, 2, 0xfe, 0xff, 'k', 0},
		Cursor:       42,
		LeaseOwner:   "dispatcher-1",
		LeaseUntil:   base.Add(time.Minute),
		Revision:     7,
		Rewound:      true,
		RewindTo:     11,

		AllowPrivateTarget: true,
	}
}

// bareSubscription returns an active subscription with no description,
// no filters and no lease.
func bareSubscription(n int) lifecycle.Subscription {
	return lifecycle.Subscription{
		ID:           fmt.Sprintf("whs_bare%04d", n),
		URL:          "https://hooks.example.com/bare",
		EventTypes:   []lifecycle.EventType{lifecycle.EventTaskUpdated},
		Filters:      lifecycle.SubscriptionFilters{TaskIDs: []string{}, Projects: []string{}},
		Status:       lifecycle.SubscriptionActive,
		CreatedAt:    ts(time.Duration(n) * time.Second),
		SealedSecret: []byte("sealed"),
	}
}

// attempt returns the first attempt at delivering event n, made at
// base+attempted.
func attempt(subID string, n int, status lifecycle.DeliveryStatus, attempted time.Duration) lifecycle.Delivery {
	return lifecycle.Delivery{
		ID:             fmt.Sprintf("dlv_%s_%04d", subID, n),
		SubscriptionID: subID,
		EventID:        fmt.Sprintf("evt_%04d", n),
		EventSequence:  int64(n),
		Attempt:        1,
		Status:         status,
		AttemptedAt:    ts(attempted),
	}
}

// pendingAttempt returns a failed attempt whose retry is due at next.
func pendingAttempt(subID string, n int, attempted, next time.Duration) lifecycle.Delivery {
	d := attempt(subID, n, lifecycle.DeliveryPending, attempted)
	d.ResponseStatus = ptr(503)
	d.Error = ptr("the receiver answered 503 Service Unavailable")
	d.NextAttemptAt = ptr(ts(next))
	d.Body = []byte(fmt.Sprintf(`{"id":"evt_%04d","data":{}}`, n))
	return d
}

func createSubscriptions(t *testing.T, s lifecycle.Store, subs ...lifecycle.Subscription) {
	t.Helper()
	update(t, s, func(tx lifecycle.Tx) error {
		for _, sub := range subs {
			if err := tx.CreateSubscription(t.Context(), sub); err != nil {
				return err
			}
		}
		return nil
	})
}

func createDeliveries(t *testing.T, s lifecycle.Store, ds ...lifecycle.Delivery) {
	t.Helper()
	update(t, s, func(tx lifecycle.Tx) error {
		for _, d := range ds {
			if err := tx.CreateDelivery(t.Context(), d); err != nil {
				return err
			}
		}
		return nil
	})
}

// listDeliveries returns every attempt of a subscription, paging by limit,
// and the number of pages it took.
func listDeliveries(t *testing.T, s lifecycle.Store, subID string, limit int) ([]lifecycle.Delivery, int) {
	t.Helper()
	return listFilteredDeliveries(t, s, lifecycle.DeliveryFilter{SubscriptionID: subID, Limit: limit})
}

// listFilteredDeliveries returns every attempt that f keeps, paging by
// f.Limit from f.Before, and the number of pages it took.
func listFilteredDeliveries(t *testing.T, s lifecycle.Store, f lifecycle.DeliveryFilter) ([]lifecycle.Delivery, int) {
	t.Helper()
	var (
		all   []lifecycle.Delivery
		pages int
	)
	limit := f.Limit
	for {
		page, err := s.Deliveries(t.Context(), f)
		if err != nil {
			t.Fatalf("Deliveries(%+v): %v", f, err)
		}
		pages++
		all = append(all, page.Deliveries...)
		if page.Next == 0 {
			return all, pages
		}
		if len(page.Deliveries) != limit {
			t.Fatalf("a page of deliveries before the last has %d, want %d", len(page.Deliveries), limit)
		}
		if pages > 1000 {
			t.Fatal("Deliveries never ends")
		}
		f.Before = page.Next
	}
}

func deliveryIDs(ds []lifecycle.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// fmtPtr formats an optional string: quoted, or nil.
func fmtPtr(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}

func subscriptionIDs(subs []lifecycle.Subscription) []string {
	var out []string
	for _, sub := range subs {
		out = append(out, sub.ID)
	}
	return out
}

func testSubscriptionRoundTrip(t *testing.T, h Harness) {
	s := open(t, h)
	full, bare := fullSubscription(1), bareSubscription(1)
	// Filters given as nil lists come back as empty ones.
	nilFilters := bareSubscription(2)
	nilFilters.Filters = lifecycle.SubscriptionFilters{}
	nilFilters.Status = lifecycle.SubscriptionDisabled
	createSubscriptions(t, s, full, bare, nilFilters)
	check := func(who string, want, got lifecycle.Subscription) {
		t.Helper()
		if diff := cmp.Diff(want, got, subscriptionOpts); diff != "" {
			t.Errorf("%s(%s) mismatch (-want +got):\n%s", who, want.ID, diff)
		}
		if got.Filters.TaskIDs == nil || got.Filters.Projects == nil {
			t.Errorf("%s(%s) filters %#v: want empty lists, not nil", who, want.ID, got.Filters)
		}
		if want.Description == nil && got.Description != nil {
			t.Errorf("%s(%s) description %q, want nil", who, want.ID, *got.Description)
		}
	}
	for _, want := range []lifecycle.Subscription{full, bare, nilFilters} {
		got, err := s.Subscription(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("Subscription(%s): %v", want.ID, err)
		}
		check("Subscription", want, got)
		update(t, s, func(tx lifecycle.Tx) error {
			got, err := tx.Subscription(t.Context(), want.ID)
			if err == nil {
				check("Tx.Subscription", want, got)
			}
			return err
		})
	}
	got, err := s.Subscription(t.Context(), bare.ID)
	if err == nil && !got.LeaseUntil.IsZero() {
		t.Errorf("Subscription(%s) LeaseUntil = %v, want the zero time", bare.ID, got.LeaseUntil)
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		dup := bareSubscription(9)
		dup.ID = full.ID
		return tx.CreateSubscription(t.Context(), dup)
	})
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("CreateSubscription(same ID) error = %v, want ErrConflict", err)
	}
}

func testSubscriptionNotFound(t *testing.T, h Harness) {
	s := open(t, h)
	createSubscriptions(t, s, bareSubscription(1))
	const missing = "whs_missing"
	if _, err := s.Subscription(t.Context(), missing); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Subscription(missing) error = %v, want ErrNotFound", err)
	}
	calls := []struct {
		name string
		fn   func(tx lifecycle.Tx) error
	}{
		{"Tx.Subscription", func(tx lifecycle.Tx) error {
			_, err := tx.Subscription(t.Context(), missing)
			return err
		}},
		{"UpdateSubscription", func(tx lifecycle.Tx) error {
			sub := bareSubscription(2)
			sub.ID = missing
			return tx.UpdateSubscription(t.Context(), sub)
		}},
		{"DeleteSubscription", func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), missing) }},
		{"CreateDelivery", func(tx lifecycle.Tx) error {
			return tx.CreateDelivery(t.Context(), attempt(missing, 1, lifecycle.DeliverySucceeded, 0))
		}},
		{"UpdateDelivery", func(tx lifecycle.Tx) error {
			return tx.UpdateDelivery(t.Context(), attempt(bareSubscription(1).ID, 1, lifecycle.DeliveryFailed, 0))
		}},
	}
	for _, c := range calls {
		if err := s.Update(t.Context(), c.fn); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("%s(missing) error = %v, want ErrNotFound", c.name, err)
		}
	}
	// An unknown subscription has no deliveries.
	page, err := s.Deliveries(t.Context(), lifecycle.DeliveryFilter{SubscriptionID: missing, Limit: 10})
	if err != nil || len(page.Deliveries) != 0 || page.Next != 0 {
		t.Errorf("Deliveries(missing) = %v, next %d, %v; want none", deliveryIDs(page.Deliveries), page.Next, err)
	}
	pending, err := pendingDeliveries(t, s, missing, 10)
	if err != nil || len(pending) != 0 {
		t.Errorf("Deliveries(Pending, missing) = %v, %v; want none", deliveryIDs(pending), err)
	}
	// The failed calls changed nothing.
	if _, err := s.Subscription(t.Context(), bareSubscription(1).ID); err != nil {
		t.Errorf("Subscription after failed calls: %v", err)
	}
}

func testListSubscriptionsPagination(t *testing.T, h Harness) {
	s := open(t, h)
	page, err := s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 10})
	if err != nil || len(page.Subscriptions) != 0 || page.Next != 0 {
		t.Errorf("ListSubscriptions(empty store) = %d, next %d, %v; want none", len(page.Subscriptions), page.Next, err)
	}
	var want []string
	// Created in an order that is neither that of their IDs nor of CreatedAt.
	for i := range 25 {
		sub := bareSubscription((i * 7) % 25)
		sub.CreatedAt = ts(-time.Duration(i) * time.Second)
		createSubscriptions(t, s, sub)
		want = append(want, sub.ID)
	}
	var got []string
	f := lifecycle.ListSubscriptionsParams{Limit: 10}
	pages := 0
	for {
		page, err := s.ListSubscriptions(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, subscriptionIDs(page.Subscriptions)...)
		if page.Next == 0 {
			break
		}
		if len(page.Subscriptions) != 10 {
			t.Fatalf("a page before the last has %d subscriptions, want 10", len(page.Subscriptions))
		}
		if pages > 10 {
			t.Fatal("ListSubscriptions never ends")
		}
		f.After = page.Next
	}
	if pages != 3 {
		t.Errorf("25 subscriptions in pages of 10 took %d pages, want 3", pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing order (-want +got):\n%s", diff)
	}
	// An exact multiple of the limit ends without an empty page.
	page, err = s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 25})
	if err != nil || len(page.Subscriptions) != 25 || page.Next != 0 {
		t.Errorf("ListSubscriptions(limit 25 of 25) = %d, next %d, %v; want 25, 0", len(page.Subscriptions), page.Next, err)
	}
	// Listed subscriptions are whole.
	full := fullSubscription(1)
	createSubscriptions(t, s, full)
	page, err = s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 30})
	if err != nil || len(page.Subscriptions) != 26 {
		t.Fatalf("ListSubscriptions(limit 30 of 26) = %d, %v; want 26", len(page.Subscriptions), err)
	}
	if diff := cmp.Diff(full, page.Subscriptions[25], subscriptionOpts); diff != "" {
		t.Errorf("listed subscription (-want +got):\n%s", diff)
	}
}

// testUpdateSubscriptionSecret: a Store that is a lifecycle.SecretResealer
// replaces a subscription's sealed secret and nothing else, and reports an
// unknown subscription. A Store without it is skipped:
// Service.ResealWebhookSecrets then says it needs one.
func testUpdateSubscriptionSecret(t *testing.T, h Harness) {
	s := open(t, h)
	r, ok := s.(lifecycle.SecretResealer)
	if !ok {
		t.Skipf("the Store (%T) does not implement lifecycle.SecretResealer", s)
	}
	orig := fullSubscription(1)
	createSubscriptions(t, s, orig)
	sealed := []byte{9, 0, 8, 0xff, 'n', 'e', 'w'}
	if err := r.UpdateSubscriptionSecret(t.Context(), "whs_none", sealed); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("UpdateSubscriptionSecret of an unknown subscription: %v, want ErrNotFound", err)
	}
	if err := r.UpdateSubscriptionSecret(t.Context(), orig.ID, sealed); err != nil {
		t.Fatal(err)
	}
	want := orig
	want.SealedSecret = sealed
	got, err := s.Subscription(t.Context(), orig.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, subscriptionOpts); diff != "" {
		t.Errorf("after UpdateSubscriptionSecret (-want +got):\n%s", diff)
	}
}

func testUpdateSubscription(t *testing.T, h Harness) {
	s := open(t, h)
	orig := fullSubscription(1)
	createSubscriptions(t, s, orig)
	changed := bareSubscription(1) // different in every member
	changed.ID = orig.ID
	changed.Status, changed.Cursor = lifecycle.SubscriptionDisabled, 1234
	changed.LeaseOwner, changed.LeaseUntil = "dispatcher-2", base.Add(time.Hour)
	changed.Revision, changed.Rewound, changed.RewindTo = 8, false, 0
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateSubscription(t.Context(), changed) })
	// Only the status, cursor, lease, revision and rewind change.
	want := orig
	want.Status, want.Cursor, want.LeaseOwner, want.LeaseUntil = changed.Status, changed.Cursor, changed.LeaseOwner, changed.LeaseUntil
	want.Revision, want.Rewound, want.RewindTo = changed.Revision, changed.Rewound, changed.RewindTo
	got, err := s.Subscription(t.Context(), orig.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, subscriptionOpts); diff != "" {
		t.Errorf("after UpdateSubscription (-want +got):\n%s", diff)
	}
	// A lease given up, and a replay.
	want.Status, want.LeaseOwner, want.LeaseUntil = lifecycle.SubscriptionActive, "", time.Time{}
	want.Cursor, want.Revision, want.Rewound, want.RewindTo = 3, 9, true, 5
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateSubscription(t.Context(), want) })
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Subscription(t.Context(), orig.ID)
		if err == nil {
			if diff := cmp.Diff(want, got, subscriptionOpts); diff != "" {
				t.Errorf("after giving the lease up (-want +got):\n%s", diff)
			}
		}
		return err
	})
}

// testSubscriptionRevision takes a subscription through an operator's
// replay and retry and the dispatcher's recording of them: after each
// change, every read of it, the claims of its holder included, returns the
// revision and rewind stored.
func testSubscriptionRevision(t *testing.T, h Harness) {
	s := open(t, h)
	sub, other := bareSubscription(1), bareSubscription(2)
	sub.Cursor, sub.Revision, sub.Rewound = 40, 3, true
	createSubscriptions(t, s, sub, other)
	now := base
	claim := func() []lifecycle.Subscription {
		t.Helper()
		now = now.Add(time.Second)
		var got []lifecycle.Subscription
		update(t, s, func(tx lifecycle.Tx) error {
			var err error
			got, err = tx.ClaimSubscriptions(t.Context(), lifecycle.ClaimSubscriptionsParams{
				Owner: "dispatcher-1", Now: now, Until: now.Add(time.Minute), Max: 10,
			})
			return err
		})
		return got
	}
	claim()
	steps := []struct {
		name     string
		change   func(sub *lifecycle.Subscription)
		cursor   int64
		revision int64
		rewound  bool
		rewindTo int64
	}{
		{"as created", func(*lifecycle.Subscription) {}, 40, 3, true, 0},
		{"the dispatcher read on from the cursor", func(sub *lifecycle.Subscription) { sub.Cursor, sub.Rewound = 45, false }, 45, 3, false, 0},
		{"an operator's replay from 10", func(sub *lifecycle.Subscription) {
			sub.Cursor, sub.Revision, sub.Rewound, sub.RewindTo = 10, 4, true, 10
		}, 10, 4, true, 10},
		{"an operator's retry", func(sub *lifecycle.Subscription) { sub.Revision++ }, 10, 5, true, 10},
		{"the dispatcher recorded its deliveries", func(sub *lifecycle.Subscription) { sub.Cursor, sub.Rewound = 46, false }, 46, 5, false, 10},
	}
	for _, step := range steps {
		update(t, s, func(tx lifecycle.Tx) error {
			stored, err := tx.Subscription(t.Context(), sub.ID)
			if err != nil {
				return err
			}
			step.change(&stored)
			return tx.UpdateSubscription(t.Context(), stored)
		})
		check := func(who string, got lifecycle.Subscription) {
			t.Helper()
			if got.Cursor != step.cursor || got.Revision != step.revision || got.Rewound != step.rewound || got.RewindTo != step.rewindTo {
				t.Errorf("after %s, %s: cursor %d, revision %d, rewound %v to %d; want %d, %d, %v to %d",
					step.name, who, got.Cursor, got.Revision, got.Rewound, got.RewindTo, step.cursor, step.revision, step.rewound, step.rewindTo)
			}
		}
		stored, err := s.Subscription(t.Context(), sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		check("Subscription", stored)
		update(t, s, func(tx lifecycle.Tx) error {
			got, err := tx.Subscription(t.Context(), sub.ID)
			if err == nil {
				check("Tx.Subscription", got)
			}
			return err
		})
		page, err := s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 10})
		if err != nil || len(page.Subscriptions) != 2 {
			t.Fatalf("ListSubscriptions = %v, %v; want 2", subscriptionIDs(page.Subscriptions), err)
		}
		check("ListSubscriptions", page.Subscriptions[0])
		claimed := claim()
		if len(claimed) != 2 {
			t.Fatalf("after %s, the claim returned %v; want both", step.name, subscriptionIDs(claimed))
		}
		check("ClaimSubscriptions", claimed[0])
		// The claim returns the subscription as it then stands.
		if stored, err = s.Subscription(t.Context(), sub.ID); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(stored, claimed[0], subscriptionOpts); diff != "" {
			t.Errorf("after %s, the claimed subscription differs from the stored one (-stored +claimed):\n%s", step.name, diff)
		}
		// The other subscription keeps its zero revision.
		if o := claimed[1]; o.Revision != 0 || o.Rewound {
			t.Errorf("after %s, the other subscription has revision %d, rewound %v; want 0, false", step.name, o.Revision, o.Rewound)
		}
	}
}

func testClaimSubscriptions(t *testing.T, h Harness) {
	s := open(t, h)
	a, b, disabled, held := bareSubscription(1), bareSubscription(2), bareSubscription(3), bareSubscription(4)
	a.AllowPrivateTarget = true
	disabled.Status = lifecycle.SubscriptionDisabled
	held.LeaseOwner, held.LeaseUntil = "other", base.Add(10*time.Minute)
	createSubscriptions(t, s, a, b, disabled, held)
	claim := func(owner string, now, until time.Duration) []lifecycle.Subscription {
		t.Helper()
		var got []lifecycle.Subscription
		update(t, s, func(tx lifecycle.Tx) error {
			var err error
			got, err = tx.ClaimSubscriptions(t.Context(), lifecycle.ClaimSubscriptionsParams{
				Owner: owner, Now: base.Add(now), Until: base.Add(until), Max: 100,
			})
			return err
		})
		return got
	}
	expect := func(what string, got []lifecycle.Subscription, owner string, until time.Duration, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, subscriptionIDs(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
		for _, sub := range got {
			if sub.LeaseOwner != owner || !sub.LeaseUntil.Equal(base.Add(until)) {
				t.Errorf("%s: %s leased to %q until %v, want %q until %v", what, sub.ID, sub.LeaseOwner, sub.LeaseUntil, owner, base.Add(until))
			}
			// The dispatcher dials by what the claim returns.
			if sub.AllowPrivateTarget != (sub.ID == a.ID) {
				t.Errorf("%s: %s AllowPrivateTarget %v, want %v", what, sub.ID, sub.AllowPrivateTarget, sub.ID == a.ID)
			}
		}
	}
	expect("first claim of A", claim("A", 0, time.Minute), "A", time.Minute, a.ID, b.ID)
	expect("claim of B while A holds", claim("B", 30*time.Second, 90*time.Second), "B", 0)
	expect("A renews", claim("A", 45*time.Second, 105*time.Second), "A", 105*time.Second, a.ID, b.ID)
	// A lease ending exactly at now has not ended before now.
	expect("claim of B as A's lease ends", claim("B", 105*time.Second, 3*time.Minute), "B", 0)
	expect("claim of B after A's lease", claim("B", 105*time.Second+time.Millisecond, 3*time.Minute), "B", 3*time.Minute, a.ID, b.ID)
	expect("claim of A after losing", claim("A", 2*time.Minute, 4*time.Minute), "A", 0)
	// The lease is stored.
	got, err := s.Subscription(t.Context(), a.ID)
	if err != nil || got.LeaseOwner != "B" || !got.LeaseUntil.Equal(base.Add(3*time.Minute)) {
		t.Errorf("Subscription(a) after B's claim: lease %q until %v, %v; want B until %v", got.LeaseOwner, got.LeaseUntil, err, base.Add(3*time.Minute))
	}
	// Other's lease ends; a disabled subscription is never claimed.
	expect("claim of B after other's lease", claim("B", 11*time.Minute, 12*time.Minute), "B", 12*time.Minute, a.ID, b.ID, held.ID)
	got, err = s.Subscription(t.Context(), disabled.ID)
	if err != nil || got.LeaseOwner != "" {
		t.Errorf("disabled subscription leased to %q, %v; want to nobody", got.LeaseOwner, err)
	}
	// A subscription disabled while held is no longer returned.
	update(t, s, func(tx lifecycle.Tx) error {
		sub, err := tx.Subscription(t.Context(), b.ID)
		if err != nil {
			return err
		}
		sub.Status = lifecycle.SubscriptionDisabled
		return tx.UpdateSubscription(t.Context(), sub)
	})
	expect("claim of B after disabling b", claim("B", 11*time.Minute+time.Second, 13*time.Minute), "B", 13*time.Minute, a.ID, held.ID)
	// A lease given up can be taken at once.
	update(t, s, func(tx lifecycle.Tx) error {
		sub, err := tx.Subscription(t.Context(), a.ID)
		if err != nil {
			return err
		}
		sub.LeaseOwner, sub.LeaseUntil = "", time.Time{}
		return tx.UpdateSubscription(t.Context(), sub)
	})
	expect("claim of A after B gave a up", claim("A", 11*time.Minute+2*time.Second, 14*time.Minute), "A", 14*time.Minute, a.ID)
}

func testClaimSubscriptionsMax(t *testing.T, h Harness) {
	s := open(t, h)
	var subs []lifecycle.Subscription
	for i := range 7 {
		subs = append(subs, bareSubscription(i))
	}
	// 0, 2 and 3 had leases that ended at different times; 1 and 4 never
	// had one; 5 is held; 6 is disabled.
	subs[0].LeaseOwner, subs[0].LeaseUntil = "gone", base.Add(3*time.Minute)
	subs[2].LeaseOwner, subs[2].LeaseUntil = "gone", base.Add(time.Minute)
	subs[3].LeaseOwner, subs[3].LeaseUntil = "gone", base.Add(2*time.Minute)
	subs[5].LeaseOwner, subs[5].LeaseUntil = "live", base.Add(time.Hour)
	subs[6].Status = lifecycle.SubscriptionDisabled
	createSubscriptions(t, s, subs...)
	now := base.Add(10 * time.Minute)
	claim := func(owner string, max int) []string {
		t.Helper()
		var got []lifecycle.Subscription
		update(t, s, func(tx lifecycle.Tx) error {
			var err error
			got, err = tx.ClaimSubscriptions(t.Context(), lifecycle.ClaimSubscriptionsParams{
				Owner: owner, Now: now, Until: now.Add(time.Minute), Max: max,
			})
			return err
		})
		for _, sub := range got {
			if sub.LeaseOwner != owner || !sub.LeaseUntil.Equal(now.Add(time.Minute)) {
				t.Errorf("claim of %s returned %s leased to %q until %v", owner, sub.ID, sub.LeaseOwner, sub.LeaseUntil)
			}
		}
		return subscriptionIDs(got)
	}
	expect := func(what string, got []string, want ...lifecycle.Subscription) {
		t.Helper()
		if diff := cmp.Diff(subscriptionIDs(want), got, equateEmpty); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	// Oldest lease first (never leased before any), returned in creation order.
	expect("A takes 2", claim("A", 2), subs[1], subs[4])
	expect("A renews and takes 1 more", claim("A", 1), subs[1], subs[2], subs[4])
	expect("A renews only", claim("A", 0), subs[1], subs[2], subs[4])
	expect("A renews only, Max negative", claim("A", -1), subs[1], subs[2], subs[4])
	expect("B takes what is left", claim("B", 10), subs[0], subs[3])
	expect("A renews, nothing left to take", claim("A", 10), subs[1], subs[2], subs[4])
	got, err := s.Subscription(t.Context(), subs[5].ID)
	if err != nil || got.LeaseOwner != "live" {
		t.Errorf("a subscription whose lease has not ended went to %q, %v; want it kept by live", got.LeaseOwner, err)
	}
}

// testClaimSubscriptionsConcurrently has two claimers claim from one store
// at the same moments, round after round, with leases that end before the
// next round, so that each takes from the other: no subscription is
// returned to both in one round, and each ends with exactly one owner.
func testClaimSubscriptionsConcurrently(t *testing.T, h Harness) {
	s := open(t, h)
	const n, rounds, max = 20, 15, 3
	var subs []lifecycle.Subscription
	for i := range n {
		subs = append(subs, bareSubscription(i))
	}
	createSubscriptions(t, s, subs...)
	owners := []string{"A", "B"}
	var last [2][]string
	for r := range rounds {
		now := base.Add(time.Duration(r) * time.Minute)
		var (
			wg  sync.WaitGroup
			got [2][]lifecycle.Subscription
		)
		start := make(chan struct{})
		for i, owner := range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
					var err error
					got[i], err = tx.ClaimSubscriptions(t.Context(), lifecycle.ClaimSubscriptionsParams{
						Owner: owner, Now: now, Until: now.Add(30 * time.Second), Max: max,
					})
					return err
				})
				if err != nil {
					t.Errorf("round %d: claim of %s: %v", r, owner, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		seen := make(map[string]string)
		for i, owner := range owners {
			last[i] = subscriptionIDs(got[i])
			for _, sub := range got[i] {
				if sub.LeaseOwner != owner {
					t.Errorf("round %d: claim of %s returned %s leased to %q", r, owner, sub.ID, sub.LeaseOwner)
				}
				if other, ok := seen[sub.ID]; ok {
					t.Errorf("round %d: %s returned to both %s and %s", r, sub.ID, other, owner)
				}
				seen[sub.ID] = owner
			}
		}
		if t.Failed() {
			return
		}
	}
	// After the last round every subscription is held by the one claimer
	// that was last given it.
	held := make(map[string]string)
	for i, owner := range owners {
		for _, id := range last[i] {
			held[id] = owner
		}
	}
	for _, sub := range subs {
		got, err := s.Subscription(t.Context(), sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LeaseOwner == "" || got.LeaseOwner != held[sub.ID] {
			t.Errorf("%s ends leased to %q; the last claims returned it to %q", sub.ID, got.LeaseOwner, held[sub.ID])
		}
	}
}

func testDeliveries(t *testing.T, h Harness) {
	s := open(t, h)
	sub, other := bareSubscription(1), bareSubscription(2)
	createSubscriptions(t, s, sub, other)
	// 25 attempts of sub, between which other's are recorded.
	var want []lifecycle.Delivery
	for i := range 25 {
		var d lifecycle.Delivery
		switch i % 3 {
		case 0:
			d = attempt(sub.ID, i, lifecycle.DeliverySucceeded, time.Duration(i)*time.Second)
			d.ResponseStatus = ptr(204)
		case 1:
			d = attempt(sub.ID, i, lifecycle.DeliveryFailed, time.Duration(i)*time.Second)
			d.Attempt, d.Error = 6, ptr("connection refused; that was attempt 6, the last")
			d.NextAttemptAt = ptr(ts(time.Hour))
		case 2:
			d = pendingAttempt(sub.ID, i, time.Duration(i)*time.Second, time.Duration(i)*time.Minute)
		}
		createDeliveries(t, s, d, attempt(other.ID, i, lifecycle.DeliverySucceeded, 0))
		want = append(want, d)
	}
	slices.Reverse(want)
	got, pages := listDeliveries(t, s, sub.ID, 10)
	if pages != 3 {
		t.Errorf("25 deliveries in pages of 10 took %d pages, want 3", pages)
	}
	if diff := cmp.Diff(want, got, deliveryListOpts); diff != "" {
		t.Errorf("Deliveries newest first (-want +got):\n%s", diff)
	}
	// An exact multiple of the limit ends without an empty page.
	if _, pages := listDeliveries(t, s, sub.ID, 25); pages != 1 {
		t.Errorf("25 deliveries in pages of 25 took %d pages, want 1", pages)
	}
	if got, _ := listDeliveries(t, s, other.ID, 100); len(got) != 25 {
		t.Errorf("the other subscription has %d deliveries, want 25", len(got))
	}

	// Attempts are recorded in one order and retried in that of NextAttemptAt.
	retries := []lifecycle.Delivery{
		pendingAttempt(other.ID, 100, time.Hour, 3*time.Hour),
		pendingAttempt(other.ID, 101, time.Hour, time.Hour+time.Minute),
		pendingAttempt(other.ID, 102, time.Hour, 2*time.Hour),
		pendingAttempt(other.ID, 103, time.Hour, time.Hour+time.Minute), // due with 101, recorded after
	}
	retries[3].ResponseStatus, retries[3].Error = nil, ptr("timeout")
	createDeliveries(t, s, retries...)
	pending, err := pendingDeliveries(t, s, other.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantPending := []lifecycle.Delivery{retries[1], retries[3], retries[2], retries[0]}
	if diff := cmp.Diff(wantPending, pending, equateEmpty); diff != "" {
		t.Errorf("Deliveries(Pending) with bodies, earliest first (-want +got):\n%s", diff)
	}
	pending, err = pendingDeliveries(t, s, other.ID, 2)
	if err != nil || !slices.Equal(deliveryIDs(pending), []string{retries[1].ID, retries[3].ID}) {
		t.Errorf("Deliveries(Pending, limit 2) = %v, %v; want %v", deliveryIDs(pending), err, deliveryIDs(wantPending[:2]))
	}
	pending, err = pendingDeliveries(t, s, sub.ID, 100)
	if err != nil || len(pending) != 8 {
		t.Errorf("Deliveries(Pending, sub) = %d, %v; want 8", len(pending), err)
	}
	for i := 1; i < len(pending); i++ {
		if pending[i].NextAttemptAt.Before(pending[i-1].NextAttemptAt.Time) {
			t.Errorf("pending attempt %s due at %v follows one due at %v", pending[i].ID, pending[i].NextAttemptAt, pending[i-1].NextAttemptAt)
		}
	}

	// The retry of 101 succeeds: 101 fails for good and drops its body.
	done := retries[1]
	done.Status, done.ResponseStatus, done.Error, done.NextAttemptAt, done.Body = lifecycle.DeliveryFailed, ptr(500), ptr("500 then"), ptr(ts(time.Hour+2*time.Minute)), nil
	retry := attempt(other.ID, 101, lifecycle.DeliverySucceeded, time.Hour+time.Minute)
	retry.ID, retry.Attempt, retry.ResponseStatus = "dlv_retry_101", 2, ptr(200)
	update(t, s, func(tx lifecycle.Tx) error {
		return errors.Join(tx.CreateDelivery(t.Context(), retry), tx.UpdateDelivery(t.Context(), done))
	})
	// Another update back to nulls.
	cleared := retries[3]
	cleared.Status, cleared.ResponseStatus, cleared.Error, cleared.NextAttemptAt, cleared.Body = lifecycle.DeliverySucceeded, nil, nil, nil, nil
	update(t, s, func(tx lifecycle.Tx) error { return tx.UpdateDelivery(t.Context(), cleared) })
	pending, err = pendingDeliveries(t, s, other.ID, 10)
	if err != nil || !slices.Equal(deliveryIDs(pending), []string{retries[2].ID, retries[0].ID}) {
		t.Errorf("Deliveries(Pending) after updates = %v, %v; want %v", deliveryIDs(pending), err, []string{retries[2].ID, retries[0].ID})
	}
	page, err := s.Deliveries(t.Context(), lifecycle.DeliveryFilter{SubscriptionID: other.ID, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The update keeps each attempt's place: newest first is creation order.
	wantPage := []lifecycle.Delivery{retry, cleared, retries[2], done, retries[0]}
	if diff := cmp.Diff(wantPage, page.Deliveries, deliveryListOpts); diff != "" {
		t.Errorf("Deliveries after updates (-want +got):\n%s", diff)
	}
	if page.Next == 0 {
		t.Error("Deliveries(limit 5 of 30) has no next page")
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateDelivery(t.Context(), retry) })
	if !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("CreateDelivery(same ID) error = %v, want ErrConflict", err)
	}
}

// testDeliveriesOfEvent records several attempts at delivering each of
// three events to two subscriptions, interleaved: the attempts at one
// event of one subscription are listed newest first, page by page.
func testDeliveriesOfEvent(t *testing.T, h Harness) {
	s := open(t, h)
	sub, other := bareSubscription(1), bareSubscription(2)
	createSubscriptions(t, s, sub, other)
	try := func(subID string, event, n int) lifecycle.Delivery {
		d := attempt(subID, event, lifecycle.DeliveryFailed, time.Duration(n)*time.Minute)
		d.ID, d.Attempt, d.ResponseStatus = fmt.Sprintf("%s_try%d", d.ID, n), n, ptr(500)
		if n == 4 {
			d.Status, d.ResponseStatus = lifecycle.DeliverySucceeded, ptr(204)
		}
		return d
	}
	want := map[string][]lifecycle.Delivery{} // by subscription and event, newest first
	for n := 1; n <= 4; n++ {
		var round []lifecycle.Delivery
		for event := 1; event <= 3; event++ {
			for _, subID := range []string{sub.ID, other.ID} {
				d := try(subID, event, n)
				round = append(round, d)
				want[subID+" "+d.EventID] = append([]lifecycle.Delivery{d}, want[subID+" "+d.EventID]...)
			}
		}
		createDeliveries(t, s, round...)
	}
	// An event only the other subscription was sent.
	only := attempt(other.ID, 9, lifecycle.DeliverySucceeded, time.Hour)
	createDeliveries(t, s, only)
	cases := []struct {
		name       string
		sub, event string
		limit      int
		want       []lifecycle.Delivery
		wantPages  int
	}{
		{"four attempts in pages of 3", sub.ID, "evt_0002", 3, want[sub.ID+" evt_0002"], 2},
		{"four attempts in pages of 4", sub.ID, "evt_0002", 4, want[sub.ID+" evt_0002"], 1},
		{"four attempts in pages of 1", sub.ID, "evt_0001", 1, want[sub.ID+" evt_0001"], 4},
		{"the other subscription's attempts at the same event", other.ID, "evt_0002", 3, want[other.ID+" evt_0002"], 2},
		{"an event sent to the other subscription only", sub.ID, only.EventID, 10, nil, 1},
		{"an event sent to the other subscription only, to it", other.ID, only.EventID, 10, []lifecycle.Delivery{only}, 1},
		{"an unknown event", sub.ID, "evt_missing", 10, nil, 1},
		{"an unknown subscription", "whs_missing", "evt_0002", 10, nil, 1},
	}
	for _, c := range cases {
		f := lifecycle.DeliveryFilter{SubscriptionID: c.sub, EventID: c.event, Limit: c.limit}
		got, pages := listFilteredDeliveries(t, s, f)
		if diff := cmp.Diff(c.want, got, deliveryListOpts); diff != "" {
			t.Errorf("%s: Deliveries(%+v) newest first (-want +got):\n%s", c.name, f, diff)
		}
		if pages != c.wantPages {
			t.Errorf("%s: Deliveries(%+v) took %d pages, want %d", c.name, f, pages, c.wantPages)
		}
	}
	// Without an event, every attempt of the subscription.
	if got, _ := listDeliveries(t, s, sub.ID, 100); len(got) != 12 {
		t.Errorf("Deliveries(%s) without an event has %d attempts, want 12", sub.ID, len(got))
	}
}

// testDeliveryByID reads attempts by ID in a transaction, bodies
// included, and reads them again after an update in the same one.
func testDeliveryByID(t *testing.T, h Harness) {
	s := open(t, h)
	sub := bareSubscription(1)
	createSubscriptions(t, s, sub)
	pending, sent := pendingAttempt(sub.ID, 1, 0, time.Minute), attempt(sub.ID, 2, lifecycle.DeliverySucceeded, time.Second)
	sent.ResponseStatus = ptr(204)
	createDeliveries(t, s, pending, sent)
	read := func(tx lifecycle.Tx, want lifecycle.Delivery) {
		t.Helper()
		got, err := tx.Delivery(t.Context(), want.ID)
		if err != nil {
			t.Errorf("Tx.Delivery(%s): %v", want.ID, err)
			return
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("Tx.Delivery(%s) (-want +got):\n%s", want.ID, diff)
		}
	}
	update(t, s, func(tx lifecycle.Tx) error {
		read(tx, pending)
		read(tx, sent)
		if _, err := tx.Delivery(t.Context(), "dlv_missing"); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("Tx.Delivery(missing) error = %v, want ErrNotFound", err)
		}
		return nil
	})
	// An operator's retry makes a failed attempt pending again, with its
	// body; the transaction reads its own writes.
	failed := pending
	failed.Status, failed.ResponseStatus, failed.Error, failed.NextAttemptAt, failed.Body = lifecycle.DeliveryFailed, ptr(500), ptr("gave up"), nil, nil
	retried := failed
	retried.Status, retried.NextAttemptAt, retried.Body = lifecycle.DeliveryPending, ptr(ts(time.Hour)), []byte(`{"id":"evt_0001","retried":true}`)
	update(t, s, func(tx lifecycle.Tx) error {
		if err := tx.UpdateDelivery(t.Context(), failed); err != nil {
			return err
		}
		read(tx, failed)
		return nil
	})
	update(t, s, func(tx lifecycle.Tx) error {
		d, err := tx.Delivery(t.Context(), failed.ID)
		if err != nil {
			return err
		}
		d.Status, d.NextAttemptAt, d.Body = retried.Status, retried.NextAttemptAt, retried.Body
		if err := tx.UpdateDelivery(t.Context(), d); err != nil {
			return err
		}
		read(tx, retried)
		return nil
	})
	got, err := pendingDeliveries(t, s, sub.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Delivery{retried}, got, equateEmpty); diff != "" {
		t.Errorf("Deliveries(Pending) after the retry (-want +got):\n%s", diff)
	}
	// A delivery of a deleted subscription is gone with it.
	update(t, s, func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), sub.ID) })
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error {
		_, err := tx.Delivery(t.Context(), sent.ID)
		return err
	})
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Tx.Delivery(of a deleted subscription) error = %v, want ErrNotFound", err)
	}
}

// testDeliveryReadForUpdate has many transactions at once read an attempt
// and write it back changed: as Tx.Delivery reads for update, none loses
// another's change.
func testDeliveryReadForUpdate(t *testing.T, h Harness) {
	s := open(t, h)
	sub := bareSubscription(1)
	createSubscriptions(t, s, sub)
	d := pendingAttempt(sub.ID, 1, 0, time.Minute)
	d.Error = ptr("")
	createDeliveries(t, s, d)
	const writers = 16
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
				got, err := tx.Delivery(t.Context(), d.ID)
				if err != nil {
					return err
				}
				got.Error = ptr(*got.Error + "x")
				return tx.UpdateDelivery(t.Context(), got)
			})
			if err != nil {
				t.Errorf("read-modify-write of %s: %v", d.ID, err)
			}
		}()
	}
	wg.Wait()
	update(t, s, func(tx lifecycle.Tx) error {
		got, err := tx.Delivery(t.Context(), d.ID)
		if err != nil {
			return err
		}
		if want := strings.Repeat("x", writers); got.Error == nil || *got.Error != want {
			t.Errorf("after %d read-modify-writes the error is %s, want %q", writers, fmtPtr(got.Error), want)
		}
		return nil
	})
}

func testDeleteSubscription(t *testing.T, h Harness) {
	s := open(t, h)
	gone, kept := bareSubscription(1), bareSubscription(2)
	createSubscriptions(t, s, gone, kept)
	createDeliveries(t, s,
		attempt(gone.ID, 1, lifecycle.DeliverySucceeded, 0),
		pendingAttempt(gone.ID, 2, 0, time.Minute),
		attempt(kept.ID, 1, lifecycle.DeliverySucceeded, 0),
		pendingAttempt(kept.ID, 2, 0, time.Minute),
	)
	update(t, s, func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), gone.ID) })
	if _, err := s.Subscription(t.Context(), gone.ID); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("Subscription(deleted) error = %v, want ErrNotFound", err)
	}
	if got, _ := listDeliveries(t, s, gone.ID, 10); len(got) != 0 {
		t.Errorf("deliveries of a deleted subscription: %v, want none", deliveryIDs(got))
	}
	if got, err := pendingDeliveries(t, s, gone.ID, 10); err != nil || len(got) != 0 {
		t.Errorf("pending deliveries of a deleted subscription: %v, %v; want none", deliveryIDs(got), err)
	}
	if got, _ := listDeliveries(t, s, kept.ID, 10); len(got) != 2 {
		t.Errorf("the other subscription has %d deliveries, want 2", len(got))
	}
	page, err := s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 10})
	if err != nil || !slices.Equal(subscriptionIDs(page.Subscriptions), []string{kept.ID}) {
		t.Errorf("ListSubscriptions after delete = %v, %v; want [%s]", subscriptionIDs(page.Subscriptions), err, kept.ID)
	}
	// The attempts are gone, not hidden: a new subscription with the same ID has none.
	createSubscriptions(t, s, gone)
	if got, _ := listDeliveries(t, s, gone.ID, 10); len(got) != 0 {
		t.Errorf("deliveries of a recreated subscription: %v, want none", deliveryIDs(got))
	}
	// And they may be recorded again.
	createDeliveries(t, s, attempt(gone.ID, 1, lifecycle.DeliverySucceeded, 0))
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), gone.ID) })
	if err != nil {
		t.Errorf("DeleteSubscription: %v", err)
	}
	err = s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), gone.ID) })
	if !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("DeleteSubscription twice: error = %v, want ErrNotFound", err)
	}
}

// pendingDeliveries returns the pending attempts of a subscription, as
// Deliveries with DeliveryFilter.Pending reads them: on one page.
func pendingDeliveries(t *testing.T, s lifecycle.Store, subID string, limit int) ([]lifecycle.Delivery, error) {
	t.Helper()
	page, err := s.Deliveries(t.Context(), lifecycle.DeliveryFilter{SubscriptionID: subID, Pending: true, Limit: limit})
	if err == nil && page.Next != 0 {
		t.Errorf("Deliveries(%s, Pending) Next = %d, want 0: pending attempts come on one page", subID, page.Next)
	}
	return page.Deliveries, err
}

// testPruneDeliveries checks that Prune deletes the attempts made before
// its cutoff, but never a pending one.
func testPruneDeliveries(t *testing.T, h Harness) {
	s := open(t, h)
	a, b := bareSubscription(1), bareSubscription(2)
	createSubscriptions(t, s, a, b)
	oldPending := pendingAttempt(a.ID, 3, -2*time.Hour, time.Hour)
	createDeliveries(t, s,
		attempt(a.ID, 1, lifecycle.DeliverySucceeded, -2*time.Hour),
		attempt(b.ID, 2, lifecycle.DeliveryFailed, -2*time.Hour),
		oldPending,
		attempt(a.ID, 4, lifecycle.DeliverySucceeded, -time.Hour), // exactly at the cutoff
		attempt(b.ID, 5, lifecycle.DeliveryFailed, 0),
	)
	prune := func(before time.Time, want int64) {
		t.Helper()
		if n, err := s.Prune(t.Context(), lifecycle.PruneParams{Before: before}); err != nil || n != (lifecycle.PruneResult{Deliveries: want}) {
			t.Errorf("Prune(%v) = %+v, %v; want %d deliveries", before, n, err, want)
		}
	}
	prune(base.Add(-time.Hour), 2)
	gotA, _ := listDeliveries(t, s, a.ID, 10)
	gotB, _ := listDeliveries(t, s, b.ID, 10)
	if diff := cmp.Diff([]string{attempt(a.ID, 4, "", 0).ID, oldPending.ID}, deliveryIDs(gotA)); diff != "" {
		t.Errorf("a's deliveries after pruning (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{attempt(b.ID, 5, "", 0).ID}, deliveryIDs(gotB)); diff != "" {
		t.Errorf("b's deliveries after pruning (-want +got):\n%s", diff)
	}
	// Everything not pending goes; the pending attempt stays with its body.
	prune(base.Add(time.Hour), 2)
	pending, err := pendingDeliveries(t, s, a.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Delivery{oldPending}, pending, equateEmpty); diff != "" {
		t.Errorf("pending deliveries after pruning (-want +got):\n%s", diff)
	}
	prune(base.Add(time.Hour), 0)
}

func testReopenKeepsWebhooks(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a store")
	}
	s := h.Open(t)
	sub := fullSubscription(1)
	createSubscriptions(t, s, sub)
	sent, pending := attempt(sub.ID, 1, lifecycle.DeliverySucceeded, 0), pendingAttempt(sub.ID, 2, time.Second, time.Minute)
	sent.ResponseStatus = ptr(200)
	createDeliveries(t, s, sent, pending)
	s = h.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	got, err := s.Subscription(t.Context(), sub.ID)
	if err != nil {
		t.Fatalf("Subscription after reopen: %v", err)
	}
	if diff := cmp.Diff(sub, got, subscriptionOpts); diff != "" {
		t.Errorf("subscription after reopen (-want +got):\n%s", diff)
	}
	list, _ := listDeliveries(t, s, sub.ID, 10)
	if diff := cmp.Diff([]lifecycle.Delivery{pending, sent}, list, deliveryListOpts); diff != "" {
		t.Errorf("deliveries after reopen (-want +got):\n%s", diff)
	}
	gotPending, err := pendingDeliveries(t, s, sub.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]lifecycle.Delivery{pending}, gotPending, equateEmpty); diff != "" {
		t.Errorf("pending deliveries after reopen (-want +got):\n%s", diff)
	}
	// Attempts recorded after the reopen are listed first.
	next := attempt(sub.ID, 3, lifecycle.DeliverySucceeded, 2*time.Second)
	createDeliveries(t, s, next)
	list, _ = listDeliveries(t, s, sub.ID, 10)
	if diff := cmp.Diff([]string{next.ID, pending.ID, sent.ID}, deliveryIDs(list)); diff != "" {
		t.Errorf("deliveries after reopen and a new attempt (-want +got):\n%s", diff)
	}
}

func testWebhooksClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Subscription(t.Context(), "whs_x"); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Subscription after Close: error = %v, want ErrClosed", err)
	}
	if _, err := s.ListSubscriptions(t.Context(), lifecycle.ListSubscriptionsParams{Limit: 10}); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("ListSubscriptions after Close: error = %v, want ErrClosed", err)
	}
	if _, err := s.Deliveries(t.Context(), lifecycle.DeliveryFilter{SubscriptionID: "whs_x", Limit: 10}); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Deliveries after Close: error = %v, want ErrClosed", err)
	}
	if _, err := pendingDeliveries(t, s, "whs_x", 10); !errors.Is(err, lifecycle.ErrClosed) {
		t.Errorf("Deliveries(Pending) after Close: error = %v, want ErrClosed", err)
	}
}
