package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// countingRouter counts the lookups of a router and the bytes of the paths
// it was asked about.
type countingRouter struct {
	mux            *http.ServeMux
	lookups, bytes int
}

func (c *countingRouter) Handler(r *http.Request) (http.Handler, string) {
	c.lookups++
	c.bytes += len(r.URL.Path)
	return c.mux.Handler(r)
}

// MountHint asks the router about the suffixes of the path's last depth
// segments only: at most depth lookups, over at most depth times the
// path's length, however many segments it has; and it still finds a route
// at the end of a long path.
func TestMountHintWorkIsBounded(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux.Handle("GET /tasks/{id}", noop)
	mux.Handle("POST /event-subscriptions/{id}/deliveries/{deliveryId}/retry", noop)
	mux.Handle("/", noop)
	const depth = 5
	long := strings.Repeat("/x", 30000)
	tests := []struct {
		name, method, path, want string
	}{
		{"no route", "GET", long, ""},
		{"a route at the end", "GET", long + "/tasks/tsk_1", "/tasks/tsk_1 under its mount point"},
		{"the deepest route at the end", "POST", long + "/event-subscriptions/w/deliveries/d/retry", "/event-subscriptions/w/deliveries/d/retry under its mount point"},
		{"a route under another method", "POST", long + "/tasks/tsk_1", ""},
		{"a short path", "GET", "/a/tasks/tsk_1", `http.StripPrefix("/a", svc.Handler())`},
		{"the root", "GET", "/", ""},
	}
	for _, tt := range tests {
		r := &countingRouter{mux: mux}
		req := &http.Request{Method: tt.method, Host: "x", URL: &url.URL{Path: tt.path}}
		got := MountHint(r, depth, req)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: hint %.200q, want one with %q", tt.name, got, tt.want)
		}
		if r.lookups > depth || r.bytes > depth*len(tt.path) {
			t.Errorf("%s: %d lookups over %d bytes of a %d-byte path, want at most %d lookups", tt.name, r.lookups, r.bytes, len(tt.path), depth)
		}
	}
}
