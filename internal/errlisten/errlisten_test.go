package errlisten

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// render is the Render of the tests: the code and detail, quoted.
func render(code int, detail string) []byte {
	return fmt.Appendf(nil, `{"code":%d,"detail":%q}`, code, detail)
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		ok       bool
		code     int
		detail   string
	}{
		{"net/http's 400 with a detail", "HTTP/1.1 400 Bad Request: invalid header value" + netHTTPErrorHeaders + "400 Bad Request: invalid header value", true, 400, "invalid header value"},
		{"net/http's 400 without one", "HTTP/1.1 400 Bad Request" + netHTTPErrorHeaders + "400 Bad Request", true, 400, ""},
		{"net/http's 431", "HTTP/1.1 431 Request Header Fields Too Large" + netHTTPErrorHeaders + "431 Request Header Fields Too Large", true, 431, ""},
		{"an unknown Expect", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\n\r\n", true, 417, DetailExpect},
		{"plain HTTP to TLS", "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n", true, 400, DetailPlainHTTP},
		{"a handler's answer", "HTTP/1.1 400 Bad Request\r\nDate: Thu, 26 Nov 2026 10:00:00 GMT" + netHTTPErrorHeaders + "x", false, 0, ""},
		{"a handler's 417", "HTTP/1.1 417 Expectation Failed\r\nContent-Type: application/json\r\n\r\n{}", false, 0, ""},
		{"a 200", "HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 10:00:00 GMT\r\nContent-Length: 0\r\n\r\n", false, 0, ""},
		{"a body", `{"data":[]}`, false, 0, ""},
		{"too short", "HTTP/1.1 40", false, 0, ""},
		{"no code", "HTTP/1.1 abc Bad" + netHTTPErrorHeaders, false, 0, ""},
	}
	for _, tt := range tests {
		out, ok := Rewrite([]byte(tt.in), render)
		if ok != tt.ok {
			t.Errorf("%s: rewritten %v, want %v", tt.name, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
		if err != nil {
			t.Fatalf("%s: %v in %q", tt.name, err, out)
		}
		body, _ := io.ReadAll(resp.Body)
		want := string(render(tt.code, tt.detail))
		if resp.StatusCode != tt.code || resp.Header.Get("Content-Type") != "application/json" || !resp.Close || string(body) != want {
			t.Errorf("%s: %q, want %d with %s", tt.name, out, tt.code, want)
		}
	}
}

// Through a server: net/http's own answers are rewritten, a handler's
// pass unchanged, and Unwrap finds the socket under a connection.
func TestWrap(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unwrapped := make(chan bool, 1)
	srv := &http.Server{
		Handler:        http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }),
		MaxHeaderBytes: 1 << 10,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				_, isTCP := Unwrap(c).(*net.TCPConn)
				unwrapped <- isTCP && Unwrap(c) != c
			}
		},
	}
	go srv.Serve(Wrap(ln, render))
	t.Cleanup(func() { srv.Close() })
	exchange := func(raw string) (*http.Response, string) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	if resp, body := exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 || body != "hello" {
		t.Errorf("a handler's answer: %d %q", resp.StatusCode, body)
	}
	if !<-unwrapped {
		t.Error("Unwrap did not return the TCP connection under the wrapper")
	}
	tests := []struct {
		raw    string
		code   int
		detail string
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, ""}, // net/http says nothing more
		{"GET / HTTP/1.1\r\n\r\n", 400, "missing required Host header"},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, ""},
		{"POST / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nContent-Length: 2\r\n\r\n{}", 417, DetailExpect},
		{"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431, ""},
	}
	for _, tt := range tests {
		resp, body := exchange(tt.raw)
		<-unwrapped
		if want := string(render(tt.code, tt.detail)); resp.StatusCode != tt.code || body != want {
			t.Errorf("%q: %d %s, want %d %s", tt.raw[:min(len(tt.raw), 40)], resp.StatusCode, body, tt.code, want)
		}
	}
	if c := (&net.TCPConn{}); Unwrap(c) != c {
		t.Error("Unwrap changed a connection not wrapped")
	}
}
