package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/tasklifecycle/lifecycle"
)

// subscriptionColumns are the columns of a subscription, in the order
// scanSubscription reads them.
const subscriptionColumns = `pos, id, url, event_types, description, filters, status, secret, created_at,
	cursor, lease_owner, lease_until, revision, rewound, rewind_to, allow_private_target`

// subscriptionRow holds the scanned columns of a subscription.
type subscriptionRow struct {
	sub                 lifecycle.Subscription
	pos, created, lease int64
	types, filters      []byte
	description         sql.NullString
	status              string
}

// scanSubscription reads one row of subscriptionColumns.
func scanSubscription(row scanner) (lifecycle.Subscription, int64, error) {
	r := new(subscriptionRow)
	sub := &r.sub
	err := row.Scan(&r.pos, &sub.ID, &sub.URL, &r.types, &r.description, &r.filters, &r.status, &sub.SealedSecret,
		&r.created, &sub.Cursor, &sub.LeaseOwner, &r.lease, &sub.Revision, &sub.Rewound, &sub.RewindTo, &sub.AllowPrivateTarget)
	if err != nil {
		return *sub, 0, translate(err)
	}
	if err := json.Unmarshal(r.types, &sub.EventTypes); err != nil {
		return *sub, 0, fmt.Errorf("sqlite: subscription %s event types: %w", sub.ID, err)
	}
	if err := json.Unmarshal(r.filters, &sub.Filters); err != nil {
		return *sub, 0, fmt.Errorf("sqlite: subscription %s filters: %w", sub.ID, err)
	}
	sub.EventTypes = nonNil(sub.EventTypes)
	sub.Filters.TaskIDs, sub.Filters.Projects = nonNil(sub.Filters.TaskIDs), nonNil(sub.Filters.Projects)
	sub.Description = nullString(&r.description)
	sub.Status = lifecycle.SubscriptionStatus(r.status)
	sub.CreatedAt = fromMillis(r.created)
	sub.LeaseUntil = leaseTime(r.lease)
	return *sub, r.pos, nil
}

// leaseTime converts a stored lease end back to a time: the zero time,
// stored as its Unix milliseconds, comes back as the zero time.
func leaseTime(ms int64) time.Time {
	t := time.UnixMilli(ms)
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// Subscription implements lifecycle.Store.
func (s *Store) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	if s.closed.Load() {
		return lifecycle.Subscription{}, errClosed
	}
	return getSubscription(ctx, s.r, id)
}

// Subscription implements lifecycle.Tx.
func (x *txn) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	return getSubscription(x.ctx, x.conn, id)
}

func getSubscription(ctx context.Context, q queryer, id string) (lifecycle.Subscription, error) {
	sub, _, err := scanSubscription(q.QueryRowContext(ctx, "SELECT "+subscriptionColumns+" FROM webhook_subscriptions WHERE id = ?", id))
	if err != nil {
		return sub, fmt.Errorf("sqlite: subscription %s: %w", id, err)
	}
	return sub, nil
}

// ListSubscriptions implements lifecycle.Store.
func (s *Store) ListSubscriptions(ctx context.Context, f lifecycle.ListSubscriptionsParams) (lifecycle.SubscriptionPage, error) {
	if s.closed.Load() {
		return lifecycle.SubscriptionPage{}, errClosed
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.r.QueryContext(ctx, "SELECT "+subscriptionColumns+" FROM webhook_subscriptions WHERE pos > ? ORDER BY pos LIMIT ?", f.After, limit+1)
	if err != nil {
		return lifecycle.SubscriptionPage{}, fmt.Errorf("sqlite: list subscriptions: %w", translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.SubscriptionPage
		last int64
	)
	for rows.Next() {
		sub, pos, err := scanSubscription(rows)
		if err != nil {
			return lifecycle.SubscriptionPage{}, fmt.Errorf("sqlite: list subscriptions: %w", err)
		}
		if len(page.Subscriptions) == limit {
			page.Next = last
			break
		}
		page.Subscriptions = append(page.Subscriptions, sub)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.SubscriptionPage{}, fmt.Errorf("sqlite: list subscriptions: %w", translate(err))
	}
	return page, nil
}

// CreateSubscription implements lifecycle.Tx.
func (x *txn) CreateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	types, err := json.Marshal(nonNil(sub.EventTypes))
	if err != nil {
		return fmt.Errorf("sqlite: encode subscription %s: %w", sub.ID, err)
	}
	filters, err := json.Marshal(lifecycle.SubscriptionFilters{
		TaskIDs:  nonNil(sub.Filters.TaskIDs),
		Projects: nonNil(sub.Filters.Projects),
	})
	if err != nil {
		return fmt.Errorf("sqlite: encode subscription %s: %w", sub.ID, err)
	}
	_, err = x.conn.ExecContext(x.ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, description, filters, status,
		secret, created_at, cursor, lease_owner, lease_until, revision, rewound, rewind_to, allow_private_target)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sub.ID, sub.URL, string(types), sub.Description, string(filters), string(sub.Status),
		nonNil(sub.SealedSecret), millis(sub.CreatedAt.Time), sub.Cursor, sub.LeaseOwner, millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo,
		sub.AllowPrivateTarget)
	if err != nil {
		return fmt.Errorf("sqlite: create subscription %s: %w", sub.ID, translate(err))
	}
	return nil
}

