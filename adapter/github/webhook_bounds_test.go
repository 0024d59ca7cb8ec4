package github

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// countBody closes reached once n bytes of the body have been read.
type countBody struct {
	io.ReadCloser
	n       atomic.Int64
	at      int64
	reached chan struct{}
}

func (c *countBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	if c.n.Add(int64(k)) >= c.at && c.n.Load()-int64(k) < c.at {
		close(c.reached)
	}
	return k, err
}

// stall opens a connection to addr and sends the head of a POST to path
// with header, declaring length bytes, and then sent bytes of it, and no
// more. It returns the connection, with a read deadline far past any the
// server should keep, so that a server that never answers fails the test
// rather than hanging it.
func stall(t *testing.T, addr, path string, header http.Header, length, sent int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: hooks.example.com\r\nContent-Length: %d\r\n", path, length)
	header.Write(&head)
	head.WriteString("\r\n")
	go func() {
		conn.Write([]byte(head.String()))
		conn.Write([]byte(strings.Repeat("x", sent)))
	}()
	return conn
}

// answer reads the response on conn and whether the server then closed
// the connection.
func answer(t *testing.T, conn net.Conn) (status int, closed bool) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = conn.Read(make([]byte, 1))
	return resp.StatusCode, err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// hookHeader returns the header of a delivery of event with the
// signature sig.
func hookHeader(event, sig string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {event},
		"X-Github-Delivery": {"d-" + event}, "X-Hub-Signature-256": {sig}}
}

// Bodies not yet verified are held within bounds a sender without the
// secret cannot push: a stalled body is cut off with 408 at the read
// deadline, its connection closed; while stalled bodies hold the whole
// budget, another delivery of a used event is answered 503 with
// Retry-After and not passed on; deliveries of unused events are verified
// as they stream, without the budget; once the stalled body is cut, its
// memory serves the next delivery.
func TestWebhookBoundsUnverifiedBodies(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	const budget = 4 * 32 << 10
	a := f.adapter(t, Config{WebhookSecret: testSecret, WebhookReadTimeout: 2 * time.Second, WebhookBodyBudget: budget})
	pr := open(t, f, a, 1)
	event, payload := f.webhookPayload(pr, lifecycle.ProviderHeadChanged)
	sink := new(recorder)
	held := &countBody{at: budget - 1, reached: make(chan struct{})}
	hook := a.WebhookHandler(sink)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Github-Delivery") == "d-stalled" {
			held.ReadCloser = r.Body
			r.Body = held
		}
		hook.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	send := func(req *http.Request) *http.Response {
		t.Helper()
		req.URL.Scheme, req.URL.Host, req.RequestURI = "http", addr, ""
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	// An unsigned body that fills the budget, all but its last byte sent.
	h := hookHeader(event, "sha256="+strings.Repeat("0", 64))
	h.Set("X-Github-Delivery", "d-stalled")
	start := time.Now()
	stalled := stall(t, addr, "/hooks/github", h, budget, budget-1)
	<-held.reached
	if n := a.hookBodies.InFlight(); n != budget {
		t.Errorf("%d bytes held for the stalled body, want the budget, %d", n, budget)
	}

	if resp := send(githubtest.Delivery("/hooks/github", event, "d-busy", testSecret, payload)); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a signed delivery with the budget spent: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	big := []byte(`{"zen":"` + strings.Repeat("z", 200<<10) + `"}`)
	if resp := send(githubtest.Delivery("/hooks/github", "ping", "d-ping", testSecret, big)); resp.StatusCode != http.StatusNoContent {
		t.Errorf("a signed ping of 200 KiB with the budget spent: %d, want 204", resp.StatusCode)
	}
	unsigned := githubtest.Delivery("/hooks/github", "ping", "d-ping", "another secret", big)
	if resp := send(unsigned); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a ping signed with another secret: %d, want 401", resp.StatusCode)
	}

	status, closed := answer(t, stalled)
	if status != http.StatusRequestTimeout || !closed {
		t.Errorf("the stalled body was answered %d, connection closed %v; want 408, closed", status, closed)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the stalled body was cut off after %s, want about the read timeout (2s)", d)
	}
	if n := a.hookBodies.InFlight(); n != 0 {
		t.Errorf("%d bytes held after the stalled body was cut off, want 0", n)
	}
	if evs := sink.take(); len(evs) != 0 {
		t.Errorf("events %+v passed on from refused deliveries", evs)
	}
	if resp := send(githubtest.Delivery("/hooks/github", event, "d-later", testSecret, payload)); resp.StatusCode != http.StatusOK {
		t.Errorf("a signed delivery once the budget is free: %d, want 200", resp.StatusCode)
	}
	if evs := sink.take(); len(evs) != 1 || evs[0].DeliveryID != "d-later" {
		t.Errorf("events %+v, want the one of d-later", evs)
	}
}

// What GitHub could not have sent is refused before its body is read: a
// Content-Length over 25 MB, a missing or malformed signature, another
// content type. The body of each is never sent, so a server that read it
// would not answer.
func TestWebhookRefusesBeforeReading(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{WebhookSecret: testSecret})
	srv := httptest.NewServer(a.WebhookHandler(new(recorder)))
	t.Cleanup(srv.Close)
	good := "sha256=" + strings.Repeat("0", 64)
	tests := []struct {
		name   string
		header http.Header
		length int
		want   int
	}{
		{"over 25 MB", hookHeader("pull_request", good), MaxWebhookBody + 1, http.StatusRequestEntityTooLarge},
		{"unused event over 25 MB", hookHeader("push", good), MaxWebhookBody + 1, http.StatusRequestEntityTooLarge},
		{"used event over the budget", hookHeader("pull_request", good), 16<<20 + 1, http.StatusRequestEntityTooLarge},
		{"small body, no signature", hookHeader("pull_request", ""), 1000, http.StatusUnauthorized},
		{"no signature", hookHeader("pull_request", ""), 20_000_000, http.StatusUnauthorized},
		{"malformed signature", hookHeader("pull_request", "sha256=00"), 20_000_000, http.StatusUnauthorized},
		{"SHA-1 signature", hookHeader("pull_request", "sha1="+strings.Repeat("0", 40)), 20_000_000, http.StatusUnauthorized},
		{"content type", func() http.Header {
			h := hookHeader("pull_request", good)
			h.Set("Content-Type", "text/plain")
			return h
		}(), 20_000_000, http.StatusUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := stall(t, srv.Listener.Addr().String(), "/hooks/github", tt.header, tt.length, 0)
			if status, closed := answer(t, conn); status != tt.want || !closed {
				t.Errorf("answered %d, connection closed %v; want %d, closed", status, closed, tt.want)
			}
		})
	}
}
