package lifecycle

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fuzzMethods are the methods FuzzUnknownPaths sends, chosen by a byte.
var fuzzMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "BREW"}

// FuzzUnknownPaths serves arbitrary paths and methods, without a key,
// through the API's handler: every answer is a JSON 401, 404 or 405 (200
// for the OpenAPI document), never a redirect or a 500, and comes at once;
// and a 404's mount hint names exactly the first suffix of the path that a
// route serves, as asking the handler about every suffix (the quadratic
// search httpapi.MountHint replaced) would.
func FuzzUnknownPaths(f *testing.F) {
	seeds := []struct {
		method uint8
		path   string
	}{
		{0, "/tasks"}, {0, "/nope"}, {0, "/api/tasks"}, {2, "/a/b/tasks/tsk_1/submit"}, {0, "/x/openapi.yaml"}, {1, "/x/openapi.yaml"},
		{2, "/p/event-subscriptions/whs_1/deliveries/dlv_1/retry"}, {4, "/tasks/tsk_1"}, {5, "/p/api-keys/key_1"},
		{0, "//tasks"}, {0, "/tasks/../tasks"}, {0, "tasks"}, {0, ""}, {0, "/tasks/"}, {7, "/a/../tasks"}, {8, "/q/tasks"},
		{0, "/a/tasks//x"}, {0, "/%2e%2e/tasks"}, {0, "/\x00/tasks"}, {0, "/\xff/tasks/tsk_\xff"}, {0, strings.Repeat("/x", 200) + "/tasks"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path)
	}
	s, _, _ := newMemService(f, func(c *Config) { c.Authenticator = nil }) // the keys, never asked for: no request sends one
	h := s.Handler()
	serve := func(t *testing.T, method, path string) *httptest.ResponseRecorder {
		req := (&http.Request{Method: method, URL: &url.URL{Path: path}, RequestURI: path, Host: "tasks.example.com",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody}).WithContext(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	f.Fuzz(func(t *testing.T, m uint8, path string) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		start := time.Now()
		rec := serve(t, method, path)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%s %q (%d bytes) took %s", method, path, len(path), d)
		}
		switch rec.Code {
		case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed:
		case http.StatusOK:
			if rec.Header().Get("Content-Type") != "application/yaml" {
				t.Fatalf("%s %q: 200 %s", method, path, rec.Header().Get("Content-Type"))
			}
			return
		default:
			t.Fatalf("%s %q: %d %s", method, path, rec.Code, rec.Body)
		}
		var body ErrorBody
		if rec.Header().Get("Content-Type") != "application/json" || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code == "" {
			t.Fatalf("%s %q: %d %q %s", method, path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		// A miss of the routes says "No such endpoint: METHOD PATH" and the
		// hint, if any; misses of the guard (a path to clean, a path without
		// a leading slash) say something else.
		prefix := asJSON("No such endpoint: " + method + " " + path)
		rest, ok := strings.CutPrefix(body.Error.Message, prefix)
		if rec.Code != http.StatusNotFound || !ok || strings.HasPrefix(rest, ";") && !strings.HasPrefix(rest, "; the API serves ") ||
			strings.Count(path, "/") > 64 {
			return // not a route's miss, or too many suffixes to ask the handler about
		}
		// The hint the quadratic search would give: the first suffix
		// starting at a slash that a route serves under this method.
		want := "."
		for i := 1; i < len(path); i++ {
			if path[i] != '/' {
				continue
			}
			if code := serve(t, method, path[i:]).Code; code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
				want = asJSON(fmt.Sprintf("; the API serves %s under its mount point: mount the handler with http.StripPrefix(%q, svc.Handler()).",
					path[i:], path[:i]))
				break
			}
		}
		if rest != want {
			t.Fatalf("%s %q: %q\nwant it to end with %q", method, path, body.Error.Message, want)
		}
	})
}

// asJSON returns s as it reads after a JSON round trip: each byte of
// invalid UTF-8 replaced.
func asJSON(s string) string {
	raw, _ := json.Marshal(s)
	var out string
	json.Unmarshal(raw, &out)
	return out
}
