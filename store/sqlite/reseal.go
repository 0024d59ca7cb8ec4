package sqlite

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
)

var _ lifecycle.SecretResealer = (*txn)(nil)

// UpdateSubscriptionSecret implements lifecycle.SecretResealer.
func (x *txn) UpdateSubscriptionSecret(ctx context.Context, id string, sealed []byte) error {
	res, err := x.conn.ExecContext(x.ctx, "UPDATE webhook_subscriptions SET secret = ? WHERE id = ?", sealed, id)
	if err != nil {
		return fmt.Errorf("sqlite: update the secret of subscription %s: %w", id, translate(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: update the secret of subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	return nil
}
