// Package postgres implements [lifecycle.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5 (pgxpool), so that several replicas of a
// Service can share one database.
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
// Tx.ShipOperation, and the records the Service reads and rewrites:
// subscriptions, idempotency records, instance leases) are SELECT ... FOR
// UPDATE, so concurrent read-modify-writes of one row wait for each other
// instead of losing an update. Inserts that may collide use ON CONFLICT DO
// NOTHING and report [lifecycle.ErrConflict] without aborting the
// transaction, as SQLite's do. A deadlock or serialization failure rolls
// the transaction back and Update runs the function again, up to
// [Config.MaxRetries] times. [Store.UpdateRelaxed] is Update with SET LOCAL
// synchronous_commit = off: the commit is visible at once and reaches the
// disk with the WAL writer, within a few hundred milliseconds, and at the
// latest with the next durable commit.
//
// # Event sequences
//
// PostgreSQL commits concurrent transactions in any order, so sequences
// drawn from a SEQUENCE could commit out of order and a reader that saw N
// could later find N-1. Instead every appended event takes its sequence
// from a one-row counter table, whose row lock the transaction then holds
// until it ends: transactions that append events commit one after another,
// in sequence order, and a reader never skips an event. The counter holds
// the greatest committed sequence, which LastEventSequence returns and
// pruning does not lower. The cost is that appending transactions do not
// overlap from their first AppendEvent to their commit, fsync included;
// BENCHMARKS.md measures it. A transaction that appends and then waits for
// a row lock held by another that waits for the counter is a deadlock,
// which PostgreSQL breaks and Update retries.
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
// The Store implements [lifecycle.Notifier] with LISTEN/NOTIFY: a
// transaction that appends events, queues a ship operation or creates,
// changes the status of or deletes a subscription sends a notification
// that is delivered when it commits, and [Store.Listen] passes it on to
// the Service, which wakes its event streams, ship runner or webhook
// dispatcher at once rather than at its next poll. Polling stays the
// backstop when the listening connection is lost.
package postgres
