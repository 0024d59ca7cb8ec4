package lifecycle

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// JSONErrorListener wraps ln so that the answers net/http writes by itself,
// before any handler runs, carry the API's JSON error body instead of plain
// text: to a request it cannot parse (a control character in a header value
// or the path, a malformed request line) 400 validation_error, to headers
// over http.Server.MaxHeaderBytes 431 payload_too_large, to an unsupported
// transfer encoding 501 not_implemented, to an Expect other than
// 100-continue 417 validation_error. Serve the API's http.Server on the
// returned listener:
//
//	ln, err := net.Listen("tcp", addr)
//	...
//	srv.Serve(lifecycle.JSONErrorListener(ln))
//
// It sees plain HTTP/1.x only: behind TLS, wrap the listener that
// tls.NewListener returns (net/http then serves HTTP/1.1 only), or
// terminate TLS in front of the server. Everything else passes through
// unchanged, including the connections event streams take over.
func JSONErrorListener(ln net.Listener) net.Listener {
	return jsonErrorListener{ln}
}

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{c}, nil
}

// jsonErrorConn rewrites net/http's own error answers as they are written.
type jsonErrorConn struct{ net.Conn }

// Write implements net.Conn.
func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if out, ok := rewriteServerError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// unwrapConn returns the connection under a jsonErrorConn, so that a
// stream that takes its connection over writes to the socket itself (one
// writev per wake-up).
func unwrapConn(c net.Conn) net.Conn {
	if jc, ok := c.(*jsonErrorConn); ok {
		return jc.Conn
	}
	return c
}

// netHTTPErrorHeaders are the headers of every error net/http writes
// before a handler runs (server.go, conn.serve).
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// rewriteServerError returns the JSON form of p when p is a whole answer
// written by net/http itself: "HTTP/1.1 400 Bad Request: invalid header
// value" with only the headers above, the 417 of an unknown Expect (empty,
// no Content-Type), or the 400 to plain HTTP on a TLS port. Answers
// written through a ResponseWriter always carry a Date header, so they
// never match.
func rewriteServerError(p []byte) ([]byte, bool) {
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
		detail = "only Expect: 100-continue is supported"
	case bytes.HasSuffix(p, []byte("\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")):
		detail = "plain HTTP sent to an HTTPS server"
	default:
		return nil, false
	}
	var obj ErrorObject
	switch code {
	case http.StatusRequestHeaderFieldsTooLarge:
		obj = ErrorObject{Code: "payload_too_large", Message: "The request's headers are too large."}
	case http.StatusNotImplemented:
		obj = ErrorObject{Code: "not_implemented", Message: "The request's transfer encoding is not supported."}
	default:
		field := "request"
		if code == http.StatusExpectationFailed {
			field = "Expect"
		}
		if detail == "" {
			detail = "is malformed"
		}
		obj = ErrorObject{Code: "validation_error", Message: "The request is malformed; error.details.fields says how.",
			Details: &ErrorDetails{Fields: []FieldError{{Field: field, Reason: detail}}}}
	}
	body := encodeJSON(ErrorBody{Error: obj})
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(code) + " " + http.StatusText(code) + "\r\n")
	out.WriteString("Content-Type: application/json\r\nConnection: close\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	out.Write(body)
	return out.Bytes(), true
}
