package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// apiSpec is docs/openapi.yaml, loaded once, with a ServeMux that finds the
// operation of a request the way the handler finds its route.
type apiSpec struct {
	doc *openapi3.T
	mux *http.ServeMux
	ops map[string]*routers.Route // by ServeMux pattern: "GET /tasks/{id}"
}

var (
	specOnce sync.Once
	spec     *apiSpec
	specErr  error
)

// loadSpec returns the parsed docs/openapi.yaml.
func loadSpec(t testing.TB) *apiSpec {
	t.Helper()
	specOnce.Do(func() { spec, specErr = parseSpec(lifecycle.OpenAPIDocument()) })
	if specErr != nil {
		t.Fatalf("docs/openapi.yaml: %v", specErr)
	}
	return spec
}

func parseSpec(raw []byte) (*apiSpec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, err
	}
	s := &apiSpec{doc: doc, mux: http.NewServeMux(), ops: map[string]*routers.Route{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			pattern := method + " " + path
			s.ops[pattern] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
			s.mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
		}
	}
	return s, nil
}

// find returns the operation of a request and its path parameters, or nil.
func (s *apiSpec) find(r *http.Request) (*routers.Route, map[string]string) {
	_, pattern := s.mux.Handler(r)
	route := s.ops[pattern]
	if route == nil {
		return nil, nil
	}
	params := map[string]string{}
	want, got := strings.Split(route.Path, "/"), strings.Split(r.URL.Path, "/")
	for i, seg := range want {
		if strings.HasPrefix(seg, "{") && i < len(got) {
			params[strings.Trim(seg, "{}")] = got[i]
		}
	}
	return route, params
}

// maxValidatedBody is the largest request body validating reads and checks.
const maxValidatedBody = 64 << 10

// validating wraps the handler of a test mount so that every request and
// response is checked against docs/openapi.yaml; what does not match fails
// t when the test ends. A request the document refuses must be refused by
// the handler too (4xx); a response must be documented for its operation
// with its status, headers and body. Requests no operation matches must be
// 404 or 405 errors.
func validating(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	s := loadSpec(t)
	var (
		mu       sync.Mutex
		problems []string
		done     bool
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		for _, p := range problems {
			t.Errorf("openapi.yaml and the handler disagree: %s", p)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength < 0 || r.ContentLength > maxValidatedBody {
			// A streamed or large body is the hardening tests' (deadlines,
			// early 413, the decoding budget): reading it here first would
			// change what they test.
			h.ServeHTTP(w, r)
			return
		}
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		route, params := s.find(r)
		var reqErr error
		opts := &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			MultiError:            true,
		}
		input := &openapi3filter.RequestValidationInput{Route: route, PathParams: params, Options: opts}
		if route != nil {
			probe := r.Clone(context.WithoutCancel(r.Context()))
			probe.Body = io.NopCloser(bytes.NewReader(body))
			input.Request = probe
			reqErr = openapi3filter.ValidateRequest(probe.Context(), input)
		}

		rw := &recordingWriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		if rw.status == 0 {
			return // a stream that took its connection over; its head is not seen here
		}
		what := fmt.Sprintf("%s %s answered %d", r.Method, r.URL.RequestURI(), rw.status)
		if route == nil {
			if rw.status != http.StatusNotFound && rw.status != http.StatusMethodNotAllowed {
				report("%s, but no operation of openapi.yaml matches it", what)
				return
			}
			if err := s.doc.Components.Schemas["Error"].Value.VisitJSON(decodeAny(rw.body.Bytes())); err != nil {
				report("%s with a body that is not an Error: %v", what, err)
			}
			return
		}
		if reqErr != nil && rw.status < 400 {
			report("%s, but openapi.yaml refuses the request: %v", what, reqErr)
		}
		rin := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: input,
			Status:                 rw.status,
			Header:                 rw.Header(),
			Options:                opts,
		}
		if ct := rw.Header().Get("Content-Type"); ct != "application/json" {
			o := *opts
			o.ExcludeResponseBody = true
			rin.Options = &o
		}
		if input.Request == nil {
			input.Request = r
		}
		rin.SetBodyBytes(rw.body.Bytes())
		if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
			report("%s (operation %s): %v\nbody: %.600s", what, route.Operation.OperationID, err, rw.body.Bytes())
		}
	})
}

