package webhookintake

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// quiet is a Config's Logger in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// post returns a request with body, its Content-Length unknown when
// length is negative.
func post(body io.Reader, length int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks", body)
	r.ContentLength = length
	return r
}

// A body is fed to the hash as it arrives and held in memory lent by the
// budget until it is released.
func TestReadFeedsTheHashAndLendsMemory(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: 1 << 20, Max: 1 << 20, Logger: quiet})
	for _, size := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 5*chunkSize + 17} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			h := sha256.New()
			b, err := rd.Read(httptest.NewRecorder(), post(bytes.NewReader(want), int64(size)), h)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			if got := b.Bytes(); !bytes.Equal(got, want) || b.Len() != int64(size) {
				t.Errorf("Bytes() = %d bytes, Len() = %d; want the %d bytes sent", len(got), b.Len(), size)
			}
			if sum := sha256.Sum256(want); !bytes.Equal(h.Sum(nil), sum[:]) {
				t.Error("the hash was not fed the body")
			}
		})
	}
	if n := rd.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d after every body was released, want 0", n)
	}
}

// failReader fails the test when it is read.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("a body declared too large was read")
	return 0, io.EOF
}

// A body over Max is refused: at once when its Content-Length says so,
// else when it has grown past Max, without holding anything.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: 1 << 20, Max: 100, Logger: quiet})
	if _, err := rd.Read(httptest.NewRecorder(), post(failReader{t}, 101), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(Content-Length 101) error = %v, want ErrTooLarge", err)
	}
	if _, err := rd.Discard(httptest.NewRecorder(), post(failReader{t}, 101), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Discard(Content-Length 101) error = %v, want ErrTooLarge", err)
	}
	long := strings.Repeat("x", 101)
	if _, err := rd.Read(httptest.NewRecorder(), post(strings.NewReader(long), -1), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(101 bytes, length unknown) error = %v, want ErrTooLarge", err)
	}
	if _, err := rd.Discard(httptest.NewRecorder(), post(strings.NewReader(long), -1), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Discard(101 bytes, length unknown) error = %v, want ErrTooLarge", err)
	}
	if n, err := rd.Discard(httptest.NewRecorder(), post(strings.NewReader(long[:100]), -1), nil); err != nil || n != 100 {
		t.Errorf("Discard(100 bytes) = %d, %v; want 100, nil", n, err)
	}
	if n := rd.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d after refusals, want 0", n)
	}
}

// Bodies being read share the budget: one that needs more than is left
// is refused with ErrBusy and holds nothing; Discard takes nothing of it.
func TestBudget(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: 3 * chunkSize, Max: 1 << 20, Logger: quiet})
	first, err := rd.Read(httptest.NewRecorder(), post(bytes.NewReader(make([]byte, 2*chunkSize)), -1), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two full chunks, and a third taken to find the end.
	if n := rd.InFlight(); n != 3*chunkSize {
		t.Errorf("InFlight() = %d while a body of two chunks is held, want %d", n, 3*chunkSize)
	}
	first.Release()
	// A body that fills the budget exactly is taken.
	first, err = rd.Read(httptest.NewRecorder(), post(bytes.NewReader(make([]byte, 3*chunkSize)), -1), nil)
	if err != nil || first.Len() != 3*chunkSize {
		t.Fatalf("a body of the budget's size: %v", err)
	}
	if _, err := rd.Read(httptest.NewRecorder(), post(strings.NewReader("{}"), 2), nil); !errors.Is(err, ErrBusy) {
		t.Errorf("a body with the budget spent: error = %v, want ErrBusy", err)
	}
	if _, err := rd.Read(httptest.NewRecorder(), post(strings.NewReader("{}"), 2), nil); !errors.Is(err, ErrBusy) {
		t.Errorf("Read with the budget spent: error = %v, want ErrBusy", err)
	}
	if n, err := rd.Discard(httptest.NewRecorder(), post(bytes.NewReader(make([]byte, 4*chunkSize)), -1), nil); err != nil || n != 4*chunkSize {
		t.Errorf("Discard with the budget spent = %d, %v; want the body read", n, err)
	}
	first.Release()
	second, err := rd.Read(httptest.NewRecorder(), post(strings.NewReader("{}"), 2), nil)
	if err != nil {
		t.Fatalf("Read once the budget was given back: %v", err)
	}
	second.Release()
	second.Release() // again: nothing
	if n := rd.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d, want 0", n)
	}
	if len(rd.free) > keptChunks {
		t.Errorf("%d chunks kept for reuse, more than %d", len(rd.free), keptChunks)
	}
}

