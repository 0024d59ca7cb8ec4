package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT is a testing.TB that records a skip or a failure instead of
// stopping the goroutine.
type fakeT struct {
	testing.TB
	name            string
	skipped, failed string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }
func (f *fakeT) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestRequireSkipsAndSummarises(t *testing.T) {
	t.Setenv("CI", "")
	var r skips
	tool := Tool{Name: "frobnicator on PATH", Install: "apt-get install -y frobnicator"}
	for _, name := range []string{"TestB", "TestA"} {
		f := &fakeT{TB: t, name: name}
		r.require(f, tool, "exec: not found")
		if f.failed != "" || !strings.Contains(f.skipped, "frobnicator on PATH is missing (exec: not found); install it with: apt-get install -y frobnicator") {
			t.Fatalf("Require skipped %q, failed %q", f.skipped, f.failed)
		}
	}
	s := r.summary()
	for _, want := range []string{"go test ./internal/testenv: 2 tests skipped", "frobnicator on PATH: TestA, TestB\n", "install: apt-get install -y frobnicator\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q does not say %q", s, want)
		}
	}
}

func TestRequireFailsUnderCI(t *testing.T) {
	t.Setenv("CI", "true")
	var r skips
	f := &fakeT{TB: t, name: "TestC"}
	r.require(f, Tool{Name: "widget", Install: "make widget"}, "")
	if f.skipped != "" || !strings.Contains(f.failed, "CI must run this test, and widget is missing; install it with: make widget") {
		t.Fatalf("under CI=true Require skipped %q, failed %q", f.skipped, f.failed)
	}
	if s := r.summary(); s != "" {
		t.Errorf("a test failed under CI=true is in the summary of skips: %q", s)
	}
}
