package sqlite_test

import (
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
