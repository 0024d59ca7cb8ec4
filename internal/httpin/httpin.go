// Package httpin holds what an HTTP API does with a request before it
// looks at what the request means: reading the body within limits (a
// largest size, refused at once when the Content-Length says so; a share
// of a byte budget (Budget) held while the body is read and decoded, so
// that concurrent large requests cannot grow memory without bound; a read
// deadline on the connection), giving up a body a handler did not read so
// that a stalled client cannot hold its connection, and the canonical
// form of a path.
package httpin

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"sync/atomic"
	"time"
)

// Errors of Read. A caller turns them into its own answers.
var (
	// ErrTooLarge: the body is over Limits.Max, by its Content-Length or
	// as it arrived.
	ErrTooLarge = errors.New("the request body is too large")
	// ErrTimeout: the body was still arriving after Limits.Timeout.
	ErrTimeout = errors.New("the request body did not arrive in time")
	// ErrUnreadable: reading the body failed otherwise.
	ErrUnreadable = errors.New("the request body could not be read")
)

// Limits say how Read reads one request body.
type Limits struct {
	// Max is the largest body accepted.
	Max int64
	// Budget, when not nil, is the shared budget the body takes its share
	// of (its Content-Length, or Max when it declares none) while it is
	// read and decoded; BudgetWait is the longest it waits for it.
	Budget     *Budget
	BudgetWait time.Duration
	// Timeout, when positive, bounds the reading by the wall clock.
	Timeout time.Duration
}

// Read reads the request body within l. A Content-Length over l.Max is
// refused with ErrTooLarge before anything is read, and so is a body that
// grows past it; both answers then close the connection rather than wait
// for the rest. A body still arriving after l.Timeout is refused with
// ErrTimeout, and its connection is closed. A share of l.Budget not
// granted in time is ErrBusy. A request whose context ends
// gets the context's error; any other failure to read is ErrUnreadable.
// An empty body is nil. On success the caller must call release once it
// no longer needs the body decoded; on failure release does nothing.
func Read(w http.ResponseWriter, r *http.Request, l Limits) (raw []byte, release func(), err error) {
	release = func() {}
	if r.ContentLength > l.Max {
		w.Header().Set("Connection", "close") // do not wait for the rest
		return nil, release, ErrTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, release, nil
	}
	ctx := r.Context()
	if l.Budget != nil {
		n := r.ContentLength
		if n < 0 {
			n = l.Max
		}
		if release, err = l.Budget.Acquire(ctx, n, l.BudgetWait); err != nil {
			return nil, func() {}, err
		}
	}
	if l.Timeout > 0 {
		// A socket deadline is wall-clock time.
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(l.Timeout)) == nil {
			defer func() {
				// Lift it once read: net/http reads on in the background to
				// see the client leave, and a passing deadline would end the
				// request. Keep it when it passed: after the answer net/http
				// would wait for the rest of the body, to discard it, before
				// it closes the connection.
				if err != ErrTimeout {
					rc.SetReadDeadline(time.Time{})
				}
			}()
		}
	}
	size := r.ContentLength
	if size < 0 {
		size = min(512, l.Max)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, l.Max))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		release()
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, func() {}, ErrTooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return nil, func() {}, ErrTimeout
		}
		if ctx.Err() != nil {
			return nil, func() {}, ctx.Err()
		}
		return nil, func() {}, ErrUnreadable
	}
	return buf.Bytes(), release, nil
}

// TrackedBody is a request body that knows whether it was read to its end.
type TrackedBody struct {
	io.ReadCloser
	done atomic.Bool
}

// Read implements io.Reader.
func (b *TrackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// GiveUp, once the handler returned, ends the connection's read of a body
// it did not read to its end (an answer refused before the body, a 401
// say): net/http reads what is left of a small body before the next
// request, without a deadline when the server has no ReadTimeout, so a
// client that declared a body and stalls would hold the connection for
// ever. The read fails at once, and net/http closes the connection.
func (b *TrackedBody) GiveUp(w http.ResponseWriter) {
	if !b.done.Load() {
		http.NewResponseController(w).SetReadDeadline(time.Now()) // fails after a hijack: nothing to give up then
	}
}

// CleanPath returns the canonical form of p that http.ServeMux redirects
// to: rooted, without . and .. elements or repeated slashes, keeping a
// trailing slash.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
