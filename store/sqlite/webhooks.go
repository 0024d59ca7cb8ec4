package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// UpdateSubscription implements lifecycle.Tx.
func (x *txn) UpdateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	res, err := x.conn.ExecContext(x.ctx, `UPDATE webhook_subscriptions SET status = ?, cursor = ?, lease_owner = ?, lease_until = ?,
		revision = ?, rewound = ?, rewind_to = ? WHERE id = ?`,
		string(sub.Status), sub.Cursor, sub.LeaseOwner, sqlstore.Millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo, sub.ID)
	if err != nil {
		return fmt.Errorf("sqlite: update subscription %s: %w", sub.ID, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update subscription %s: %w", sub.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// ClaimSubscriptions implements lifecycle.Tx. One statement renews and
// takes the leases, inside a transaction that holds the write lock from its
// start (BEGIN IMMEDIATE), so claims of several processes never overlap.
func (x *txn) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	_, err := x.conn.ExecContext(x.ctx, `UPDATE webhook_subscriptions SET lease_owner = ?, lease_until = ?
		WHERE status = 'active' AND (lease_owner = ? OR pos IN (SELECT pos FROM webhook_subscriptions
			WHERE status = 'active' AND lease_owner != ? AND lease_until < ? ORDER BY lease_until, pos LIMIT ?))`,
		p.Owner, sqlstore.Millis(p.Until), p.Owner, p.Owner, sqlstore.Millis(p.Now), max(p.Max, 0))
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim subscriptions for %s: %w", p.Owner, translate(err))
	}
	subs, err := sqlstore.QueryAll(ctx, x.X, sqlstore.ScanSubscriptionOnly, "SELECT "+sqlstore.SubscriptionColumns+` FROM webhook_subscriptions
		WHERE status = 'active' AND lease_owner = $1 ORDER BY pos`, p.Owner)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim subscriptions for %s: %w", p.Owner, err)
	}
	return subs, nil
}

// CreateDelivery implements lifecycle.Tx.
func (x *txn) CreateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, errText, next, body := sqlstore.DeliveryArgs(&d)
	_, err := x.conn.ExecContext(x.ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status,
		response_status, error, attempted_at, next_attempt_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.SubscriptionID, d.EventID, d.EventSequence, int64(d.Attempt), string(d.Status),
		response, errText, sqlstore.Millis(d.AttemptedAt.Time), next, body)
	var se sqlite3.Error
	if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintForeignKey {
		return fmt.Errorf("sqlite: create delivery %s: subscription %s: %w: %w", d.ID, d.SubscriptionID, err, lifecycle.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create delivery %s: %w", d.ID, translate(err))
	}
	return nil
}