// A body longer than the whole budget can never be taken: it is refused
// as too large, at once when its Content-Length says so.
func TestBodyOverTheBudgetIsTooLarge(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: 2 * chunkSize, Max: 1 << 20, Logger: quiet})
	if _, err := rd.Read(httptest.NewRecorder(), post(failReader{t}, 2*chunkSize+1), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Content-Length over the budget: error = %v, want ErrTooLarge", err)
	}
	if _, err := rd.Read(httptest.NewRecorder(), post(bytes.NewReader(make([]byte, 2*chunkSize+1)), -1), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a body over the budget, length unknown: error = %v, want ErrTooLarge", err)
	}
	if n := rd.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d, want 0", n)
	}
}

// A body given up, unread or after a refusal, is not waited for: net/http,
// which reads what is left of a small body after the handler, answers and
// closes the connection at once, though the sender stalls.
func TestAbandonedBodyIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: chunkSize, Max: 1 << 20, Timeout: time.Minute, Logger: quiet})
	held := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/unread":
			Abandon(w, r)
			w.WriteHeader(http.StatusUnauthorized)
		case "/hold": // holds the whole budget until released
			b, err := rd.Read(w, r, nil)
			if err != nil {
				Refuse(w, r, err)
				return
			}
			close(held)
			<-release
			b.Release()
		default:
			if _, err := rd.Read(w, r, nil); err != nil {
				Refuse(w, r, err)
			}
		}
	}))
	t.Cleanup(srv.Close)
	defer close(release)
	go func() {
		resp, err := http.Post(srv.URL+"/hold", "application/json", bytes.NewReader(make([]byte, chunkSize)))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-held
	for _, tc := range []struct {
		path string
		want int
	}{{"/unread", http.StatusUnauthorized}, {"/busy", http.StatusServiceUnavailable}} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A small body, of which a little is sent: net/http would read the
		// rest after the handler.
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", tc.path)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", tc.path, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.want || !resp.Close {
			t.Errorf("%s: %d, Close %v; want %d and the connection closed", tc.path, resp.StatusCode, resp.Close, tc.want)
		}
		if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("%s: the connection stayed open (%v)", tc.path, err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A body that stalls is cut off at the read deadline: the sender gets 408
// and its connection is closed; what it sent is given back to the budget.
func TestStalledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	rd := New(Config{Budget: 1 << 20, Max: 1 << 20, Timeout: 200 * time.Millisecond, Logger: quiet})
	errs := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := rd.Read(w, r, nil)
		errs <- err
		if err != nil {
			Refuse(w, r, err)
			return
		}
		b.Release()
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n%s", strings.Repeat("x", 1000))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("answer %d, Close %v; want 408 and the connection closed", resp.StatusCode, resp.Close)
	}
	if err := <-errs; !errors.Is(err, ErrTimeout) {
		t.Errorf("Read error = %v, want ErrTimeout", err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open after the answer")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cut off after %s, want about the 200ms timeout", d)
	}
	if n := rd.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d after the cut, want 0", n)
	}
}

// Refuse answers each error with its status and closes HTTP/1 connections.
func TestRefuse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err        error
		status     int
		retryAfter string
	}{
		{ErrTooLarge, http.StatusRequestEntityTooLarge, ""},
		{fmt.Errorf("%w: %w", ErrTooLarge, &http.MaxBytesError{Limit: 1}), http.StatusRequestEntityTooLarge, ""},
		{ErrBusy, http.StatusServiceUnavailable, "5"},
		{readError(fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded)), http.StatusRequestTimeout, ""},
		{readError(io.ErrUnexpectedEOF), http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		Refuse(rec, post(nil, 0), tt.err)
		if rec.Code != tt.status || rec.Header().Get("Retry-After") != tt.retryAfter || rec.Header().Get("Connection") != "close" {
			t.Errorf("Refuse(%v) = %d, Retry-After %q, Connection %q; want %d, %q, close", tt.err, rec.Code,
				rec.Header().Get("Retry-After"), rec.Header().Get("Connection"), tt.status, tt.retryAfter)
		}
	}
}
