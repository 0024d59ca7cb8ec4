package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// A database that a program knowing migrations 0001 to 0006 made is
// migrated on when a Store opens it: its rows are kept, the new columns
// take their defaults, the new tables and indexes work, and the version is
// recorded, so that the next Store migrates nothing.
func TestMigratesFromVersion6(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) < 7 {
		t.Fatalf("migrations %v, %v; want at least seven", names, err)
	}
	path := filepath.Join(t.TempDir(), "lifecycle.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range names[:6] {
		script, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(script)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	old := []string{
		"PRAGMA user_version = 6",
		`INSERT INTO webhook_subscriptions (id, url, event_types, description, filters, status, secret, created_at, cursor, lease_owner, lease_until)
			VALUES ('whs_old', 'https://hooks.example.com/', '["task.updated"]', NULL, '{"taskIds":[],"projects":[]}', 'active', x'00ff', 0, 5, 'dispatcher-1', 0)`,
		`INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status, attempted_at)
			VALUES ('dlv_old', 'whs_old', 'evt_old', 5, 1, 'succeeded', 0)`,
	}
	for _, q := range old {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("the schema of version 6: %v", err)
		}
	}
	// Events 5 and 6 kept: 1 to 4 were pruned (their task is gone too).
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"PRAGMA foreign_keys = OFF",
		`INSERT INTO events (seq, id, type, task_id, task_version, occurred_at, data) VALUES (5, 'evt_5', 'task.updated', 'tsk_gone', 5, 0, x'7b7d')`,
		`INSERT INTO events (seq, id, type, task_id, task_version, occurred_at, data) VALUES (6, 'evt_6', 'task.updated', 'tsk_gone', 6, 0, x'7b7d')`,
		"PRAGMA foreign_keys = ON",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("events of version 6: %v", err)
		}
	}
	conn.Close()
	version := func() int {
		t.Helper()
		var v int
		if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	s, err := sqlite.New(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := version(); v != len(names) {
		t.Errorf("schema version %d after migrating, want %d", v, len(names))
	}
	sub, err := s.Subscription(ctx, "whs_old")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Cursor != 5 || sub.LeaseOwner != "dispatcher-1" || sub.Revision != 0 || sub.Rewound {
		t.Errorf("subscription after migrating: cursor %d, lease owner %q, revision %d, rewound %v; want 5, dispatcher-1, 0, false",
			sub.Cursor, sub.LeaseOwner, sub.Revision, sub.Rewound)
	}
	page, err := s.Deliveries(ctx, lifecycle.DeliveryFilter{SubscriptionID: "whs_old", EventID: "evt_old", Limit: 10})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].ID != "dlv_old" {
		t.Errorf("Deliveries of evt_old after migrating = %v, %v; want dlv_old", page.Deliveries, err)
	}
	if b, err := s.EventBounds(ctx); err != nil || b.PrunedThrough != 4 {
		t.Errorf("EventBounds after migrating = %+v, %v; want PrunedThrough 4, below the oldest event kept", b, err)
	}
	cs := lifecycle.ConsoleSession{Hash: []byte{1, 2, 3}, KeyID: "key_1", KeyHash: []byte{4, 5, 6},
		CreatedAt: lifecycle.NewTimestamp(time.Now()), ExpiresAt: lifecycle.NewTimestamp(time.Now().Add(time.Hour))}
	if err := s.CreateConsoleSession(ctx, cs); err != nil {
		t.Fatalf("CreateConsoleSession after migrating: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again, the database is current.
	s, err = sqlite.New(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := version(); v != len(names) {
		t.Errorf("schema version %d after reopening, want %d", v, len(names))
	}
	if _, err := s.ConsoleSession(ctx, cs.Hash); err != nil {
		t.Errorf("ConsoleSession after reopening: %v", err)
	}
}
