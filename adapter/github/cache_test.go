package github

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// answerOf returns a 200 answer with an ETag and body.
func answerOf(etag string, body []byte) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {etag}}, Body: io.NopCloser(bytes.NewReader(body))}
}

// TestETagCacheBounds: the cache keeps at most cacheEntries answers, the
// least recently used dropped first, and hands on a body too large to
// keep whole without keeping it.
func TestETagCacheBounds(t *testing.T) {
	t.Parallel()
	c := newETagCache()
	for i := range cacheEntries + 1 {
		if err := c.keep(fmt.Sprintf("k%d", i), answerOf(fmt.Sprintf(`"e%d"`, i), []byte("{}"))); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue
		}
		c.get("k0") // k0 stays the most recently used
	}
	if c.get("k0") == nil || c.get("k1") != nil || c.get(fmt.Sprintf("k%d", cacheEntries)) == nil {
		t.Errorf("after %d answers: k0 kept %v, k1 dropped %v", cacheEntries+1, c.get("k0") != nil, c.get("k1") == nil)
	}
	big := bytes.Repeat([]byte("x"), cacheEntryBytes+10)
	resp := answerOf(`"big"`, big)
	if err := c.keep("big", resp); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if !bytes.Equal(got, big) || c.get("big") != nil {
		t.Errorf("a large body: read back %d bytes of %d, kept %v; want all of it, not kept", len(got), len(big), c.get("big") != nil)
	}
	resp = answerOf(`"small"`, []byte(`{"a":1}`))
	if err := c.keep("small", resp); err != nil {
		t.Fatal(err)
	}
	kept := c.get("small")
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/x", nil)
	out := kept.answer(req, &http.Response{StatusCode: http.StatusNotModified, Header: http.Header{"X-Ratelimit-Remaining": {"41"}}})
	body, _ := io.ReadAll(out.Body)
	if out.StatusCode != http.StatusOK || string(body) != `{"a":1}` || out.Header.Get("X-RateLimit-Remaining") != "41" {
		t.Errorf("answer for a 304 = %d %s %v", out.StatusCode, body, out.Header)
	}
}

// TestETagsKeptPerToken: GitHub's ETags are per token. An answer kept for
// one Authorization is not sent back, as If-None-Match, with another (an
// App's renewed installation token); each keeps its own; the token is
// not in the cache's keys.
func TestETagsKeptPerToken(t *testing.T) {
	t.Parallel()
	var sent []string // If-None-Match of each request
	tr := &hostTransport{
		clock: fakeclock.New(time.Now()), budget: hostbudget.New(0.5, time.Now), cache: newETagCache(),
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, r.Header.Get("If-None-Match"))
			etag := `"` + r.Header.Get("Authorization")[len("Bearer "):] + `"`
			if r.Header.Get("If-None-Match") == etag {
				return &http.Response{StatusCode: http.StatusNotModified, Header: http.Header{"Etag": {etag}}, Body: http.NoBody, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Etag": {etag}}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
		}),
	}
	get := func(token string) {
		req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/o/r/pulls/1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("ghs_first")
	get("ghs_renewed")
	get("ghs_first")
	get("ghs_renewed")
	want := []string{"", "", `"ghs_first"`, `"ghs_renewed"`}
	if !slices.Equal(sent, want) {
		t.Errorf("If-None-Match sent: %q, want %q", sent, want)
	}
	tr.cache.mu.Lock()
	defer tr.cache.mu.Unlock()
	for k := range tr.cache.byKey {
		if strings.Contains(k, "ghs_") {
			t.Errorf("a cache key holds the token: %q", k)
		}
	}
}
