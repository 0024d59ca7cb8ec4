package lifecycle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// redoclyDir holds the pinned @redocly/cli (npm ci --prefix testdata/redocly).
const redoclyDir = "testdata/redocly"

// TestOpenAPILint runs an independent linter, `redocly lint` with its
// recommended rules, on docs/openapi.yaml: no error and no warning may be
// left but those testdata/redocly/.redocly.lint-ignore.yaml explains. It is
// skipped when node or the package is missing, and fails then under
// CI=true, as .ci/run installs both.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(redoclyDir, "node_modules", ".bin", "redocly")
	_, nodeErr := exec.LookPath("node")
	_, binErr := os.Stat(bin)
	if nodeErr != nil {
		testenv.Require(t, testenv.Node, "")
	}
	if binErr != nil {
		testenv.Require(t, testenv.Redocly, "")
	}
	cmd := exec.Command(bin, "lint", "--config", filepath.Join(redoclyDir, "redocly.yaml"), "--max-problems", "50", "docs/openapi.yaml")
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	if err != nil || regexp.MustCompile(`You have \d+ warnings?`).Match(out) {
		t.Fatalf("redocly lint docs/openapi.yaml: %v\n%s", err, out)
	}
}
