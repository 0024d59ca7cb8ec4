package lifecycle_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"log/slog"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// openSealed opens a stored secret sealed with key (format 1: AES-256-GCM,
// a 12-byte nonce, bound to the subscription ID), independently of the
// library.
func openSealed(t *testing.T, key []byte, subID string, sealed []byte) ([]byte, bool) {
	t.Helper()
	if len(sealed) < 13 || sealed[0] != 1 {
		return nil, false
	}
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	out, err := aead.Open(nil, sealed[1:13], sealed[13:], []byte(subID))
	return out, err == nil
}

// A rotation of WebhookSecretKey: during it, the new key seals and the
// previous one still opens; ResealWebhookSecrets moves every secret, plain
// ones included, to the new key.
func TestWebhookSecretKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	e := newEnv(t, func(c *lifecycle.Config) {
		c.AllowPrivateWebhookTargets = true
		c.WebhookSecretKey = oldKey
	})
	sealedOld := e.Subscribe(subBody("https://127.0.0.1:1/a"))["id"].(string)
	with := func(key []byte, previous ...[]byte) *lifecycle.Service {
		svc, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: slog.New(slog.DiscardHandler),
			AllowPrivateWebhookTargets: true, WebhookSecretKey: key, WebhookPreviousSecretKeys: previous})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	plain := with(nil)
	plainSub, err := plain.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{URL: "https://127.0.0.1:1/b",
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskShipped}, Secret: "plain-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}

	// Without the previous key, the old secret cannot be opened.
	if _, err := with(newKey).ResealWebhookSecrets(t.Context()); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Fatalf("reseal without the previous key: %v", err)
	}
	rotating := with(newKey, oldKey)
	n, err := rotating.ResealWebhookSecrets(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("reseal = %d, %v; want 2", n, err)
	}
	for id, want := range map[string]string{sealedOld: subBody("")["secret"].(string), plainSub.ID: "plain-secret-0123456789"} {
		sub, err := e.Store.Subscription(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := openSealed(t, newKey, id, sub.SealedSecret); !ok || string(got) != want {
			t.Errorf("%s is not sealed with the new key: %q %v", id, got, ok)
		}
	}
	// Done: the new key alone suffices, and a second pass changes nothing.
	if n, err := with(newKey).ResealWebhookSecrets(t.Context()); err != nil || n != 0 {
		t.Errorf("second reseal = %d, %v", n, err)
	}
	// New subscriptions are sealed with the new key during the rotation.
	fresh, err := rotating.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{URL: "https://127.0.0.1:1/c",
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskShipped}, Secret: "fresh-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.Store.Subscription(t.Context(), fresh.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := openSealed(t, newKey, fresh.ID, sub.SealedSecret); !ok {
		t.Errorf("a subscription made during the rotation is not sealed with the new key")
	}
}
