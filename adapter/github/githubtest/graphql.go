package githubtest

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// The fake's GraphQL API: POST /graphql (api.github.com's endpoint) and
// POST /api/graphql (GitHub Enterprise Server's). A query is parsed and
// validated against schema.graphql, the part of GitHub's public schema the
// fake serves, with gqlparser, and executed against the repository's
// state: aliases, inline fragments and fragment spreads, arguments and
// variables. Fields GitHub cannot resolve are null with an error naming
// their path (a pull request that does not exist: type NOT_FOUND), beside
// the data of the others. Directives (@include, @skip) are not applied.
//
// Every query is charged the points GitHub documents: the requests its
// connections need (one per connection, multiplied by the first or last
// of the connections it is within), divided by 100 and rounded, at least
// one. A connection without first or last, or with more than 100, is
// refused as GitHub refuses it, and so is a query of more than 500,000
// nodes.

//go:embed schema.graphql
var schemaSDL string

// gqlSchema parses the schema, without the fields omit names
// ("Type.field").
func gqlSchema(omit ...string) *ast.Schema {
	schema := gqlparser.MustLoadSchema(&ast.Source{Name: "schema.graphql", Input: schemaSDL})
	for _, f := range omit {
		typ, field, _ := strings.Cut(f, ".")
		if def := schema.Types[typ]; def != nil {
			def.Fields = slices.DeleteFunc(def.Fields, func(d *ast.FieldDefinition) bool { return d.Name == field })
		}
	}
	return schema
}

// MergeInfoPreview is the media type of GitHub's merge info schema preview,
// which a GraphQL request names in its Accept header to reach
// PullRequest.mergeStateStatus on GitHub Enterprise Server
// ([Options.MergeInfoPreview]).
const MergeInfoPreview = "application/vnd.github.merge-info-preview+json"

// schemaFor returns the schema a request sees: without the merge info
// preview's fields unless it asks for them, when Options.MergeInfoPreview
// puts them behind it.
func (s *Server) schemaFor(r *http.Request) *ast.Schema {
	if s.noPreview != nil && !strings.Contains(r.Header.Get("Accept"), MergeInfoPreview) {
		return s.noPreview
	}
	return s.schema
}