// UpdateSubscription implements lifecycle.Tx.
func (x *txn) UpdateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	res, err := x.conn.ExecContext(x.ctx, `UPDATE webhook_subscriptions SET status = ?, cursor = ?, lease_owner = ?, lease_until = ?,
		revision = ?, rewound = ?, rewind_to = ? WHERE id = ?`,
		string(sub.Status), sub.Cursor, sub.LeaseOwner, millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo, sub.ID)
	if err != nil {
		return fmt.Errorf("sqlite: update subscription %s: %w", sub.ID, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update subscription %s: %w", sub.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// DeleteSubscription implements lifecycle.Tx. The foreign key deletes the
// subscription's deliveries with it.
func (x *txn) DeleteSubscription(ctx context.Context, id string) error {
	res, err := x.conn.ExecContext(x.ctx, "DELETE FROM webhook_subscriptions WHERE id = ?", id)
	if err != nil {
		return fmt.Errorf("sqlite: delete subscription %s: %w", id, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: delete subscription %s: %w", id, lifecycle.ErrNotFound)
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
		p.Owner, millis(p.Until), p.Owner, p.Owner, millis(p.Now), max(p.Max, 0))
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim subscriptions for %s: %w", p.Owner, translate(err))
	}
	scan := func(row scanner) (lifecycle.Subscription, error) {
		sub, _, err := scanSubscription(row)
		return sub, err
	}
	subs, err := queryAll(x.ctx, x.conn, scan, "SELECT "+subscriptionColumns+` FROM webhook_subscriptions
		WHERE status = 'active' AND lease_owner = ? ORDER BY pos`, p.Owner)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim subscriptions for %s: %w", p.Owner, err)
	}
	return subs, nil
}

// deliveryColumns are the columns of a delivery but its body, in the order
// scanDelivery reads them.
const deliveryColumns = `pos, id, subscription_id, event_id, event_seq, attempt, status, response_status, error,
	attempted_at, next_attempt_at`

// deliveryRow holds the scanned columns of a delivery.
type deliveryRow struct {
	d              lifecycle.Delivery
	pos, attempted int64
	status         string
	response, next sql.NullInt64
	errText        sql.NullString
	responseInt    int
	nextAt         lifecycle.Timestamp
	dest           [12]any // the arguments of Scan
}

// scanDelivery reads one row of deliveryColumns, followed by body when
// withBody is set.
func scanDelivery(row scanner, withBody bool) (lifecycle.Delivery, int64, error) {
	r := new(deliveryRow)
	d := &r.d
	args := append(r.dest[:0], &r.pos, &d.ID, &d.SubscriptionID, &d.EventID, &d.EventSequence, &d.Attempt, &r.status,
		&r.response, &r.errText, &r.attempted, &r.next)
	if withBody {
		args = append(args, &d.Body)
	}
	if err := row.Scan(args...); err != nil {
		return *d, 0, translate(err)
	}
	d.Status = lifecycle.DeliveryStatus(r.status)
	d.AttemptedAt = fromMillis(r.attempted)
	if r.response.Valid {
		r.responseInt = int(r.response.Int64)
		d.ResponseStatus = &r.responseInt
	}
	d.Error = nullString(&r.errText)
	if r.next.Valid {
		r.nextAt = fromMillis(r.next.Int64)
		d.NextAttemptAt = &r.nextAt
	}
	return *d, r.pos, nil
}

// deliveryArgs returns the values of the columns CreateDelivery and
// UpdateDelivery write that may be NULL: response_status, error,
// next_attempt_at and body.
func deliveryArgs(d *lifecycle.Delivery) (response, errText, next, body any) {
	if d.ResponseStatus != nil {
		response = int64(*d.ResponseStatus)
	}
	if d.Error != nil {
		errText = *d.Error
	}
	if d.NextAttemptAt != nil {
		next = millis(d.NextAttemptAt.Time)
	}
	if d.Body != nil {
		body = d.Body
	}
	return response, errText, next, body
}

// CreateDelivery implements lifecycle.Tx.
func (x *txn) CreateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, errText, next, body := deliveryArgs(&d)
	_, err := x.conn.ExecContext(x.ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status,
		response_status, error, attempted_at, next_attempt_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.SubscriptionID, d.EventID, d.EventSequence, int64(d.Attempt), string(d.Status),
		response, errText, millis(d.AttemptedAt.Time), next, body)
	var se sqlite3.Error
	if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintForeignKey {
		return fmt.Errorf("sqlite: create delivery %s: subscription %s: %w: %w", d.ID, d.SubscriptionID, err, lifecycle.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: create delivery %s: %w", d.ID, translate(err))
	}
	return nil
}

// Delivery implements lifecycle.Tx. The transaction holds SQLite's write
// lock, so what it reads no other writer changes before it ends.
func (x *txn) Delivery(ctx context.Context, id string) (lifecycle.Delivery, error) {
	d, _, err := scanDelivery(x.conn.QueryRowContext(x.ctx, "SELECT "+deliveryColumns+", body FROM webhook_deliveries WHERE id = ?", id), true)
	if err != nil {
		return d, fmt.Errorf("sqlite: delivery %s: %w", id, err)
	}
	return d, nil
}

// UpdateDelivery implements lifecycle.Tx.
func (x *txn) UpdateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, errText, next, body := deliveryArgs(&d)
	res, err := x.conn.ExecContext(x.ctx, `UPDATE webhook_deliveries SET status = ?, response_status = ?, error = ?,
		next_attempt_at = ?, body = ? WHERE id = ?`, string(d.Status), response, errText, next, body, d.ID)
	if err != nil {
		return fmt.Errorf("sqlite: update delivery %s: %w", d.ID, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update delivery %s: %w", d.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// Deliveries implements lifecycle.Store. It leaves Body nil, but for
// pending attempts.
func (s *Store) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if s.closed.Load() {
		return lifecycle.DeliveryPage{}, errClosed
	}
	if f.Pending {
		ds, err := s.pendingDeliveries(ctx, f.SubscriptionID, f.Limit)
		return lifecycle.DeliveryPage{Deliveries: ds}, err
	}
	before := f.Before
	if before == 0 {
		before = math.MaxInt64
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	what := "deliveries of " + f.SubscriptionID
	query, args := "SELECT "+deliveryColumns+` FROM webhook_deliveries
		WHERE subscription_id = ? AND pos < ? ORDER BY pos DESC LIMIT ?`, []any{f.SubscriptionID, before, limit + 1}
	if f.EventID != "" {
		what += " for event " + f.EventID
		query, args = "SELECT "+deliveryColumns+` FROM webhook_deliveries
			WHERE subscription_id = ? AND event_id = ? AND pos < ? ORDER BY pos DESC LIMIT ?`, []any{f.SubscriptionID, f.EventID, before, limit + 1}
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return lifecycle.DeliveryPage{}, fmt.Errorf("sqlite: %s: %w", what, translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.DeliveryPage
		last int64
	)
	for rows.Next() {
		d, pos, err := scanDelivery(rows, false)
		if err != nil {
			return lifecycle.DeliveryPage{}, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		if len(page.Deliveries) == limit {
			page.Next = last
			break
		}
		page.Deliveries = append(page.Deliveries, d)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.DeliveryPage{}, fmt.Errorf("sqlite: %s: %w", what, translate(err))
	}
	return page, nil
}

// pendingDeliveries returns up to limit pending attempts of a
// subscription with their Body, earliest NextAttemptAt first; attempts due
// at the same time come in the order they were recorded.
func (s *Store) pendingDeliveries(ctx context.Context, subscriptionID string, limit int) ([]lifecycle.Delivery, error) {
	if limit <= 0 {
		limit = 1000
	}
	scan := func(row scanner) (lifecycle.Delivery, error) {
		d, _, err := scanDelivery(row, true)
		return d, err
	}
	ds, err := queryAll(ctx, s.r, scan, "SELECT "+deliveryColumns+`, body FROM webhook_deliveries
		WHERE subscription_id = ? AND status = 'pending' ORDER BY next_attempt_at, pos LIMIT ?`, subscriptionID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending deliveries of %s: %w", subscriptionID, err)
	}
	return ds, nil
}

// deleteDeliveriesBefore deletes the attempts made before t that are not
// pending, in batches so that writers are not held up by a large prune.
func (s *Store) deleteDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM webhook_deliveries WHERE pos IN (SELECT pos FROM webhook_deliveries
		WHERE attempted_at < ? AND status != 'pending' LIMIT ?)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("sqlite: delete deliveries: %w", err)
	}
	return n, nil
}
