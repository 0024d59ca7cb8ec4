package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tasklifecycle/lifecycle"
)

// A schema that a program knowing migration 0001 only made is migrated on
// when a Store opens it: its rows are kept, the new columns take their
// defaults, the new tables and indexes work, and the version is recorded,
// so that the next Store migrates nothing.
func TestMigratesFromVersion1(t *testing.T) {
	needServer(t)
	t.Parallel()
	ctx := t.Context()
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) < 2 {
		t.Fatalf("migrations %v, %v; want at least two", names, err)
	}
	first, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	schema := newSchema()
	conn, err := pgx.Connect(ctx, testDB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// What New did at version 1: the schema, its version table, 0001.
	old := []string{
		"CREATE SCHEMA " + schema,
		"SET search_path TO " + schema,
		"CREATE TABLE schema_version (version INTEGER NOT NULL)",
		"INSERT INTO schema_version (version) VALUES (1)",
		string(first),
		`INSERT INTO webhook_subscriptions (id, url, event_types, description, filters, status, secret, created_at, cursor, lease_owner, lease_until)
			VALUES ('whs_old', 'https://hooks.example.com/', '["task.updated"]', NULL, '{"taskIds":[],"projects":[]}', 'active', '\x00ff', 0, 5, 'dispatcher-1', 0)`,
		`INSERT INTO webhook_deliveries (id, subscription_id, event_id, event_seq, attempt, status, attempted_at)
			VALUES ('dlv_old', 'whs_old', 'evt_old', 5, 1, 'succeeded', 0)`,
	}
	for _, q := range old {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("the schema of version 1: %v", err)
		}
	}

	s := openStore(t, schema)
	version := func() int {
		t.Helper()
		var v int
		if err := s.Pool().QueryRow(ctx, "SELECT version FROM schema_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
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
	cs := lifecycle.ConsoleSession{Hash: []byte{1, 2, 3}, KeyID: "key_1", KeyHash: []byte{4, 5, 6},
		CreatedAt: lifecycle.NewTimestamp(time.Now()), ExpiresAt: lifecycle.NewTimestamp(time.Now().Add(time.Hour))}
	if err := s.CreateConsoleSession(ctx, cs); err != nil {
		t.Fatalf("CreateConsoleSession after migrating: %v", err)
	}
	if _, err := s.ConsoleSession(ctx, cs.Hash); err != nil {
		t.Errorf("ConsoleSession after migrating: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again, the schema is current.
	s = openStore(t, schema)
	defer s.Close()
	if v := version(); v != len(names) {
		t.Errorf("schema version %d after reopening, want %d", v, len(names))
	}
	if _, err := s.ConsoleSession(ctx, cs.Hash); err != nil {
		t.Errorf("ConsoleSession after reopening: %v", err)
	}
}
