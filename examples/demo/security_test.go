package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the demo's own: run
// -background starts os.Executable with childEnv set, and load tests
// start it with serveEnv set, to serve as main does.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" || os.Getenv(serveEnv) != "" {
		main()
		os.Exit(0)
	}
	clearDeveloperEnv()
	os.Exit(m.Run())
}

// clearDeveloperEnv unsets what a developer's shell may hold for the demo
// or a code host (LIFECYCLE_*, WEBHOOK_SECRET, GITHUB_*, GITLAB_*) or for
// OpenTelemetry (OTEL_*: an OTLP endpoint would receive the tests' spans),
// so that it cannot change what the tests, and the demos they start, see.
func clearDeveloperEnv() {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LIFECYCLE_") || name == "WEBHOOK_SECRET" ||
			strings.HasPrefix(name, "GITHUB_") || strings.HasPrefix(name, "GITLAB_") || strings.HasPrefix(name, "OTEL_") {
			os.Unsetenv(name)
		}
	}
}

// serveEnv makes the test binary run the demo in the foreground.
const serveEnv = "LIFECYCLE_DEMO_TEST_SERVE"

// checkPrivate fails the test unless dir is 0700 and every regular file
// in it 0600 at most, and returns the names of those files.
func checkPrivate(t *testing.T, dir string) []string {
	t.Helper()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory %s is %o, want 700", dir, perm)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %o, want it readable by its owner only (600)", e.Name(), perm)
		}
		names = append(names, e.Name())
	}
	return names
}

// The data directory is the owner's only, and so is every file in it: the
// database, the admin key and the key that seals webhook secrets, kept
// there on the first run, the instance ID; a directory and a log an older
// run left readable by others are tightened.
func TestDataDirectoryIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.log"), []byte("an older run's log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Loosen them, whatever the umask made them.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "demo.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := launch(t, "-addr", "127.0.0.1:0", "-data", dir)
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	// A write, so that SQLite's -wal and -shm files exist.
	c := client{t: t, base: base, key: strings.TrimSpace(string(key))}
	c.do("POST", "/tasks", map[string]any{"identifier": "SEC-1", "title": "t", "links": map[string]any{"issue": "https://issues.example.com/SEC-1"}})
	names := checkPrivate(t, dir)
	for _, want := range []string{"lifecycle.db", "admin.key", "webhook-secret.key", "instance.id", "demo.log"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in the data directory (files: %v)", want, names)
		}
	}
}

// No secret is taken from the command line, where ps shows it: each flag
// that took one is refused with what to use instead, without repeating
// the value; the secrets come from the files flags name, or else from the
// environment; a -postgres DSN with a password is refused.
func TestSecretsAreNotTakenFromTheCommandLine(t *testing.T) {
	const secret = "lsk_0123456789abcdefghijklmnopqrstuvwxyzSECRET"
	for _, name := range []string{"admin-key", "webhook-secret", "github-token", "github-webhook-secret", "gitlab-token",
		"gitlab-webhook-token", "webhook-secret-key", "webhook-previous-secret-keys"} {
		_, err := parseFlags([]string{"-" + name, secret}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "-"+name+"-file") || strings.Contains(err.Error(), secret) {
			t.Errorf("-%s: error %v, want a refusal naming -%s-file, without the value", name, err, name)
		}
	}
	for _, dsn := range []string{"postgres://lifecycle:" + secret + "@127.0.0.1/lifecycle", "host=127.0.0.1 password=" + secret, "postgres://127.0.0.1/db?password=" + secret} {
		_, err := parseFlags([]string{"-postgres", dsn}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "LIFECYCLE_POSTGRES_DSN") || strings.Contains(err.Error(), secret) {
			t.Errorf("-postgres with a password: error %v, want a refusal naming LIFECYCLE_POSTGRES_DSN, without the password", err)
		}
	}
	env := map[string]string{
		"LIFECYCLE_ADMIN_KEY": "from-env-admin", "WEBHOOK_SECRET": "from-env-webhook", "GITHUB_TOKEN": "from-env-github",
		"GITHUB_WEBHOOK_SECRET": "from-env-github-hook", "GITLAB_TOKEN": "from-env-gitlab", "GITLAB_WEBHOOK_TOKEN": "from-env-gitlab-hook",
		"LIFECYCLE_WEBHOOK_SECRET_KEY": "from-env-seal", "LIFECYCLE_WEBHOOK_PREVIOUS_SECRET_KEYS": "from-env-previous",
		"LIFECYCLE_POSTGRES_DSN": "postgres://u:pw@127.0.0.1/db",
	}
	o, err := parseFlags([]string{"-github-token-file", secretFile(t, "from-file-github")}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	got := []string{o.adminKey, o.webhookSecret, o.githubToken, o.githubWebhookSecret, o.gitlabToken, o.gitlabWebhookToken, o.webhookSecretKey, o.previousSecretKeys, o.postgres}
	want := []string{"from-env-admin", "from-env-webhook", "from-file-github", "from-env-github-hook", "from-env-gitlab", "from-env-gitlab-hook", "from-env-seal", "from-env-previous", env["LIFECYCLE_POSTGRES_DSN"]}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("secret %d = %q, want %q (the file wins over the environment)", i, got[i], want[i])
		}
	}
	if o.adminKeyFromData || o.adminKeySource != "$LIFECYCLE_ADMIN_KEY" {
		t.Errorf("admin key from %q (data directory %v), want $LIFECYCLE_ADMIN_KEY", o.adminKeySource, o.adminKeyFromData)
	}
	if _, err := parseFlags([]string{"-admin-key-file", filepath.Join(t.TempDir(), "missing")}, func(string) string { return "" }); err == nil {
		t.Error("a missing -admin-key-file was accepted")
	}
}

// -webhook-url's subscription, and it alone, may deliver to a private
// address: it reaches a receiver on loopback, while a subscription to a
// loopback address created over the API is refused.
func TestWebhookURLAllowsOnlyItsOwnSubscription(t *testing.T) {
	got := make(chan string, 100)
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Service-Event-Type")
	}))
	t.Cleanup(rc.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startDemo(t, "-webhook-url", rc.URL+"/hooks", "-webhook-secret-file", secretFile(t, "demo-secret-0123456789"), "-webhook-ca", ca)
	c := client{t: t, base: base}
	c.do("POST", "/tasks", map[string]any{"identifier": "SEC-2", "title": "t", "links": map[string]any{"issue": "https://issues.example.com/SEC-2"}})
	select {
	case typ := <-got:
		if typ != "task.updated" {
			t.Errorf("delivery of %q, want task.updated", typ)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the -webhook-url subscription received nothing")
	}
	status, body := c.post("/event-subscriptions", map[string]any{"url": rc.URL + "/other", "eventTypes": []string{"task.updated"}, "secret": "another-secret-0123456789"})
	if status != http.StatusBadRequest || !strings.Contains(body, "loopback") {
		t.Errorf("a subscription to loopback over the API: %d %s, want 400 refusing the loopback address", status, body)
	}
}
