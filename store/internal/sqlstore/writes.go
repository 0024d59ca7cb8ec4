package sqlstore

import (
	"context"

	"github.com/tasklifecycle/lifecycle"
)

// Writes are the writes of a Store that run in a transaction of their
// own, shared by both stores: a Store embeds them.
type Writes struct {
	F *Flavour
	// Run runs fn in a transaction of the store, one whose commit need not
	// wait for the disk when relaxed is set.
	Run func(ctx context.Context, relaxed bool, fn func(x *Tx) error) error
}

// CreateConsoleSession implements lifecycle.ConsoleSessionStore.
func (w *Writes) CreateConsoleSession(ctx context.Context, cs lifecycle.ConsoleSession) error {
	return w.Run(ctx, false, func(x *Tx) error { return x.InsertConsoleSession(ctx, cs) })
}

// DeleteConsoleSession implements lifecycle.ConsoleSessionStore.
func (w *Writes) DeleteConsoleSession(ctx context.Context, hash []byte) error {
	return w.Run(ctx, false, func(x *Tx) error { return x.RemoveConsoleSession(ctx, hash) })
}

// UpdateSubscriptionSecret implements lifecycle.SecretResealer, so that
// Service.ResealWebhookSecrets can finish a rotation of the webhook secret
// key.
func (w *Writes) UpdateSubscriptionSecret(ctx context.Context, id string, sealed []byte) error {
	return w.Run(ctx, false, func(x *Tx) error { return x.ReplaceSubscriptionSecret(ctx, id, sealed) })
}

// UpdateInstanceLease implements lifecycle.InstanceLeaser in one
// transaction, relaxed when p.Relaxed is set. Where rows are locked, the
// transaction first takes a lock of the instance ID (Flavour.LockKey), so
// that updates of one lease run one at a time even before its row exists:
// FOR UPDATE locks no row that does not exist yet.
func (w *Writes) UpdateInstanceLease(ctx context.Context, p lifecycle.UpdateInstanceLeaseParams) error {
	return w.Run(ctx, p.Relaxed, func(x *Tx) error {
		if w.F.LockKey != "" {
			if _, err := x.X.Exec(ctx, w.F.LockKey, "lifecycle.instance_lease:"+p.ID); err != nil {
				return w.F.errorf("lock instance lease %s: %w", p.ID, err)
			}
		}
		return x.RewriteInstanceLease(ctx, p)
	})
}
