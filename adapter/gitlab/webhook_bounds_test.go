package gitlab_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// countBody closes reached once at bytes of the body have been read.
type countBody struct {
	io.ReadCloser
	n       atomic.Int64
	at      int64
	reached chan struct{}
}

func (c *countBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	if n := c.n.Add(int64(k)); n >= c.at && n-int64(k) < c.at {
		close(c.reached)
	}
	return k, err
}

// stall opens a connection to addr and sends the head of a POST of
// /hooks/gitlab with header, declaring length bytes, and then sent bytes
// of it, and no more. The connection's read deadline is far past any the
// server should keep, so that a server that never answers fails the test
// rather than hanging it.
func stall(t *testing.T, addr string, header http.Header, length, sent int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var head strings.Builder
	fmt.Fprintf(&head, "POST /hooks/gitlab HTTP/1.1\r\nHost: hooks.example.com\r\nContent-Length: %d\r\n", length)
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
	var ne net.Error
	return resp.StatusCode, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// count returns the number of events taken.
func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// The token is checked, and the event named, before the body is read: a
// delivery with another token, or of an event the lifecycle does not
// follow, is answered without its body, which is never sent here.
func TestWebhookAnswersBeforeReading(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
	srv := httptest.NewServer(a.WebhookHandler(&recordingSink{}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name, event, token string
		length, want       int
	}{
		{"another token", gitlabtest.EventMergeRequest, "not-the-token", 20_000_000, http.StatusUnauthorized},
		{"unfollowed event", gitlabtest.EventPush, hookToken, 20_000_000, http.StatusNoContent},
		{"over 25 MiB", gitlabtest.EventMergeRequest, hookToken, 25<<20 + 1, http.StatusRequestEntityTooLarge},
		{"over the budget", gitlabtest.EventMergeRequest, hookToken, 16<<20 + 1, http.StatusRequestEntityTooLarge},
		// net/http reads what is left of a small body after the handler.
		{"another token, small body", gitlabtest.EventMergeRequest, "not-the-token", 1000, http.StatusUnauthorized},
		{"unfollowed event, small body", gitlabtest.EventPush, hookToken, 1000, http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"X-Gitlab-Event": {tt.event}, "X-Gitlab-Token": {tt.token}, "Content-Type": {"application/json"}}
			conn := stall(t, srv.Listener.Addr().String(), h, tt.length, 0)
			if status, closed := answer(t, conn); status != tt.want || !closed {
				t.Errorf("answered %d, connection closed %v; want %d, closed", status, closed, tt.want)
			}
		})
	}
}

// A body is read within the read timeout and the budget: a stalled one is
// cut off with 408 and its connection closed; while it holds the whole
// budget, another delivery is answered 503 with Retry-After and not
// passed on; once it is cut off, deliveries are taken again.
func TestWebhookBodiesAreBounded(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	const budget = 2 * 32 << 10
	a := newAdapter(t, f, func(c *gitlab.Config) {
		c.WebhookToken, c.WebhookReadTimeout, c.WebhookBodyBudget = hookToken, 2*time.Second, budget
	})
	sink := &recordingSink{}
	held := &countBody{at: budget - 1, reached: make(chan struct{})}
	hook := a.WebhookHandler(sink)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Gitlab-Event-UUID") == "stalled" {
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

	start := time.Now()
	h := http.Header{"X-Gitlab-Event": {gitlabtest.EventMergeRequest}, "X-Gitlab-Token": {hookToken}, "X-Gitlab-Event-Uuid": {"stalled"}}
	// All but the last byte of a body that fills the budget.
	stalled := stall(t, addr, h, budget, budget-1)
	<-held.reached
	if resp := send(f.Delivery(gitlabtest.EventJob, hookToken, nil)); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a delivery with the budget spent: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	status, closed := answer(t, stalled)
	if status != http.StatusRequestTimeout || !closed {
		t.Errorf("the stalled body was answered %d, connection closed %v; want 408, closed", status, closed)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the stalled body was cut off after %s, want about the read timeout (2s)", d)
	}
	if n := sink.count(); n != 0 {
		t.Errorf("%d events passed on from refused deliveries", n)
	}
	if resp := send(f.Delivery(gitlabtest.EventJob, hookToken, nil)); resp.StatusCode != http.StatusOK || sink.count() != 1 {
		t.Errorf("a delivery once the budget is free: %d with %d events, want 200 and one", resp.StatusCode, sink.count())
	}
}

// Negative bounds are refused by New.
func TestWebhookBoundsMustNotBeNegative(t *testing.T) {
	t.Parallel()
	for _, mutate := range []func(*gitlab.Config){
		func(c *gitlab.Config) { c.WebhookReadTimeout = -time.Second },
		func(c *gitlab.Config) { c.WebhookBodyBudget = -1 },
	} {
		c := gitlab.Config{Token: "glpat-x", Project: "group/name"}
		mutate(&c)
		if _, err := gitlab.New(c); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("New(%+v) error = %v, want a refusal of the negative bound", c, err)
		}
	}
}
