// Package pgtest gives the tests of a package a PostgreSQL database of
// their own: it creates one on the server named by LIFECYCLE_TEST_POSTGRES
// (default: the local server with trust authentication) and drops it when
// the tests end. Without a server the tests are to be skipped, except
// under CI=true, where a missing server is a failure.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultServer is the server used when LIFECYCLE_TEST_POSTGRES is not set.
const DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Database is the outcome of Main for the tests to read.
type Database struct {
	// DSN names the test database, or is "" when no server answered.
	DSN string
	// SkipReason says why, when DSN is "".
	SkipReason string
}

// Main is the body of a TestMain: it creates a database named after
// label, sets db, runs m and drops the database, and returns the exit
// code. label also prefixes its messages ("store/postgres").
func Main(m *testing.M, label string, db *Database) int {
	admin := os.Getenv("LIFECYCLE_TEST_POSTGRES")
	if admin == "" {
		admin = DefaultServer
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "%s: no PostgreSQL server at %s, and CI=true requires one (.ci/run starts it): %v\n", label, admin, err)
			return 1
		}
		db.SkipReason = fmt.Sprintf("no PostgreSQL server answers at %s (%v); start one, or set LIFECYCLE_TEST_POSTGRES to the DSN of a server where the tests may create databases", admin, err)
		return m.Run()
	}
	name := fmt.Sprintf("lifecycle_test_%d_%d", os.Getpid(), rand.IntN(1_000_000))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		fmt.Fprintf(os.Stderr, "%s: create database %s: %v\n", label, name, err)
		return 1
	}
	cfg := conn.Config()
	user := cfg.User
	if cfg.Password != "" {
		user += ":" + cfg.Password
	}
	db.DSN = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", user, cfg.Host, cfg.Port, name)
	code := m.Run()
	drop, cancelDrop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelDrop()
	if _, err := conn.Exec(drop, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "%s: drop database %s: %v\n", label, name, err)
	}
	conn.Close(drop)
	return code
}