// decodeAny decodes a JSON body for schema validation, or returns the raw
// text when it is not JSON (and then fails the schema).
func decodeAny(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// recordingWriter passes a response through and keeps its status and (up to
// 1 MiB of) its body. Unwrap lets http.ResponseController reach the
// underlying writer, to flush or take the connection over.
type recordingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len() < 1<<20 && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routePattern matches the patterns of the handler's routes.
var routePattern = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /\S*$`)

// handlerRoutes returns the routes the root package registers, by
// pattern, with the value of the scope each needs ("" for none): the first
// argument of every call of handle, Handle or HandleFunc that is a string
// literal like "GET /tasks/{id}", and its second when it names a constant.
func handlerRoutes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	types, err := filepath.Glob("lifecycletype/*.go") // the scopes' values
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, types...)
	type route struct{ pattern, scope string }
	var found []route
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if len(n.Args) == 0 {
					return true
				}
				var fn string
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				if fn != "handle" && fn != "handleLong" && fn != "Handle" && fn != "HandleFunc" {
					return true
				}
				lit, ok := n.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				p, err := strconv.Unquote(lit.Value)
				if err != nil || !routePattern.MatchString(p) {
					return true
				}
				r := route{pattern: p}
				if len(n.Args) > 2 {
					if id, ok := n.Args[1].(*ast.Ident); ok {
						r.scope = id.Name
					}
				}
				found = append(found, r)
			}
			return true
		})
	}
	routes := map[string]string{}
	for _, r := range found {
		routes[r.pattern] = consts[r.scope]
		if r.scope != "" && consts[r.scope] == "" {
			t.Fatalf("route %s needs scope %s, whose value the test cannot find", r.pattern, r.scope)
		}
	}
	return routes
}

// TestOpenAPICoversEveryRoute checks that every route of the handler has an
// operation in docs/openapi.yaml and every operation a route.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	routes := handlerRoutes(t)
	if len(routes) < 20 {
		t.Fatalf("found only %d routes in the root package's source (%v); has the way routes are registered changed?", len(routes), routes)
	}
	var documented []string
	for pattern, route := range s.ops {
		if route.Operation.Extensions["x-served-by"] == "host" {
			continue
		}
		documented = append(documented, pattern)
	}
	sort.Strings(documented)
	for r, scope := range routes {
		op := s.ops[r]
		if op == nil || !slices.Contains(documented, r) {
			t.Errorf("the handler serves %q, which docs/openapi.yaml does not document: add an operation under paths (and describe it in docs/api.md)", r)
			continue
		}
		docScope, _ := op.Operation.Extensions["x-scope"].(string)
		if docScope != scope {
			t.Errorf("%s needs scope %q, but docs/openapi.yaml says x-scope %q", r, scope, docScope)
		}
		if public := op.Operation.Security != nil && len(*op.Operation.Security) == 0; public != (scope == "") {
			t.Errorf("%s: docs/openapi.yaml says it needs no key: %v, the handler: %v", r, public, scope == "")
		}
	}

	e := newEnv(t)
	for _, pattern := range documented {
		if _, ok := routes[pattern]; !ok {
			t.Errorf("docs/openapi.yaml documents %q, which no handle(...) call of the root package registers", pattern)
		}
		// Whatever the source says, the handler must route the operation:
		// an unrouted request is a 404 "no such endpoint" or a 405.
		method, path, _ := strings.Cut(pattern, " ")
		path = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "tsk_probe")
		rec := e.Do(apitest.Request{Method: method, Path: path})
		if rec.Code == http.StatusMethodNotAllowed || strings.Contains(rec.Body.String(), "No such endpoint") {
			t.Errorf("docs/openapi.yaml documents %q, but the handler has no such route: %s %s answered %d %s", pattern, method, path, rec.Code, rec.Body)
		}
	}
}

// TestOpenAPIServed checks GET /openapi.yaml: no key needed, the embedded
// document as it is in the repository.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.Do(apitest.Request{Method: "GET", Path: "/openapi.yaml"})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi.yaml = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	onDisk, err := os.ReadFile("docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), onDisk) {
		t.Fatal("GET /openapi.yaml differs from docs/openapi.yaml")
	}
	if !strings.HasPrefix(string(onDisk), "openapi: 3.1.") {
		t.Fatalf("docs/openapi.yaml is not OpenAPI 3.1: %.40q", onDisk)
	}
}

// TestOpenAPIValidationCatchesDrift makes sure the validating mount fails a
// test when a response does not match the document: a handler answering an
// undocumented member, or leaving a documented one out.
func TestOpenAPIValidationCatchesDrift(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"extra member":   `{"data":[],"nextCursor":null,"total":0}`,
		"missing member": `{"data":[]}`,
		"wrong type":     `{"data":[],"nextCursor":7}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeT{TB: t}
			h := validating(fake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(body))
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/tasks", nil))
			fake.runCleanups()
			if len(fake.errors) == 0 {
				t.Fatalf("a response %s passed validation", body)
			}
		})
	}
}

// fakeT records the errors and cleanups of code under test instead of
// failing the test.
type fakeT struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fakeT) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestEventsMatchTheSchema checks every event of a task's whole lifecycle
// (created, started, blocked, resolved, submitted, checked, reviewed,
// shipped) against the Event schema, which describes the stream's data
// lines and the webhook deliveries.
func TestEventsMatchTheSchema(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	e, _, _ := newShipEnv(t)
	id := e.startedTask("WEB-1")
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: e.Admin, Body: blockerBody()}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/resolve-blocker", Key: e.Admin}, http.StatusOK)
	sha := e.SubmitOK(id, "submit-WEB-1", apitest.SubmitBody())["headSha"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/checks", Key: e.Admin, Body: map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}}}}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/reviews", Key: e.Admin, Body: map[string]any{"outcome": "approved"}}, http.StatusCreated)
	op := apitest.Decode(t, e.ship(id, "ship-WEB-1", apitest.ShipBody("merge_and_deploy", "staging", sha)))["data"].(map[string]any)
	e.waitShip(op["operationId"].(string))

	types := map[string]bool{}
	schema := s.doc.Components.Schemas["Event"].Value
	for _, ev := range e.EventsOf(id) {
		types[ev["type"].(string)] = true
		if err := schema.VisitJSON(ev); err != nil {
			t.Errorf("event %v does not match the Event schema: %v", ev, err)
		}
	}
	if len(types) != 4 {
		t.Errorf("the lifecycle emitted the event types %v, want all four", types)
	}
}
