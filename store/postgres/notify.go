package postgres

import (
	"context"
	"fmt"
	"time"

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

// announce queues the notification of the changes c, which a transaction
// has just committed, for the announcer to send.
func (s *Store) announce(c lifecycle.Change) {
	for {
		old := s.pending.Load()
		if old|uint32(c) == old || s.pending.CompareAndSwap(old, old|uint32(c)) {
			break
		}
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// announceSQL sends the notifications of its parameters, each a channel,
// in a transaction of its own whose commit does not wait for the disk:
// it wrote nothing worth keeping.
const announceSQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(c, '') FROM unnest($1::text[]) AS c"

// announcer sends the notifications of the changes announced, through
// the pool, until the Store closes. Changes announced while
// it sends are sent together next.
//
// Sending them after the commit, rather than with pg_notify inside the
// transaction that made them, keeps commits concurrent: PostgreSQL
// serialises the commits of transactions that notify on one lock for the
// whole cluster, held until the commit has reached the disk, so that
// transactions that appended events and notified committed one at a time,
// each waiting for its own flush. A process that dies between its commit
// and the announcement leaves the other processes to find the change at
// their next poll.
func (s *Store) announcer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		c := lifecycle.Change(s.pending.Swap(0))
		if c == 0 {
			continue
		}
		var channels []string
		for _, n := range changeNames {
			if c&n.change != 0 {
				channels = append(channels, s.channel(n.change))
			}
		}
		if _, err := s.pool.Exec(s.ctx, announceSQL, channels); err != nil {
			// Try again after a pause, with what was announced meanwhile;
			// the pollers of every process are the backstop.
			s.announce(c)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(announceRetry):
			}
		}
	}
}

// announceRetry is how long the announcer waits after failing to send.
const announceRetry = 100 * time.Millisecond

// Listen implements lifecycle.Notifier with LISTEN on a connection of its
// own, opened with the pool's configuration. After a transaction that
// appended events, queued ship operations, or created, deleted or changed
// the status or revision of subscriptions commits, the Store sends
// notifications (pg_notify) of those kinds of change, one for the
// transactions that commit while it sends the last. Listen returns when
// ctx is done, when the Store is closed, or when the connection fails.
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
