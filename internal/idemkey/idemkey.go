// Package idemkey holds the parts of idempotency keys that know nothing of
// what a request does: the form of a key, the fingerprint that tells two
// requests under one key apart (the SHA-256 of the method, the route and
// the body in a canonical JSON form, so that member order and whitespace
// do not matter), and the count of the keys a process's requests hold.
package idemkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
)

// Limits of a key's length.
const (
	MinLen = 8
	MaxLen = 128
)

// Check returns why key is not a valid idempotency key, or "" when it is
// one: MinLen to MaxLen visible ASCII characters.
func Check(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "must hold only visible ASCII characters"
		}
	}
	if len(key) < MinLen || len(key) > MaxLen {
		return fmt.Sprintf("must be %d to %d characters, not %d", MinLen, MaxLen, len(key))
	}
	return ""
}

// Canonical re-encodes a JSON value with object members sorted and no
// insignificant whitespace. Numbers keep their text.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Fingerprint returns the SHA-256 of a request's method, route and
// canonical body (see Canonical).
func Fingerprint(method, route string, canonicalBody []byte) []byte {
	h := sha256.New()
	h.Write([]byte(method + "\n" + route + "\n"))
	h.Write(canonicalBody)
	return h.Sum(nil)
}

// Held counts the keys, of type K, that requests hold; a key may be held
// by several at once. The zero value holds none and is ready to use.
type Held[K comparable] struct {
	mu   sync.Mutex
	keys map[K]int
}

// Add counts one more request holding key.
func (h *Held[K]) Add(key K) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[K]int)
	}
	h.keys[key]++
}

// Done counts one request fewer holding key.
func (h *Held[K]) Done(key K) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys[key]--; h.keys[key] <= 0 {
		delete(h.keys, key)
	}
}

// Has reports whether a request holds key.
func (h *Held[K]) Has(key K) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key] > 0
}
