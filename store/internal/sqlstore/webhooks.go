package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// SubscriptionColumns are the columns of a subscription, in the order
// ScanSubscription reads them.
const SubscriptionColumns = `pos, id, url, event_types, description, filters, status, secret, created_at,
	cursor, lease_owner, lease_until, revision, rewound, rewind_to, allow_private_target`

// subscriptionRow holds the scanned columns of a subscription.
type subscriptionRow struct {
	sub                 lifecycle.Subscription
	pos, created, lease int64
	types, filters      []byte
	description         sql.NullString
	status              string
}

// ScanSubscription reads one row of SubscriptionColumns, and returns the
// subscription and its position.
func ScanSubscription(row Row) (lifecycle.Subscription, int64, error) {
	r := new(subscriptionRow)
	sub := &r.sub
	err := row.Scan(&r.pos, &sub.ID, &sub.URL, &r.types, &r.description, &r.filters, &r.status, &sub.SealedSecret,
		&r.created, &sub.Cursor, &sub.LeaseOwner, &r.lease, &sub.Revision, &sub.Rewound, &sub.RewindTo, &sub.AllowPrivateTarget)
	if err != nil {
		return *sub, 0, err
	}
	if err := json.Unmarshal(r.types, &sub.EventTypes); err != nil {
		return *sub, 0, fmt.Errorf("subscription %s event types: %w", sub.ID, err)
	}
	if err := json.Unmarshal(r.filters, &sub.Filters); err != nil {
		return *sub, 0, fmt.Errorf("subscription %s filters: %w", sub.ID, err)
	}
	sub.EventTypes = NonNil(sub.EventTypes)
	sub.Filters.TaskIDs, sub.Filters.Projects = NonNil(sub.Filters.TaskIDs), NonNil(sub.Filters.Projects)
	sub.Description = NullString(&r.description)
	sub.Status = lifecycle.SubscriptionStatus(r.status)
	sub.CreatedAt = FromMillis(r.created)
	sub.LeaseUntil = leaseTime(r.lease)
	return *sub, r.pos, nil
}

// ScanSubscriptionOnly is ScanSubscription without the position.
func ScanSubscriptionOnly(row Row) (lifecycle.Subscription, error) {
	sub, _, err := ScanSubscription(row)
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
func (s *Reads) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	if err := s.Open(); err != nil {
		return lifecycle.Subscription{}, err
	}
	sub, _, err := ScanSubscription(s.X.QueryRow(ctx, "SELECT "+SubscriptionColumns+" FROM webhook_subscriptions WHERE id = $1", id))
	if err != nil {
		return sub, s.F.errorf("subscription %s: %w", id, err)
	}
	return sub, nil
}

// Subscription implements lifecycle.Tx: a read for update.
func (x *Tx) Subscription(ctx context.Context, id string) (lifecycle.Subscription, error) {
	sub, _, err := ScanSubscription(x.X.QueryRow(ctx, "SELECT "+SubscriptionColumns+" FROM webhook_subscriptions WHERE id = $1"+x.F.ForUpdate, id))
	if err != nil {
		return sub, x.F.errorf("subscription %s: %w", id, err)
	}
	return sub, nil
}

