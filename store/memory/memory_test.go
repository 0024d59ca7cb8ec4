package memory_test

import (
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) lifecycle.Store { return memory.New() },
		Reopen: func(t *testing.T, old lifecycle.Store) lifecycle.Store {
			return memory.Reopen(old.(*memory.Store))
		},
	})
}
