package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// storedSubscription returns the copy of sub the Store keeps, with empty
// lists for nil ones.
func storedSubscription(sub lifecycle.Subscription) lifecycle.Subscription {
	sub = clone(sub)
	sub.EventTypes = nonNil(sub.EventTypes)
	sub.Filters.TaskIDs, sub.Filters.Projects = nonNil(sub.Filters.TaskIDs), nonNil(sub.Filters.Projects)
	sub.SealedSecret = nonNil(sub.SealedSecret)
	return sub
}

// Subscription implements lifecycle.Store.
func (s *Store) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	var sub lifecycle.Subscription
	err := s.read(func(t *tables) error {
		var err error
		sub, err = getSubscription(t.subscriptions, id)
		return err
	})
	return sub, err
}

// Subscription implements lifecycle.Tx.
func (x *txn) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	return getSubscription(x.subscriptions, id)
}

// getSubscription returns a copy of the subscription with the given ID.
func getSubscription(subs records[lifecycle.Subscription], id string) (lifecycle.Subscription, error) {
	sub, ok := subs.get(id)
	if !ok {
		return sub, fmt.Errorf("memory: subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	return clone(sub), nil
}

// ListSubscriptions implements lifecycle.Store. Positions are those of
// the subscriptions' creation.
func (s *Store) ListSubscriptions(ctx context.Context, f lifecycle.ListSubscriptionsParams) (lifecycle.SubscriptionPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	var page lifecycle.SubscriptionPage
	err := s.read(func(t *tables) error {
		var last int64
		for pos, sub := range t.subscriptions.after(f.After) {
			if len(page.Subscriptions) == limit {
				page.Next = last
				break
			}
			page.Subscriptions = append(page.Subscriptions, clone(sub))
			last = pos
		}
		return nil
	})
	return page, err
}

// CreateSubscription implements lifecycle.Tx. Every Listen is told at
// commit.
func (x *txn) CreateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	if _, ok := x.subscriptions.insert(sub.ID, storedSubscription(sub)); !ok {
		return fmt.Errorf("memory: create subscription %s: %w", sub.ID, lifecycle.ErrConflict)
	}
	x.changes |= lifecycle.ChangeSubscriptions
	return nil
}

// UpdateSubscription implements lifecycle.Tx. A change of status or of
// revision is told to every Listen at commit.
func (x *txn) UpdateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	stored, ok := x.subscriptions.get(sub.ID)
	if !ok {
		return fmt.Errorf("memory: update subscription %s: %w", sub.ID, lifecycle.ErrNotFound)
	}
	if sub.Status != stored.Status || sub.Revision != stored.Revision {
		x.changes |= lifecycle.ChangeSubscriptions
	}
	stored.Status, stored.Cursor, stored.LeaseOwner, stored.LeaseUntil = sub.Status, sub.Cursor, sub.LeaseOwner, sub.LeaseUntil
	stored.Revision, stored.Rewound, stored.RewindTo = sub.Revision, sub.Rewound, sub.RewindTo
	x.subscriptions.replace(sub.ID, stored)
	return nil
}

// UpdateSubscriptionSecret implements lifecycle.SecretResealer.
func (s *Store) UpdateSubscriptionSecret(ctx context.Context, id string, sealed []byte) error {
	return s.Update(ctx, func(tx lifecycle.Tx) error {
		x := tx.(*txn)
		stored, ok := x.subscriptions.get(id)
		if !ok {
			return fmt.Errorf("memory: update the secret of subscription %s: %w", id, lifecycle.ErrNotFound)
		}
		stored.SealedSecret = nonNil(clone(sealed))
		x.subscriptions.replace(id, stored)
		return nil
	})
}

