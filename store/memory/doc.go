// Package memory implements [lifecycle.Store] in the memory of the
// process, for tests and demos.
//
// Nothing survives the process: when it exits, every task, event, key and
// subscription is gone. It is not for production; use store/sqlite or
// store/postgres there. It passes the same conformance suite
// (store/storetest) as they do, so a test that needs a Store, and not a
// database, can use it without linking a database driver:
//
//	svc, err := lifecycle.New(lifecycle.Config{Store: memory.New(), ...})
//
// # Transactions
//
// One mutex serialises every [Store.Update]. A transaction keeps its
// changes beside the committed tables and reads through them; when its
// function returns nil, the changes are applied to the tables at once
// under a write lock, and when it returns an error or panics they are
// forgotten. Reads outside a transaction take a read lock and run beside
// it, seeing only what was committed. [Store.Prune] runs alone, as a
// transaction does, and deletes every kind in one step. Claims (ClaimShipOperations,
// ClaimReconciliations, ClaimSubscriptions) are atomic because no other
// transaction runs beside them. Event sequences are given in commit
// order, so a reader never skips an event.
//
// Values are copied on the way in and on the way out: a caller that
// changes a slice, map or pointer it passed or received changes nothing
// stored.
//
// # Optional interfaces
//
// The Store implements [lifecycle.Notifier]: after a transaction that
// appended events, queued ship operations or changed subscriptions
// commits, every [Store.Listen] is told, so two Services that share one
// Store wake each other at once. It implements
// [lifecycle.InstanceLeaser], so that two Services sharing it with one
// [lifecycle.Config.InstanceID] behave as on the SQL Stores (the second
// refuses to run while the first lives), and
// [lifecycle.ConsoleSessionStore], so that a Service on it serves the
// operator console (package console). Instance leases and console
// sessions change outside transactions, each change alone and atomic as
// a transaction is. Its Tx implements [lifecycle.SecretResealer].
//
// It implements [lifecycletype.MergeQueueStore], and its Tx
// [lifecycletype.MergeQueueTx], so that a Service on it runs the
// lifecycle's own merge queue; a queue's State is copied, as every
// value is. It implements [lifecycletype.CIFailureStore], and its Tx
// [lifecycletype.CIFailureTx]: it keeps the details of failed CI checks.
//
// It does not implement [lifecycle.RelaxedUpdater], since nothing it
// commits waits for a disk, nor [lifecycle.FailureClassifier], since it
// has no failure that may pass.
package memory
