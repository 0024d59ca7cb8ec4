package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/bytebudget"
)

// Defaults of the request limits of Config.
const (
	defaultMaxDecodingBytes = 8 << 20
	defaultBodyReadTimeout  = 30 * time.Second
	// decodingWait is the longest a request waits for its share of
	// Config.MaxDecodingBytes before it is refused with 429.
	decodingWait = 2 * time.Second
)

// requestDefaults fills in and checks the request limits of c, the
// limiter of failed authentications included.
func (c *Config) requestDefaults() error {
	if c.MaxDecodingBytes == 0 {
		c.MaxDecodingBytes = defaultMaxDecodingBytes
	}
	if c.MaxDecodingBytes > 0 && c.MaxDecodingBytes < maxBodyBytes {
		return fmt.Errorf("lifecycle: Config.MaxDecodingBytes %d is less than one body of 1 MiB (%d); raise it, or make it negative to lift the bound", c.MaxDecodingBytes, maxBodyBytes)
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = defaultBodyReadTimeout
	}
	return c.authLimitDefaults()
}

// serviceKey is the context key under which the handler passes its
// Service to readBody.
type serviceKey struct{}

// readBody reads the request body, at most 1 MiB: a larger Content-Length
// is refused with 413 before anything is read. Under a Service's handler
// it first takes the body's share of Config.MaxDecodingBytes, and reads
// under Config.BodyReadTimeout (408 when the body is late). On success the
// caller must call release once it no longer needs the body decoded.
func readBody(w http.ResponseWriter, r *http.Request) (raw []byte, release func(), err error) {
	limits := bodyLimits{max: maxBodyBytes}
	if s, _ := r.Context().Value(serviceKey{}).(*Service); s != nil {
		limits.budget, limits.timeout = s.decoding, s.cfg.BodyReadTimeout
	}
	return readBodyWith(w, r, limits)
}

// bodyLimits says how readBodyWith reads one request body.
type bodyLimits struct {
	// max is the largest body accepted.
	max int64
	// budget, when not nil, is the shared budget the body takes its share
	// of while it is read and decoded.
	budget *bytebudget.Budget
	// timeout, when positive, bounds the reading by the wall clock.
	timeout time.Duration
}

// readBodyWith reads the request body within limits: a Content-Length over
// limits.max is refused with 413 before anything is read, and so is a body
// that grows past it; a body still arriving after limits.timeout gets 408,
// and its connection is closed. On success the caller must call release
// once it no longer needs the body decoded.
func readBodyWith(w http.ResponseWriter, r *http.Request, limits bodyLimits) (raw []byte, release func(), err error) {
	release = func() {}
	tooLarge := fmt.Errorf("the request body exceeds %d bytes: %w", limits.max, ErrPayloadTooLarge)
	if r.ContentLength > limits.max {
		w.Header().Set("Connection", "close") // do not wait for the rest
		return nil, release, tooLarge
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, release, nil
	}
	ctx := r.Context()
	if limits.budget != nil {
		n := r.ContentLength
		if n < 0 {
			n = limits.max
		}
		if release, err = limits.budget.Acquire(ctx, n, decodingWait); err != nil {
			if errors.Is(err, bytebudget.ErrBusy) {
				err = &RateLimitError{RetryAfterSeconds: 1,
					Message: "The server is reading too many large request bodies at once; retry in a second"}
			}
			return nil, func() {}, err
		}
	}
	if limits.timeout > 0 {
		// A socket deadline is wall-clock time, not the Service's Clock.
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(limits.timeout)) == nil {
			defer func() {
				// Lift it once read: net/http reads on in the background to
				// see the client leave, and a passing deadline would end the
				// request. Keep it when it passed: after the answer net/http
				// would wait for the rest of the body, to discard it, before
				// it closes the connection.
				if !errors.Is(err, ErrRequestTimeout) {
					rc.SetReadDeadline(time.Time{})
				}
			}()
		}
	}
	size := r.ContentLength
	if size < 0 {
		size = min(512, limits.max)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limits.max))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		release()
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, func() {}, tooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return nil, func() {}, fmt.Errorf("the request body did not arrive within %s: %w", limits.timeout, ErrRequestTimeout)
		}
		if ctx.Err() != nil {
			return nil, func() {}, ctx.Err()
		}
		return nil, func() {}, invalid("body", "could not be read")
	}
	return buf.Bytes(), release, nil
}