// gqlError is an error of a GraphQL answer, in GitHub's shape.
type gqlError struct {
	Type       string         `json:"type,omitempty"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
	Locations  []gqlLocation  `json:"locations,omitempty"`
	Message    string         `json:"message"`
}

// undefinedField matches gqlparser's message for a field the schema lacks.
var undefinedField = regexp.MustCompile(`^Cannot query field "([^"]+)" on type "([^"]+)"`)

// validationError returns a query's validation error as GitHub answers
// it. A field the schema lacks is GitHub's (graphql-ruby's) undefinedField:
//
//	{"message": "Field 'fullDatabaseId' doesn't exist on type 'PullRequestReview'",
//	 "extensions": {"code": "undefinedField", "typeName": "PullRequestReview", "fieldName": "fullDatabaseId"}, ...}
func validationError(e *gqlerror.Error) gqlError {
	out := gqlError{Message: e.Message}
	if m := undefinedField.FindStringSubmatch(e.Message); m != nil {
		out.Message = fmt.Sprintf("Field '%s' doesn't exist on type '%s'", m[1], m[2])
		out.Extensions = map[string]any{"code": "undefinedField", "typeName": m[2], "fieldName": m[1]}
	}
	for _, l := range e.Locations {
		out.Locations = append(out.Locations, gqlLocation{Line: l.Line, Column: l.Column})
	}
	return out
}

type gqlLocation struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// omap is a JSON object that keeps the order of its members, as a GraphQL
// answer keeps the order of the selection.
type omap struct {
	keys []string
	vals map[string]any
}

func (m *omap) set(k string, v any) {
	if m.vals == nil {
		m.vals = map[string]any{}
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// MarshalJSON implements json.Marshaler.
func (m *omap) MarshalJSON() ([]byte, error) { return appendJSON(nil, m) }

// appendJSON appends v, an answer's value (an *omap, a list, a scalar),
// as JSON: nested objects are written in place rather than marshalled
// and compacted again by each enclosing one.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case *omap:
		b = append(b, '{')
		for i, k := range x.keys {
			if i > 0 {
				b = append(b, ',')
			}
			kb, _ := json.Marshal(k)
			b = append(append(b, kb...), ':')
			var err error
			if b, err = appendJSON(b, x.vals[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	vb, err := json.Marshal(v)
	return append(b, vb...), err
}

func (s *Server) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	s.count(RouteGraphQL)
	auth := r.Header.Get("Authorization")
	s.mu.Lock()
	s.lastAuth = auth
	s.mu.Unlock()
	if !s.authorized(auth) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials", "documentation_url": "https://docs.github.com/graphql"})
		return
	}
	s.answer(w, r, RouteGraphQL, s.graphql)
}

func (s *Server) graphql(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query         string         `json:"query"`
		Variables     map[string]any `json:"variables"`
		OperationName string         `json:"operationName"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON", "documentation_url": "https://docs.github.com/graphql"})
		return
	}
	fail := func(errs ...gqlError) { writeJSON(w, http.StatusOK, map[string]any{"errors": errs}) }
	schema := s.schemaFor(r)
	doc, errs := s.parse(schema, req.Query)
	if len(errs) > 0 {
		out := make([]gqlError, len(errs))
		for i, e := range errs {
			out[i] = validationError(e)
		}
		fail(out...)
		return
	}
	op := doc.Operations.ForName(req.OperationName)
	var root gqlObject = queryObj{}
	switch {
	case op == nil:
		fail(gqlError{Message: "No operation named " + strconv.Quote(req.OperationName)})
		return
	case op.Operation == ast.Mutation:
		root = mutationObj{} // the mutations of mergequeue.go
	case op.Operation != ast.Query:
		fail(gqlError{Message: "The fake serves queries and the mutations of the merge queue only"})
		return
	}
	vars, err := validator.VariableValues(schema, op, req.Variables)
	if err != nil {
		fail(gqlError{Message: err.Error()})
		return
	}
	e := &gqlExec{s: s, vars: vars, doc: doc}
	requests, nodes, perr := e.cost(op.SelectionSet, 1)
	if perr != nil {
		fail(*perr)
		return
	}
	if nodes > 500_000 {
		fail(gqlError{Type: "MAX_NODE_LIMIT_EXCEEDED", Message: fmt.Sprintf("This query requests up to %d possible nodes which exceeds the maximum limit of 500,000.", nodes)})
		return
	}
	e.points = max(1, int(math.Round(float64(requests)/100)))
	e.nodes = nodes

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gqlLimit > 0 {
		if !time.Now().Before(s.gqlReset) {
			s.gqlUsed, s.gqlReset = 0, time.Now().Add(time.Hour)
		}
		if s.gqlUsed+e.points > s.gqlLimit {
			s.gqlHeaders(w.Header())
			writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]string{{
				"type": "RATE_LIMIT", "code": "graphql_rate_limit", "message": "API rate limit already exceeded for user ID 1."}}})
			return
		}
		s.gqlUsed += e.points
	}
	s.gqlQueries.Add(1)
	s.gqlPoints.Add(int64(e.points))
	if s.gqlTimeout > 0 && pullRequests(op.SelectionSet) > s.gqlTimeout {
		// Charged all the same: GitHub counts timeouts against the
		// primary rate limit.
		s.gqlTimeouts++
		s.gqlHeaders(w.Header())
		writeJSON(w, http.StatusBadGateway, map[string]any{"data": nil, "errors": []map[string]string{{
			"message": "Something went wrong while executing your query. This may be the result of a timeout, or it could be a GitHub bug. Please include `0400:1F2E:3A4B5C:6D7E8F:6A1B2C3D` when reporting this issue."}}})
		return
	}
	data := &omap{}
	e.collect(root, op.SelectionSet, data, nil)
	for _, p := range e.read {
		s.computed(p)
	}
	s.gqlHeaders(w.Header())
	out := &omap{}
	out.set("data", data)
	if len(e.errs) > 0 {
		out.set("errors", e.errs)
	}
	body, err := appendJSON(make([]byte, 0, 4096), out)
	if err != nil {
		panic(err) // the answer is plain data
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(append(body, '\n'))
}

// SetGraphQLTimeout makes GitHub time out on queries of more than n pull
// requests (0: never), as it does on a query it takes more than 10
// seconds to answer ("If GitHub takes more than 10 seconds to process an
// API request, GitHub will terminate the request", rate limits and node
// limits for the GraphQL API): it answers 502 with "Something went wrong
// while executing your query. This may be the result of a timeout", and
// charges the query's points, as GitHub counts timeouts against the
// primary rate limit.
func (s *Server) SetGraphQLTimeout(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gqlTimeout = n
}

