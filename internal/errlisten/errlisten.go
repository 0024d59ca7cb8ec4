// Package errlisten rewrites the error answers that net/http writes by
// itself, before any handler runs (to a request it cannot parse, headers
// over http.Server.MaxHeaderBytes, an unsupported transfer encoding, an
// Expect other than 100-continue, plain HTTP on a TLS port), into answers
// whose body a caller renders, as they are written to the connection. It
// sees plain HTTP/1.x only; everything else passes through unchanged.
package errlisten

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Render returns the body of the answer to write instead of net/http's
// own, for its status code and detail: what net/http said after the
// status ("invalid header value", say), one of the details this package
// gives (see [Rewrite]), or "" when it said nothing. The body is served as
// application/json.
type Render func(code int, detail string) []byte

// Wrap returns ln with every connection it accepts rewriting net/http's
// own error answers through render.
func Wrap(ln net.Listener, render Render) net.Listener {
	return listener{ln, render}
}

type listener struct {
	net.Listener
	render Render
}

// Accept implements net.Listener.
func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{c, l.render}, nil
}

// conn rewrites net/http's own error answers as they are written.
type conn struct {
	net.Conn
	render Render
}

// Write implements net.Conn.
func (c *conn) Write(p []byte) (int, error) {
	if out, ok := Rewrite(p, c.render); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Unwrap returns the connection under one that Wrap's listener accepted,
// or c itself, so that a handler that takes its connection over writes to
// the socket itself (one writev per write).
func Unwrap(c net.Conn) net.Conn {
	if ec, ok := c.(*conn); ok {
		return ec.Conn
	}
	return c
}

// netHTTPErrorHeaders are the headers of every error net/http writes
// before a handler runs (server.go, conn.serve).
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Details given to Render for answers whose status line says nothing.
const (
	// DetailExpect is the detail of the 417 to an Expect other than
	// 100-continue.
	DetailExpect = "only Expect: 100-continue is supported"
	// DetailPlainHTTP is the detail of the 400 to plain HTTP on a TLS port.
	DetailPlainHTTP = "plain HTTP sent to an HTTPS server"
)

// Rewrite returns the answer to write instead of p, with the body render
// gives, when p is a whole answer written by net/http itself: "HTTP/1.1
// 400 Bad Request: invalid header value" with only the headers above, the
// 417 of an unknown Expect (empty, no Content-Type), or the 400 to plain
// HTTP on a TLS port. Answers written through a ResponseWriter always
// carry a Date header, so they never match.
func Rewrite(p []byte, render Render) ([]byte, bool) {
	if len(p) < 13 || !bytes.HasPrefix(p, []byte("HTTP/1.")) {
		return nil, false
	}
	code, err := strconv.Atoi(string(p[9:12]))
	if err != nil {
		return nil, false
	}
	var detail string
	switch {
	case bytes.Contains(p, []byte(netHTTPErrorHeaders)):
		line := string(p[:bytes.Index(p, []byte(netHTTPErrorHeaders))])
		if strings.Contains(line, "\r\n") {
			return nil, false // other headers: not net/http's own
		}
		if _, after, ok := strings.Cut(line[13:], ": "); ok {
			detail = after
		}
	case code == http.StatusExpectationFailed && !bytes.Contains(p, []byte("\r\nContent-Type:")):
		detail = DetailExpect
	case bytes.HasSuffix(p, []byte("\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")):
		detail = DetailPlainHTTP
	default:
		return nil, false
	}
	body := render(code, detail)
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(code) + " " + http.StatusText(code) + "\r\n")
	out.WriteString("Content-Type: application/json\r\nConnection: close\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	out.Write(body)
	return out.Bytes(), true
}
