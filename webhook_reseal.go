package lifecycle

import (
	"context"
	"errors"
	"fmt"
)

// ResealWebhookSecrets seals again, with [Config.WebhookSecretKey], every
// subscription secret stored in the clear or sealed with one of
// [Config.WebhookPreviousSecretKeys], and returns how many it changed. It
// finishes a rotation: once it has returned without error, every Service
// sharing the Store can drop the previous keys. It may run while webhooks
// are delivered; it needs a Store that implements [SecretResealer].
func (s *Service) ResealWebhookSecrets(ctx context.Context) (int, error) {
	if !s.secrets.Sealing() {
		return 0, errors.New("lifecycle: ResealWebhookSecrets needs Config.WebhookSecretKey, the key to seal with")
	}
	if s.caps.resealer == nil {
		return 0, fmt.Errorf("lifecycle: ResealWebhookSecrets needs a Store that implements lifecycle.SecretResealer; %T does not", s.store)
	}
	changed := 0
	for after := int64(0); ; {
		page, err := s.store.ListSubscriptions(ctx, ListSubscriptionsParams{After: after, Limit: 200})
		if err != nil {
			return changed, fmt.Errorf("lifecycle: reseal webhook secrets: %w", err)
		}
		for _, sub := range page.Subscriptions {
			secret, current, err := s.secrets.OpenCurrent(sub.ID, sub.SealedSecret)
			if err != nil {
				return changed, fmt.Errorf("lifecycle: reseal the secret of %s: %w", sub.ID, err)
			}
			if current {
				continue
			}
			sealed, err := s.secrets.Seal(sub.ID, secret)
			if err != nil {
				return changed, fmt.Errorf("lifecycle: reseal the secret of %s: %w", sub.ID, err)
			}
			err = s.caps.resealer.UpdateSubscriptionSecret(ctx, sub.ID, sealed)
			switch {
			case errors.Is(err, ErrNotFound): // deleted meanwhile
			case err != nil:
				return changed, fmt.Errorf("lifecycle: reseal the secret of %s: %w", sub.ID, err)
			default:
				changed++
			}
		}
		if page.Next == 0 {
			return changed, nil
		}
		after = page.Next
	}
}
