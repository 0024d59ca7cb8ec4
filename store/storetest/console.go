package storetest

import (
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
)

// consoleSession returns a session opened with key at base+created that
// expires at base+expires; its hash is that of token.
func consoleSession(token, key string, created, expires time.Duration) lifecycle.ConsoleSession {
	hash, keyHash := sha256.Sum256([]byte(token)), sha256.Sum256([]byte("lk_"+key))
	return lifecycle.ConsoleSession{Hash: hash[:], KeyID: key, KeyHash: keyHash[:], CreatedAt: ts(created), ExpiresAt: ts(expires)}
}

func createConsoleSessions(t *testing.T, s lifecycle.ConsoleSessionStore, sessions ...lifecycle.ConsoleSession) {
	t.Helper()
	for _, cs := range sessions {
		if err := s.CreateConsoleSession(t.Context(), cs); err != nil {
			t.Fatalf("CreateConsoleSession(%x): %v", cs.Hash, err)
		}
	}
}

// testConsoleSessionStore runs the tests of lifecycle.ConsoleSessionStore,
// each on a fresh store, when the Store implements it; a Store without it
// keeps no console sessions, and they are skipped.
func testConsoleSessionStore(t *testing.T, h Harness) {
	probe := h.Open(t)
	_, ok := probe.(lifecycle.ConsoleSessionStore)
	probe.Close()
	if !ok {
		t.Skip("the Store does not implement lifecycle.ConsoleSessionStore: it keeps no console sessions, and serves no console")
	}
	for _, tt := range []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"RoundTrip", testConsoleSessions},
		{"DeleteBefore", testDeleteConsoleSessionsBefore},
		{"Closed", testConsoleSessionsClosed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, h)
		})
	}
}

// openSessions opens a store that is closed when the test ends, as a
// ConsoleSessionStore.
func openSessions(t *testing.T, h Harness) lifecycle.ConsoleSessionStore {
	t.Helper()
	return open(t, h).(lifecycle.ConsoleSessionStore)
}

func testConsoleSessions(t *testing.T, h Harness) {
	s := openSessions(t, h)
	a, b := consoleSession("token-a", "key_1", 0, time.Hour), consoleSession("token-b", "key_1", time.Minute, 2*time.Hour)
	// Hashes are bytes: a prefix of another's, or one that differs from
	// another's in a zero byte, is another session's.
	prefix, zero := consoleSession("token-c", "key_2", 0, time.Hour), consoleSession("token-d", "key_2", 0, time.Hour)
	prefix.Hash = slices.Clone(a.Hash[:16])
	zero.Hash = append([]byte{0}, a.Hash[1:]...) // a's hash begins with 0xa7
	expired := consoleSession("token-e", "key_2", -2*time.Hour, -time.Hour)
	createConsoleSessions(t, s, a, b, prefix, zero, expired)
	// Expired or not, a session is returned as created.
	for _, want := range []lifecycle.ConsoleSession{a, b, prefix, zero, expired} {
		got, err := s.ConsoleSession(t.Context(), want.Hash)
		if err != nil {
			t.Errorf("ConsoleSession(%x): %v", want.Hash, err)
			continue
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("ConsoleSession(%x) (-want +got):\n%s", want.Hash, diff)
		}
	}
	missing := consoleSession("token-missing", "key_1", 0, time.Hour)
	calls := []struct {
		name string
		fn   func() error
		want error
	}{
		{"CreateConsoleSession(same hash)", func() error {
			dup := consoleSession("token-a", "key_2", 5*time.Minute, 3*time.Hour) // another key, the same token
			return s.CreateConsoleSession(t.Context(), dup)
		}, lifecycle.ErrConflict},
		{"DeleteConsoleSession(missing)", func() error { return s.DeleteConsoleSession(t.Context(), missing.Hash) }, lifecycle.ErrNotFound},
		{"DeleteConsoleSession(a prefix of a hash)", func() error { return s.DeleteConsoleSession(t.Context(), a.Hash[:8]) }, lifecycle.ErrNotFound},
		{"DeleteConsoleSession(no hash)", func() error { return s.DeleteConsoleSession(t.Context(), nil) }, lifecycle.ErrNotFound},
	}
	for _, c := range calls {
		if err := c.fn(); !errors.Is(err, c.want) {
			t.Errorf("%s error = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := s.ConsoleSession(t.Context(), missing.Hash); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("ConsoleSession(missing) error = %v, want ErrNotFound", err)
	}
	// The failed calls changed nothing.
	if got, err := s.ConsoleSession(t.Context(), a.Hash); err != nil || !cmp.Equal(a, got, equateEmpty) {
		t.Errorf("ConsoleSession(a) after failed calls = %+v, %v; want it unchanged", got, err)
	}

	// Sign-out deletes one session, and only once.
	if err := s.DeleteConsoleSession(t.Context(), a.Hash); err != nil {
		t.Fatalf("DeleteConsoleSession: %v", err)
	}
	if _, err := s.ConsoleSession(t.Context(), a.Hash); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("ConsoleSession(deleted) error = %v, want ErrNotFound", err)
	}
	if err := s.DeleteConsoleSession(t.Context(), a.Hash); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("DeleteConsoleSession twice: error = %v, want ErrNotFound", err)
	}
	for _, kept := range []lifecycle.ConsoleSession{b, prefix, zero} {
		if _, err := s.ConsoleSession(t.Context(), kept.Hash); err != nil {
			t.Errorf("ConsoleSession(%x) after deleting another: %v", kept.Hash, err)
		}
	}
	// A deleted session's hash may be used again.
	createConsoleSessions(t, s, a)
}