// DeleteSubscription implements lifecycle.Tx. It deletes the
// subscription's delivery attempts with it, and every Listen is told at
// commit.
func (x *txn) DeleteSubscription(ctx context.Context, id string) error {
	if !x.subscriptions.delete(id) {
		return fmt.Errorf("memory: delete subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	var attempts []string
	for _, d := range x.deliveries.all() {
		if d.SubscriptionID == id {
			attempts = append(attempts, d.ID)
		}
	}
	for _, d := range attempts {
		x.deliveries.delete(d)
	}
	x.changes |= lifecycle.ChangeSubscriptions
	return nil
}

// ClaimSubscriptions implements lifecycle.Tx. The transaction runs alone,
// so claims never overlap: a subscription is leased to one owner at a
// time.
func (x *txn) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	var free []lifecycle.Subscription // in creation order
	for _, sub := range x.subscriptions.all() {
		if sub.Status != lifecycle.SubscriptionActive {
			continue
		}
		if sub.LeaseOwner == p.Owner {
			sub.LeaseUntil = p.Until
			x.subscriptions.replace(sub.ID, sub)
		} else if sub.LeaseUntil.Before(p.Now) {
			free = append(free, sub)
		}
	}
	// The oldest lease first; the oldest subscription among equal ones.
	slices.SortStableFunc(free, func(a, b lifecycle.Subscription) int { return a.LeaseUntil.Compare(b.LeaseUntil) })
	for _, sub := range free[:min(len(free), max(p.Max, 0))] {
		sub.LeaseOwner, sub.LeaseUntil = p.Owner, p.Until
		x.subscriptions.replace(sub.ID, sub)
	}
	var held []lifecycle.Subscription
	for _, sub := range x.subscriptions.all() {
		if sub.Status == lifecycle.SubscriptionActive && sub.LeaseOwner == p.Owner {
			held = append(held, clone(sub))
		}
	}
	return held, nil
}

// CreateDelivery implements lifecycle.Tx.
func (x *txn) CreateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	if _, ok := x.subscriptions.get(d.SubscriptionID); !ok {
		return fmt.Errorf("memory: create delivery %s: subscription %s: %w", d.ID, d.SubscriptionID, lifecycle.ErrNotFound)
	}
	if _, ok := x.deliveries.insert(d.ID, clone(d)); !ok {
		return fmt.Errorf("memory: create delivery %s: %w", d.ID, lifecycle.ErrConflict)
	}
	return nil
}

// Delivery implements lifecycle.Tx. The transaction runs alone, so no
// other changes the attempt before it ends.
func (x *txn) Delivery(ctx context.Context, id string) (lifecycle.Delivery, error) {
	d, ok := x.deliveries.get(id)
	if !ok {
		return d, fmt.Errorf("memory: delivery %s: %w", id, lifecycle.ErrNotFound)
	}
	return clone(d), nil
}

// UpdateDelivery implements lifecycle.Tx.
func (x *txn) UpdateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	stored, ok := x.deliveries.get(d.ID)
	if !ok {
		return fmt.Errorf("memory: update delivery %s: %w", d.ID, lifecycle.ErrNotFound)
	}
	d = clone(d)
	stored.Status, stored.ResponseStatus, stored.Error, stored.NextAttemptAt, stored.Body = d.Status, d.ResponseStatus, d.Error, d.NextAttemptAt, d.Body
	x.deliveries.replace(d.ID, stored)
	return nil
}

// Deliveries implements lifecycle.Store. It leaves Body nil, but for
// pending attempts. Positions are those of the attempts' creation.
func (s *Store) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if f.Pending {
		ds, err := s.pendingDeliveries(f.SubscriptionID, f.Limit)
		return lifecycle.DeliveryPage{Deliveries: ds}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	var page lifecycle.DeliveryPage
	err := s.read(func(t *tables) error {
		var last int64
		for pos, d := range t.deliveries.before(f.Before) {
			if d.SubscriptionID != f.SubscriptionID || f.EventID != "" && d.EventID != f.EventID {
				continue
			}
			if len(page.Deliveries) == limit {
				page.Next = last
				break
			}
			d.Body = nil
			page.Deliveries = append(page.Deliveries, clone(d))
			last = pos
		}
		return nil
	})
	return page, err
}

// pendingDeliveries returns up to limit pending attempts of a
// subscription with their Body, earliest NextAttemptAt first; attempts
// due at the same time come in the order they were recorded.
func (s *Store) pendingDeliveries(subscriptionID string, limit int) ([]lifecycle.Delivery, error) {
	if limit <= 0 {
		limit = 1000
	}
	var pending []lifecycle.Delivery
	err := s.read(func(t *tables) error {
		for _, d := range t.deliveries.all() {
			if d.SubscriptionID == subscriptionID && d.Status == lifecycle.DeliveryPending {
				pending = append(pending, d)
			}
		}
		slices.SortStableFunc(pending, func(a, b lifecycle.Delivery) int { return nextAttempt(a).Compare(nextAttempt(b)) })
		pending = pending[:min(len(pending), limit)]
		for i := range pending {
			pending[i] = clone(pending[i])
		}
		return nil
	})
	return pending, err
}

// nextAttempt returns when the next attempt of d is due; one that has no
// time comes first, as NULL does in SQL.
func nextAttempt(d lifecycle.Delivery) time.Time {
	if d.NextAttemptAt == nil {
		return time.Time{}
	}
	return d.NextAttemptAt.Time
}
