package mcp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/tasklifecycle/lifecycle"
)

// This file keeps the API's promises at the Handler's entrance: the
// Origin check against DNS rebinding and cross-site requests, bodies read
// as the API reads its own, and the transport's errors in the API's JSON
// error shape.

// newOriginCheck returns the cross-origin protection of the Handler: net/http's
// CrossOriginProtection, which the SDK recommends wrapping its handler in,
// trusting the origins of allowed.
func newOriginCheck(allowed []string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range allowed {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("mcp: Config.AllowedOrigins: %w", err)
		}
	}
	return c, nil
}

// checkOrigin applies the cross-origin protection to r whatever its
// method: CrossOriginProtection lets every GET through, where the
// transport's notification stream is a GET. A request from a browser
// page of another origin (by Sec-Fetch-Site, or its Origin against its
// Host) is refused, unless its origin is among Config.AllowedOrigins;
// same-origin requests and clients that send no Origin (every client but
// a browser) pass.
func (h *Handler) checkOrigin(r *http.Request) error {
	probe := r
	if r.Method != http.MethodPost {
		probe = new(http.Request)
		*probe = *r
		probe.Method = http.MethodPost
	}
	if err := h.origins.Check(probe); err != nil {
		return fmt.Errorf("cross-origin request refused (Origin %q); a browser page may reach this server only from its own origin or one of its allowed origins: %w",
			r.Header.Get("Origin"), lifecycle.ErrCSRF)
	}
	return nil
}

// readBody reads the body of a POST through the Service's body reader
// (the API's size, shared budget and read deadline) before the fast path
// or the SDK sees it, and gives it back as r's body. The budget's share
// is held until the body has been read to its end or done is called.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (raw []byte, done func(), err error) {
	raw, release, err := h.svc.ReadBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	done = func() { once.Do(release) }
	r.Body = &bufferedBody{Reader: bytes.NewReader(raw), eof: done}
	r.ContentLength = int64(len(raw))
	return raw, done, nil
}

// bufferedBody is a request body read already, which gives back its share
// of the decoding budget once read to its end.
type bufferedBody struct {
	*bytes.Reader
	eof func()
}

func (b *bufferedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.eof()
	}
	return n, err
}

// Close implements io.Closer.
func (b *bufferedBody) Close() error { return nil }

// errorShaper stands between the SDK's transport and the client: an error
// the transport answers in plain text (http.Error) is answered in the API's
// JSON error shape instead, with the same status (see sdkError). Anything
// else passes through as written.
type errorShaper struct {
	http.ResponseWriter
	started bool
	status  int // the plain-text error's status; 0: none
	text    bytes.Buffer
}

// maxErrorText bounds the text of an error of the transport kept.
const maxErrorText = 1024

func (e *errorShaper) WriteHeader(code int) {
	if e.started {
		return
	}
	e.started = true
	if code >= 400 && strings.HasPrefix(e.Header().Get("Content-Type"), "text/plain") {
		e.status = code
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorShaper) Write(b []byte) (int, error) {
	if !e.started {
		e.WriteHeader(http.StatusOK)
	}
	if e.status != 0 {
		if room := maxErrorText - e.text.Len(); room > 0 {
			e.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return e.ResponseWriter.Write(b)
}

// Flush flushes what passes through.
func (e *errorShaper) Flush() {
	if e.status == 0 {
		_ = http.NewResponseController(e.ResponseWriter).Flush()
	}
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (e *errorShaper) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// finish answers the plain-text error the transport wrote, if any.
func (e *errorShaper) finish() {
	if e.status == 0 {
		return
	}
	status, body := sdkError(e.status, strings.TrimSpace(e.text.String()))
	hdr := e.Header()
	hdr.Del("X-Content-Type-Options")
	if status == http.StatusUnauthorized {
		hdr.Set("WWW-Authenticate", `Bearer realm="lifecycle"`)
	}
	lifecycle.WriteJSON(e.ResponseWriter, status, body)
}

// sdkError turns an error the SDK's transport answered in plain text into
// the API's status and body: the codes of the API's error table for the
// statuses it has (400 validation_error naming the header or body at
// fault, 403 csrf_failed for the transport's own protection against DNS
// rebinding, 404 not_found, 405 method_not_allowed, 409 conflict, 413
// payload_too_large), 415 validation_error of Content-Type, 500 internal.
// A session of another principal is answered as no session at all (404):
// whether a session ID exists is no business of anyone else.
func sdkError(status int, text string) (int, lifecycle.ErrorBody) {
	obj := func(code, msg string) lifecycle.ErrorBody {
		return lifecycle.ErrorBody{Error: lifecycle.ErrorObject{Code: code, Message: msg}}
	}
	invalid := func(field string) lifecycle.ErrorBody {
		b := obj("validation_error", "The request is invalid; error.details.fields lists every problem.")
		b.Error.Details = &lifecycle.ErrorDetails{Fields: []lifecycle.FieldError{{Field: field, Reason: text}}}
		return b
	}
	switch status {
	case http.StatusBadRequest:
		return status, invalid(faultyPart(text))
	case http.StatusUnsupportedMediaType:
		return status, invalid("Content-Type")
	case http.StatusForbidden:
		if text == "session user mismatch" {
			return http.StatusNotFound, obj("not_found", "No such MCP session for this API key; start one with initialize (a POST without Mcp-Session-Id).")
		}
		return status, obj("csrf_failed", text)
	case http.StatusNotFound:
		return status, obj("not_found", "No such MCP session ("+text+"); it ended or never was: start one with initialize (a POST without Mcp-Session-Id).")
	case http.StatusMethodNotAllowed:
		return status, obj("method_not_allowed", "Use POST, GET or DELETE on the MCP endpoint.")
	case http.StatusConflict:
		return status, obj("conflict", text)
	case http.StatusRequestEntityTooLarge:
		return status, obj("payload_too_large", text)
	case http.StatusUnauthorized:
		return status, obj("unauthorized", text)
	}
	if status >= 500 {
		return status, obj("internal", "The server failed to handle the request; it has been logged.")
	}
	return status, obj("validation_error", text)
}

// faultyPart names the part of a request a 400 of the transport is about.
func faultyPart(text string) string {
	for _, part := range []string{"Mcp-Session-Id", "Last-Event-ID", "Accept", "Content-Type"} {
		if strings.Contains(text, part) {
			return part
		}
	}
	if strings.Contains(text, "protocol version") {
		return "MCP-Protocol-Version"
	}
	return "body"
}
