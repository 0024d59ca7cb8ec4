package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// UnmountedPath returns the error of a path without a leading slash
// (http.StripPrefix given a prefix that ends with "/"), which the ServeMux
// would redirect outside the mount point, or nil.
func UnmountedPath(r *http.Request) error {
	if strings.HasPrefix(r.URL.Path, "/") {
		return nil
	}
	return fmt.Errorf("no such endpoint: %s %s; the handler got a path without a leading slash: "+
		"mount it with %s, without the trailing slash: %w", r.Method, r.URL.Path, stripPrefixFix(r), lifecycletype.ErrNotFound)
}

// Router finds the route of a request, as http.ServeMux.Handler does.
type Router interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// Probe returns the smallest request the router can match: method and path,
// on r's host. Unlike r.Clone it copies no header.
func Probe(r *http.Request, method, path string) *http.Request {
	return &http.Request{Method: method, Host: r.Host, URL: &url.URL{Path: path}}
}

// MountHint explains a request that no route matched when its path ends
// with a path the API serves: the handler is then mounted under a prefix
// that was not stripped. It returns "" when there is nothing to say.
//
// Every route has at most depth segments, each matching one segment of a
// path (the API registers no pattern ending in "/" nor with a "..."
// wildcard), so only the suffixes made of the path's last depth segments
// can match one: MountHint asks the router about those only, the longest
// first, at most depth lookups of at most the path's length. Its work is
// linear in the length of the path, however many segments it has.
func MountHint(mux Router, depth int, r *http.Request) string {
	path := r.URL.Path
	// The starts of the candidate suffixes: the last depth slashes but the
	// first character's (the whole path, which no route matched).
	starts := make([]int, 0, depth)
	for end := len(path); len(starts) < depth; {
		i := strings.LastIndexByte(path[:end], '/')
		if i < 1 {
			break
		}
		starts = append(starts, i)
		end = i
	}
	for k := len(starts) - 1; k >= 0; k-- {
		i := starts[k]
		if _, pattern := mux.Handler(Probe(r, r.Method, path[i:])); pattern != "/" && pattern != "" {
			return fmt.Sprintf("; the API serves %s under its mount point: mount the handler with http.StripPrefix(%q, svc.Handler())",
				path[i:], path[:i])
		}
	}
	return ""
}

// stripPrefixFix names the http.StripPrefix call that would have kept the
// leading slash of r's path, from the path the client asked for.
func stripPrefixFix(r *http.Request) string {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if prefix, ok := strings.CutSuffix(orig, r.URL.Path); ok && strings.HasSuffix(prefix, "/") && len(prefix) > 1 {
		return fmt.Sprintf("http.StripPrefix(%q, ...)", strings.TrimSuffix(prefix, "/"))
	}
	return `http.StripPrefix("/prefix", ...)`
}
