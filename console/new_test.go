package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// sessionlessStore is a Store that keeps no console sessions.
type sessionlessStore struct{ lifecycle.Store }

// New refuses a Store without console sessions, saying so, and a Config
// out of bounds; the Service itself serves with such a Store, and logs
// that it keeps no console sessions.
func TestNewChecksStoreAndConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bare := sessionlessStore{e.Store}
	svc, err := lifecycle.New(lifecycle.Config{Store: bare, BaseURL: apitest.BaseURL, Logger: e.Logger()})
	if err != nil {
		t.Fatalf("New with a Store without console sessions: %v", err)
	}
	if !strings.Contains(e.LogText(), "keeps no console sessions") {
		t.Errorf("New did not log that the Store keeps no console sessions:\n%s", e.LogText())
	}
	if _, err := console.New(svc, bare, console.Config{}); err == nil || !strings.Contains(err.Error(), "ConsoleSessionStore") {
		t.Errorf("console.New with a Store without sessions = %v, want an error naming lifecycle.ConsoleSessionStore", err)
	}
	for _, cfg := range []console.Config{{SessionTTL: 30 * time.Second}, {SessionCheckInterval: -1}, {PruneInterval: -time.Second}} {
		if _, err := console.New(e.Svc, e.Store, cfg); err == nil {
			t.Errorf("console.New(%+v) = nil error, want one", cfg)
		}
	}
	con, err := console.New(e.Svc, e.Store, console.Config{SessionTTL: time.Minute})
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
		CreatedAt: lifecycle.NewTimestamp(apitest.Epoch.Add(-2 * time.Hour)), ExpiresAt: lifecycle.NewTimestamp(apitest.Epoch.Add(-time.Hour))}
	later := old
	later.Hash, later.ExpiresAt = []byte("later-session-hash-0000000000000"), lifecycle.NewTimestamp(apitest.Epoch.Add(time.Hour))
	for _, s := range []lifecycle.ConsoleSession{old, later} {
		if err := e.Store.CreateConsoleSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.newConsole(func(c *console.Config) { c.PruneInterval = time.Hour })
	gone := func(s lifecycle.ConsoleSession) bool {
		_, err := e.Store.ConsoleSession(ctx, s.Hash)
		return err != nil
	}
	apitest.WaitFor(t, func() bool { return gone(old) })
	if gone(later) {
		t.Fatal("a live session was pruned")
	}
	if !e.Clock.WaitForWaiters(2, 5*time.Second) { // the next check and the next prune
		t.Fatal("the console's loop does not wait for its next prune")
	}
	e.Clock.Advance(time.Hour + time.Second)
	apitest.WaitFor(t, func() bool { return gone(later) })
	if !strings.Contains(e.LogText(), "console: pruned expired sessions") {
		t.Errorf("no log of the pruning:\n%s", e.LogText())
	}
}
