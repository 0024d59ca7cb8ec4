package lifecycle

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/httpin"
)

// Defaults of the request limits of Config.
const (
	defaultMaxDecodingBytes = 8 << 20
	defaultBodyReadTimeout  = 30 * time.Second
	// decodingWait is the longest a request waits for its share of
	// Config.MaxDecodingBytes before it is refused with 429.
	decodingWait = 2 * time.Second
)

// requestDefaults fills in the request limits of c.
func (c *Config) requestDefaults() {
	if c.MaxDecodingBytes == 0 {
		c.MaxDecodingBytes = defaultMaxDecodingBytes
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = defaultBodyReadTimeout
	}
}

// validateRequests checks the request limits of c.
func (c *Config) validateRequests() error {
	if c.MaxDecodingBytes > 0 && c.MaxDecodingBytes < httpapi.MaxBodyBytes {
		return fmt.Errorf("lifecycle: Config.MaxDecodingBytes %d is less than one body of 1 MiB (%d); raise it, or make it negative to lift the bound", c.MaxDecodingBytes, httpapi.MaxBodyBytes)
	}
	return nil
}

// bodyLimits returns the limits of the API's request bodies: at most
// 1 MiB, read within a share of Config.MaxDecodingBytes (a budget of its
// own; none when that is not positive) and under Config.BodyReadTimeout,
// and within scanLimits.
func bodyLimits(cfg *Config) httpapi.Limits {
	var budget *httpin.Budget
	if cfg.MaxDecodingBytes > 0 {
		budget = httpin.NewBudget(cfg.MaxDecodingBytes)
	}
	return httpapi.Limits{
		Read: httpin.Limits{Max: httpapi.MaxBodyBytes, Budget: budget, BudgetWait: decodingWait, Timeout: cfg.BodyReadTimeout},
		Scan: &scanLimits,
	}
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
	raw, _, err := httpapi.ReadBodyWith(w, r, httpin.Limits{Max: maxBytes, Timeout: timeout})
	if err != nil {
		return err
	}
	return httpapi.DecodeRaw(r.Context(), raw, dst, &scanLimits, false, nil)
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
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "request handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			status, body := httpapi.ErrorResponse(errors.New("panic"))
			httpapi.WriteJSON(w, status, body)
		}()
		started.check(s, r)
		if r.ContentLength > 0 || len(r.TransferEncoding) > 0 { // a body was declared
			body := &httpin.TrackedBody{ReadCloser: r.Body}
			r.Body = body
			defer body.GiveUp(w)
		}
		if err := httpapi.UnmountedPath(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if r.Method != http.MethodConnect && httpin.CleanPath(r.URL.Path) != r.URL.Path {
			s.writeError(w, r, fmt.Errorf("no such endpoint: %s %q; paths are not cleaned or redirected: %w", r.Method, r.URL.Path, ErrNotFound))
			return
		}
		mux.ServeHTTP(w, r)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.tel.Instrument(w, r, guarded)
	})
}
