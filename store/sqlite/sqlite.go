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
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
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
	// Path is the database file. Required. Its directory is created when
	// missing.
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

// Store is a lifecycle.Store on a SQLite database file. It also implements
// lifecycle.RelaxedUpdater, FailureClassifier, InstanceLeaser,
// ShipQueueCounter, TaskRevisioner, ConsoleSessionStore, SecretResealer
// lifecycletype.MergeQueueStore (its Tx is a MergeQueueTx) and
// lifecycletype.CIFailureStore (its Tx is a CIFailureTx). Most of
// its methods (the reads, Prune, the console sessions' and the lease's
// writes) are the code it shares with store/postgres, embedded, so go doc
// lists only those of its own here; the interfaces say what each does.
type Store struct {
	reads  // the reads the stores share, on the read pool
	pruner // the deletions of Prune, in transactions of the writer
	writes // the writes in transactions of their own
	ph     *placeholders
	w      *sql.DB   // the pool of the write connection
	conn   *sql.Conn // the write connection, owned by the writer goroutine
	r      *sql.DB   // read-only pool
	path   string
	closed atomic.Bool

	reqs       chan *writeReq
	stop       chan struct{}
	writerDone chan struct{}

	sync    Synchronous // the configured setting
	relaxed bool        // the writer connection runs with synchronous=NORMAL now; writer goroutine only
}

// Path returns the database file the store was opened on.
func (s *Store) Path() string { return s.path }

var (
	_ lifecycle.Store               = (*Store)(nil)
	_ lifecycle.RelaxedUpdater      = (*Store)(nil)
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
	if err := prepareDir(cfg.Path); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite3", dsn(""))
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
	conn, err := w.Conn(context.Background())
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", cfg.Path, err)
	}
	s := &Store{w: w, conn: conn, r: r, path: cfg.Path, sync: cfg.Synchronous, ph: new(placeholders),
		reqs: make(chan *writeReq), stop: make(chan struct{}), writerDone: make(chan struct{})}
	s.reads = reads{F: flavour, X: &executor{q: r, ph: s.ph}, Open: s.open}
	s.writes = writes{F: flavour, Run: func(ctx context.Context, relaxed bool, fn func(x *sqlstore.Tx) error) error {
		return s.write(ctx, relaxed, func(x *txn) error { return fn(&x.Tx) })
	}}
	s.pruner = pruner{F: flavour, Open: s.open, Exec: s.execAlone, DeleteEventsBefore: s.deleteEventsBefore}
	go s.writer()
	return s, nil
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

// Close stops the writer, answering writes still queued with
// lifecycle.ErrClosed, and closes the database.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.writerDone
	return errors.Join(s.conn.Close(), s.r.Close(), s.w.Close())
}

// reads are the shared reads, embedded without an exported field.
type reads = sqlstore.Reads

// writes are the shared writes, embedded without an exported field.
type writes = sqlstore.Writes

// pruner is the shared Prune, embedded without an exported field.
type pruner = sqlstore.Pruner

// execAlone runs one statement in a transaction of the writer.
func (s *Store) execAlone(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.write(ctx, false, func(x *txn) error {
		var err error
		n, err = x.X.Exec(ctx, query, args...)
		return err
	})
	return n, err
}

// open returns errClosed once the store is closed.
func (s *Store) open() error {
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

// errClosed is returned by calls made after Close.
var errClosed = fmt.Errorf("sqlite: %w", lifecycle.ErrClosed)

// maxBatch bounds the transactions committed together.
const maxBatch = 128

// writeReq is a transaction waiting for the writer.
type writeReq struct {
	ctx     context.Context
	fn      func(x *txn) error
	relaxed bool // the commit need not wait for the disk
	done    chan writeResult
}

type writeResult struct {
	err   error
	panic any // a panic of fn, re-raised in the caller's goroutine
}

// Update implements lifecycle.Store. Transactions that arrive while
// another commits are committed together (group commit): each runs in a
// savepoint of one SQLite transaction, so a failing one is rolled back
// alone, and all share one fsync. A transaction's statements run with the
// batch's context, so cancelling one caller cannot interrupt the others;
// a caller cancelled before its turn is skipped.
func (s *Store) Update(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	return s.write(ctx, false, func(x *txn) error { return fn(x) })
}

// UpdateRelaxed implements lifecycle.RelaxedUpdater. With synchronous=FULL,
// a batch of relaxed transactions only is committed with synchronous=NORMAL:
// it is in the WAL, visible to every reader, and reaches the disk with the
// next fsync of the WAL, at the latest the next durable commit's.
func (s *Store) UpdateRelaxed(ctx context.Context, fn func(tx lifecycle.Tx) error) error {
	return s.write(ctx, true, func(x *txn) error { return fn(x) })
}

// write queues fn for the writer and waits for its outcome.
func (s *Store) write(ctx context.Context, relaxed bool, fn func(x *txn) error) error {
	if s.closed.Load() {
		return errClosed
	}
	req := &writeReq{ctx: ctx, fn: fn, relaxed: relaxed, done: make(chan writeResult, 1)}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return errClosed
	}
	res := <-req.done // the writer always answers
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}

