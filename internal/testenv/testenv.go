// Package testenv handles the tests that need a program or package that
// Go does not bring (Chromium, Node.js, npm packages, git, a PostgreSQL
// server): Require skips such a test, saying what is missing and the
// command that installs it, or fails it under CI=true, where CI installs
// everything; Main prints, once per test binary, which tests skipped for
// want of what. WaitFor and WaitUntil let a test wait for a condition
// instead of sleeping for a guess.
//
// go test hides the output of a package whose tests pass unless -v is
// given, TestMain's included, so the summary also goes to the terminal
// (/dev/tty) when there is one: a plain go test ./... at a terminal shows
// it. Each test binary keeps the skips of its own run: that is the one
// piece of package state here, as a TestMain has no other way to learn
// them.
package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Tool is something some tests need that Go does not bring.
type Tool struct {
	// Name says what is missing, as in "chromium on PATH".
	Name string
	// Install is the command (or step) that provides it.
	Install string
}

// The tools the repository's tests need.
var (
	Chromium       = Tool{Name: "chromium on PATH (or LIFECYCLE_CHROMIUM)", Install: "apt-get install -y chromium"}
	Node           = Tool{Name: "node on PATH", Install: "apt-get install -y nodejs npm"}
	Git            = Tool{Name: "git on PATH", Install: "apt-get install -y git"}
	WebhookVerify  = Tool{Name: "testdata/webhookverify/node_modules", Install: "npm ci --prefix testdata/webhookverify"}
	Redocly        = Tool{Name: "testdata/redocly/node_modules", Install: "npm ci --prefix testdata/redocly"}
	GitHubExamples = Tool{Name: "adapter/github/testdata/webhooks-examples/node_modules", Install: "npm ci --prefix adapter/github/testdata/webhooks-examples"}
	PostgreSQL     = Tool{Name: "a PostgreSQL server at 127.0.0.1:5432 trusting local connections (or LIFECYCLE_TEST_POSTGRES)", Install: "apt-get install -y postgresql (see .ci/run)"}
)

// skips records the tests skipped for want of a tool.
type skips struct {
	mu sync.Mutex
	by map[Tool][]string
}

// recorded are the skips of this test binary, which Require adds to and
// Main prints.
var recorded skips

// Require skips t because tool is missing (detail, when not empty, says
// more, as an error), or fails it when CI=true: CI installs every tool, so
// a missing one there is a broken CI. The skip is recorded for Main's
// summary.
func Require(t testing.TB, tool Tool, detail string) {
	t.Helper()
	recorded.require(t, tool, detail)
}

func (r *skips) require(t testing.TB, tool Tool, detail string) {
	t.Helper()
	msg := tool.Name + " is missing"
	if detail != "" {
		msg += " (" + detail + ")"
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must run this test, and %s; install it with: %s (.ci/run does)", msg, tool.Install)
		return
	}
	r.mu.Lock()
	if r.by == nil {
		r.by = map[Tool][]string{}
	}
	r.by[tool] = append(r.by[tool], t.Name())
	r.mu.Unlock()
	t.Skipf("skipped: %s; install it with: %s", msg, tool.Install)
}

// Main runs m, prints the summary of the tests skipped for want of a tool
// once, and returns the exit code for os.Exit. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
//
// The summary goes to stdout, which go test shows with -v or when the
// package fails; otherwise to the terminal, when there is one.
func Main(m *testing.M) int { return Report(m.Run()) }

// Report prints the summary as Main does, for a TestMain that runs its
// tests otherwise, and returns code, the tests' exit code:
//
//	os.Exit(testenv.Report(pgtest.Main(m, ...)))
func Report(code int) int {
	s := Summary()
	if s == "" {
		return code
	}
	if code != 0 || testing.Verbose() {
		fmt.Print(s)
		return code
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		writeSummary(tty, s)
		tty.Close()
	}
	return code
}

// writeSummary writes s to w, ignoring errors: a summary that cannot be
// shown changes no test's outcome.
func writeSummary(w io.Writer, s string) { _, _ = io.WriteString(w, s) }

// Summary returns the lines that say which tests of this binary skipped for
// want of which tool and how to install it, or "" when none did.
func Summary() string { return recorded.summary() }

func (r *skips) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.by) == 0 {
		return ""
	}
	tools := make([]Tool, 0, len(r.by))
	n := 0
	for tool, names := range r.by {
		tools = append(tools, tool)
		n += len(names)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	var b strings.Builder
	tests := "tests"
	if n == 1 {
		tests = "test"
	}
	fmt.Fprintf(&b, "go test %s: %d %s skipped for want of a tool (under CI=true they fail instead):\n", packageName(), n, tests)
	for _, tool := range tools {
		names := slices.Clone(r.by[tool])
		slices.Sort(names)
		fmt.Fprintf(&b, "  %s: %s\n    install: %s\n", tool.Name, strings.Join(names, ", "), tool.Install)
	}
	return b.String()
}

// packageName names the test binary's package by its directory relative
// to the module's root, as go test runs a test binary in its package's
// directory.
func packageName() string {
	wd, err := os.Getwd()
	if err != nil {
		return "tests"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil && rel != "." {
				return "./" + filepath.ToSlash(rel)
			} else if err == nil {
				return "."
			}
			return wd
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}
