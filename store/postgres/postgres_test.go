package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/postgres"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

// The tests run against the server named by LIFECYCLE_TEST_POSTGRES
// (default: the local one with trust authentication). TestMain creates a
// database of their own and drops it at the end; each Store gets a schema
// of its own in it.
var (
	testDSN    string // the test database, "" when no server answered
	skipReason string
	schemas    atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	admin := os.Getenv("LIFECYCLE_TEST_POSTGRES")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "store/postgres: no PostgreSQL server at %s, and CI=true requires one (.ci/run starts it): %v\n", admin, err)
			return 1
		}
		skipReason = fmt.Sprintf("no PostgreSQL server answers at %s (%v); start one, or set LIFECYCLE_TEST_POSTGRES to the DSN of a server where the tests may create databases", admin, err)
		return m.Run()
	}
	name := fmt.Sprintf("lifecycle_test_%d_%d", os.Getpid(), rand.IntN(1_000_000))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		fmt.Fprintf(os.Stderr, "store/postgres: create database %s: %v\n", name, err)
		return 1
	}
	cfg := conn.Config().Copy()
	cfg.Database = name
	testDSN = cfg.ConnString()
	// ConnString keeps the admin database's name; build it from parts.
	testDSN = replaceDatabase(admin, name)
	code := m.Run()
	drop, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, err := conn.Exec(drop, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "store/postgres: drop database %s: %v\n", name, err)
	}
	conn.Close(drop)
	return code
}

// replaceDatabase returns dsn with its database replaced by name.
func replaceDatabase(dsn, name string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", userInfo(cfg), cfg.Host, cfg.Port, name)
}

func userInfo(cfg *pgx.ConnConfig) string {
	if cfg.Password == "" {
		return cfg.User
	}
	return cfg.User + ":" + cfg.Password
}

// needServer skips t when no server answered.
func needServer(t testing.TB) {
	t.Helper()
	if testDSN == "" {
		t.Skip(skipReason)
	}
}

// newSchema returns the name of a schema no Store of this run uses yet.
func newSchema() string { return fmt.Sprintf("s%d", schemas.Add(1)) }

// openStore opens a Store on schema, with a small pool, as the suite opens
// many.
func openStore(t testing.TB, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.New(context.Background(), postgres.Config{DSN: testDSN, Schema: schema, MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newStore opens a Store on a new schema, closed when t ends.
func newStore(t testing.TB) *postgres.Store {
	t.Helper()
	needServer(t)
	s := openStore(t, newSchema())
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	needServer(t)
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) lifecycle.Store { return openStore(t, newSchema()) },
		Reopen: func(t *testing.T, old lifecycle.Store) lifecycle.Store {
			schema := old.(*postgres.Store).Schema()
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			return openStore(t, schema)
		},
	})
}
