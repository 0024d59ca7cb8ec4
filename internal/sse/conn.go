// Package sse writes server-sent event streams: it takes the connection
// of an HTTP/1.x stream over from net/http, writes with write deadlines in
// one system call per batch, sends heartbeats, and runs the loop of a
// stream that replays stored items, then follows a shared buffer of live
// ones (a Feed) until it ends. An idle stream parks (see Parker): it waits
// with one goroutine, reading its connection, and a few hundred bytes.
//
// It knows nothing of what the items are: a Feed turns them into frames.
package sse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrWrite marks failures to write to the client.
var ErrWrite = errors.New("write to the client")

// SetHeaders sets the headers every event stream response carries: its
// content type, no caching, and no buffering by reverse proxies.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell reverse proxies not to buffer
}

// LastEventID returns where a client resumes a stream: the Last-Event-ID
// header its EventSource sends on reconnecting or, when it has none, the
// query parameter param of the first request (query is the request's
// parsed query). "" when neither is set.
func LastEventID(h http.Header, query url.Values, param string) string {
	if id := strings.TrimSpace(h.Get("Last-Event-ID")); id != "" {
		return id
	}
	return strings.TrimSpace(query.Get(param))
}

// Conn is where a stream writes: net/http's ResponseWriter, or the
// connection itself once taken over (TakeOver). Every write is flushed
// within a write timeout.
type Conn struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	conn     net.Conn           // the connection once taken over, else nil
	cancel   context.CancelFunc // cancels the context TakeOver returned
	head     http.Header        // the headers to send on a taken-over connection
	http10   bool               // the taken-over request was HTTP/1.0
	timeout  time.Duration      // the write timeout
	deadline time.Time          // the write deadline last set, by the wall clock
}

// NewConn returns the Conn of w, whose writes time out after timeout.
func NewConn(w http.ResponseWriter, timeout time.Duration) Conn {
	return Conn{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Header returns the headers of the response. Set them before TakeOver.
func (c *Conn) Header() http.Header { return c.w.Header() }

// TakeOver takes an HTTP/1.x connection from net/http, so that the stream
// can be served from a goroutine of its own and the handler return:
// net/http then lets go of what it holds per connection (its buffers, its
// background reader, the handler's deep stack), and an idle stream costs a
// few KiB instead of about 28. unwrap, if not nil, returns the connection
// to write to in place of the one net/http hands over (the socket itself:
// one writev per batch).
//
// It returns a context cancelled when parent is done, when the client
// closes the connection, or by Close, which the caller must call once the
// stream has ended. Bytes the client sends after its request (a pipelined
// request) are discarded: an event stream is the last response on its
// connection. It reports false, having done nothing, for HTTP/2 or when
// the ResponseWriter (wrapped by middleware) cannot be hijacked; the
// stream is then served inside the handler.
func (c *Conn) TakeOver(r *http.Request, parent context.Context, unwrap func(net.Conn) net.Conn) (context.Context, bool) {
	if !c.hijack(r, unwrap) {
		return nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	c.cancel = cancel
	go watchClient(c.conn, cancel)
	return ctx, true
}

// hijack takes the connection over from net/http, as TakeOver does, with
// no context and no goroutine watching the client: the caller reads the
// connection itself (see Stream.park).
func (c *Conn) hijack(r *http.Request, unwrap func(net.Conn) net.Conn) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	head := c.w.Header().Clone() // the ResponseWriter is net/http's again once hijacked
	conn, _, err := c.rc.Hijack()
	if err != nil {
		return false
	}
	c.head = head
	// Let go of net/http's response and connection (their buffers), which
	// would otherwise stay reachable for as long as the stream lives.
	c.w, c.rc = nil, nil
	if unwrap != nil {
		conn = unwrap(conn)
	}
	c.conn, c.http10 = conn, r.ProtoMinor == 0
	return true
}

// Close cancels the context TakeOver returned, if any, and closes the
// connection. It does nothing to a stream served inside the handler.
func (c *Conn) Close() error {
	if c.conn == nil {
		return nil
	}
	if c.cancel != nil {
		c.cancel()
	}
	return c.conn.Close()
}

// watchClient reads a taken-over connection until the client closes it (or
// the stream does), then cancels the stream. Clients of an event stream
// send nothing after their request; whatever they send is discarded.
func watchClient(conn net.Conn, cancel context.CancelFunc) {
	var b [16]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			cancel()
			return
		}
	}
}

// WriteHead sends the status (200) and headers of the stream.
func (c *Conn) WriteHead() error {
	if c.conn == nil {
		c.w.WriteHeader(http.StatusOK)
		return c.Write()
	}
	h := c.head
	c.head = nil // written once; not kept for as long as the stream lives
	// A taken-over connection gets the head net/http would have written,
	// with the headers middleware set, and a body that ends when the
	// connection does.
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Connection", "close")
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	var head bytes.Buffer
	if c.http10 {
		head.WriteString("HTTP/1.0 200 OK\r\n")
	} else {
		head.WriteString("HTTP/1.1 200 OK\r\n")
	}
	h.Write(&head) // sorted, and sanitised of line breaks
	head.WriteString("\r\n")
	return c.Write(head.Bytes())
}

// Write writes chunks and flushes them, within the write timeout. Its
// errors match ErrWrite, and http.ErrNotSupported when the ResponseWriter
// cannot flush.
func (c *Conn) Write(chunks ...[]byte) error {
	// A socket deadline is wall-clock time. It also lifts any WriteTimeout
	// of the host's http.Server. Setting it costs a timer update, so it is
	// renewed only once half spent: a write that blocks is cut off after
	// half to all of the timeout.
	if now := time.Now(); c.deadline.Sub(now) < c.timeout/2 {
		c.deadline = now.Add(c.timeout)
		var err error
		if c.conn != nil {
			err = c.conn.SetWriteDeadline(c.deadline)
		} else {
			err = c.rc.SetWriteDeadline(c.deadline)
		}
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("%w: set deadline: %w", ErrWrite, err)
		}
	}
	if c.conn != nil {
		// One system call for every chunk (writev on TCP).
		bufs := net.Buffers(chunks)
		if _, err := bufs.WriteTo(c.conn); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
		return nil
	}
	for _, b := range chunks {
		if _, err := c.w.Write(b); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
	}
	if err := c.rc.Flush(); err != nil {
		return fmt.Errorf("%w: flush: %w", ErrWrite, err)
	}
	return nil
}
