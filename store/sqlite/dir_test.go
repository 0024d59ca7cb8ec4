package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// TestNewCreatesTheDirectory checks that New makes a missing directory of
// the database, and names the real cause when it cannot write there.
func TestNewCreatesTheDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "nested", "lifecycle.db")
	s, err := sqlite.New(sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("New with a missing directory: %v", err)
	}
	s.Close()

	if os.Geteuid() == 0 {
		t.Skip("running as root: directory permissions do not stop root")
	}
	locked := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(locked, 0o500); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.New(sqlite.Config{Path: filepath.Join(locked, "lifecycle.db")})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("New in a read-only directory = %v, want an error naming the permission", err)
	}
}