// ListSubscriptions implements lifecycle.Store.
func (s *Reads) ListSubscriptions(ctx context.Context, f lifecycle.ListSubscriptionsParams) (lifecycle.SubscriptionPage, error) {
	if err := s.Open(); err != nil {
		return lifecycle.SubscriptionPage{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.X.Query(ctx, "SELECT "+SubscriptionColumns+" FROM webhook_subscriptions WHERE pos > $1 ORDER BY pos LIMIT $2", f.After, limit+1)
	if err != nil {
		return lifecycle.SubscriptionPage{}, s.F.errorf("list subscriptions: %w", err)
	}
	defer rows.Close()
	var (
		page lifecycle.SubscriptionPage
		last int64
	)
	for rows.Next() {
		sub, pos, err := ScanSubscription(rows)
		if err != nil {
			return lifecycle.SubscriptionPage{}, s.F.errorf("list subscriptions: %w", err)
		}
		if len(page.Subscriptions) == limit {
			page.Next = last
			break
		}
		page.Subscriptions = append(page.Subscriptions, sub)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.SubscriptionPage{}, s.F.errorf("list subscriptions: %w", err)
	}
	return page, nil
}

// CreateSubscription implements lifecycle.Tx. It adds
// ChangeSubscriptions to the transaction's Changes.
func (x *Tx) CreateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	types, err := json.Marshal(NonNil(sub.EventTypes))
	if err != nil {
		return x.F.errorf("encode subscription %s: %w", sub.ID, err)
	}
	filters, err := json.Marshal(lifecycle.SubscriptionFilters{
		TaskIDs:  NonNil(sub.Filters.TaskIDs),
		Projects: NonNil(sub.Filters.Projects),
	})
	if err != nil {
		return x.F.errorf("encode subscription %s: %w", sub.ID, err)
	}
	n, err := x.X.Exec(ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, description, filters, status,
		secret, created_at, cursor, lease_owner, lease_until, revision, rewound, rewind_to, allow_private_target)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT DO NOTHING`,
		sub.ID, sub.URL, string(types), sub.Description, string(filters), string(sub.Status),
		NonNil(sub.SealedSecret), Millis(sub.CreatedAt.Time), sub.Cursor, sub.LeaseOwner, Millis(sub.LeaseUntil), sub.Revision, sub.Rewound, sub.RewindTo,
		sub.AllowPrivateTarget)
	if err != nil {
		return x.F.errorf("create subscription %s: %w", sub.ID, err)
	}
	if n == 0 {
		return x.F.errorf("create subscription %s: one with this ID exists: %w", sub.ID, lifecycle.ErrConflict)
	}
	x.Changes |= lifecycle.ChangeSubscriptions
	return nil
}

// DeleteSubscription implements lifecycle.Tx. The foreign key deletes the
// subscription's deliveries with it. It adds ChangeSubscriptions to the
// transaction's Changes.
func (x *Tx) DeleteSubscription(ctx context.Context, id string) error {
	n, err := x.X.Exec(ctx, "DELETE FROM webhook_subscriptions WHERE id = $1", id)
	if err != nil {
		return x.F.errorf("delete subscription %s: %w", id, err)
	}
	if n == 0 {
		return x.F.errorf("delete subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	x.Changes |= lifecycle.ChangeSubscriptions
	return nil
}

// deliveryColumns are the columns of a delivery but its body, in the order
// scanDelivery reads them.
const deliveryColumns = `pos, id, subscription_id, event_id, event_seq, attempt, status, response_status, error,
	attempted_at, next_attempt_at`

// deliveryRow holds the scanned columns of a delivery.
type deliveryRow struct {
	d                       lifecycle.Delivery
	pos, attempted, attempt int64
	status                  string
	response, next          sql.NullInt64
	errText                 sql.NullString
	responseInt             int
	nextAt                  lifecycle.Timestamp
	dest                    [12]any // the arguments of Scan
}

// scanDelivery reads one row of deliveryColumns, followed by body when
// withBody is set.
func scanDelivery(row Row, withBody bool) (lifecycle.Delivery, int64, error) {
	r := new(deliveryRow)
	d := &r.d
	args := append(r.dest[:0], &r.pos, &d.ID, &d.SubscriptionID, &d.EventID, &d.EventSequence, &r.attempt, &r.status,
		&r.response, &r.errText, &r.attempted, &r.next)
	if withBody {
		args = append(args, &d.Body)
	}
	if err := row.Scan(args...); err != nil {
		return *d, 0, err
	}
	d.Attempt = int(r.attempt)
	d.Status = lifecycle.DeliveryStatus(r.status)
	d.AttemptedAt = FromMillis(r.attempted)
	if r.response.Valid {
		r.responseInt = int(r.response.Int64)
		d.ResponseStatus = &r.responseInt
	}
	d.Error = NullString(&r.errText)
	if r.next.Valid {
		r.nextAt = FromMillis(r.next.Int64)
		d.NextAttemptAt = &r.nextAt
	}
	return *d, r.pos, nil
}

// DeliveryArgs returns the values of the columns CreateDelivery and
// UpdateDelivery write that may be NULL: response_status, error,
// next_attempt_at and body.
func DeliveryArgs(d *lifecycle.Delivery) (response, errText, next, body any) {
	if d.ResponseStatus != nil {
		response = int64(*d.ResponseStatus)
	}
	if d.Error != nil {
		errText = *d.Error
	}
	if d.NextAttemptAt != nil {
		next = Millis(d.NextAttemptAt.Time)
	}
	if d.Body != nil {
		body = d.Body
	}
	return response, errText, next, body
}

// Delivery implements lifecycle.Tx: a read for update.
func (x *Tx) Delivery(ctx context.Context, id string) (lifecycle.Delivery, error) {
	d, _, err := scanDelivery(x.X.QueryRow(ctx, "SELECT "+deliveryColumns+", body FROM webhook_deliveries WHERE id = $1"+x.F.ForUpdate, id), true)
	if err != nil {
		return d, x.F.errorf("delivery %s: %w", id, err)
	}
	return d, nil
}

// UpdateDelivery implements lifecycle.Tx.
func (x *Tx) UpdateDelivery(ctx context.Context, d lifecycle.Delivery) error {
	response, errText, next, body := DeliveryArgs(&d)
	n, err := x.X.Exec(ctx, `UPDATE webhook_deliveries SET status = $2, response_status = $3, error = $4,
		next_attempt_at = $5, body = $6 WHERE id = $1`, d.ID, string(d.Status), response, errText, next, body)
	if err != nil {
		return x.F.errorf("update delivery %s: %w", d.ID, err)
	}
	if n == 0 {
		return x.F.errorf("update delivery %s: %w", d.ID, lifecycle.ErrNotFound)
	}
	return nil
}

// Deliveries implements lifecycle.Store. It leaves Body nil, but for
// pending attempts.
func (s *Reads) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if err := s.Open(); err != nil {
		return lifecycle.DeliveryPage{}, err
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
	rows, err := s.X.Query(ctx, query, args...)
	if err != nil {
		return lifecycle.DeliveryPage{}, s.F.errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var (
		page lifecycle.DeliveryPage
		last int64
	)
	for rows.Next() {
		d, pos, err := scanDelivery(rows, false)
		if err != nil {
			return lifecycle.DeliveryPage{}, s.F.errorf("%s: %w", what, err)
		}
		if len(page.Deliveries) == limit {
			page.Next = last
			break
		}
		page.Deliveries = append(page.Deliveries, d)
		last = pos
	}
	if err := rows.Err(); err != nil {
		return lifecycle.DeliveryPage{}, s.F.errorf("%s: %w", what, err)
	}
	return page, nil
}

// pendingDeliveries returns up to limit pending attempts of a
// subscription with their Body, earliest NextAttemptAt first; attempts due
// at the same time come in the order they were recorded.
func (s *Reads) pendingDeliveries(ctx context.Context, subscriptionID string, limit int) ([]lifecycle.Delivery, error) {
	if limit <= 0 {
		limit = 1000
	}
	scan := func(row Row) (lifecycle.Delivery, error) {
		d, _, err := scanDelivery(row, true)
		return d, err
	}
	ds, err := QueryAll(ctx, s.X, scan, "SELECT "+deliveryColumns+`, body FROM webhook_deliveries
		WHERE subscription_id = $1 AND status = 'pending' ORDER BY next_attempt_at, pos LIMIT $2`, subscriptionID, limit)
	if err != nil {
		return nil, s.F.errorf("pending deliveries of %s: %w", subscriptionID, err)
	}
	return ds, nil
}