// writer owns the write connection: it takes the queued transactions in
// batches and commits each batch at once.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		var first *writeReq
		select {
		case first = <-s.reqs:
		case <-s.stop:
			for {
				select {
				case r := <-s.reqs:
					r.done <- writeResult{err: errClosed}
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commitAll(batch)
	}
}

// commitAll commits a batch. The relaxed transactions of a batch that
// also holds durable ones commit first, in a transaction without an fsync,
// so that they are not kept waiting for the durable ones'. None was
// answered yet: any order among them is one they could have run in.
func (s *Store) commitAll(batch []*writeReq) {
	mixed := s.sync == SynchronousFull &&
		slices.ContainsFunc(batch, func(r *writeReq) bool { return r.relaxed }) &&
		slices.ContainsFunc(batch, func(r *writeReq) bool { return !r.relaxed })
	if !mixed {
		s.commitBatch(batch)
		return
	}
	var relaxed, durable []*writeReq
	for _, r := range batch {
		if r.relaxed {
			relaxed = append(relaxed, r)
		} else {
			durable = append(durable, r)
		}
	}
	s.commitBatch(relaxed)
	s.commitBatch(durable)
}

// commitBatch runs a batch of transactions in one SQLite transaction and
// answers each.
func (s *Store) commitBatch(batch []*writeReq) {
	ctx := context.Background()
	results := make([]writeResult, len(batch))
	answer := func() {
		for i, r := range batch {
			r.done <- results[i]
		}
	}
	exec := func(q string) error {
		_, err := s.conn.ExecContext(ctx, q)
		return err
	}
	// A batch of relaxed transactions only commits without an fsync.
	relaxed := s.sync == SynchronousFull && !slices.ContainsFunc(batch, func(r *writeReq) bool { return !r.relaxed })
	if relaxed != s.relaxed {
		mode := "FULL"
		if relaxed {
			mode = "NORMAL"
		}
		if err := exec("PRAGMA synchronous = " + mode); err != nil {
			err = translate(fmt.Errorf("sqlite: set synchronous: %w", err))
			for i := range results {
				results[i].err = err
			}
			answer()
			return
		}
		s.relaxed = relaxed
	}
	if err := exec("BEGIN IMMEDIATE"); err != nil {
		err = translate(fmt.Errorf("sqlite: begin: %w", err))
		for i := range results {
			results[i].err = err
		}
		answer()
		return
	}
	x := &txn{Tx: sqlstore.Tx{F: flavour, X: &executor{q: s.conn, ph: s.ph, ctx: ctx}}, conn: s.conn, ctx: ctx}
	committed := make([]bool, len(batch))
	var abort error
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i].err = err
			continue
		}
		if err := exec("SAVEPOINT w"); err != nil {
			abort = err
			break
		}
		p, err := runFn(r.fn, x)
		if err == nil && p == nil {
			if err := exec("RELEASE w"); err != nil {
				abort = err
				break
			}
			committed[i] = true
			continue
		}
		results[i] = writeResult{err: err, panic: p}
		// Undo this transaction alone. Should SQLite have rolled back the
		// whole batch (it does so on some I/O errors), this fails.
		if err := exec("ROLLBACK TO w"); err != nil {
			abort = err
			break
		}
		if err := exec("RELEASE w"); err != nil {
			abort = err
			break
		}
	}
	var commitErr error
	switch {
	case abort != nil:
		commitErr = translate(fmt.Errorf("sqlite: transaction batch failed: %w", abort))
		exec("ROLLBACK")
	case slices.Contains(committed, true):
		if err := exec("COMMIT"); err != nil {
			commitErr = translate(fmt.Errorf("sqlite: commit: %w", err))
			exec("ROLLBACK")
		}
	default:
		exec("ROLLBACK")
	}
	for i := range batch {
		if commitErr != nil && (committed[i] || (results[i].err == nil && results[i].panic == nil)) {
			results[i].err = commitErr
		}
	}
	answer()
}

// runFn calls fn, turning a panic into a value to re-raise elsewhere.
func runFn(fn func(*txn) error, x *txn) (p any, err error) {
	defer func() {
		if r := recover(); r != nil {
			p = r
		}
	}()
	return nil, fn(x)
}

// txn is a lifecycle.Tx inside a batch. Its methods run on the write
// connection with the batch's context and ignore the one they are given.
type txn struct {
	sqlstore.Tx
	conn *sql.Conn
	ctx  context.Context
}

var (
	_ lifecycle.Tx           = (*txn)(nil)
	_ lifecycle.DependencyTx = (*txn)(nil)
)

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

// Unavailable implements lifecycle.FailureClassifier: err is a failure
// that may pass when SQLite could not write or read its files (the disk
// full, an I/O error, a file it cannot open or that became read-only),
// ran out of memory, or found the database locked for longer than its
// busy timeout.
func (s *Store) Unavailable(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrReadonly, sqlite3.ErrNomem, sqlite3.ErrBusy, sqlite3.ErrLocked:
		return true
	}
	return false
}
