package gitlab

import (
	"strings"
	"testing"
)

// A tailWriter keeps the last bytes of what it is given, however it is
// cut into writes, and never more.
func TestTailWriter(t *testing.T) {
	t.Parallel()
	log := strings.Repeat("0123456789", 1000) + "the end"
	for _, chunk := range []int{1, 3, 7, 10, 64, 4096, len(log)} {
		w := &tailWriter{max: 100}
		for i := 0; i < len(log); i += chunk {
			if _, err := w.Write([]byte(log[i:min(i+chunk, len(log))])); err != nil {
				t.Fatal(err)
			}
			if len(w.buf) > w.max {
				t.Fatalf("chunks of %d: holds %d bytes, more than %d", chunk, len(w.buf), w.max)
			}
		}
		if got := string(w.bytes()); got != log[len(log)-100:] || !w.cut {
			t.Errorf("chunks of %d: kept %q (cut %v), want the last 100 bytes", chunk, got, w.cut)
		}
	}
	short := &tailWriter{max: 100}
	short.Write([]byte("abc"))
	short.Write([]byte("def"))
	if got := string(short.bytes()); got != "abcdef" || short.cut {
		t.Errorf("a short log: %q, cut %v", got, short.cut)
	}
}

// Job logs lose their ANSI escapes and section markers, as GitLab's
// documentation shows them.
func TestCleanLog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		cut            bool
	}{
		{"colours", "\x1b[32;1m$ go test ./...\x1b[0;m\n\x1b[31;1mFAIL\x1b[0;m\n", "$ go test ./...\nFAIL\n", false},
		{"sections", "\x1b[0Ksection_start:1560896352:my_first_section\r\x1b[0KHeader of the 1st collapsible section\nthis line should be hidden when collapsed\n\x1b[0Ksection_end:1560896353:my_first_section\r\x1b[0K\n", "Header of the 1st collapsible section\nthis line should be hidden when collapsed\n\n", false},
		{"options", "\x1b[0Ksection_start:1560896352:my_first_section[collapsed=true]\r\x1b[0KHeader\n", "Header\n", false},
		{"crlf", "a\r\nb\r\n", "a\nb\n", false},
		{"cut drops the partial first line", "ial line\nERROR: Job failed: exit code 1\n", "ERROR: Job failed: exit code 1\n", true},
	} {
		got, cut := cleanLog([]byte(tc.in), tc.cut)
		if got != tc.want || cut != tc.cut {
			t.Errorf("%s: cleanLog = %q, %v; want %q", tc.name, got, cut, tc.want)
		}
	}
}
