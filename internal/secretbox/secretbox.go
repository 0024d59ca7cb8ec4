// Package secretbox seals secrets kept at rest (webhook secrets, recorded
// responses) with AES-256-GCM, authenticated with the ID of the record
// that holds them, and opens them again under the current key or a
// previous key of a rotation.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// Box seals secrets at rest with AES-256-GCM when it has a key, and keeps
// them as they are otherwise. A sealed secret
// begins with a version byte: 0 for a plain secret, 1 for AES-256-GCM
// (then a 12-byte nonce and the ciphertext, authenticated with the
// record's ID given to Seal and Open).
type Box struct {
	aead     cipher.AEAD   // nil: no key
	previous []cipher.AEAD // keys of a rotation that still open secrets
	keyName  string        // the setting of the key, for errors
}

// The version bytes of sealed secrets.
const (
	secretPlain byte = 0
	secretGCM   byte = 1
)

// New returns a box for key, which is empty or 32 bytes, that also opens
// secrets sealed with the previous keys of a rotation. Its errors name
// the keys by keyName and previousName, the settings they come from.
func New(key []byte, previous [][]byte, keyName, previousName string) (*Box, error) {
	if len(key) == 0 {
		if len(previous) > 0 {
			return nil, fmt.Errorf("%s is set without %s; set the new key there", previousName, keyName)
		}
		return &Box{}, nil
	}
	aead, err := newGCM(keyName, key)
	if err != nil {
		return nil, err
	}
	b := &Box{aead: aead, keyName: keyName}
	for i, k := range previous {
		a, err := newGCM(fmt.Sprintf("%s[%d]", previousName, i), k)
		if err != nil {
			return nil, err
		}
		b.previous = append(b.previous, a)
	}
	return b, nil
}

// newGCM returns AES-256-GCM under key, the setting named field.
func newGCM(field string, key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%s must be 32 bytes (AES-256), not %d", field, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return aead, nil
}

// Sealing reports whether the box has a key: without one, Seal keeps
// secrets as they are.
func (b *Box) Sealing() bool { return b.aead != nil }

// Seal returns the stored form of the secret of record id.
func (b *Box) Seal(id string, secret []byte) ([]byte, error) {
	if b.aead == nil {
		return append([]byte{secretPlain}, secret...), nil
	}
	out := make([]byte, 1+b.aead.NonceSize(), 1+b.aead.NonceSize()+len(secret)+b.aead.Overhead())
	out[0] = secretGCM
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return b.aead.Seal(out, out[1:], secret, []byte(id)), nil
}

// Open returns the secret of record id from its stored form.
func (b *Box) Open(id string, sealed []byte) ([]byte, error) {
	secret, _, err := b.OpenCurrent(id, sealed)
	return secret, err
}

// OpenCurrent is Open, and also says whether the stored form is sealed
// with the current key (false for a plain secret or a previous key's).
func (b *Box) OpenCurrent(id string, sealed []byte) (secret []byte, current bool, err error) {
	if len(sealed) == 0 {
		return nil, false, errors.New("no secret is stored")
	}
	switch sealed[0] {
	case secretPlain:
		return sealed[1:], b.aead == nil, nil
	case secretGCM:
		if b.aead == nil {
			return nil, false, errors.New("the secret is encrypted, and no key is set")
		}
		n := b.aead.NonceSize()
		if len(sealed) < 1+n {
			return nil, false, errors.New("the stored secret is truncated")
		}
		for i, aead := range append([]cipher.AEAD{b.aead}, b.previous...) {
			if secret, err := aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(id)); err == nil {
				return secret, i == 0, nil
			}
		}
		return nil, false, fmt.Errorf("the secret does not decrypt with %s or a previous key", b.keyName)
	}
	return nil, false, fmt.Errorf("unknown secret format %d", sealed[0])
}
