package idemkey

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"abcdefgh":               "",
		strings.Repeat("k", 128): "",
		"abcdefg":                "must be 8 to 128 characters, not 7",
		strings.Repeat("k", 129): "must be 8 to 128 characters, not 129",
		"abc defgh":              "must hold only visible ASCII characters",
		"abc\x7fdefgh":           "must hold only visible ASCII characters",
		"abcdéfgh":               "must hold only visible ASCII characters",
		"":                       "must be 8 to 128 characters, not 0",
	} {
		if got := Check(key); got != want {
			t.Errorf("Check(%q) = %q, want %q", key, got, want)
		}
	}
}

// The canonical form sorts members and drops whitespace, keeps numbers'
// text, does not escape HTML, and so makes equal fingerprints of requests
// that differ only in form.
func TestCanonicalFingerprint(t *testing.T) {
	t.Parallel()
	a := []byte(`{"b": [1.50, {"y":1,"x":"<&>"}], "a": null}`)
	b := []byte("{\"a\":null,\n\"b\":[1.50,{\"x\":\"<&>\",\"y\":1}]}")
	ca, err := Canonical(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":null,"b":[1.50,{"x":"<&>","y":1}]}`; string(ca) != want {
		t.Errorf("Canonical: %s, want %s", ca, want)
	}
	cb, err := Canonical(b)
	if err != nil || !bytes.Equal(ca, cb) {
		t.Fatalf("%s and %s: %v", ca, cb, err)
	}
	if !bytes.Equal(Fingerprint("POST", "/tasks", ca), Fingerprint("POST", "/tasks", cb)) {
		t.Error("equal bodies, different fingerprints")
	}
	for _, other := range [][3]string{{"PUT", "/tasks", string(ca)}, {"POST", "/tasks/x", string(ca)}, {"POST", "/tasks", `{"a":1}`}} {
		if bytes.Equal(Fingerprint(other[0], other[1], []byte(other[2])), Fingerprint("POST", "/tasks", ca)) {
			t.Errorf("%v has the same fingerprint", other)
		}
	}
	if _, err := Canonical([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON has a canonical form")
	}
}

func TestHeld(t *testing.T) {
	t.Parallel()
	var h Held[string]
	if h.Has("k") {
		t.Fatal("the zero value holds a key")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				h.Add("k")
				h.Add("j")
				h.Done("j")
			}
		})
	}
	wg.Wait()
	if !h.Has("k") || h.Has("j") {
		t.Fatalf("k held %v, j held %v", h.Has("k"), h.Has("j"))
	}
	for range 799 {
		h.Done("k")
	}
	if !h.Has("k") {
		t.Fatal("k let go before its last holder")
	}
	h.Done("k")
	if h.Has("k") || len(h.keys) != 0 {
		t.Errorf("k held after its last holder, %d keys kept", len(h.keys))
	}
}
