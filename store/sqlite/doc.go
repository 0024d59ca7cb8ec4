// Package sqlite implements [lifecycle.Store] on SQLite, through
// github.com/mattn/go-sqlite3 (cgo).
//
// The database runs in WAL mode with foreign keys on and a busy timeout.
// Its schema is embedded and migrated on open. Writes go through one
// connection owned by a writer goroutine, so transactions never contend
// inside a process; transactions that arrive together are committed
// together (group commit), each in its own savepoint. Reads use a pool of
// their own and run beside writes. By default every commit is fsynced
// (synchronous=FULL): when Update returns, the change survives a power
// cut.
//
// # Layout
//
// The statements of the Store and its Tx that SQLite and PostgreSQL
// share are written once, in store/internal/sqlstore, with numbered
// placeholders ($1) that this package rewrites to SQLite's (?1); the
// Store embeds its reads, writes and prune, and a transaction embeds its
// Tx. This package keeps what is SQLite's own: opening the database and
// its migrations (sqlite.go, dir.go), the writer with group commit, the
// executor and the translation of SQLite's errors (exec.go), event
// appends and bounds from the AUTOINCREMENT counter (events.go), and the
// claims of reconciliations, ship operations and subscriptions, atomic
// under the one writer (tasks.go, ship.go, webhooks.go).
package sqlite
