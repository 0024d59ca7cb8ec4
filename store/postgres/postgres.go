package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"path"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// Config configures a Store. Give DSN or Pool.
type Config struct {
	// DSN is the connection string of the database, such as
	// "postgres://user:password@db.example.com:5432/app?sslmode=verify-full".
	// The Store opens a pool of its own on it and closes it in Close.
	DSN string
	// Pool is a pool to use instead of opening one. Every connection it
	// makes must have search_path set to Schema, for example through
	// pgxpool.Config.ConnConfig.RuntimeParams["search_path"]; New checks
	// one. The Store does not close it.
	Pool *pgxpool.Pool
	// Schema is the schema holding the Store's tables, created when
	// missing. Defaults to "lifecycle".
	Schema string
	// MaxConns is the size of the pool the Store opens on DSN. Defaults to
	// four times the number of CPUs, at least 8. Ignored with Pool.
	MaxConns int32
	// MaxRetries is how many times Update runs a transaction again after a
	// deadlock or a serialization failure. Defaults to 20.
	MaxRetries int
}

// withDefaults checks cfg and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if (c.DSN == "") == (c.Pool == nil) {
		return c, errors.New("postgres: give Config.DSN (such as postgres://user@127.0.0.1:5432/app) or Config.Pool, and not both")
	}
	if c.Schema == "" {
		c.Schema = "lifecycle"
	}
	if c.MaxConns == 0 {
		c.MaxConns = int32(max(8, 4*runtime.NumCPU()))
	}
	if c.MaxConns < 0 || c.MaxRetries < 0 {
		return c, errors.New("postgres: Config.MaxConns and MaxRetries must not be negative; leave them zero for the defaults")
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 20
	}
	return c, nil
}

// defaultConnectTimeout bounds a connection attempt when the DSN sets no
// connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Store is a lifecycle.Store on a PostgreSQL database. It also implements
// lifecycle.RelaxedUpdater, Notifier, FailureClassifier, InstanceLeaser,
// ShipQueueCounter, TaskRevisioner, ConsoleSessionStore, SecretResealer
// lifecycletype.MergeQueueStore (its Tx is a MergeQueueTx) and
// lifecycletype.CIFailureStore (its Tx is a CIFailureTx). Most of
// its methods (the reads, Prune, the console sessions' and the lease's
// writes) are the code it shares with store/sqlite, embedded, so go doc
// lists only those of its own here; the interfaces say what each does.
type Store struct {
	reads   // the reads the stores share, on the pool
	pruner  // the deletions of Prune, each statement on the pool
	writes  // the writes in transactions of their own
	pool    *pgxpool.Pool
	ownPool bool
	schema  string
	ns      int32 // the first half of the keys of this schema's advisory locks
	retries int
	closed  atomic.Bool

	// ctx is cancelled by Close; it ends listening connections.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex     // orders Listen's start with Close
	wg     sync.WaitGroup // calls of Listen, and the announcer

	// pending are the changes committed and not yet announced; kick
	// wakes the announcer.
	pending atomic.Uint32
	kick    chan struct{}
}

