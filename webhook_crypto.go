package lifecycle

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Webhook signature headers.
const (
	// HeaderSignature holds "sha256=" and the lowercase hex HMAC-SHA256 of
	// the body, keyed with the subscription secret.
	HeaderSignature = "X-Service-Signature"
	// HeaderEventID holds the event ID, the same on every attempt.
	HeaderEventID = "X-Service-Event-Id"
	// HeaderDeliveryID holds the ID of the attempt, new on each.
	HeaderDeliveryID = "X-Service-Delivery-Id"
	// HeaderEventType holds the event type.
	HeaderEventType = "X-Service-Event-Type"
)

// signaturePrefix begins the value of X-Service-Signature.
const signaturePrefix = "sha256="

// ErrInvalidSignature means a webhook request's signature does not match
// its body and the subscription secret.
var ErrInvalidSignature = errors.New("lifecycle: webhook signature does not match")

// sign returns the X-Service-Signature value of body.
func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// signStandard returns the webhook-signature value of the Standard Webhooks
// scheme: "v1," and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}".
func signStandard(secret []byte, eventID string, unix int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(eventID))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// VerifyWebhookSignature checks, in constant time, that signature (the
// X-Service-Signature header of a delivery) is the HMAC-SHA256 of body
// under secret. body must be the raw bytes received, before any JSON
// parsing. It returns nil when the signature matches and an error matching
// ErrInvalidSignature when it does not.
func VerifyWebhookSignature(body []byte, signature, secret string) error {
	hexSum, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return fmt.Errorf("%w: the header does not begin with %q", ErrInvalidSignature, signaturePrefix)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: the header does not hold a hex SHA-256 digest", ErrInvalidSignature)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrInvalidSignature
	}
	return nil
}

// VerifyWebhookRequest reads the body of a webhook delivery, at most
// maxBytes of it (1 MiB when maxBytes <= 0), and checks its
// X-Service-Signature under secret. It returns the body when the
// signature matches; the caller then parses it. A receiver should answer
// 401 when the error matches ErrInvalidSignature, and deduplicate
// deliveries on their X-Service-Event-Id.
func VerifyWebhookRequest(r *http.Request, secret string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = maxBodyBytes
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("lifecycle: read webhook body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("lifecycle: webhook body exceeds %d bytes", maxBytes)
	}
	if err := VerifyWebhookSignature(body, r.Header.Get(HeaderSignature), secret); err != nil {
		return nil, err
	}
	return body, nil
}

// secretBox seals webhook secrets at rest with AES-256-GCM when the host
// gives a key, and keeps them as they are otherwise. A sealed secret
// begins with a version byte: 0 for a plain secret, 1 for AES-256-GCM
// (then a 12-byte nonce and the ciphertext, authenticated with the
// subscription ID).
type secretBox struct {
	aead     cipher.AEAD   // nil: no key
	previous []cipher.AEAD // keys of a rotation that still open secrets
}

// The version bytes of sealed secrets.
const (
	secretPlain byte = 0
	secretGCM   byte = 1
)

// newSecretBox returns a box for key, which is empty or 32 bytes, that
// also opens secrets sealed with the previous keys of a rotation.
func newSecretBox(key []byte, previous ...[]byte) (*secretBox, error) {
	if len(key) == 0 {
		if len(previous) > 0 {
			return nil, errors.New("lifecycle: Config.WebhookPreviousSecretKeys is set without Config.WebhookSecretKey; set the new key there")
		}
		return &secretBox{}, nil
	}
	aead, err := newGCM("Config.WebhookSecretKey", key)
	if err != nil {
		return nil, err
	}
	b := &secretBox{aead: aead}
	for i, k := range previous {
		a, err := newGCM(fmt.Sprintf("Config.WebhookPreviousSecretKeys[%d]", i), k)
		if err != nil {
			return nil, err
		}
		b.previous = append(b.previous, a)
	}
	return b, nil
}

// newGCM returns AES-256-GCM under key, the Config field named field.
func newGCM(field string, key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("lifecycle: %s must be 32 bytes (AES-256), not %d", field, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: %s: %w", field, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: %s: %w", field, err)
	}
	return aead, nil
}

// seal returns the stored form of the secret of subscription subID.
func (b *secretBox) seal(subID string, secret []byte) ([]byte, error) {
	if b.aead == nil {
		return append([]byte{secretPlain}, secret...), nil
	}
	out := make([]byte, 1+b.aead.NonceSize(), 1+b.aead.NonceSize()+len(secret)+b.aead.Overhead())
	out[0] = secretGCM
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return b.aead.Seal(out, out[1:], secret, []byte(subID)), nil
}

// open returns the secret of subscription subID from its stored form.
func (b *secretBox) open(subID string, sealed []byte) ([]byte, error) {
	secret, _, err := b.openCurrent(subID, sealed)
	return secret, err
}

// openCurrent is open, and also says whether the stored form is sealed
// with the current key (false for a plain secret or a previous key's).
func (b *secretBox) openCurrent(subID string, sealed []byte) (secret []byte, current bool, err error) {
	if len(sealed) == 0 {
		return nil, false, errors.New("no secret is stored")
	}
	switch sealed[0] {
	case secretPlain:
		return sealed[1:], b.aead == nil, nil
	case secretGCM:
		if b.aead == nil {
			return nil, false, errors.New("the secret is encrypted, and Config.WebhookSecretKey is not set")
		}
		n := b.aead.NonceSize()
		if len(sealed) < 1+n {
			return nil, false, errors.New("the stored secret is truncated")
		}
		for i, aead := range append([]cipher.AEAD{b.aead}, b.previous...) {
			if secret, err := aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(subID)); err == nil {
				return secret, i == 0, nil
			}
		}
		return nil, false, errors.New("the secret does not decrypt with Config.WebhookSecretKey or a previous key")
	}
	return nil, false, fmt.Errorf("unknown secret format %d", sealed[0])
}
