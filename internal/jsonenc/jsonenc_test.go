package jsonenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// AppendString writes what encoding/json writes, with and without HTML
// escaping, for strings and byte slices alike.
func TestAppendStringAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r\b\f\x00\x1f\x7f",
		"héllo wörld ✓ 𝄞", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82", "\xed\xa0\x80 surrogate"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			w := bytes.TrimSuffix(want.Bytes(), []byte("\n"))
			if got := AppendString(nil, s, html); !bytes.Equal(got, w) {
				t.Errorf("AppendString(%q, html=%v) = %s, want %s", s, html, got, w)
			}
			if got := AppendString(nil, []byte(s), html); !bytes.Equal(got, w) {
				t.Errorf("AppendString([]byte %q, html=%v) = %s, want %s", s, html, got, w)
			}
		}
	}
}

func TestAppendStringAllocatesNothing(t *testing.T) { // not parallel: AllocsPerRun
	dst := make([]byte, 0, 256)
	s := []byte("héllo <wörld> \xff \u2028 ✓")
	if n := testing.AllocsPerRun(100, func() { AppendString(dst[:0], s, true) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
