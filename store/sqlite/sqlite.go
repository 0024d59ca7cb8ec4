// Package sqlite implements [lifecycle.Store] on SQLite, through
// github.com/mattn/go-sqlite3 (cgo).
//
// The database runs in WAL mode with foreign keys on and a busy timeout.
// Its schema is embedded and migrated on open. Writes go through one
// connection, so transactions never contend inside a process; reads use a
// pool of their own and run beside writes. By default every commit is
// fsynced (synchronous=FULL): when Update returns, the change survives a
// power cut.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/tasklifecycle/lifecycle"
)

// Synchronous is SQLite's synchronous setting: how hard a commit waits for
// the disk.
type Synchronous string

// The synchronous settings a Store accepts.
const (
	// SynchronousFull fsyncs the WAL at every commit: a committed change
	// survives a power cut. The default.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal fsyncs only at checkpoints: a commit survives a
	// crash of the process, but the last ones may be lost in a power cut.
	SynchronousNormal Synchronous = "NORMAL"
)

// Config configures a Store.
type Config struct {
	// Path is the database file. Required. Its directory must exist.
	Path string
	// Synchronous defaults to SynchronousFull.
	Synchronous Synchronous
	// BusyTimeout is how long a statement waits for a lock held by another
	// process. Defaults to 5 seconds.
	BusyTimeout time.Duration
	// MaxReaders is the size of the read connection pool. Defaults to
	// twice the number of CPUs, at least 4.
	MaxReaders int
}

// Store is a lifecycle.Store on a SQLite database file.
type Store struct {
	w      *sql.DB // the single writer connection
	r      *sql.DB // read-only pool
	path   string
	closed atomic.Bool
}

// Path returns the database file the store was opened on.
func (s *Store) Path() string { return s.path }

var _ lifecycle.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// New opens (creating if needed) the database at cfg.Path and migrates it
// to the current schema.
func New(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: Config.Path is required: give the database file, such as data/lifecycle.db")
	}
	if cfg.Synchronous == "" {
		cfg.Synchronous = SynchronousFull
	}
	if cfg.Synchronous != SynchronousFull && cfg.Synchronous != SynchronousNormal {
		return nil, fmt.Errorf("sqlite: Config.Synchronous %q: use SynchronousFull or SynchronousNormal", cfg.Synchronous)
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	if cfg.MaxReaders == 0 {
		cfg.MaxReaders = max(4, 2*runtime.NumCPU())
	}
	dsn := func(extra string) string {
		q := url.Values{}
		q.Set("_journal_mode", "WAL")
		q.Set("_busy_timeout", strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10))
		q.Set("_foreign_keys", "on")
		q.Set("_synchronous", string(cfg.Synchronous))
		q.Set("_stmt_cache_size", "64")
		return "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() + "?" + q.Encode() + extra
	}
	w, err := sql.Open("sqlite3", dsn("&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(context.Background(), w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", cfg.Path, err)
	}
	r, err := sql.Open("sqlite3", dsn("&_query_only=1"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	r.SetMaxOpenConns(cfg.MaxReaders)
	r.SetMaxIdleConns(cfg.MaxReaders)
	r.SetConnMaxIdleTime(0)
	r.SetConnMaxLifetime(0)
	return &Store{w: w, r: r, path: cfg.Path}, nil
}

// migrate applies the embedded migrations the database has not seen yet,
// each in its own transaction, recording progress in PRAGMA user_version.
func migrate(ctx context.Context, db *sql.DB) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(names) {
		return fmt.Errorf("schema version %d is newer than this program's %d: upgrade the program", version, len(names))
	}
	for i := version; i < len(names); i++ {
		script, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: %w", path.Base(names[i]), err)
		}
		if _, err := tx.ExecContext(ctx, string(script)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", path.Base(names[i]), err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", path.Base(names[i]), err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", path.Base(names[i]), err)
		}
	}
	return nil
}

// Close closes the database. Calls that are running may fail.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// errClosed is returned by calls made after Close.
var errClosed = fmt.Errorf("sqlite: %w", lifecycle.ErrClosed)

// Update implements lifecycle.Store.
func (s *Store) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	if s.closed.Load() {
		return errClosed
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return translate(fmt.Errorf("sqlite: begin: %w", err))
	}
	if err := fn(&txn{tx: tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return translate(fmt.Errorf("sqlite: commit: %w", err))
	}
	return nil
}

// txn is a lifecycle.Tx on a *sql.Tx.
type txn struct {
	tx *sql.Tx
}

var _ lifecycle.Tx = (*txn)(nil)

// queryer is what *sql.DB and *sql.Tx have in common.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// translate maps driver errors to the Store's error contract.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %w", err, lifecycle.ErrNotFound)
	case errors.As(err, &se) && se.Code == sqlite3.ErrConstraint &&
		(se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey):
		return fmt.Errorf("%w: %w", err, lifecycle.ErrConflict)
	}
	return err
}

// millis converts a time to Unix milliseconds, the stored form.
func millis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis converts stored Unix milliseconds back to a timestamp.
func fromMillis(ms int64) lifecycle.Timestamp {
	return lifecycle.NewTimestamp(time.UnixMilli(ms))
}
