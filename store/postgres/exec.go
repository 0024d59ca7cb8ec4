package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tasklifecycle/lifecycle/store/internal/sqlstore"
)

// flavour says how PostgreSQL differs to the shared code: reads for
// update lock their rows, text sorts in byte order only when told, and
// a transaction locks a key with an advisory lock.
var flavour = &sqlstore.Flavour{Name: "postgres", ForUpdate: " FOR UPDATE", Collate: ` COLLATE "C"`,
	LockKey: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"}

// querier is what *pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	queryer
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// executor is a sqlstore.Executor on the pool or a transaction, whose
// errors go through fail: the Store's translate, or a transaction's fail.
type executor struct {
	q    querier
	fail func(error) error
}

// Exec implements sqlstore.Executor.
func (e *executor) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := e.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, e.fail(err)
	}
	return tag.RowsAffected(), nil
}

// Query implements sqlstore.Executor.
func (e *executor) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r, err := e.q.Query(ctx, query, args...)
	if err != nil {
		return nil, e.fail(err)
	}
	return &rows{r: r, fail: e.fail}, nil
}

// QueryRow implements sqlstore.Executor.
func (e *executor) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return &row{r: e.q.QueryRow(ctx, query, args...), fail: e.fail}
}

// row is a pgx.Row whose errors go through fail.
type row struct {
	r    pgx.Row
	fail func(error) error
}

func (r *row) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); err != nil {
		return r.fail(err)
	}
	return nil
}

// rows are pgx.Rows whose errors go through fail.
type rows struct {
	r    pgx.Rows
	fail func(error) error
}

func (r *rows) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); err != nil {
		return r.fail(err)
	}
	return nil
}
func (r *rows) Next() bool { return r.r.Next() }
func (r *rows) Err() error {
	if err := r.r.Err(); err != nil {
		return r.fail(err)
	}
	return nil
}
func (r *rows) Close() { r.r.Close() }
