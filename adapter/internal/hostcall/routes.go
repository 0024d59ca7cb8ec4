package hostcall

import (
	"fmt"
	"net/url"
	"strings"
)

// The operations of requests no route names.
const (
	// OperationOther is the operation of a request that matches no route.
	OperationOther = "other"
	// OperationGraphQL is the operation of a request to a GraphQL
	// endpoint.
	OperationGraphQL = "graphql"
)

// Route names the requests of one of a host's endpoints.
type Route struct {
	// Method is the request's method, "GET", "POST", ...
	Method string
	// Path is the path template of the endpoint, the API's base path
	// included: "/api/v3/repos/{owner}/{repo}/pulls/{number}". A segment
	// in braces matches any one segment of a request's escaped path
	// ("feature%2Fx" is one); any other segment matches itself only.
	Path string
	// Operation is the bounded name the request is recorded under
	// (lifecycle.host.operation): "pulls.get".
	Operation string
}

// Routes maps requests to their operations, by method and path template.
// It is immutable and safe for concurrent use.
type Routes struct {
	routes []route
	// other is the span name of an unmatched request, by method.
	other map[string]string
}

type route struct {
	method    string
	segments  []string // "" for a {parameter}
	operation string
	spanName  string // method + " " + operation
}

// NewRoutes returns the Routes of rs. It panics on a route whose path does
// not begin with "/", or whose operation is empty or holds a "/": the
// table is the adapter's own, fixed at compile time.
func NewRoutes(rs ...Route) *Routes {
	out := &Routes{other: map[string]string{}}
	for _, r := range rs {
		if !strings.HasPrefix(r.Path, "/") || r.Method == "" || r.Operation == "" || strings.Contains(r.Operation, "/") {
			panic(fmt.Sprintf("hostcall: route %+v: the path must begin with /, and the method and operation be set, the operation without /", r))
		}
		segs := strings.Split(strings.TrimPrefix(r.Path, "/"), "/")
		for i, s := range segs {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				segs[i] = ""
			}
		}
		out.routes = append(out.routes, route{method: r.Method, segments: segs, operation: r.Operation, spanName: r.Method + " " + r.Operation})
	}
	for _, m := range methods {
		out.other[m] = m + " " + OperationOther
	}
	out.other[otherMethod] = "HTTP " + OperationOther
	return out
}

// match returns the route of a request, or nil.
func (rs *Routes) match(method, path string) *route {
	if rs == nil {
		return nil
	}
	path = strings.TrimPrefix(path, "/")
	n := strings.Count(path, "/") + 1
	for i := range rs.routes {
		r := &rs.routes[i]
		if r.method != method || len(r.segments) != n {
			continue
		}
		if matchSegments(r.segments, path) {
			return r
		}
	}
	return nil
}

// matchSegments reports whether path's segments match segs, "" matching
// any non-empty one. path has as many segments as segs.
func matchSegments(segs []string, path string) bool {
	rest := path
	for _, want := range segs {
		seg, after, _ := strings.Cut(rest, "/")
		rest = after
		if want == "" {
			if seg == "" {
				return false
			}
			continue
		}
		if seg != want {
			return false
		}
	}
	return true
}

// spanName returns the span name and operation of a request: "{METHOD}
// {operation}", with "HTTP" for a method that is not one of HTTP's own.
func (rs *Routes) spanName(method string, u *url.URL) (name, operation string) {
	if r := rs.match(method, escapedPath(u)); r != nil {
		return r.spanName, r.operation
	}
	if rs != nil {
		if n, ok := rs.other[method]; ok {
			return n, OperationOther
		}
		return rs.other[otherMethod], OperationOther
	}
	return "HTTP " + OperationOther, OperationOther
}

// escapedPath returns u's path as sent, without allocating: RawPath when
// set (the path has escapes that Path decodes), else Path.
func escapedPath(u *url.URL) string {
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.Path
}
