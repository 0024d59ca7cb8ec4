package lifecycle

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/webhooksend"
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
const signaturePrefix = webhooksend.SignaturePrefix

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
		maxBytes = httpapi.MaxBodyBytes
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
