// Package id makes the random, prefixed identifiers the service hands out
// (tsk_..., evt_..., lsk_...).
package id

import (
	"crypto/rand"
	"strings"
)

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Length is the number of random base62 characters after the prefix of an
// identifier made by New: 22 characters carry about 131 bits.
const Length = 22

// New returns prefix followed by Length random base62 characters.
func New(prefix string) string {
	return NewN(prefix, Length)
}

// NewN returns prefix followed by n random base62 characters drawn from
// crypto/rand without modulo bias.
func NewN(prefix string, n int) string {
	out := make([]byte, len(prefix), len(prefix)+n)
	copy(out, prefix)
	var buf [64]byte
	for len(out) < cap(out) {
		rand.Read(buf[:]) // never returns an error (crypto/rand, Go 1.24+)
		for _, b := range buf {
			// 248 = 4*62: rejecting larger bytes keeps every symbol equally likely.
			if b >= 248 {
				continue
			}
			out = append(out, alphabet[b%62])
			if len(out) == cap(out) {
				break
			}
		}
	}
	return string(out)
}

// Valid reports whether s is prefix followed by at least one base62
// character and nothing else.
func Valid(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}
