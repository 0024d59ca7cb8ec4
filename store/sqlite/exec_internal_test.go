package sqlite

import (
	"strings"
	"testing"
)

func TestPlaceholdersRewrite(t *testing.T) {
	t.Parallel()
	var p placeholders
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE id = $1", "SELECT a FROM t WHERE id = ?1"},
		{"UPDATE t SET a = $2, b = $10 WHERE id = $1", "UPDATE t SET a = ?2, b = ?10 WHERE id = ?1"},
		{"SELECT '$x', $1", "SELECT '$x', ?1"},
		{"SELECT $", "SELECT $"},
	} {
		for range 2 { // the second time from what was kept
			if got := p.rewrite(c.in); got != c.want {
				t.Errorf("rewrite(%q) = %q, want %q", c.in, got, c.want)
			}
		}
	}
}

func TestPlaceholdersKeepABoundedNumber(t *testing.T) {
	t.Parallel()
	var p placeholders
	for i := range 2 * maxRewrites {
		q := "SELECT $1 IN (" + strings.Repeat("$2, ", i) + "$3)"
		if got := p.rewrite(q); strings.Contains(got, "$") {
			t.Fatalf("rewrite of statement %d kept a $: %q", i, got)
		}
	}
	if n := len(p.m); n != maxRewrites {
		t.Errorf("kept %d rewrites, want %d", n, maxRewrites)
	}
}