// GraphQLTimeouts returns how many queries timed out (SetGraphQLTimeout).
func (s *Server) GraphQLTimeouts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gqlTimeouts
}

// pullRequests counts the pullRequest fields of a query's repository.
func pullRequests(set ast.SelectionSet) int {
	n := 0
	for _, sel := range set {
		if f, ok := sel.(*ast.Field); ok {
			if f.Name == "pullRequest" {
				n++
			}
			n += pullRequests(f.SelectionSet)
		}
	}
	return n
}

// parse parses and validates query against schema, keeping the documents
// of the queries it saw last: clients send the same few queries again and
// again with other variables. A document is only read once validated.
func (s *Server) parse(schema *ast.Schema, query string) (*ast.QueryDocument, gqlerror.List) {
	type key struct {
		schema *ast.Schema
		query  string
	}
	k := key{schema, query}
	if doc, ok := s.parsed.Load(k); ok {
		return doc.(*ast.QueryDocument), nil
	}
	doc, errs := gqlparser.LoadQueryWithRules(schema, query, rules.NewDefaultRules())
	if len(errs) == 0 {
		if s.parsedN.Add(1) > 256 {
			s.parsed.Clear()
			s.parsedN.Store(1)
		}
		s.parsed.Store(k, doc)
	}
	return doc, errs
}

// gqlHeaders sets the GraphQL rate headers. Callers hold s.mu.
func (s *Server) gqlHeaders(h http.Header) {
	if s.gqlLimit == 0 {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.gqlLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(s.gqlLimit-s.gqlUsed, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(s.gqlUsed))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.gqlReset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "graphql")
}

// gqlExec executes one query. Its Server's mu is held.
type gqlExec struct {
	s      *Server
	vars   map[string]any
	doc    *ast.QueryDocument
	errs   []gqlError
	points int
	nodes  int
	read   []*pull // pull requests whose mergeability was asked for
}

// gqlObject is an object of the schema the fake resolves.
type gqlObject interface {
	typeName() string
	// resolve returns the value of field name: nil, a scalar, a time, a
	// gqlObject or a []gqlObject; or an error GitHub answers for it.
	resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError)
}

// cost returns the requests and nodes the connections of set need, each
// multiplied by mult, GitHub's way.
func (e *gqlExec) cost(set ast.SelectionSet, mult int) (requests, nodes int, err *gqlError) {
	for _, sel := range set {
		var sub ast.SelectionSet
		m := mult
		switch f := sel.(type) {
		case *ast.Field:
			sub = f.SelectionSet
			if f.Definition != nil && strings.HasSuffix(f.Definition.Type.Name(), "Connection") {
				args := f.ArgumentMap(e.vars)
				n, ok := intArg(args["first"])
				if !ok {
					n, ok = intArg(args["last"])
				}
				switch {
				case !ok:
					return 0, 0, &gqlError{Type: "MISSING_PAGINATION_BOUNDARIES", Path: nil, Locations: loc(f.Position),
						Message: fmt.Sprintf("You must provide a `first` or `last` value to properly paginate the `%s` connection.", f.Name)}
				case n > 100 || n < 0:
					return 0, 0, &gqlError{Type: "EXCESSIVE_PAGINATION", Locations: loc(f.Position),
						Message: fmt.Sprintf("Requesting %d records on the `%s` connection exceeds the `first` limit of 100 records.", n, f.Name)}
				}
				requests += mult
				nodes += mult * n
				m = mult * n
			}
		case *ast.InlineFragment:
			sub = f.SelectionSet
		case *ast.FragmentSpread:
			if f.Definition != nil {
				sub = f.Definition.SelectionSet
			}
		}
		r, n, err := e.cost(sub, m)
		if err != nil {
			return 0, 0, err
		}
		requests, nodes = requests+r, nodes+n
	}
	return requests, nodes, nil
}

func loc(p *ast.Position) []gqlLocation {
	if p == nil {
		return nil
	}
	return []gqlLocation{{Line: p.Line, Column: p.Column}}
}

// intArg returns an Int argument's value.
func intArg(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil
	}
	return 0, false
}

