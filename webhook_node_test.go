package lifecycle_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// nodeVerifierDir holds verify.mjs, which checks a delivery with
// @octokit/webhooks-methods and the standardwebhooks reference library,
// and the package files that pin them.
const nodeVerifierDir = "testdata/webhookverify"

// nodeVerdict is what verify.mjs prints.
type nodeVerdict struct {
	Octokit  bool   `json:"octokit"`  // X-Service-Signature matched
	Standard bool   `json:"standard"` // the Standard Webhooks headers matched
	Error    string `json:"error"`    // why either did not
}

// verifyWithNode checks a delivery (its raw body and its headers, signed
// with secret) with verifiers written by others: @octokit/webhooks-methods
// checks X-Service-Signature, and the standardwebhooks library checks
// webhook-id, webhook-timestamp and webhook-signature. It fails the test,
// with node's output, unless both accept it. The standardwebhooks library
// refuses a webhook-timestamp more than 5 minutes from the real clock; for a
// delivery signed on a fake clock use verifyWithNodeAt.
//
// It skips the test when node is not on PATH or the verifiers are not
// installed (npm ci --prefix testdata/webhookverify), and fails it instead
// when CI=true.
func verifyWithNode(t *testing.T, secret string, body []byte, h http.Header) {
	t.Helper()
	verifyWithNodeAt(t, time.Now(), secret, body, h)
}

// verifyWithNodeAt is verifyWithNode for a receiver whose clock reads now,
// such as e.Clock.Now() for a delivery of a Service on a fake clock.
func verifyWithNodeAt(t *testing.T, now time.Time, secret string, body []byte, h http.Header) {
	t.Helper()
	v, out := nodeVerify(t, now, secret, body, h)
	if !v.Octokit || !v.Standard {
		t.Errorf("the node webhook verifiers rejected the delivery (octokit %t, standard %t): %s\nbody: %s\nheaders: %v",
			v.Octokit, v.Standard, out, body, h)
	}
}

// nodeVerify runs verify.mjs on a delivery, as received by a clock that
// reads now, and returns the verdict and node's output. It fails the test
// only when the script could not give a verdict.
func nodeVerify(t *testing.T, now time.Time, secret string, body []byte, h http.Header) (nodeVerdict, string) {
	t.Helper()
	node := findNodeVerifier(t)
	if !utf8.Valid(body) {
		// JSON strings carry text: the script would be given other bytes.
		t.Fatalf("the body is not UTF-8, so verify.mjs cannot be given it exactly: %q", body)
	}
	headers := make(map[string]string, len(h))
	for name, values := range h {
		headers[name] = strings.Join(values, ", ") // as Node's http module joins repeated headers
	}
	in, err := json.Marshal(map[string]any{"secret": secret, "body": string(body), "headers": headers, "now": now.Unix()})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(nodeVerifierDir, "verify.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := strings.TrimSpace(stdout.String() + "\n" + stderr.String())

	var exit *exec.ExitError
	if runErr != nil && (!errors.As(runErr, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("node %s/verify.mjs: %v\n%s", nodeVerifierDir, runErr, out)
	}
	var v nodeVerdict
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("node %s/verify.mjs printed no verdict: %v\n%s", nodeVerifierDir, err, out)
	}
	if accepted := runErr == nil; accepted != (v.Octokit && v.Standard) {
		t.Fatalf("node %s/verify.mjs exited %v with the verdict %+v", nodeVerifierDir, runErr, v)
	}
	return v, out
}

// findNodeVerifier returns the node binary, or skips the test when node or
// the verifiers' modules are missing (fails it when CI=true, as .ci/run
// installs both).
func findNodeVerifier(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Require(t, testenv.Node, "")
	}
	if _, err := os.Stat(filepath.Join(nodeVerifierDir, "node_modules")); err != nil {
		testenv.Require(t, testenv.WebhookVerify, "")
	}
	return node
}

