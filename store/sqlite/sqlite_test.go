package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.New(sqlite.Config{Path: filepath.Join(notADir, "x.db")}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("New under a file = %v, want an error saying it is not a directory", err)
	}
}

// Relaxed commits are visible at once, mix with durable ones in a batch,
// and are kept across a reopen.
func TestRelaxedUpdates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lifecycle.db")
	s, err := sqlite.New(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) lifecycle.IdempotencyScope {
		return lifecycle.IdempotencyScope{PrincipalID: "p", Method: "POST", Route: "/r", Key: fmt.Sprintf("key-%04d", i)}
	}
	now := time.Now()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := lifecycle.IdempotencyRecord{IdempotencyScope: key(i), Fingerprint: []byte{1}, CreatedAt: now, ExpiresAt: now.Add(time.Hour), LockedUntil: now}
			put := func(tx lifecycle.Tx) error {
				return tx.UpdateIdempotencyRecord(context.Background(), rec.IdempotencyScope, func(*lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
					return &rec, nil
				})
			}
			var err error
			if i%2 == 0 {
				err = s.UpdateRelaxed(context.Background(), put)
			} else {
				err = s.Update(context.Background(), put)
			}
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	count := func(s *sqlite.Store) int {
		n := 0
		s.Update(t.Context(), func(tx lifecycle.Tx) error {
			for i := range 40 {
				tx.UpdateIdempotencyRecord(t.Context(), key(i), func(cur *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
					if cur != nil {
						n++
					}
					return cur, nil // kept as it is
				})
			}
			return nil
		})
		return n
	}
	if n := count(s); n != 40 {
		t.Fatalf("%d records after relaxed and durable commits, want 40", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.New(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := count(s); n != 40 {
		t.Errorf("%d records after reopening, want 40", n)
	}
}
