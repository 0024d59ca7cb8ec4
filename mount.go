package lifecycle

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// startCheck logs, once, that a Service serves requests though Start was
// not called: ship operations then stay queued and webhooks are not
// delivered.
type startCheck struct{ done atomic.Bool }

func (c *startCheck) check(s *Service, r *http.Request) {
	if c.done.Load() {
		return
	}
	s.mu.Lock()
	started, closed := s.started, s.closed
	s.mu.Unlock()
	if started || closed {
		c.done.Store(true)
	} else if c.done.CompareAndSwap(false, true) {
		s.log.WarnContext(r.Context(), "lifecycle: the Service serves requests but Service.Start was not called: "+
			"ship operations stay queued, webhooks are not delivered and old events are not pruned until it is")
	}
}

// unmountedPath returns the error of a path without a leading slash
// (http.StripPrefix given a prefix that ends with "/"), which the ServeMux
// would redirect outside the mount point, or nil.
func unmountedPath(r *http.Request) error {
	if strings.HasPrefix(r.URL.Path, "/") {
		return nil
	}
	return fmt.Errorf("no such endpoint: %s %s; the handler got a path without a leading slash: "+
		"mount it with %s, without the trailing slash: %w", r.Method, r.URL.Path, stripPrefixFix(r), ErrNotFound)
}

// mountHint explains a request that no route matched when its path ends
// with a path the API serves: the handler is then mounted under a prefix
// that was not stripped. It returns "" when there is nothing to say.
func mountHint(mux *http.ServeMux, r *http.Request) string {
	path := r.URL.Path
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		probe := r.Clone(r.Context())
		probe.URL.Path = path[i:]
		probe.URL.RawPath = ""
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
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
