package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
)

// changeNames name the notification channel of each kind of change,
// after the schema's name.
var changeNames = []struct {
	change lifecycle.Change
	name   string
}{
	{lifecycle.ChangeEvents, "events"},
	{lifecycle.ChangeShips, "ships"},
	{lifecycle.ChangeSubscriptions, "subscriptions"},
}

// channel returns the name of the notification channel of c, a single
// kind of change: "<schema>.events", "<schema>.ships" or
// "<schema>.subscriptions". Channels are per database, so the schema's
// name keeps Stores in different schemas apart.
func (s *Store) channel(c lifecycle.Change) string {
	for _, n := range changeNames {
		if n.change == c {
			return s.schema + "." + n.name
		}
	}
	panic(fmt.Sprintf("postgres: no channel for change %d", c))
}

// notify sends the notification of c, delivered at commit.
func (x *txn) notify(ctx context.Context, c lifecycle.Change) error {
	if _, err := x.exec(ctx, "SELECT pg_notify($1, '')", x.s.channel(c)); err != nil {
		return fmt.Errorf("postgres: notify: %w", err)
	}
	return nil
}

// Listen implements lifecycle.Notifier with LISTEN on a connection of its
// own, opened with the pool's configuration. Transactions that append
// events, queue ship operations, or create, delete or change the status of
// subscriptions send notifications (pg_notify), which PostgreSQL delivers
// when they commit and merges within one transaction. Listen returns
// when ctx is done, when the Store is closed, or when the connection
// fails.
func (s *Store) Listen(ctx context.Context, notify func(lifecycle.Change)) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return errClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var listen string
	channels := make(map[string]lifecycle.Change, len(changeNames))
	for _, n := range changeNames {
		ch := s.channel(n.change)
		channels[ch] = n.change
		listen += "LISTEN " + pgx.Identifier{ch}.Sanitize() + "; "
	}
	if _, err := conn.Exec(ctx, listen); err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	// What was committed before LISTEN took effect was not notified.
	notify(lifecycle.ChangeAll)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				if s.ctx.Err() != nil {
					return errClosed
				}
				return ctx.Err()
			}
			return fmt.Errorf("postgres: listen: %w", err)
		}
		if c, ok := channels[n.Channel]; ok {
			notify(c)
		}
	}
}
