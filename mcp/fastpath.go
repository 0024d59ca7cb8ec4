package mcp

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/jsonenc"
)

// The fast path serves the calls of the read-only tools that answer at
// once (get_task and the other reads, not wait_for_task_change) in front
// of the SDK's transport: the SDK decodes each message several times,
// with a 32 KiB buffer per decoding, marshals the result twice and hands
// it between goroutines, which costs several times the call itself. A POST
// that carries a single JSON-RPC request of method tools/call of one of
// these tools, in a live session of the request's principal, with a
// protocol version of the Streamable HTTP transport this server speaks,
// is answered here with a single JSON response (Content-Type
// application/json, which the transport allows a server to answer a POST
// with), the same JSON-RPC response the SDK would send in its event
// stream. Anything else (batches, notifications, other methods and tools,
// unknown sessions, other principals, arguments the scan below does not
// take, malformed bodies) goes to the SDK as it came.

// maxFastBody is the largest body the fast path parses; a larger one goes
// to the SDK.
const maxFastBody = 16 << 10

// fastVersions are the protocol versions the fast path answers: the
// versions of the Streamable HTTP transport with sessions.
var fastVersions = map[string]bool{"2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// fastCall is a tools/call request the fast path serves.
type fastCall struct {
	id   []byte // the request's ID, as sent: an integer, or a plain string
	tool *tool
	args json.RawMessage // nil when the call has none
}

// serveFast answers r, whose body (read already by the Handler, within
// the API's limits) is body, on the fast path when it can, and says
// whether it did. When it did not, r goes to the SDK as it came.
func (h *Handler) serveFast(w http.ResponseWriter, r *http.Request, body []byte, p *lifecycle.Principal, s *liveSession) bool {
	if !fastVersions[r.Header.Get("Mcp-Protocol-Version")] || len(r.Header.Values("Last-Event-ID")) > 0 ||
		!isJSON(r.Header.Get("Content-Type")) || !acceptsBoth(r.Header.Values("Accept")) || !hostAllowed(r) ||
		len(body) > maxFastBody {
		return false
	}
	c, ok := h.parseFastCall(body)
	if !ok {
		return false
	}
	s.markUsed(h.live.timeout)
	raw, result, isError := c.tool.invoke(r.Context(), p, c.args)
	out := make([]byte, 0, max(2*len(raw), len(result))+96+len(c.id))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, c.id...)
	out = append(out, `,"result":`...)
	if result != nil {
		out = append(out, result...)
	} else {
		out = appendToolResult(out, raw, isError)
	}
	out = append(out, '}')
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache, no-transform")
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Mcp-Session-Id", s.ss.ID())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}

// appendToolResult appends the result of a call as the SDK encodes a
// CallToolResult: the answer as text content and, unless it is an error,
// as structured content, each HTML-escaped as encoding/json.Marshal does.
func appendToolResult(out, raw []byte, isError bool) []byte {
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = jsonenc.AppendString(out, raw, true)
	out = append(out, `}]`...)
	if isError {
		return append(out, `,"isError":true}`...)
	}
	out = append(out, `,"structuredContent":`...)
	var buf bytes.Buffer
	json.HTMLEscape(&buf, raw)
	out = append(out, buf.Bytes()...)
	return append(out, '}')
}

// parseFastCall scans a body for a single tools/call request of a tool
// the fast path serves, with nothing else in it.
func (h *Handler) parseFastCall(body []byte) (fastCall, bool) {
	var c fastCall
	if !json.Valid(body) {
		return c, false
	}
	var version, method, params bool
	var paramsRaw []byte
	ok := scanObject(body, func(key string, v []byte) bool {
		switch key {
		case "jsonrpc":
			if version {
				return false
			}
			version = string(v) == `"2.0"`
			return version
		case "id":
			if c.id != nil || !plainID(v) {
				return false
			}
			c.id = v
		case "method":
			if method {
				return false
			}
			method = string(v) == `"tools/call"`
			return method
		case "params":
			if params {
				return false
			}
			params, paramsRaw = true, v
		default:
			return false
		}
		return true
	})
	if !ok || !version || !method || !params || c.id == nil {
		return c, false
	}
	var named bool
	ok = scanObject(paramsRaw, func(key string, v []byte) bool {
		switch key {
		case "name":
			if named {
				return false
			}
			name, plain := plainString(v)
			t := h.toolSet[name]
			if !plain || t == nil || !t.def.readOnly || t.def.waits {
				return false
			}
			named, c.tool = true, t
		case "arguments":
			if c.args != nil {
				return false
			}
			c.args = v
		default:
			return false // _meta (a progress token) and anything else: the SDK's
		}
		return true
	})
	return c, ok && named
}

// scanObject calls member for each member of the JSON object b (valid
// JSON), with its key and its value's bytes, until member returns false.
// It returns false when b is not an object, a key is not a plain string
// (one without escapes), or member returned false.
func scanObject(b []byte, member func(key string, v []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		end := skipValue(b, i)
		key, plain := plainString(b[i:end])
		if !plain {
			return false
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		end = skipValue(b, i)
		if !member(key, b[i:end]) {
			return false
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just after the JSON value at i of valid
// JSON.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && !strings.ContainsRune(" \t\r\n,}]", rune(b[i])) {
		i++
	}
	return i
}

// skipString returns the index just after the JSON string at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// plainString returns the text of a JSON string without escapes, control
// characters or non-ASCII, which is the same text as it is sent.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c >= 0x7F || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// plainID says whether a request ID is one the SDK sends back as it came:
// an integer of at most 15 digits, or a plain string without the
// characters encoding/json might escape.
func plainID(v []byte) bool {
	if len(v) > 0 && v[0] == '"' {
		if _, ok := plainString(v); !ok {
			return false
		}
		return !bytes.ContainsAny(v, "<>&")
	}
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(v) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isJSON says whether a Content-Type is application/json.
func isJSON(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(base), "application/json")
}

// acceptsBoth says whether the Accept headers name both application/json
// and text/event-stream, as the transport requires of a POST.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	return jsonOK && streamOK
}

// hostAllowed says whether the SDK's protection against DNS rebinding
// lets r through: a request to a loopback address must name a loopback
// host. When it does not, the SDK refuses it.
func hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return true
	}
	return isLoopback(r.Host)
}

// isLoopback says whether a host (with or without its port) is a loopback
// address or localhost, as the SDK's check has it.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