// signForNodeTest returns the headers of a delivery of body, computed here
// from the definition of the scheme, independently of the library:
// X-Service-Signature is "sha256=" and the hex HMAC-SHA256 of the body;
// webhook-signature is "v1," and the base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}"; both are keyed with the secret's UTF-8 bytes.
func signForNodeTest(secret, eventID string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	plain := hmac.New(sha256.New, []byte(secret))
	plain.Write(body)
	standard := hmac.New(sha256.New, []byte(secret))
	standard.Write([]byte(eventID + "." + ts + "."))
	standard.Write(body)

	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "webhook-node-test")
	h.Set(lifecycle.HeaderEventID, eventID)
	h.Set(lifecycle.HeaderDeliveryID, "dlv_node_test")
	h.Set(lifecycle.HeaderEventType, "task.updated")
	h.Set(lifecycle.HeaderSignature, "sha256="+hex.EncodeToString(plain.Sum(nil)))
	h.Set("Webhook-Id", eventID)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(standard.Sum(nil)))
	return h
}

// TestNodeVerifiersAgreeWithTheScheme checks the node verifiers themselves,
// so that a failure of verifyWithNode in a delivery test points at the
// Service: they accept a delivery signed by the scheme's definition and
// reject it once the body, the secret or (Standard Webhooks only) the
// timestamp is wrong.
func TestNodeVerifiersAgreeWithTheScheme(t *testing.T) {
	t.Parallel()
	const eventID = "evt_01JNODEVERIFY0000000000000"
	// The body has characters that JSON encoders escape, and some beyond
	// ASCII, so that it must reach node byte for byte.
	body := []byte(`{"id":"` + eventID + `","type":"task.updated","occurredAt":"2026-11-21T10:00:00Z",` +
		`"sequence":7,"taskVersion":2,"traceId":null,"data":{"taskId":"tsk_1","taskIdentifier":"ENG-1",` +
		`"summary":"Résumé <b>&</b> ` + "\u2028" + ` 日本語 🚀","status":"in_progress"}}`)
	tampered := bytes.Replace(body, []byte(`"sequence":7`), []byte(`"sequence":8`), 1)

	for _, tc := range []struct{ name, secret string }{
		{"ASCII", "demo-secret-0123456789"},
		// The key is the UTF-8 bytes of the secret, not its UTF-16 code
		// units: a verifier that gets this wrong rejects this one only.
		{"non-ASCII", "sécret-ключ-秘密-0123"},
		// Shaped like a Standard Webhooks secret, yet used as it is: not
		// stripped of "whsec_" and base64-decoded.
		{"whsec-shaped", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			h := signForNodeTest(tc.secret, eventID, now, body)
			if err := lifecycle.VerifyWebhookSignature(body, h.Get(lifecycle.HeaderSignature), tc.secret); err != nil {
				t.Errorf("VerifyWebhookSignature rejects what the node verifiers are to accept: %v", err)
			}
			verifyWithNode(t, tc.secret, body, h)

			for _, bad := range []struct {
				name   string
				secret string
				body   []byte
			}{
				{"tampered body", tc.secret, tampered},
				{"wrong secret", tc.secret + "x", body},
			} {
				v, out := nodeVerify(t, now, bad.secret, bad.body, h)
				if v.Octokit || v.Standard {
					t.Errorf("%s: the node verifiers accepted it (octokit %t, standard %t): %s", bad.name, v.Octokit, v.Standard, out)
				}
			}

			// Signed 10 minutes ago: X-Service-Signature carries no time, but
			// Standard Webhooks refuses a timestamp 5 minutes off, unless the
			// receiver's clock reads that time too.
			then := now.Add(-10 * time.Minute)
			old := signForNodeTest(tc.secret, eventID, then, body)
			v, out := nodeVerify(t, now, tc.secret, body, old)
			if !v.Octokit || v.Standard || !strings.Contains(v.Error, "too old") {
				t.Errorf("signed 10 minutes ago: got octokit %t, standard %t, want true, false (too old): %s", v.Octokit, v.Standard, out)
			}
			verifyWithNodeAt(t, then, tc.secret, body, old)
		})
	}
}
