// Package testsupport holds what the tests of several packages of the
// module share: finding Chromium for the browser tests, and reading an
// answer off a raw connection.
package testsupport

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// BrowserTimeout bounds, in real time, each wait for the browser.
const BrowserTimeout = 60 * time.Second

// FindChromium returns the Chromium binary to run, or skips the test
// (fails it when CI=true, as CI installs Chromium; see testenv.Require).
// LIFECYCLE_CHROMIUM
// overrides the search.
func FindChromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("LIFECYCLE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Require(t, testenv.Chromium, "")
	return ""
}

// Answered reads the answer to a request sent on conn within wait, and
// checks that the server then closes the connection. It returns the
// status and the error code of the body (the API's error envelope).
func Answered(t testing.TB, conn net.Conn, wait time.Duration) (status int, code string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", wait, err)
	}
	var body lifecycle.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection stays open after its %d answer: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, body.Error.Code
}
