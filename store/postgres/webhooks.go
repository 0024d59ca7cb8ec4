package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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
	types, filters      string
	status              string
}

// scanSubscription reads one row of subscriptionColumns.
func scanSubscription(row scanner) (lifecycle.Subscription, int64, error) {
	r := new(subscriptionRow)
	sub := &r.sub
	err := row.Scan(&r.pos, &sub.ID, &sub.URL, &r.types, &sub.Description, &r.filters, &r.status, &sub.SealedSecret,
		&r.created, &sub.Cursor, &sub.LeaseOwner, &r.lease, &sub.Revision, &sub.Rewound, &sub.RewindTo, &sub.AllowPrivateTarget)
	if err != nil {
		return *sub, 0, err
	}
	if err := json.Unmarshal([]byte(r.types), &sub.EventTypes); err != nil {
		return *sub, 0, fmt.Errorf("subscription %s event types: %w", sub.ID, err)
	}
	if err := json.Unmarshal([]byte(r.filters), &sub.Filters); err != nil {
		return *sub, 0, fmt.Errorf("subscription %s filters: %w", sub.ID, err)
	}
	sub.EventTypes = nonNil(sub.EventTypes)
	sub.Filters.TaskIDs, sub.Filters.Projects = nonNil(sub.Filters.TaskIDs), nonNil(sub.Filters.Projects)
	sub.Status = lifecycle.SubscriptionStatus(r.status)
	sub.CreatedAt = fromMillis(r.created)
	sub.LeaseUntil = leaseTime(r.lease)
	return *sub, r.pos, nil
}

func scanSubscriptionOnly(row scanner) (lifecycle.Subscription, error) {
	sub, _, err := scanSubscription(row)
	return sub, err
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
	sub, _, err := scanSubscription(s.pool.QueryRow(ctx, "SELECT "+subscriptionColumns+" FROM webhook_subscriptions WHERE id = $1", id))
	if err != nil {
		return sub, fmt.Errorf("postgres: subscription %s: %w", id, s.translate(err))
	}
	return sub, nil
}

