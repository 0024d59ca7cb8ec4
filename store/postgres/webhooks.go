package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// UpdateSubscription implements lifecycle.Tx. A change of status or of
// revision notifies the webhook dispatchers of every process at commit.
func (x *txn) UpdateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	var (
		oldStatus   string
		oldRevision int64
	)
	err := x.tx.QueryRow(ctx, `WITH old AS (SELECT id, status, revision FROM webhook_subscriptions WHERE id = $1 FOR UPDATE)
		UPDATE webhook_subscriptions w SET status = $2, cursor = $3, lease_owner = $4, lease_until = $5,
			revision = $6, rewound = $7, rewind_to = $8
		FROM old WHERE w.id = old.id RETURNING old.status, old.revision`,
		sub.ID, string(sub.Status), sub.Cursor, sub.LeaseOwner, sqlstore.Millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo).Scan(&oldStatus, &oldRevision)
	if err != nil {
		return fmt.Errorf("postgres: update subscription %s: %w", sub.ID, x.fail(err))
	}
	if oldStatus != string(sub.Status) || oldRevision != sub.Revision {
		x.Changes |= lifecycle.ChangeSubscriptions
	}
	return nil
}

// ClaimSubscriptions implements lifecycle.Tx. One statement takes up to
// p.Max expired leases with FOR UPDATE SKIP LOCKED and renews them with
// those p.Owner holds. A lease another claim is taking over at the same
// time is locked by it: the renewal waits for it, finds the subscription
// no longer p.Owner's, and leaves it.
func (x *txn) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	subs, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanSubscriptionOnly, `WITH expired AS (
		SELECT pos FROM webhook_subscriptions
		WHERE status = 'active' AND lease_owner <> $1 AND lease_until < $3
		ORDER BY lease_until, pos LIMIT $4 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE webhook_subscriptions w SET lease_owner = $1, lease_until = $2
		WHERE w.status = 'active' AND (w.lease_owner = $1 OR w.pos IN (SELECT pos FROM expired))
		RETURNING w.*)
	SELECT `+sqlstore.SubscriptionColumns+` FROM claimed ORDER BY pos`,
		p.Owner, sqlstore.Millis(p.Until), sqlstore.Millis(p.Now), max(p.Max, 0))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim subscriptions for %s: %w", p.Owner, x.fail(err))
	}
	return subs, nil
}

// CreateDelivery implements lifecycle.Tx.
func (x *txn) CreateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, errText, next, body := sqlstore.DeliveryArgs(&d)
	n, err := x.exec(ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status,
		response_status, error, attempted_at, next_attempt_at, body)
		SELECT $1, id, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM webhook_subscriptions WHERE id = $2
		ON CONFLICT DO NOTHING`,
		d.ID, d.SubscriptionID, d.EventID, d.EventSequence, int64(d.Attempt), string(d.Status),
		response, errText, sqlstore.Millis(d.AttemptedAt.Time), next, body)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // deleted meanwhile
		return fmt.Errorf("postgres: create delivery %s: subscription %s: %w: %w", d.ID, d.SubscriptionID, err, lifecycle.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("postgres: create delivery %s: %w", d.ID, err)
	}
	if n == 1 {
		return nil
	}
	var exists bool
	if err := x.tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = $1)", d.SubscriptionID).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: create delivery %s: %w", d.ID, x.fail(err))
	}
	if !exists {
		return fmt.Errorf("postgres: create delivery %s: subscription %s: %w", d.ID, d.SubscriptionID, lifecycle.ErrNotFound)
	}
	return fmt.Errorf("postgres: create delivery %s: one with this ID exists: %w", d.ID, lifecycle.ErrConflict)
}
