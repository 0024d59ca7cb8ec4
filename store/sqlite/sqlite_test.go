package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) lifecycle.Store {
			s, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Reopen: func(t *testing.T, old lifecycle.Store) lifecycle.Store {
			path := old.(*sqlite.Store).Path()
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := sqlite.New(sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A panic in a transaction function reaches its caller, rolls back that
// transaction alone, and leaves the store working.
func TestPanicInTransactionReachesCaller(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the transaction's panic", r)
			}
		}()
		s.Update(t.Context(), func(tx lifecycle.Tx) error { panic("boom") })
	}()
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return nil }); err != nil {
		t.Fatalf("Update after a panic: %v", err)
	}
}

// A caller whose context ends before its turn is skipped.
func TestCancelledBeforeItsTurn(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	err := s.Update(ctx, func(tx lifecycle.Tx) error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("Update with a cancelled context: error %v, ran %v; want context.Canceled and not run", err, ran)
	}
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	if _, err := sqlite.New(sqlite.Config{}); err == nil {
		t.Error("New without a path succeeded")
	}
	if _, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "x.db"), Synchronous: "OFF"}); err == nil {
		t.Error("New with synchronous OFF succeeded")
	}
	if _, err := sqlite.New(sqlite.Config{Path: filepath.Join(t.TempDir(), "missing", "x.db")}); err == nil {
		t.Error("New in a missing directory succeeded")
	}
}
