package github

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The bounds of the conditional-request cache: the answers of this many
// URLs are kept, the least recently used dropped first, up to this many
// bytes of bodies in all; a larger body is not kept.
const (
	cacheEntries    = 2048
	cacheBytes      = 32 << 20
	cacheEntryBytes = 1 << 20
)

// etagCache keeps, per GET request, the last answer GitHub gave with an
// ETag, so that the request can be made conditional: GitHub answers 304
// Not Modified, which its rate limit does not charge, when nothing
// changed, and the kept body stands for the answer. It is safe for
// concurrent use.
type etagCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *cachedAnswer, most recently used first
	byKey map[string]*list.Element
}

// cachedAnswer is an answer kept for a request.
type cachedAnswer struct {
	key    string
	etag   string
	status int
	header http.Header
	body   []byte
}

func newETagCache() *etagCache {
	return &etagCache{order: list.New(), byKey: make(map[string]*list.Element)}
}

// cacheKey returns the key under which the answer to req is kept, or ""
// for a request that is not made conditional: anything but a plain GET.
// Accept is part of it: go-github asks some endpoints for a media type of
// their own. So is who asks: GitHub's ETags are per token (its answers
// vary on Authorization), and an App's installation token changes every
// hour; the key holds a digest of the Authorization header, never the
// token.
func cacheKey(req *http.Request) string {
	if req.Method != http.MethodGet || req.Header.Get("Range") != "" || req.Header.Get("If-None-Match") != "" {
		return ""
	}
	who := sha256.Sum256([]byte(req.Header.Get("Authorization")))
	return req.URL.String() + "\n" + req.Header.Get("Accept") + "\n" + hex.EncodeToString(who[:12])
}

// get returns the answer kept for key, or nil.
func (c *etagCache) get(key string) *cachedAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedAnswer)
}

// keep reads resp's body, leaves it readable again, and keeps the answer
// under key unless it is too large.
func (c *etagCache) keep(key string, resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, cacheEntryBytes+1))
	if err != nil {
		resp.Body.Close()
		return err
	}
	if len(body) > cacheEntryBytes {
		// Too large to keep: hand it on whole, read as it comes.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return nil
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	a := &cachedAnswer{key: key, etag: resp.Header.Get("ETag"), status: resp.StatusCode, header: resp.Header.Clone(), body: body}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byKey[key]; ok {
		c.size -= len(old.Value.(*cachedAnswer).body)
		c.order.Remove(old)
	}
	c.byKey[key] = c.order.PushFront(a)
	c.size += len(body)
	for c.order.Len() > cacheEntries || c.size > cacheBytes {
		last := c.order.Back()
		old := last.Value.(*cachedAnswer)
		c.order.Remove(last)
		delete(c.byKey, old.key)
		c.size -= len(old.body)
	}
	return nil
}

// answer returns the kept answer as GitHub's answer to req, whose 304
// notModified confirmed it: the kept status, headers and body, with the
// rate-limit headers of the 304, which are current.
func (a *cachedAnswer) answer(req *http.Request, notModified *http.Response) *http.Response {
	h := a.header.Clone()
	for k, vs := range notModified.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Ratelimit-") || k == "Date" || k == "Etag" {
			h[k] = vs
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", a.status, http.StatusText(a.status)),
		StatusCode:    a.status,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
		TLS:           notModified.TLS,
	}
}