// collect resolves the selection set on o into out.
func (e *gqlExec) collect(o gqlObject, set ast.SelectionSet, out *omap, path []any) {
	for _, sel := range set {
		switch f := sel.(type) {
		case *ast.Field:
			key := f.Alias
			if key == "" {
				key = f.Name
			}
			p := append(slices.Clip(path), key)
			if f.Name == "__typename" {
				out.set(key, o.typeName())
				continue
			}
			v, err := o.resolve(e, f.Name, f.ArgumentMap(e.vars))
			if err != nil {
				err.Path, err.Locations = p, loc(f.Position)
				e.errs = append(e.errs, *err)
				out.set(key, nil)
				continue
			}
			out.set(key, e.complete(v, f, p))
		case *ast.InlineFragment:
			if e.matches(o, f.TypeCondition) {
				e.collect(o, f.SelectionSet, out, path)
			}
		case *ast.FragmentSpread:
			if f.Definition != nil && e.matches(o, f.Definition.TypeCondition) {
				e.collect(o, f.Definition.SelectionSet, out, path)
			}
		}
	}
}

// complete turns a resolved value into JSON.
func (e *gqlExec) complete(v any, f *ast.Field, path []any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case gqlObject:
		m := &omap{}
		e.collect(x, f.SelectionSet, m, path)
		return m
	case []gqlObject:
		list := make([]any, len(x))
		for i, o := range x {
			list[i] = e.complete(o, f, append(slices.Clip(path), i))
		}
		return list
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	}
	return v
}

// matches reports whether o is of type cond or of a type within it.
func (e *gqlExec) matches(o gqlObject, cond string) bool {
	if cond == "" || cond == o.typeName() {
		return true
	}
	def := e.s.schema.Types[cond]
	if def == nil {
		return false
	}
	for _, t := range e.s.schema.GetPossibleTypes(def) {
		if t.Name == o.typeName() {
			return true
		}
	}
	return false
}

// page cuts items into the page args ask for (first and after, or last
// and before), with GitHub-like opaque cursors.
func (e *gqlExec) page(items []gqlObject, args map[string]any) ([]gqlObject, gqlObject) {
	cursorOf := func(i int) string { return base64.StdEncoding.EncodeToString([]byte("cursor:v2:" + strconv.Itoa(i))) }
	index := func(c any) (int, bool) {
		s, ok := c.(string)
		if !ok {
			return 0, false
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return 0, false
		}
		i, err := strconv.Atoi(strings.TrimPrefix(string(raw), "cursor:v2:"))
		return i, err == nil
	}
	from, to := 0, len(items)
	if i, ok := index(args["after"]); ok {
		from = min(i+1, len(items))
	}
	if i, ok := index(args["before"]); ok {
		to = max(min(i, len(items)), from)
	}
	if n, ok := intArg(args["first"]); ok {
		to = min(to, from+n)
	} else if n, ok := intArg(args["last"]); ok {
		from = max(from, to-n)
	}
	info := pageInfoObj{hasNext: to < len(items), hasPrev: from > 0}
	if to > from {
		info.start, info.end = cursorOf(from), cursorOf(to-1)
	}
	return items[from:to], info
}

type queryObj struct{}

func (queryObj) typeName() string { return "Query" }

func (queryObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	s := e.s
	switch name {
	case "repository":
		owner, _ := args["owner"].(string)
		repo, _ := args["name"].(string)
		if !strings.EqualFold(owner, Owner) || !strings.EqualFold(repo, Repo) {
			return nil, &gqlError{Type: "NOT_FOUND", Message: fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, repo)}
		}
		return repoObj{}, nil
	case "rateLimit":
		if s.gqlLimit == 0 {
			return nil, nil
		}
		return rateLimitObj{cost: e.points, limit: s.gqlLimit, used: s.gqlUsed, reset: s.gqlReset, nodes: e.nodes}, nil
	}
	return nil, nil
}

type rateLimitObj struct {
	cost, limit, used, nodes int
	reset                    time.Time
}

func (rateLimitObj) typeName() string { return "RateLimit" }

func (r rateLimitObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "cost":
		return r.cost, nil
	case "limit":
		return r.limit, nil
	case "remaining":
		return max(r.limit-r.used, 0), nil
	case "used":
		return r.used, nil
	case "resetAt":
		return r.reset, nil
	case "nodeCount":
		return r.nodes, nil
	}
	return nil, nil
}

type repoObj struct{}

func (repoObj) typeName() string { return "Repository" }

