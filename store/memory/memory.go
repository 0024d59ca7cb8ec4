package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Store is a lifecycle.Store kept in the memory of the process. Make one
// with [New]; it is safe for use by many goroutines.
type Store struct {
	// wmu is held by a transaction, a write outside one (a prune, an
	// instance lease, a console session) or Close for its whole run: one
	// writer at a time.
	wmu sync.Mutex
	// mu guards t and closed: readers hold it to read; a commit, a write
	// outside a transaction or Close holds it (and wmu) to write.
	mu     sync.RWMutex
	t      *tables
	closed bool

	// done is closed by Close, ending every Listen.
	done chan struct{}
	// lmu guards listeners.
	lmu       sync.Mutex
	listeners map[*listener]struct{}
}

var (
	_ lifecycle.Store               = (*Store)(nil)
	_ lifecycle.Notifier            = (*Store)(nil)
	_ lifecycle.InstanceLeaser      = (*Store)(nil)
	_ lifecycle.ConsoleSessionStore = (*Store)(nil)
	_ lifecycle.ShipQueueCounter    = (*Store)(nil)
	_ lifecycle.TaskRevisioner      = (*Store)(nil)
	_ lifecycle.Tx                  = (*txn)(nil)
	_ lifecycle.DependencyTx        = (*txn)(nil)
	_ lifecycle.SecretResealer      = (*Store)(nil)

	_ lifecycletype.MergeQueueStore = (*Store)(nil)
	_ lifecycletype.MergeQueueTx    = (*txn)(nil)
	_ lifecycletype.CIFailureStore  = (*Store)(nil)
	_ lifecycletype.CIFailureTx     = (*txn)(nil)
)

// New returns an empty Store.
func New() *Store {
	return newStore(newTables())
}

// newStore returns a Store over t.
func newStore(t *tables) *Store {
	return &Store{t: t, done: make(chan struct{}), listeners: make(map[*listener]struct{})}
}

// errClosed is returned by calls made after Close.
var errClosed = fmt.Errorf("memory: %w", lifecycle.ErrClosed)

// Close implements lifecycle.Store. It waits for a transaction that runs
// to end; later calls fail with lifecycle.ErrClosed, and every Listen
// returns. The data goes with the Store.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

// read runs fn with the committed tables under the read lock, or returns
// errClosed after Close.
func (s *Store) read(fn func(t *tables) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	return fn(s.t)
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// Update implements lifecycle.Store. Transactions run one at a time. A
// transaction keeps its changes beside the committed tables, which it
// reads through them; readers outside it see none of its changes until it
// commits, and then all of them at once, under the write lock. When fn
// returns an error or panics (the panic goes on to the caller), its
// changes are forgotten. A caller whose ctx is done before its turn is
// not run. Update never calls fn twice.
func (s *Store) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	x := begin(s.t)
	if err := fn(x); err != nil {
		return err
	}
	s.mu.Lock()
	x.commit()
	s.mu.Unlock()
	if x.changes != 0 {
		s.announce(x.changes)
	}
	return nil
}

// write runs fn, a change outside a transaction, alone and under the
// write lock: fn reads and changes the committed tables, in one atomic
// step. What fn changed before it returns an error stays, so fn changes
// nothing before it knows it will succeed. It returns errClosed after
// Close.
func (s *Store) write(ctx context.Context, fn func(t *tables) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return fn(s.t)
}

// txn is a lifecycle.Tx: its changes to each of the tables, kept beside
// them until it commits.
type txn struct {
	tasks              *tableTx[lifecycle.Task]
	identifiers        *dictTx[string, string]
	revisions          *dictTx[string, int64]
	inProgress         *dictTx[string, int]
	events             *tableTx[lifecycle.Event]
	submissions        *tableTx[lifecycle.Submission]
	reviews            *tableTx[lifecycle.Review]
	checks             *dictTx[checkKey, lifecycle.Check]
	providerDeliveries *dictTx[providerKey, lifecycle.ProviderDelivery]
	ships              *tableTx[lifecycle.ShipOperation]
	idempotency        *dictTx[lifecycle.IdempotencyScope, lifecycle.IdempotencyRecord]
	keys               *tableTx[lifecycle.APIKey]
	keyHashes          *dictTx[string, string]
	subscriptions      *tableTx[lifecycle.Subscription]
	deliveries         *tableTx[lifecycle.Delivery]
	mergeQueues        *dictTx[string, lifecycletype.MergeQueueRecord]
	ciFailures         *dictTx[checkKey, lifecycletype.CIFailureRecord]

	// changes are the kinds of change made, announced at commit.
	changes lifecycle.Change
}

// begin starts a transaction over t.
func begin(t *tables) *txn {
	return &txn{
		tasks:              newTableTx(t.tasks),
		identifiers:        newDictTx(t.identifiers),
		revisions:          newDictTx(t.revisions),
		inProgress:         newDictTx(t.inProgress),
		events:             newTableTx(t.events),
		submissions:        newTableTx(t.submissions),
		reviews:            newTableTx(t.reviews),
		checks:             newDictTx(t.checks),
		providerDeliveries: newDictTx(t.providerDeliveries),
		ships:              newTableTx(t.ships),
		idempotency:        newDictTx(t.idempotency),
		keys:               newTableTx(t.keys),
		keyHashes:          newDictTx(t.keyHashes),
		subscriptions:      newTableTx(t.subscriptions),
		deliveries:         newTableTx(t.deliveries),
		mergeQueues:        newDictTx(t.mergeQueues),
		ciFailures:         newDictTx(t.ciFailures),
	}
}

// commit applies the transaction's changes to the tables. The caller
// holds the write lock.
func (x *txn) commit() {
	x.tasks.commit()
	x.identifiers.commit()
	x.revisions.commit()
	x.inProgress.commit()
	x.events.commit()
	x.submissions.commit()
	x.reviews.commit()
	x.checks.commit()
	x.providerDeliveries.commit()
	x.ships.commit()
	x.idempotency.commit()
	x.keys.commit()
	x.keyHashes.commit()
	x.subscriptions.commit()
	x.deliveries.commit()
	x.mergeQueues.commit()
	x.ciFailures.commit()
}
