package lifecycle

import (
	"net"

	"github.com/tasklifecycle/lifecycle/internal/errlisten"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
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
	return errlisten.Wrap(ln, httpapi.NetHTTPErrorBody)
}

// unwrapConn returns the connection under one JSONErrorListener accepted,
// so that a stream that takes its connection over writes to the socket
// itself (one writev per wake-up).
func unwrapConn(c net.Conn) net.Conn { return errlisten.Unwrap(c) }