func (repoObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "R_kgDOAAAAKg", nil
	case "name":
		return Repo, nil
	case "nameWithOwner":
		return Owner + "/" + Repo, nil
	case "mergeCommitAllowed":
		return e.s.mergeMethods["merge"], nil
	case "squashMergeAllowed":
		return e.s.mergeMethods["squash"], nil
	case "rebaseMergeAllowed":
		return e.s.mergeMethods["rebase"], nil
	case "object":
		// By oid only: the fake resolves no rev-parse expression.
		if oid, _ := args["oid"].(string); e.s.commits[oid] {
			return commitObj{sha: oid}, nil
		}
		return nil, nil
	case "mergeQueue", "refs":
		return e.s.resolveQueueRepo(e, name, args)
	case "pullRequest":
		n, _ := intArg(args["number"])
		p, ok := e.s.pulls[n]
		if !ok {
			return nil, &gqlError{Type: "NOT_FOUND", Message: fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", n)}
		}
		o := prObj{p: p}
		o.mergeable, o.mergeState = e.s.mergeView(p)
		e.read = append(e.read, p)
		return o, nil
	}
	return nil, nil
}

// prObj is a pull request as it was when the query reached it.
type prObj struct {
	p                     *pull
	mergeable, mergeState string
}

func (prObj) typeName() string { return "PullRequest" }

func (o prObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	s, p := e.s, o.p
	switch name {
	case "id":
		return fmt.Sprintf("PR_kwDOAAAAKs%d", p.Number), nil
	case "number":
		return p.Number, nil
	case "state":
		switch {
		case p.Merged:
			return "MERGED", nil
		case p.Closed:
			return "CLOSED", nil
		}
		return "OPEN", nil
	case "closed":
		return p.Closed || p.Merged, nil
	case "merged":
		return p.Merged, nil
	case "mergedAt":
		if p.Merged {
			return p.updatedAt, nil
		}
		return nil, nil
	case "isDraft":
		return p.Draft, nil
	case "title":
		return p.Title, nil
	case "body":
		return p.Body, nil
	case "url":
		return fmt.Sprintf("https://github.example/%s/%s/pull/%d", Owner, Repo, p.Number), nil
	case "createdAt":
		return p.createdAt, nil
	case "updatedAt":
		return p.updatedAt, nil
	case "headRefName":
		return p.Head, nil
	case "headRefOid":
		return p.HeadSHA, nil
	case "baseRefName":
		return p.Base, nil
	case "baseRefOid":
		return s.branches[p.Base], nil
	case "headRef":
		if sha, ok := s.branches[p.Head]; ok {
			return refObj{name: p.Head, sha: sha}, nil
		}
		return nil, nil
	case "baseRef":
		if sha, ok := s.branches[p.Base]; ok {
			return refObj{name: p.Base, sha: sha}, nil
		}
		return nil, nil
	case "mergeable":
		return o.mergeable, nil
	case "mergeStateStatus":
		return o.mergeState, nil
	case "reviewDecision":
		if d := s.reviewDecision(p); d != "" {
			return d, nil
		}
		return nil, nil
	case "mergeCommit":
		if p.Merged {
			return commitObj{sha: p.MergeCommitSHA}, nil
		}
		return nil, nil
	case "statusCheckRollup":
		return commitObj{sha: p.HeadSHA}.resolve(e, name, args)
	case "isInMergeQueue", "mergeQueue", "mergeQueueEntry", "timelineItems":
		return s.resolveQueuePR(e, p, name, args)
	case "latestOpinionatedReviews":
		var items []gqlObject
		writersOnly, _ := args["writersOnly"].(bool)
		for _, r := range s.latestOpinions(p.Number) {
			if writersOnly && !writer(s.association(r.GetUser().GetLogin())) {
				continue
			}
			items = append(items, reviewObj{r: r, n: p.Number})
		}
		return connection{typ: "PullRequestReviewConnection", items: items, args: args}, nil
	}
	return nil, nil
}

type refObj struct{ name, sha string }

func (refObj) typeName() string { return "Ref" }

func (r refObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "REF_" + base64.RawStdEncoding.EncodeToString([]byte(r.name)), nil
	case "name":
		return r.name, nil
	case "prefix":
		return "refs/heads/", nil
	case "target":
		return commitObj{sha: r.sha}, nil
	}
	return nil, nil
}

