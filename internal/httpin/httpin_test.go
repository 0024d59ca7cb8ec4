package httpin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// unread is a body that fails the test when read.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) { u.t.Error("the body was read"); return 0, io.EOF }
func (unread) Close() error               { return nil }

// post returns a POST of body whose Content-Length is n.
func post(body io.Reader, n int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", body)
	r.ContentLength = n
	return r
}

func TestRead(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	raw, release, err := Read(w, post(strings.NewReader(`{"a":1}`), 7), Limits{Max: 10})
	if err != nil || string(raw) != `{"a":1}` {
		t.Fatalf("%q %v", raw, err)
	}
	release()
	raw, _, err = Read(w, post(strings.NewReader(`{"a":1}`), -1), Limits{Max: 10}) // length not declared
	if err != nil || string(raw) != `{"a":1}` {
		t.Fatalf("without a Content-Length: %q %v", raw, err)
	}
	for _, r := range []*http.Request{post(nil, 0), post(http.NoBody, 0), post(strings.NewReader("x"), 0)} {
		if raw, release, err := Read(w, r, Limits{Max: 10}); raw != nil || err != nil || release == nil {
			t.Errorf("an empty body: %q %v", raw, err)
		}
	}
	if w.Header().Get("Connection") != "" {
		t.Error("a body read whole closes its connection")
	}
}

// A body over the limit is refused: by its Content-Length before it is
// read, else as it grows past it.
func TestReadTooLarge(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	r := post(nil, 11)
	r.Body = unread{t}
	if _, release, err := Read(w, r, Limits{Max: 10}); err != ErrTooLarge || release == nil {
		t.Errorf("by its Content-Length: %v", err)
	}
	if w.Header().Get("Connection") != "close" {
		t.Error("the connection is kept to read the rest")
	}
	if _, _, err := Read(httptest.NewRecorder(), post(strings.NewReader(strings.Repeat("x", 11)), -1), Limits{Max: 10}); err != ErrTooLarge {
		t.Errorf("as it grows: %v", err)
	}
}

// A body takes its share of the budget while it is used, and waits at
// most BudgetWait for it.
func TestReadBudget(t *testing.T) {
	t.Parallel()
	budget := NewBudget(10)
	l := Limits{Max: 10, Budget: budget, BudgetWait: 20 * time.Millisecond}
	_, release, err := Read(httptest.NewRecorder(), post(strings.NewReader("12345678"), 8), l)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(httptest.NewRecorder(), post(strings.NewReader("123"), 3), l); !errors.Is(err, ErrBusy) {
		t.Fatalf("a share beyond the budget: %v", err)
	}
	_, release2, err := Read(httptest.NewRecorder(), post(strings.NewReader("12"), 2), l)
	if err != nil {
		t.Fatalf("a share within it: %v", err)
	}
	release()
	release2()
	// An undeclared length takes Max; a failed read gives its share back.
	if _, _, err := Read(httptest.NewRecorder(), post(iotest.ErrReader(errors.New("reset")), -1), l); err != ErrUnreadable {
		t.Fatalf("a failing body: %v", err)
	}
	give, err := budget.Acquire(t.Context(), 10, 0)
	if err != nil {
		t.Fatalf("the budget is not whole again: %v", err)
	}
	give()
}

// A request whose context ended gets the context's error.
func TestReadCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := post(strings.NewReader("12"), 2).WithContext(ctx)
	if _, _, err := Read(httptest.NewRecorder(), r, Limits{Max: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("%v", err)
	}
}

// serve serves h on loopback and returns a connection to it.
func serve(t *testing.T, h http.HandlerFunc) net.Conn {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// closed reports whether c is closed by the server once its answer is
// read.
func closed(t *testing.T, c net.Conn) bool {
	t.Helper()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	return err == io.EOF
}

// A body still arriving after the timeout is ErrTimeout, and its
// connection is closed rather than held while net/http waits for the rest.
func TestReadTimeout(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 1)
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _, err := Read(w, r, Limits{Max: 100, Timeout: 200 * time.Millisecond})
		errs <- err
		w.WriteHeader(http.StatusRequestTimeout)
	})
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\"")
	if err := <-errs; err != ErrTimeout {
		t.Fatalf("%v", err)
	}
	if !closed(t, c) {
		t.Error("the connection stays open")
	}
}

// A body the handler left unread is given up: its connection is closed
// instead of waiting for the rest; one read to its end is not.
func TestTrackedBody(t *testing.T) {
	t.Parallel()
	handler := func(read bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body := &TrackedBody{ReadCloser: r.Body}
			r.Body = body
			defer body.GiveUp(w)
			if read {
				io.ReadAll(r.Body)
			}
			w.WriteHeader(http.StatusUnauthorized)
		}
	}
	c := serve(t, handler(false))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345") // and stalls
	if !closed(t, c) {
		t.Error("a stalled body unread holds its connection")
	}
	c = serve(t, handler(true))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n12345")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.Close {
		t.Fatalf("a body read whole: %v, closed %v", err, resp != nil && resp.Close)
	}
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Errorf("the connection of a body read whole serves no next request: %v", err)
	}
}

func TestCleanPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"": "/", "/": "/", "tasks": "/tasks", "/tasks/": "/tasks/", "//tasks": "/tasks", "/tasks/./x": "/tasks/x",
		"/tasks/x/../y": "/tasks/y", "/a/b/..": "/a", "/a/b/../": "/a/", "/..": "/",
	} {
		if got := CleanPath(p); got != want {
			t.Errorf("CleanPath(%q) = %q, want %q", p, got, want)
		}
	}
}
