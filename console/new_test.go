package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/console"
)

// sessionlessStore is a Store that keeps no console sessions.
type sessionlessStore struct{ lifecycle.Store }

// New refuses a Store without console sessions, saying so, and a Config
// out of bounds; the Service itself serves with such a Store, and logs
// that it keeps no console sessions.
func TestNewChecksStoreAndConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bare := sessionlessStore{e.store}
	svc, err := lifecycle.New(lifecycle.Config{Store: bare, BaseURL: testBase, Logger: e.svcLogger()})
	if err != nil {
		t.Fatalf("New with a Store without console sessions: %v", err)
	}
	if !strings.Contains(e.logText(), "keeps no console sessions") {
		t.Errorf("New did not log that the Store keeps no console sessions:\n%s", e.logText())
	}
	if _, err := console.New(svc, bare, console.Config{}); err == nil || !strings.Contains(err.Error(), "ConsoleSessionStore") {
		t.Errorf("console.New with a Store without sessions = %v, want an error naming lifecycle.ConsoleSessionStore", err)
	}
	for _, cfg := range []console.Config{{SessionTTL: 30 * time.Second}, {SessionCheckInterval: -1}, {PruneInterval: -time.Second}} {
		if _, err := console.New(e.svc, e.store, cfg); err == nil {
			t.Errorf("console.New(%+v) = nil error, want one", cfg)
		}
	}
	con, err := console.New(e.svc, e.store, console.Config{SessionTTL: time.Minute})
	if err != nil {
		t.Fatalf("console.New with a one-minute SessionTTL: %v", err)
	}
	con.Close()
}

// The console deletes expired sessions from the Store at once, then every
// PruneInterval.
func TestConsolePrunesExpiredSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	old := lifecycle.ConsoleSession{Hash: []byte("expired-session-hash-00000000000"), KeyID: "key_1", KeyHash: lifecycle.HashAPIKey("x"),
		CreatedAt: lifecycle.NewTimestamp(epoch.Add(-2 * time.Hour)), ExpiresAt: lifecycle.NewTimestamp(epoch.Add(-time.Hour))}
	later := old
	later.Hash, later.ExpiresAt = []byte("later-session-hash-0000000000000"), lifecycle.NewTimestamp(epoch.Add(time.Hour))
	for _, s := range []lifecycle.ConsoleSession{old, later} {
		if err := e.store.CreateConsoleSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.newConsole(func(c *console.Config) { c.PruneInterval = time.Hour })
	gone := func(s lifecycle.ConsoleSession) bool {
		_, err := e.store.ConsoleSession(ctx, s.Hash)
		return err != nil
	}
	waitFor(t, func() bool { return gone(old) })
	if gone(later) {
		t.Fatal("a live session was pruned")
	}
	if !e.clock.WaitForWaiters(2, 5*time.Second) { // the next check and the next prune
		t.Fatal("the console's loop does not wait for its next prune")
	}
	e.clock.Advance(time.Hour + time.Second)
	waitFor(t, func() bool { return gone(later) })
	if !strings.Contains(e.logText(), "console: pruned expired sessions") {
		t.Errorf("no log of the pruning:\n%s", e.logText())
	}
}
