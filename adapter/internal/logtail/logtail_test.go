package logtail

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
		cut  bool
	}{
		{"abcdef", 3, "def", true},
		{"abc", 3, "abc", false},
		{"abc", 0, "abc", false},
		{"abc", -1, "abc", false},
		{"aé", 1, "", true},   // the second byte of é: no rune starts there
		{"aéb", 2, "b", true}, // é's last byte then b
		{"aéb", 3, "éb", true},
	} {
		got, cut := Cut(tc.s, tc.n)
		if got != tc.want || cut != tc.cut {
			t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", tc.s, tc.n, got, cut, tc.want, tc.cut)
		}
	}
	s := strings.Repeat("日本語ab", 50)
	for n := range len(s) + 2 {
		got, _ := Cut(s, n)
		if !utf8.ValidString(got) || len(got) > max(n, 0) && n > 0 || !strings.HasSuffix(s, got) {
			t.Fatalf("Cut(s, %d) = %q: not a valid suffix within %d bytes", n, got, n)
		}
	}
}
