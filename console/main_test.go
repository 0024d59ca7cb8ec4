package console_test

import (
	"os"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// TestMain prints, once, which tests skipped for want of a tool.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
