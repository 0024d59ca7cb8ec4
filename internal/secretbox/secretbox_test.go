package secretbox

import (
	"bytes"
	"strings"
	"testing"
)

func TestSealAndOpen(t *testing.T) {
	t.Parallel()
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	plain, _ := New(nil, nil, "key", "previous")
	before, _ := New(oldKey, nil, "key", "previous")
	after, err := New(newKey, [][]byte{oldKey}, "key", "previous")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("whsec_1")
	tests := []struct {
		name     string
		seal     *Box
		open     *Box
		id       string
		current  bool
		errWords string // "" for a secret that opens
	}{
		{"no key", plain, plain, "sub_1", true, ""},
		{"a plain secret under a key", plain, after, "sub_1", false, ""},
		{"the current key", after, after, "sub_1", true, ""},
		{"a previous key", before, after, "sub_1", false, ""},
		{"another record's", after, after, "sub_2", false, "does not decrypt with key"},
		{"sealed, opened without a key", after, plain, "sub_1", false, "no key is set"},
	}
	for _, tt := range tests {
		sealed, err := tt.seal.Seal("sub_1", secret)
		if err != nil {
			t.Fatal(err)
		}
		if tt.seal.Sealing() && bytes.Contains(sealed, secret) {
			t.Errorf("%s: the sealed form holds the secret", tt.name)
		}
		got, current, err := tt.open.OpenCurrent(tt.id, sealed)
		switch {
		case tt.errWords != "":
			if err == nil || !strings.Contains(err.Error(), tt.errWords) {
				t.Errorf("%s: OpenCurrent error %v, want one saying %q", tt.name, err, tt.errWords)
			}
		case err != nil || !bytes.Equal(got, secret) || current != tt.current:
			t.Errorf("%s: OpenCurrent = %q, current %v, %v; want %q, current %v", tt.name, got, current, err, secret, tt.current)
		}
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	if _, err := New(make([]byte, 16), nil, "Config.Key", "Config.Previous"); err == nil || !strings.Contains(err.Error(), "Config.Key must be 32 bytes") {
		t.Errorf("a 16-byte key: %v", err)
	}
	if _, err := New(make([]byte, 32), [][]byte{make([]byte, 3)}, "Config.Key", "Config.Previous"); err == nil || !strings.Contains(err.Error(), "Config.Previous[0] must be 32 bytes") {
		t.Errorf("a short previous key: %v", err)
	}
	if _, err := New(nil, [][]byte{make([]byte, 32)}, "Config.Key", "Config.Previous"); err == nil || !strings.Contains(err.Error(), "Config.Previous is set without Config.Key") {
		t.Errorf("previous keys without a key: %v", err)
	}
}
