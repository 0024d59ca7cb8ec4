// Package postgres implements [lifecycle.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5 (pgxpool), so that several replicas of a
// Service can share one database.
//
// # Layout
//
// The statements of the Store and its Tx that PostgreSQL and SQLite
// share are written once, in store/internal/sqlstore: the Store embeds
// its reads, writes and prune, and a transaction embeds its Tx, whose
// Changes it announces after commit. Its flavour adds FOR UPDATE to the
// reads for update, COLLATE "C" where rows sort by text, and an advisory
// lock where a row to lock may not exist yet. This package keeps what is
// PostgreSQL's own: the pool, the schema and its migrations, retries and
// the executor that records a transaction's failure (postgres.go,
// exec.go), event sequences and their horizon (events.go), the claims
// with FOR UPDATE SKIP LOCKED (tasks.go, ship.go, webhooks.go) and
// LISTEN/NOTIFY (notify.go).
//
// # Schema and migrations
//
// The Store keeps its tables in one schema ([Config.Schema], by default
// "lifecycle"), created when missing. Its migrations are embedded and
// applied by [New] under a session advisory lock, so replicas that start
// together migrate once; a database migrated by a newer program is
// refused.
//
// # Transactions
//
// [Store.Update] runs its function in a READ COMMITTED transaction. The
// reads of a Tx that the contract calls "read for update" (Tx.Task,
// Tx.ShipOperation, Tx.Delivery, and the records the Service reads and
// rewrites: subscriptions, idempotency records, instance leases) are
// SELECT ... FOR UPDATE, so concurrent read-modify-writes of one row wait
// for each other instead of losing an update. Inserts that may collide use
// ON CONFLICT DO NOTHING and report [lifecycle.ErrConflict] without
// aborting the transaction, as SQLite's do. A deadlock or serialization
// failure rolls the transaction back and Update runs the function again,
// up to [Config.MaxRetries] times. [Store.UpdateRelaxed] is Update with
// SET LOCAL synchronous_commit = off: the commit is visible at once and
// reaches the disk with the WAL writer, within a few hundred milliseconds,
// and at the latest with the next durable commit.
//
// # Event sequences
//
// PostgreSQL commits concurrent transactions in any order, so sequences
// drawn from a SEQUENCE can commit out of order: a reader that saw N could
// later find N-1. Serialising the appending transactions would prevent it
// but would also serialise their commits and fsyncs. Instead, before its
// first nextval a transaction takes a shared advisory lock (transaction
// scoped) keyed by the greatest sequence handed out so far, so that every
// sequence it draws is above its key. Events and EventBounds first
// read that greatest sequence, then the keys of the locks held (pg_locks),
// in one round trip, and return nothing past the smallest: the horizon at
// or below which every sequence is committed or rolled back. PostgreSQL
// makes a transaction's rows visible before it releases its locks, so the
// next statement's snapshot holds every event up to the horizon. A reader
// never skips an event, and appending transactions still commit together.
// A transaction left open after appending holds every reader at its
// sequence until it ends. Pruning keeps the greatest sequence it deleted,
// so that EventBounds.Last never goes back.
//
// # Claims
//
// ClaimShipOperations, ClaimReconciliations and ClaimSubscriptions select
// their rows with FOR UPDATE SKIP LOCKED and update them in one statement:
// processes that claim at once each take different rows, and none waits
// for another's.
//
// # Wake-ups
//
// The Store implements [lifecycle.Notifier] with LISTEN/NOTIFY: after a
// transaction that appended events, queued a ship operation or created,
// deleted or changed the status or revision of a subscription commits, the
// Store sends a notification of each kind of change (pg_notify, in a
// transaction of its own that does not wait for the disk), and
// [Store.Listen] passes it on to the Service, which wakes its event
// streams, ship runner or webhook dispatcher at once rather than at its
// next poll. Notifications of transactions that commit while one is being
// sent are sent together next. They are not sent from inside the
// transactions themselves: PostgreSQL serialises the commits of
// notifying transactions on one lock for the whole cluster, held until the
// commit reaches the disk, which made transactions that appended events
// commit one at a time. Polling stays the backstop when the listening
// connection is lost, or when a process dies between a commit and its
// notification.
package postgres