// DecodeBody reads the request body and decodes one JSON object from it
// into dst, strictly, as the API decodes its own: unknown members,
// members of the wrong type and trailing data are a *ValidationError
// naming them, an empty body too. Unlike the API's bodies, it is read
// outside [Config.MaxDecodingBytes]: for a small body read before anyone
// is authenticated (a sign-in), which must then hold nothing others wait
// for. A body over maxBytes is refused with an error matching
// ErrPayloadTooLarge, from its Content-Length before it is read when it
// declares one; a body still arriving after timeout, or after
// [Config.BodyReadTimeout] when that is shorter, with an error matching
// ErrRequestTimeout, and its connection is closed.
func (s *Service) DecodeBody(w http.ResponseWriter, r *http.Request, dst any, maxBytes int64, timeout time.Duration) error {
	if t := s.cfg.BodyReadTimeout; t > 0 && (timeout <= 0 || t < timeout) {
		timeout = t
	}
	raw, _, err := readBodyWith(w, r, bodyLimits{max: maxBytes, timeout: timeout})
	if err != nil {
		return err
	}
	return decodeRaw(r.Context(), raw, dst, false, nil)
}

// Guard wraps a handler as the API's routes are wrapped, for a host that
// serves pages of its own beside the API (see [Service.ServeFunc]): a
// handler that panics is answered with a JSON 500 (and logged) instead of
// a dropped connection; a path without a leading slash (a mounting
// mistake) gets a 404 that says how to mount; a path that a ServeMux
// would redirect to its cleaned form ("//tasks", "/tasks/./x") gets a JSON
// 404 instead of an HTML redirect; and the first request served before
// [Service.Start] logs a warning.
func (s *Service) Guard(h http.Handler) http.Handler { return s.guard(h) }

// guard is Guard.
func (s *Service) guard(mux http.Handler) http.Handler {
	var started startCheck
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "request handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			status, body := errorResponse(errors.New("panic"))
			writeJSON(w, status, body)
		}()
		started.check(s, r)
		if r.ContentLength > 0 || len(r.TransferEncoding) > 0 { // a body was declared
			body := &trackedBody{ReadCloser: r.Body}
			r.Body = body
			defer body.giveUp(w)
		}
		if err := unmountedPath(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if r.Method != http.MethodConnect && cleanPath(r.URL.Path) != r.URL.Path {
			s.writeError(w, r, fmt.Errorf("no such endpoint: %s %q; paths are not cleaned or redirected: %w", r.Method, r.URL.Path, ErrNotFound))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// trackedBody is a request body that knows whether it was read to its end.
type trackedBody struct {
	io.ReadCloser
	done atomic.Bool
}

// Read implements io.Reader.
func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// giveUp, once the handler returned, ends the connection's read of a body
// it did not read to its end (an answer refused before the body, a 401
// say): net/http reads what is left of a small body before the next
// request, without a deadline when the server has no ReadTimeout, so a
// client that declared a body and stalls would hold the connection for
// ever. The read fails at once, and net/http closes the connection.
func (b *trackedBody) giveUp(w http.ResponseWriter) {
	if !b.done.Load() {
		http.NewResponseController(w).SetReadDeadline(time.Now()) // fails after a hijack: nothing to give up then
	}
}

// cleanPath returns the canonical form of p that http.ServeMux redirects
// to: rooted, without . and .. elements or repeated slashes, keeping a
// trailing slash.
func cleanPath(p string) string {
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

// contextWithService returns ctx carrying s for readBody.
func contextWithService(ctx context.Context, s *Service) context.Context {
	return context.WithValue(ctx, serviceKey{}, s)
}