func testDeleteConsoleSessionsBefore(t *testing.T, h Harness) {
	s := openSessions(t, h)
	sessions := []lifecycle.ConsoleSession{
		consoleSession("token-1", "key_1", -3*time.Hour, -2*time.Hour),
		consoleSession("token-2", "key_2", -3*time.Hour, -2*time.Hour),
		consoleSession("token-3", "key_1", -2*time.Hour, -time.Hour), // exactly at the first cutoff
		consoleSession("token-4", "key_1", -time.Hour, time.Hour),
		consoleSession("token-5", "key_2", 0, 2*time.Hour),
	}
	createConsoleSessions(t, s, sessions...)
	left := func() []int {
		t.Helper()
		var out []int
		for i, cs := range sessions {
			_, err := s.ConsoleSession(t.Context(), cs.Hash)
			switch {
			case err == nil:
				out = append(out, i+1)
			case !errors.Is(err, lifecycle.ErrNotFound):
				t.Fatalf("ConsoleSession(%d): %v", i+1, err)
			}
		}
		return out
	}
	cases := []struct {
		cutoff  time.Duration
		deleted int64
		left    []int
	}{
		{-3 * time.Hour, 0, []int{1, 2, 3, 4, 5}},
		{-time.Hour, 2, []int{3, 4, 5}},
		{90 * time.Minute, 2, []int{5}},
		{90 * time.Minute, 0, []int{5}},
		{3 * time.Hour, 1, nil},
	}
	for _, c := range cases {
		n, err := s.DeleteConsoleSessionsBefore(t.Context(), base.Add(c.cutoff))
		if err != nil || n != c.deleted {
			t.Errorf("DeleteConsoleSessionsBefore(%v) = %d, %v; want %d", c.cutoff, n, err, c.deleted)
		}
		if diff := cmp.Diff(c.left, left(), equateEmpty); diff != "" {
			t.Errorf("sessions left after DeleteConsoleSessionsBefore(%v) (-want +got):\n%s", c.cutoff, diff)
		}
	}
}

// testConsoleSessionsClosed calls the console session methods of a closed
// store.
func testConsoleSessionsClosed(t *testing.T, h Harness) {
	st := h.Open(t)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := st.(lifecycle.ConsoleSessionStore)
	calls := []struct {
		name string
		fn   func() error
	}{
		{"ConsoleSession", func() error { _, err := s.ConsoleSession(t.Context(), []byte("hash")); return err }},
		{"CreateConsoleSession", func() error {
			return s.CreateConsoleSession(t.Context(), consoleSession("token", "key_1", 0, time.Hour))
		}},
		{"DeleteConsoleSession", func() error { return s.DeleteConsoleSession(t.Context(), []byte("hash")) }},
		{"DeleteConsoleSessionsBefore", func() error { _, err := s.DeleteConsoleSessionsBefore(t.Context(), base); return err }},
	}
	for _, c := range calls {
		if err := c.fn(); !errors.Is(err, lifecycle.ErrClosed) {
			t.Errorf("%s after Close: error = %v, want ErrClosed", c.name, err)
		}
	}
}

// testHistoryClosed calls the reads of a task's history of a closed store.
func testHistoryClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Submissions", func() error { _, err := s.Submissions(t.Context(), "tsk_x"); return err }},
		{"ShipOperations", func() error { _, err := s.ShipOperations(t.Context(), "tsk_x"); return err }},
		{"EventBounds", func() error { _, err := s.EventBounds(t.Context()); return err }},
	}
	for _, c := range calls {
		if err := c.fn(); !errors.Is(err, lifecycle.ErrClosed) {
			t.Errorf("%s after Close: error = %v, want ErrClosed", c.name, err)
		}
	}
}
