package sqlstore

import (
	"context"
	"errors"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// DeleteBatch is the most rows one statement of a prune deletes.
const DeleteBatch = 5000

// Pruner deletes what Store.Prune and
// ConsoleSessionStore.DeleteConsoleSessionsBefore delete, in batches of
// DeleteBatch rows, so that a large prune holds up no writer for long: a
// store embeds it.
type Pruner struct {
	F *Flavour
	// Open returns an error matching lifecycle.ErrClosed once the store
	// is closed, and nil before.
	Open func() error
	// Exec runs one statement in a transaction of its own and returns
	// how many rows it affected.
	Exec func(ctx context.Context, query string, args ...any) (int64, error)
	// DeleteEventsBefore deletes the events that occurred before a time,
	// keeping the greatest sequence it deletes (EventBounds.PrunedThrough),
	// and returns how many it deleted.
	DeleteEventsBefore func(ctx context.Context, before time.Time) (int64, error)
}

// Prune implements lifecycle.Store. Each kind is deleted in statements of
// its own, in batches, one kind after the other, going on after one fails;
// it returns what they deleted, with their failures joined.
func (p *Pruner) Prune(ctx context.Context, params lifecycle.PruneParams) (lifecycle.PruneResult, error) {
	if err := p.Open(); err != nil {
		return lifecycle.PruneResult{}, err
	}
	return Deleters{
		IdempotencyRecords: p.deleteIdempotencyRecordsBefore,
		ProviderDeliveries: p.deleteProviderDeliveriesBefore,
		Deliveries:         p.deleteDeliveriesBefore,
		Events:             p.DeleteEventsBefore,
	}.Prune(ctx, params)
}

// DeleteInBatches runs query, a DELETE of at most as many rows as its
// last parameter says, in statements of DeleteBatch rows until one
// deletes fewer. It returns how many rows it deleted.
func (p *Pruner) DeleteInBatches(ctx context.Context, query string, args ...any) (int64, error) {
	args = append(args, DeleteBatch)
	var total int64
	for {
		if err := p.Open(); err != nil {
			return total, err
		}
		n, err := p.Exec(ctx, query, args...)
		if err != nil {
			return total, err
		}
		total += n
		if n < DeleteBatch {
			return total, nil
		}
	}
}

// deleteIdempotencyRecordsBefore deletes the records that expired before t.
func (p *Pruner) deleteIdempotencyRecordsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := p.DeleteInBatches(ctx, `DELETE FROM idempotency_records WHERE (principal_id, method, route, resource_id, key) IN (
		SELECT principal_id, method, route, resource_id, key FROM idempotency_records WHERE expires_at < $1 LIMIT $2)`, Millis(t))
	if err != nil {
		return n, p.F.errorf("delete expired idempotency records: %w", err)
	}
	return n, nil
}

// deleteProviderDeliveriesBefore deletes the records received before t.
func (p *Pruner) deleteProviderDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := p.DeleteInBatches(ctx, `DELETE FROM provider_deliveries WHERE (source, id) IN (SELECT source, id FROM provider_deliveries
		WHERE received_at < $1 LIMIT $2)`, Millis(t))
	if err != nil {
		return n, p.F.errorf("delete provider deliveries: %w", err)
	}
	return n, nil
}

// deleteDeliveriesBefore deletes the attempts made before t that are not
// pending.
func (p *Pruner) deleteDeliveriesBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := p.DeleteInBatches(ctx, `DELETE FROM webhook_deliveries WHERE pos IN (SELECT pos FROM webhook_deliveries
		WHERE attempted_at < $1 AND status <> 'pending' LIMIT $2)`, Millis(t))
	if err != nil {
		return n, p.F.errorf("delete deliveries: %w", err)
	}
	return n, nil
}

// DeleteConsoleSessionsBefore implements lifecycle.ConsoleSessionStore.
func (p *Pruner) DeleteConsoleSessionsBefore(ctx context.Context, t time.Time) (int64, error) {
	n, err := p.DeleteInBatches(ctx, `DELETE FROM console_sessions WHERE hash IN (SELECT hash FROM console_sessions
		WHERE expires_at < $1 LIMIT $2)`, Millis(t))
	if err != nil {
		return n, p.F.errorf("delete expired console sessions: %w", err)
	}
	return n, nil
}

// Deleters are a store's deletions of each kind that Store.Prune prunes:
// each deletes what came before its cutoff, in statements of its own,
// and says how many records it deleted.
type Deleters struct {
	IdempotencyRecords, ProviderDeliveries, Deliveries, Events func(ctx context.Context, before time.Time) (int64, error)
}

// Prune runs the deletions as lifecycle.Store.Prune says: those whose
// cutoff p sets, one after the other, going on after one fails. It
// returns what they deleted, with their failures joined.
func (d Deleters) Prune(ctx context.Context, p lifecycle.PruneParams) (lifecycle.PruneResult, error) {
	var (
		r    lifecycle.PruneResult
		errs []error
	)
	run := func(n *int64, before time.Time, del func(context.Context, time.Time) (int64, error)) {
		if !before.IsZero() {
			var err error
			*n, err = del(ctx, before)
			errs = append(errs, err)
		}
	}
	run(&r.IdempotencyRecords, p.ExpiredBefore, d.IdempotencyRecords)
	run(&r.ProviderDeliveries, p.Before, d.ProviderDeliveries)
	run(&r.Deliveries, p.Before, d.Deliveries)
	run(&r.Events, p.Before, d.Events)
	return r, errors.Join(errs...)
}
