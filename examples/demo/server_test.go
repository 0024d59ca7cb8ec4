package main

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The demo seals webhook secrets by default: it generates a key on the
// first run, keeps it in the data directory (readable by its owner only)
// and reuses it; a key given by flag wins, and previous keys are read for
// a rotation.
func TestWebhookSecretKeyIsKeptInTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	key, prev, err := webhookSecretKeys(options{data: dir})
	if err != nil || len(key) != 32 || len(prev) != 0 {
		t.Fatalf("first run: %x %v %v", key, prev, err)
	}
	info, err := os.Stat(filepath.Join(dir, "webhook-secret.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", info, err)
	}
	again, _, err := webhookSecretKeys(options{data: dir})
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("second run: %x, %v; want the kept key", again, err)
	}
	given := strings.Repeat("ab", 32)
	flagKey, prev, err := webhookSecretKeys(options{data: dir, webhookSecretKey: given, previousSecretKeys: hex.EncodeToString(key)})
	if err != nil || hex.EncodeToString(flagKey) != given || len(prev) != 1 || !bytes.Equal(prev[0], key) {
		t.Fatalf("flag: %x %x %v", flagKey, prev, err)
	}
	if _, _, err := webhookSecretKeys(options{data: dir, webhookSecretKey: "short"}); err == nil {
		t.Error("a short key was accepted")
	}
}

// The demo's server lets idle and silent connections go, and leaves
// write deadlines to the Service (event streams last).
func TestHTTPServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 || srv.IdleTimeout > time.Minute || srv.MaxHeaderBytes <= 0 {
		t.Errorf("ReadHeaderTimeout %s, IdleTimeout %s, MaxHeaderBytes %d", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	if srv.WriteTimeout != 0 || srv.ReadTimeout != 0 {
		t.Errorf("WriteTimeout %s, ReadTimeout %s: event streams and bodies set their own deadlines", srv.WriteTimeout, srv.ReadTimeout)
	}
}