type commitObj struct{ sha string }

func (commitObj) typeName() string { return "Commit" }

func (c commitObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "C_" + c.sha, nil
	case "oid":
		return c.sha, nil
	case "abbreviatedOid":
		return c.sha[:min(7, len(c.sha))], nil
	case "statusCheckRollup":
		if e.s.rollupState(c.sha) == "" {
			return nil, nil
		}
		return rollupObj(c), nil
	case "checkSuites":
		var items []gqlObject
		for _, su := range e.s.suites[c.sha] {
			items = append(items, suiteObj{su})
		}
		return connection{typ: "CheckSuiteConnection", items: items, args: args}, nil
	}
	return nil, nil
}

type suiteObj struct{ su *suite }

func (suiteObj) typeName() string { return "CheckSuite" }

func (o suiteObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	su := o.su
	switch name {
	case "id":
		return fmt.Sprintf("CS_%d", su.id), nil
	case "databaseId":
		return su.id, nil
	case "status":
		return strings.ToUpper(su.status), nil
	case "conclusion":
		if su.status != "completed" {
			return nil, nil
		}
		return strings.ToUpper(su.conclusion), nil
	case "app":
		return appObj{id: su.appID, slug: su.appSlug, name: su.appName}, nil
	}
	return nil, nil
}

type appObj struct {
	id         int64
	slug, name string
}

func (appObj) typeName() string { return "App" }

func (o appObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return fmt.Sprintf("A_%d", o.id), nil
	case "databaseId":
		return o.id, nil
	case "slug":
		return o.slug, nil
	case "name":
		return o.name, nil
	}
	return nil, nil
}

type rollupObj struct{ sha string }

func (rollupObj) typeName() string { return "StatusCheckRollup" }

func (r rollupObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "SCR_" + r.sha, nil
	case "state":
		return e.s.rollupState(r.sha), nil
	case "commit":
		return commitObj(r), nil
	case "contexts":
		runs, statuses := e.s.latestChecks(r.sha)
		items := make([]gqlObject, 0, len(runs)+len(statuses))
		runStates, statusStates := map[string]int{}, map[string]int{}
		for _, c := range runs {
			items = append(items, checkRunObj{c})
			runStates[checkRunState(c)]++
		}
		for _, st := range statuses {
			items = append(items, statusObj{st})
			statusStates[strings.ToUpper(st.GetState())]++
		}
		return connection{typ: "StatusCheckRollupContextConnection", items: items, args: args, runs: len(runs), statuses: len(statuses),
			runStates: stateCounts("CheckRunStateCount", runStates), statusStates: stateCounts("StatusContextStateCount", statusStates)}, nil
	}
	return nil, nil
}

// checkRunState is a check run's CheckRunState: its status until it
// completes, then its conclusion.
func checkRunState(c *gh.CheckRun) string {
	if c.GetStatus() != "completed" {
		return strings.ToUpper(c.GetStatus())
	}
	return strings.ToUpper(c.GetConclusion())
}

// stateCounts returns counts by state as objects of typ, ordered by
// state, those of no context left out.
func stateCounts(typ string, counts map[string]int) []gqlObject {
	out := make([]gqlObject, 0, len(counts))
	for _, st := range slices.Sorted(maps.Keys(counts)) {
		out = append(out, stateCountObj{typ: typ, state: st, count: counts[st]})
	}
	return out
}

// stateCountObj is a CheckRunStateCount or a StatusContextStateCount.
type stateCountObj struct {
	typ, state string
	count      int
}

func (o stateCountObj) typeName() string { return o.typ }

func (o stateCountObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "state":
		return o.state, nil
	case "count":
		return o.count, nil
	}
	return nil, nil
}

// connection is a connection of the schema: its nodes paged by its
// arguments.
type connection struct {
	typ                     string
	items                   []gqlObject
	args                    map[string]any
	runs, statuses          int
	runStates, statusStates []gqlObject
}

func (c connection) typeName() string { return c.typ }

func (c connection) resolve(e *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	nodes, info := e.page(c.items, c.args)
	switch name {
	case "nodes":
		return nodes, nil
	case "pageInfo":
		return info, nil
	case "totalCount":
		return len(c.items), nil
	case "checkRunCount":
		return c.runs, nil
	case "statusContextCount":
		return c.statuses, nil
	case "checkRunCountsByState":
		return c.runStates, nil
	case "statusContextCountsByState":
		return c.statusStates, nil
	}
	return nil, nil
}

