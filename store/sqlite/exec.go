package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// flavour says how SQLite differs to the shared code: its one writer
// holds the database, so a read for update needs no lock of its own.
var flavour = &sqlstore.Flavour{Name: "sqlite"}

// maxRewrites bounds the rewrites placeholders keeps: statements built
// from a request (a list of statuses of any length) are many.
const maxRewrites = 512

// placeholders rewrites the shared statements' numbered placeholders ($1)
// to SQLite's (?1), keeping up to maxRewrites rewrites for the next call.
type placeholders struct {
	mu sync.RWMutex
	m  map[string]string
}

// rewrite returns query with SQLite's placeholders.
func (p *placeholders) rewrite(query string) string {
	if strings.IndexByte(query, '$') < 0 {
		return query
	}
	p.mu.RLock()
	q, ok := p.m[query]
	p.mu.RUnlock()
	if ok {
		return q
	}
	b := []byte(query)
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '$' && b[i+1] >= '0' && b[i+1] <= '9' {
			b[i] = '?'
		}
	}
	q = string(b)
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[string]string)
	}
	if len(p.m) < maxRewrites {
		p.m[query] = q
	}
	p.mu.Unlock()
	return q
}

// queryer is what *sql.DB and *sql.Conn have in common.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// executor is a sqlstore.Executor on the read pool or the write
// connection.
type executor struct {
	q  queryer
	ph *placeholders
	// ctx, when set, is the context the statements run with instead of
	// the call's: the writer's batch.
	ctx context.Context
}

func (e *executor) context(ctx context.Context) context.Context {
	if e.ctx != nil {
		return e.ctx
	}
	return ctx
}

// Exec implements sqlstore.Executor.
func (e *executor) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := e.q.ExecContext(e.context(ctx), e.ph.rewrite(query), args...)
	if err != nil {
		return 0, translate(err)
	}
	n, err := res.RowsAffected()
	return n, translate(err)
}

// Query implements sqlstore.Executor.
func (e *executor) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r, err := e.q.QueryContext(e.context(ctx), e.ph.rewrite(query), args...)
	if err != nil {
		return nil, translate(err)
	}
	return (*rows)(r), nil
}

// QueryRow implements sqlstore.Executor.
func (e *executor) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return (*row)(e.q.QueryRowContext(e.context(ctx), e.ph.rewrite(query), args...))
}

// row is a *sql.Row whose errors are translated.
type row sql.Row

func (r *row) Scan(dest ...any) error { return translate((*sql.Row)(r).Scan(dest...)) }

// rows are *sql.Rows whose errors are translated.
type rows sql.Rows

func (r *rows) Scan(dest ...any) error { return translate((*sql.Rows)(r).Scan(dest...)) }
func (r *rows) Next() bool             { return (*sql.Rows)(r).Next() }
func (r *rows) Err() error             { return translate((*sql.Rows)(r).Err()) }
func (r *rows) Close()                 { (*sql.Rows)(r).Close() }
