// Package sqlstore is the code store/sqlite and store/postgres share: the
// statements of the Store and its Tx written once, the encoding of rows
// (times as Unix milliseconds, JSON members as text) and their scanning.
//
// A store gives it an [Executor] for each place statements run (its read
// pool, a transaction) and a [Flavour] saying how its database differs.
// Statements are written with PostgreSQL's numbered placeholders ($1,
// $2, ...); the SQLite executor rewrites them to SQLite's ?1, ?2, ...
// Errors an Executor returns are already translated to the Store's
// contract (lifecycle.ErrNotFound for no row, lifecycle.ErrConflict for a
// unique key taken), so the shared code only wraps them with context.
//
// A store embeds [Reads] (its reads outside transactions), [Writes] (the
// writes that run in a transaction of their own) and [Pruner] (Prune, in
// batches), each without an exported field, and its transaction embeds
// [Tx]: their methods become the store's, as lifecycle's interfaces name
// them. A store may still write a statement of its own where its driver
// does better (SQLite's event append reads the rowid LastInsertId gives).
//
// What differs stays in the stores: connecting and migrating, the
// transaction machinery (SQLite's single writer with group commit,
// PostgreSQL's retries, advisory locks and notifications), claims with
// FOR UPDATE SKIP LOCKED, and event sequences.
package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Flavour says how a database differs in what the shared statements say.
type Flavour struct {
	// Name prefixes the errors: "sqlite" or "postgres".
	Name string
	// ForUpdate ends a read for update: " FOR UPDATE" where rows are
	// locked, "" on SQLite, whose one writer holds the database.
	ForUpdate string
	// Collate follows a text column in ORDER BY for byte order:
	// ` COLLATE "C"` on PostgreSQL, "" on SQLite, whose default it is.
	Collate string
	// LockKey is a statement that takes a lock of the key $1 (a string)
	// until the transaction ends, where rows are locked; "" on SQLite.
	LockKey string
}

// errorf formats an error prefixed with the flavour's name.
func (f *Flavour) errorf(format string, args ...any) error {
	return fmt.Errorf(f.Name+": "+format, args...)
}

// Row is one row of a result: *sql.Row, pgx.Row.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a result, read one after the other.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close()
}

// Executor runs statements written with numbered placeholders ($1, $2)
// where a store says: its read pool, or one of its transactions. Its
// errors are translated to the Store's contract: ErrNotFound when
// QueryRow finds no row, ErrConflict when a unique key is taken.
type Executor interface {
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query and returns its rows, to be closed.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryRow runs a query of one row; its error comes with Scan.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Reads are the reads of a Store outside transactions, shared by both
// stores: a Store embeds them.
type Reads struct {
	F *Flavour
	// X runs the reads: the store's read pool.
	X Executor
	// Open returns an error matching lifecycle.ErrClosed once the store
	// is closed, and nil before.
	Open func() error
}

// Tx is the shared part of a store's lifecycle.Tx: a store's transaction
// embeds it.
type Tx struct {
	F *Flavour
	// X runs the statements of the transaction.
	X Executor
	// Changes are the kinds of change the transaction made, for a store
	// that announces them to every process after commit (PostgreSQL).
	Changes lifecycle.Change

	// edges are the dependencies of the tasks the transaction read or
	// wrote, by task ID, as they are stored.
	edges map[string][]string
}

// QueryAll runs a query and scans each of its rows with scan.
func QueryAll[T any](ctx context.Context, x Executor, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := x.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Millis converts a time to Unix milliseconds, the stored form.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis converts stored Unix milliseconds back to a timestamp.
func FromMillis(ms int64) lifecycle.Timestamp {
	return lifecycle.NewTimestamp(time.UnixMilli(ms))
}

// OptionalMillis converts an optional timestamp to its stored form.
func OptionalMillis(t *lifecycle.Timestamp) *int64 {
	if t == nil {
		return nil
	}
	ms := Millis(t.Time)
	return &ms
}

// NonNil returns s, or an empty slice when s is nil: a NOT NULL column
// takes it where nil would be NULL.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
