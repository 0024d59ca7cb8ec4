package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
)

// prepareDir creates the directory of the database file when it is
// missing, and checks that the process may create files in it (SQLite
// keeps its -wal and -shm files beside the database), so that a bad path
// fails in New with its real cause rather than as "unable to open
// database file" or "no such file or directory".
func prepareDir(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("sqlite: create the directory of %s: %w", path, err)
	}
	probe, err := os.CreateTemp(dir, ".lifecycle-probe-*")
	if err != nil {
		return fmt.Errorf("sqlite: %s: cannot create files in %s (SQLite keeps -wal and -shm files beside the database): %w", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}