type pageInfoObj struct {
	hasNext, hasPrev bool
	start, end       string
}

func (pageInfoObj) typeName() string { return "PageInfo" }

func (p pageInfoObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	switch name {
	case "hasNextPage":
		return p.hasNext, nil
	case "hasPreviousPage":
		return p.hasPrev, nil
	case "startCursor":
		return orNull(p.start), nil
	case "endCursor":
		return orNull(p.end), nil
	}
	return nil, nil
}

// required answers isRequired of the check or status name, for the pull
// request args name.
func (e *gqlExec) required(args map[string]any, name string) bool {
	n, ok := intArg(args["pullRequestNumber"])
	if !ok {
		if id, isString := args["pullRequestId"].(string); isString {
			n, ok = intArg(json.Number(strings.TrimPrefix(id, "PR_kwDOAAAAKs")))
		}
	}
	return ok && slices.Contains(e.s.requiredFor(n), name)
}

type checkRunObj struct{ c *gh.CheckRun }

func (checkRunObj) typeName() string { return "CheckRun" }

func (o checkRunObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	c := o.c
	switch name {
	case "id":
		return fmt.Sprintf("CR_%d", c.GetID()), nil
	case "databaseId":
		return c.GetID(), nil
	case "name":
		return c.GetName(), nil
	case "status":
		return strings.ToUpper(c.GetStatus()), nil
	case "conclusion":
		if c.Conclusion == nil {
			return nil, nil
		}
		return strings.ToUpper(c.GetConclusion()), nil
	case "detailsUrl":
		return c.GetHTMLURL(), nil
	case "url", "permalink":
		return c.GetHTMLURL(), nil
	case "startedAt":
		if c.StartedAt == nil {
			return nil, nil
		}
		return c.GetStartedAt().Time, nil
	case "completedAt":
		if c.CompletedAt == nil {
			return nil, nil
		}
		return c.GetCompletedAt().Time, nil
	case "isRequired":
		return e.required(args, c.GetName()), nil
	}
	return nil, nil
}

type statusObj struct{ st *gh.RepoStatus }

func (statusObj) typeName() string { return "StatusContext" }

func (o statusObj) resolve(e *gqlExec, name string, args map[string]any) (any, *gqlError) {
	st := o.st
	switch name {
	case "id":
		return fmt.Sprintf("SC_%d", st.GetID()), nil
	case "context":
		return st.GetContext(), nil
	case "state":
		return strings.ToUpper(st.GetState()), nil
	case "targetUrl":
		return st.GetTargetURL(), nil
	case "description":
		return nil, nil
	case "createdAt":
		return st.GetCreatedAt().Time, nil
	case "isRequired":
		return e.required(args, st.GetContext()), nil
	}
	return nil, nil
}

type reviewObj struct {
	r *gh.PullRequestReview
	n int
}

func (reviewObj) typeName() string { return "PullRequestReview" }

func (o reviewObj) resolve(e *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	r := o.r
	switch name {
	case "id":
		return fmt.Sprintf("PRR_%d", r.GetID()), nil
	case "databaseId":
		return r.GetID(), nil
	case "fullDatabaseId":
		return strconv.FormatInt(r.GetID(), 10), nil // BigInt is a string
	case "author":
		return userObj{login: r.GetUser().GetLogin()}, nil
	case "authorAssociation":
		return e.s.association(r.GetUser().GetLogin()), nil
	case "authorCanPushToRepository":
		return writer(e.s.association(r.GetUser().GetLogin())), nil
	case "body":
		return r.GetBody(), nil
	case "state":
		return r.GetState(), nil
	case "commit":
		if r.GetCommitID() == "" {
			return nil, nil
		}
		return commitObj{sha: r.GetCommitID()}, nil
	case "submittedAt", "createdAt":
		return r.GetSubmittedAt().Time, nil
	case "url":
		return r.GetHTMLURL(), nil
	}
	return nil, nil
}

type userObj struct{ login string }

func (userObj) typeName() string { return "User" }

func (u userObj) resolve(_ *gqlExec, name string, _ map[string]any) (any, *gqlError) {
	switch name {
	case "id":
		return "U_" + u.login, nil
	case "login":
		return u.login, nil
	case "url":
		return "https://github.example/" + u.login, nil
	}
	return nil, nil
}
