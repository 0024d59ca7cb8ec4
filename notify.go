package lifecycle

import (
	"context"
	"time"
)

// Change is a set of kinds of change a [Notifier] reports.
type Change uint8

// The kinds of change.
const (
	// ChangeEvents: events were committed.
	ChangeEvents Change = 1 << iota
	// ChangeShips: ship operations were queued.
	ChangeShips
	// ChangeSubscriptions: webhook subscriptions were created or deleted,
	// or their status or revision changed.
	ChangeSubscriptions

	// ChangeAll is every kind of change.
	ChangeAll = ChangeEvents | ChangeShips | ChangeSubscriptions
)

// Notifier is an optional interface of a Store that several processes
// share: it tells each process of the changes every process commits, soon
// after they commit, so that a Service wakes its event streams, ship
// runner and webhook dispatcher at once instead of at their next poll.
// Polling (Config.EventPollInterval, ShipPollInterval, WebhookPollInterval)
// stays the backstop. The Service finds it by type assertion.
type Notifier interface {
	// Listen calls notify with the changes committed to the Store, by
	// this process or another, until ctx is done; it then returns ctx's
	// error. It calls notify with ChangeAll once it listens, since changes
	// may have been committed before. Calls of notify come one at a time
	// and must not block. When Listen can no longer listen (its
	// connection was lost), it returns an error; the Service calls it
	// again after a pause.
	Listen(ctx context.Context, notify func(Change)) error
}

// notifyRetry is how long the Service waits before listening again after
// a Notifier's Listen failed.
const notifyRetry = time.Second

// listen passes the changes a Notifier Store reports on to the parts of
// the Service they concern, until ctx is done. It does nothing when the
// Store is not a Notifier.
func (s *Service) listen(ctx context.Context) {
	n := s.caps.notifier
	if n == nil {
		return
	}
	for {
		err := n.Listen(ctx, s.changed)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("store notifications lost; polling until they resume", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(notifyRetry):
		}
	}
}

// changed wakes what c concerns.
func (s *Service) changed(c Change) {
	if c&ChangeEvents != 0 {
		s.broker.Wake()
	}
	if c&ChangeShips != 0 {
		s.wakeShipRunner()
	}
	if c&ChangeSubscriptions != 0 {
		s.webhooks.SubscriptionsChanged()
	}
}
