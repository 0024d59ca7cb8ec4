package postgres

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle"
)

var _ lifecycle.SecretResealer = (*txn)(nil)

// UpdateSubscriptionSecret implements lifecycle.SecretResealer, so that
// Service.ResealWebhookSecrets can finish a rotation of the webhook secret
// key on PostgreSQL.
func (x *txn) UpdateSubscriptionSecret(ctx context.Context, id string, sealed []byte) error {
	n, err := x.exec(ctx, "UPDATE webhook_subscriptions SET secret = $1 WHERE id = $2", nonNil(sealed), id)
	if err != nil {
		return fmt.Errorf("postgres: update the secret of subscription %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: update the secret of subscription %s: %w", id, lifecycle.ErrNotFound)
	}
	return nil
}