var (
	_ lifecycle.Store               = (*Store)(nil)
	_ lifecycle.RelaxedUpdater      = (*Store)(nil)
	_ lifecycle.Notifier            = (*Store)(nil)
	_ lifecycle.FailureClassifier   = (*Store)(nil)
	_ lifecycle.InstanceLeaser      = (*Store)(nil)
	_ lifecycle.ShipQueueCounter    = (*Store)(nil)
	_ lifecycle.TaskRevisioner      = (*Store)(nil)
	_ lifecycle.ConsoleSessionStore = (*Store)(nil)
	_ lifecycle.SecretResealer      = (*Store)(nil)

	_ lifecycletype.MergeQueueStore = (*Store)(nil)
	_ lifecycletype.MergeQueueTx    = (*txn)(nil)
	_ lifecycletype.CIFailureStore  = (*Store)(nil)
	_ lifecycletype.CIFailureTx     = (*txn)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

// New connects to the database, creates the schema when missing and
// migrates it to the current version.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(cfg.Schema))
	s := &Store{pool: cfg.Pool, schema: cfg.Schema, ns: int32(h.Sum32() & 0x7fffffff), retries: cfg.MaxRetries}
	s.reads = reads{F: flavour, Open: s.open}
	if s.pool == nil {
		pc, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			return nil, fmt.Errorf("postgres: Config.DSN: %w", err)
		}
		pc.MaxConns = cfg.MaxConns
		pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
		if pc.ConnConfig.ConnectTimeout == 0 {
			// A database out of reach fails a request in seconds rather
			// than at its deadline; connect_timeout in the DSN wins.
			pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
		}
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, fmt.Errorf("postgres: open pool: %w", err)
		}
		s.ownPool = true
	}
	s.reads.X = &executor{q: s.pool, fail: s.translate}
	s.writes = writes{F: flavour, Run: func(ctx context.Context, relaxed bool, fn func(x *sqlstore.Tx) error) error {
		opts := pgx.TxOptions{}
		if relaxed {
			opts = relaxedTx
		}
		return s.update(ctx, opts, func(tx lifecycle.Tx) error { return fn(&tx.(*txn).Tx) })
	}}
	s.pruner = pruner{F: flavour, Open: s.open, Exec: s.reads.X.Exec, DeleteEventsBefore: s.deleteEventsBefore}
	if err := s.migrate(ctx); err != nil {
		if s.ownPool {
			s.pool.Close()
		}
		return nil, fmt.Errorf("postgres: schema %s: %w", cfg.Schema, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.kick = make(chan struct{}, 1)
	s.wg.Add(1)
	go s.announcer()
	return s, nil
}

// migrateLock is the key of the session advisory lock held while
// migrating, with the schema's hash as the second half.
const migrateLock = 0x6c696665 // "life"

// migrate applies the embedded migrations the schema has not seen yet,
// each in its own transaction, recording progress in schema_version. It
// holds an advisory lock meanwhile, so that processes starting together
// migrate once.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", migrateLock, s.schema); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1, hashtext($2))", migrateLock, s.schema)
	schema := pgx.Identifier{s.schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var current string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&current); err != nil || current != s.schema {
		return fmt.Errorf("the connections' search_path must name schema %q first (current schema %q, %v): set it in the pool's ConnConfig.RuntimeParams", s.schema, current, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var version int
	err = conn.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = conn.Exec(ctx, "INSERT INTO schema_version (version) VALUES (0)")
	}
	if err != nil {
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
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(script)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE schema_version SET version = $1", i+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", path.Base(names[i]), err)
		}
	}
	return nil
}

// Pool returns the pool the Store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema holding the Store's tables.
func (s *Store) Schema() string { return s.schema }

// Close ends listening and closes the pool, unless it was given in
// Config.Pool. Calls made after it fail with lifecycle.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// reads are the shared reads, embedded without an exported field.
type reads = sqlstore.Reads

// writes are the shared writes, embedded without an exported field.
type writes = sqlstore.Writes

// pruner is the shared Prune, embedded without an exported field.
type pruner = sqlstore.Pruner

// open returns errClosed once the store is closed.
func (s *Store) open() error {
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

// errClosed is returned by calls made after Close.
var errClosed = fmt.Errorf("postgres: %w", lifecycle.ErrClosed)

// Update implements lifecycle.Store. fn runs in a READ COMMITTED
// transaction; after a deadlock or serialization failure the transaction
// is rolled back and fn runs again.
func (s *Store) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	return s.update(ctx, pgx.TxOptions{}, fn)
}

// relaxedBegin begins a transaction whose commit does not wait for the
// WAL to reach the disk.
var relaxedTx = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}

// UpdateRelaxed implements lifecycle.RelaxedUpdater with SET LOCAL
// synchronous_commit = off. The commit is visible to every reader at once;
// the WAL writer flushes it within a few hundred milliseconds, and any
// later durable commit flushes it first, as the WAL is written in order.
func (s *Store) UpdateRelaxed(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	return s.update(ctx, relaxedTx, fn)
}

