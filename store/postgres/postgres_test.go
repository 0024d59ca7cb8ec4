package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/postgres"
	"github.com/tasklifecycle/lifecycle/store/postgres/pgtest"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

// The tests run against the server named by LIFECYCLE_TEST_POSTGRES
// (default: the local one with trust authentication). TestMain creates a
// database of their own and drops it at the end; each Store gets a schema
// of its own in it.
var (
	testDB  pgtest.Database // the test database; DSN "" when no server answered
	schemas atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Report(pgtest.Main(m, "store/postgres", &testDB)))
}

// needServer skips t when no server answered.
func needServer(t testing.TB) {
	t.Helper()
	if testDB.DSN == "" {
		testenv.Require(t, testenv.PostgreSQL, testDB.SkipReason)
	}
}

// newSchema returns the name of a schema no Store of this run uses yet.
func newSchema() string { return fmt.Sprintf("s%d", schemas.Add(1)) }

// openStore opens a Store on schema, with a small pool, as the suite opens
// many.
func openStore(t testing.TB, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.New(context.Background(), postgres.Config{DSN: testDB.DSN, Schema: schema, MaxConns: 6})
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