// Subscription implements lifecycle.Tx. It reads the subscription for
// update.
func (x *txn) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	sub, _, err := scanSubscription(x.tx.QueryRow(ctx, "SELECT "+subscriptionColumns+" FROM webhook_subscriptions WHERE id = $1 FOR UPDATE", id))
	if err != nil {
		return sub, fmt.Errorf("postgres: subscription %s: %w", id, x.fail(err))
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
	rows, err := s.pool.Query(ctx, "SELECT "+subscriptionColumns+" FROM webhook_subscriptions WHERE pos > $1 ORDER BY pos LIMIT $2", f.After, limit+1)
	if err != nil {
		return lifecycle.SubscriptionPage{}, fmt.Errorf("postgres: list subscriptions: %w", s.translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.SubscriptionPage
		last int64
	)
	for rows.Next() {
		sub, pos, err := scanSubscription(rows)
		if err != nil {
			return lifecycle.SubscriptionPage{}, fmt.Errorf("postgres: list subscriptions: %w", s.translate(err))
		}
		if len(page.Subscriptions) == limit {
			page.Next = last
			break
		}
		page.Subscriptions = append(page.Subscriptions, sub)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.SubscriptionPage{}, fmt.Errorf("postgres: list subscriptions: %w", s.translate(err))
	}
	return page, nil
}

// CreateSubscription implements lifecycle.Tx. It notifies the webhook
// dispatchers of every process after commit.
func (x *txn) CreateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	types, err := json.Marshal(nonNil(sub.EventTypes))
	if err != nil {
		return fmt.Errorf("postgres: encode subscription %s: %w", sub.ID, err)
	}
	filters, err := json.Marshal(lifecycle.SubscriptionFilters{
		TaskIDs:  nonNil(sub.Filters.TaskIDs),
		Projects: nonNil(sub.Filters.Projects),
	})
	if err != nil {
		return fmt.Errorf("postgres: encode subscription %s: %w", sub.ID, err)
	}
	n, err := x.exec(ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, description, filters, status,
		secret, created_at, cursor, lease_owner, lease_until, revision, rewound, rewind_to, allow_private_target)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT DO NOTHING`,
		sub.ID, sub.URL, string(types), sub.Description, string(filters), string(sub.Status),
		nonNil(sub.SealedSecret), millis(sub.CreatedAt.Time), sub.Cursor, sub.LeaseOwner, millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo,
		sub.AllowPrivateTarget)
	if err != nil {
		return fmt.Errorf("postgres: create subscription %s: %w", sub.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: create subscription %s: one with this ID exists: %w", sub.ID, lifecycle.ErrConflict)
	}
	x.changes |= lifecycle.ChangeSubscriptions
	return nil
}

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
		sub.ID, string(sub.Status), sub.Cursor, sub.LeaseOwner, millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo).Scan(&oldStatus, &oldRevision)
	if err != nil {
		return fmt.Errorf("postgres: update subscription %s: %w", sub.ID, x.fail(err))
	}
	if oldStatus != string(sub.Status) || oldRevision != sub.Revision {
		x.changes |= lifecycle.ChangeSubscriptions
	}
	return nil
}

// DeleteSubscription implements lifecycle.Tx. The foreign key deletes the
// subscription's deliveries with it; the webhook dispatchers of every
// process are notified after commit.
func (x *txn) DeleteSubscription(ctx context.Context, id string) error {
	n, err := x.exec(ctx, "DELETE FROM webhook_subscriptions WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("postgres: delete subscription %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: delete subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	x.changes |= lifecycle.ChangeSubscriptions
	return nil
}

// ClaimSubscriptions implements lifecycle.Tx. One statement takes up to
// p.Max expired leases with FOR UPDATE SKIP LOCKED and renews them with
// those p.Owner holds. A lease another claim is taking over at the same
// time is locked by it: the renewal waits for it, finds the subscription
// no longer p.Owner's, and leaves it.
func (x *txn) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	subs, err := queryAll(ctx, x.tx, scanSubscriptionOnly, `WITH expired AS (
		SELECT pos FROM webhook_subscriptions
		WHERE status = 'active' AND lease_owner <> $1 AND lease_until < $3
		ORDER BY lease_until, pos LIMIT $4 FOR UPDATE SKIP LOCKED),
	claimed AS (UPDATE webhook_subscriptions w SET lease_owner = $1, lease_until = $2
		WHERE w.status = 'active' AND (w.lease_owner = $1 OR w.pos IN (SELECT pos FROM expired))
		RETURNING w.*)
	SELECT `+subscriptionColumns+` FROM claimed ORDER BY pos`,
		p.Owner, millis(p.Until), millis(p.Now), max(p.Max, 0))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim subscriptions for %s: %w", p.Owner, x.fail(err))
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
	attempt        int32
	status         string
	response       *int32
	next           *int64
	responseInt    int
	dest           [12]any // the arguments of Scan
}

// scanDelivery reads one row of deliveryColumns, followed by body when
// withBody is set.
func scanDelivery(row scanner, withBody bool) (lifecycle.Delivery, int64, error) {
	r := new(deliveryRow)
	d := &r.d
	args := append(r.dest[:0], &r.pos, &d.ID, &d.SubscriptionID, &d.EventID, &d.EventSequence, &r.attempt, &r.status,
		&r.response, &d.Error, &r.attempted, &r.next)
	if withBody {
		args = append(args, &d.Body)
	}
	if err := row.Scan(args...); err != nil {
		return *d, 0, err
	}
	d.Attempt = int(r.attempt)
	d.Status = lifecycle.DeliveryStatus(r.status)
	d.AttemptedAt = fromMillis(r.attempted)
	if r.response != nil {
		r.responseInt = int(*r.response)
		d.ResponseStatus = &r.responseInt
	}
	d.NextAttemptAt = optionalTimestamp(r.next)
	return *d, r.pos, nil
}

// deliveryArgs returns the values of the columns CreateDelivery and
// UpdateDelivery write that may be NULL: response_status, next_attempt_at
// and body.
func deliveryArgs(d *lifecycle.Delivery) (response *int32, next *int64, body []byte) {
	if d.ResponseStatus != nil {
		r := int32(*d.ResponseStatus)
		response = &r
	}
	return response, optionalMillis(d.NextAttemptAt), d.Body
}

// CreateDelivery implements lifecycle.Tx.
func (x *txn) CreateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, next, body := deliveryArgs(&d)
	n, err := x.exec(ctx, `INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status,
		response_status, error, attempted_at, next_attempt_at, body)
		SELECT $1, id, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM webhook_subscriptions WHERE id = $2
		ON CONFLICT DO NOTHING`,
		d.ID, d.SubscriptionID, d.EventID, d.EventSequence, int32(d.Attempt), string(d.Status),
		response, d.Error, millis(d.AttemptedAt.Time), next, body)
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

// Delivery implements lifecycle.Tx: SELECT ... FOR UPDATE.
func (x *txn) Delivery(ctx context.Context, id string) (lifecycle.Delivery, error) {
	d, _, err := scanDelivery(x.tx.QueryRow(ctx, "SELECT "+deliveryColumns+", body FROM webhook_deliveries WHERE id = $1 FOR UPDATE", id), true)
	if err != nil {
		return d, fmt.Errorf("postgres: delivery %s: %w", id, x.fail(err))
	}
	return d, nil
}

// UpdateDelivery implements lifecycle.Tx.
func (x *txn) UpdateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, next, body := deliveryArgs(&d)
	n, err := x.exec(ctx, `UPDATE webhook_deliveries SET status = $2, response_status = $3, error = $4,
		next_attempt_at = $5, body = $6 WHERE id = $1`, d.ID, string(d.Status), response, d.Error, next, body)
	if err != nil {
		return fmt.Errorf("postgres: update delivery %s: %w", d.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: update delivery %s: %w", d.ID, lifecycle.ErrNotFound)
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
		WHERE subscription_id = $1 AND pos < $2 ORDER BY pos DESC LIMIT $3`, []any{f.SubscriptionID, before, limit + 1}
	if f.EventID != "" {
		what += " for event " + f.EventID
		query, args = "SELECT "+deliveryColumns+` FROM webhook_deliveries
			WHERE subscription_id = $1 AND event_id = $2 AND pos < $3 ORDER BY pos DESC LIMIT $4`, []any{f.SubscriptionID, f.EventID, before, limit + 1}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return lifecycle.DeliveryPage{}, fmt.Errorf("postgres: %s: %w", what, s.translate(err))
	}
	defer rows.Close()
	var (
		page lifecycle.DeliveryPage
		last int64
	)
	for rows.Next() {
		d, pos, err := scanDelivery(rows, false)
		if err != nil {
			return lifecycle.DeliveryPage{}, fmt.Errorf("postgres: %s: %w", what, s.translate(err))
		}
		if len(page.Deliveries) == limit {
			page.Next = last
			break
		}
		page.Deliveries = append(page.Deliveries, d)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.DeliveryPage{}, fmt.Errorf("postgres: %s: %w", what, s.translate(err))
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
	ds, err := queryAll(ctx, s.pool, scan, "SELECT "+deliveryColumns+`, body FROM webhook_deliveries
		WHERE subscription_id = $1 AND status = 'pending' ORDER BY next_attempt_at, pos LIMIT $2`, subscriptionID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending deliveries of %s: %w", subscriptionID, s.translate(err))
	}
	return ds, nil
}

// deleteDeliveriesBefore deletes the attempts made before t that are not
// pending.
func (s *Store) deleteDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := s.deleteInBatches(ctx, `DELETE FROM webhook_deliveries WHERE pos IN (SELECT pos FROM webhook_deliveries
		WHERE attempted_at < $1 AND status <> 'pending' LIMIT $2)`, millis(t))
	if err != nil {
		return n, fmt.Errorf("postgres: delete deliveries: %w", err)
	}
	return n, nil
}