func (s *Store) update(ctx context.Context, opts pgx.TxOptions, fn func(tx lifecycle.Tx) error) error {
	for attempt := 0; ; attempt++ {
		if s.closed.Load() {
			return errClosed
		}
		err := s.try(ctx, opts, fn)
		if err == nil || !retryable(err) || attempt >= s.retries {
			return err
		}
		// Back off a little, with jitter, so that the transactions that
		// collided do not collide again.
		wait := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}

// try runs fn in one transaction.
func (s *Store) try(ctx context.Context, opts pgx.TxOptions, fn func(tx lifecycle.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return s.translate(fmt.Errorf("postgres: begin: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // after Commit, a no-op
	x := &txn{s: s, tx: tx}
	x.Tx = sqlstore.Tx{F: flavour, X: &executor{q: tx, fail: x.fail}}
	if err := fn(x); err != nil {
		if x.failed != nil && retryable(x.failed) && !retryable(err) {
			// fn turned the failure into an error of its own: the
			// transaction is aborted all the same.
			return x.failed
		}
		return err
	}
	if x.failed != nil {
		// fn went on after a statement failed: PostgreSQL aborted the
		// transaction, and commits nothing.
		return fmt.Errorf("postgres: the transaction failed and was rolled back: %w", x.failed)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.translate(fmt.Errorf("postgres: commit: %w", err))
	}
	if x.Changes != 0 {
		s.announce(x.Changes)
	}
	return nil
}

// retryable reports whether err is a failure after which running the
// transaction again may succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// translate maps driver errors to the Store's error contract.
func (s *Store) translate(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", err, lifecycle.ErrNotFound)
	case errors.As(err, &pe) && pe.Code == "23505":
		return fmt.Errorf("%w: %w", err, lifecycle.ErrConflict)
	case s.closed.Load():
		return fmt.Errorf("%w: %w", err, lifecycle.ErrClosed)
	}
	return err
}

// Unavailable implements lifecycle.FailureClassifier: err is a failure
// that may pass when PostgreSQL could not be reached or was lost (a
// connection refused, reset or timed out, a server shutting down or
// restarting), or is out of a resource (connections, disk, memory) or
// failing its I/O: SQLSTATE classes 08, 53, 57 and 58. A statement
// PostgreSQL refused for another reason (a constraint, a bad query) is
// not.
func (s *Store) Unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:min(2, len(pe.Code))] {
		case "08", "53", "57", "58":
			return true
		}
		return false
	}
	var (
		ce *pgconn.ConnectError
		oe *net.OpError // not any net.Error: context.DeadlineExceeded is one
	)
	return errors.As(err, &ce) || errors.As(err, &oe) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// txn is a lifecycle.Tx: one pgx transaction.
type txn struct {
	sqlstore.Tx
	s  *Store
	tx pgx.Tx
	// failed is the first error PostgreSQL returned in the transaction,
	// which aborts it.
	failed error
	// appending is set once the transaction holds its advisory lock of
	// event appends.
	appending bool
}

var (
	_ lifecycle.Tx           = (*txn)(nil)
	_ lifecycle.DependencyTx = (*txn)(nil)
)

// fail records err as an error of the transaction, when it is one of
// PostgreSQL's, and translates it.
func (x *txn) fail(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if x.failed == nil && errors.As(err, &pe) {
		x.failed = err
	}
	return translateTx(err)
}

// translateTx is translate for errors inside a transaction, where Close
// does not matter.
func translateTx(err error) error {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", err, lifecycle.ErrNotFound)
	case errors.As(err, &pe) && pe.Code == "23505":
		return fmt.Errorf("%w: %w", err, lifecycle.ErrConflict)
	}
	return err
}

// exec runs a statement in the transaction and returns the rows it
// affected.
func (x *txn) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := x.tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, x.fail(err)
	}
	return tag.RowsAffected(), nil
}

// queryer is what *pgxpool.Pool and pgx.Tx have in common.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
