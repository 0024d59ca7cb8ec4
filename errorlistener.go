package lifecycle

import (
	"net"
	"net/http"

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
	return errlisten.Wrap(ln, netHTTPErrorBody)
}

// unwrapConn returns the connection under one JSONErrorListener accepted,
// so that a stream that takes its connection over writes to the socket
// itself (one writev per wake-up).
func unwrapConn(c net.Conn) net.Conn { return errlisten.Unwrap(c) }

// netHTTPErrorBody is the API's error body for an answer net/http writes by
// itself, with its status code and what net/http said (see package
// errlisten).
func netHTTPErrorBody(code int, detail string) []byte {
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
	return httpapi.EncodeJSON(ErrorBody{Error: obj})
}
