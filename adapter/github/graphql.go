package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
)

// GitHub's GraphQL API answers a query with "data" and, for what it could
// not resolve, "errors", each with a type and the path of the field:
//
//	{"data": {"repository": {"p1": null}},
//	 "errors": [{"type": "NOT_FOUND", "path": ["repository", "p1"],
//	             "message": "Could not resolve to a PullRequest with the number of 99999."}]}
//
// githubv4 decodes the data and keeps of the errors only their messages,
// so graphqlTransport, under it, reads them whole from the answer into the
// request's gqlCapture.

// gqlError is one of the errors of a GraphQL answer. A field the
// server's schema lacks is refused, with the whole query, as
//
//	{"message": "Field 'fullDatabaseId' doesn't exist on type 'PullRequestReview'",
//	 "extensions": {"code": "undefinedField", "typeName": "PullRequestReview", "fieldName": "fullDatabaseId"}}
type gqlError struct {
	Type       string `json:"type"`
	Path       []any  `json:"path"`
	Message    string `json:"message"`
	Extensions struct {
		Code      string `json:"code"`
		TypeName  string `json:"typeName"`
		FieldName string `json:"fieldName"`
	} `json:"extensions"`
}

// undefinedField is the code of an error for a field the schema lacks.
const undefinedField = "undefinedField"

// mergeInfoPreview is the media type of GitHub's merge info schema
// preview, under which GitHub Enterprise Server serves
// PullRequest.mergeStateStatus (github.com has it without).
const mergeInfoPreview = "application/vnd.github.merge-info-preview+json"

// gqlCapture receives the errors of the answer to the query made with a
// context carrying it.
type gqlCapture struct {
	errors []gqlError
}

type gqlCaptureKey struct{}

// graphqlTransport asks for GitHub's merge info schema preview (Accept:
// application/vnd.github.merge-info-preview+json), reads the errors of
// GraphQL answers into the request's gqlCapture, and turns an answer
// saying that the GraphQL rate limit is spent (GitHub answers it 200 with
// an error of type RATE_LIMIT, earlier RATE_LIMITED) into a
// *lifecycle.TemporaryError that is RateLimited, with the wait until the
// reset the answer names, and one saying GitHub gave up on the query
// ("Something went wrong while executing your query. This may be the
// result of a timeout") into a *lifecycle.TemporaryError.
type graphqlTransport struct {
	base  http.RoundTripper
	clock interface{ Now() time.Time }
}

// RoundTrip implements http.RoundTripper.
func (t *graphqlTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", mergeInfoPreview)
	resp, err := base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("github: POST %s: read the answer: %w", req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var out struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if json.Unmarshal(body, &out) != nil {
		return resp, nil // githubv4 reports what it cannot decode
	}
	if len(out.Errors) > 0 && gaveUp(out.Errors[0].Message) && (len(out.Data) == 0 || string(out.Data) == "null") {
		return nil, &lifecycle.TemporaryError{Err: &hostError{Status: resp.StatusCode, Method: req.Method, Path: req.URL.Path, Message: out.Errors[0].Message}}
	}
	for _, e := range out.Errors {
		if e.Type == "RATE_LIMIT" || e.Type == "RATE_LIMITED" {
			wait := secondaryWait
			if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
				wait = max(time.Unix(reset, 0).Sub(t.clock.Now()), time.Second)
			}
			return nil, &lifecycle.TemporaryError{RateLimited: true, RetryAfter: wait,
				Err: &hostError{Status: resp.StatusCode, Method: req.Method, Path: req.URL.Path, Message: e.Message}}
		}
	}
	if c, ok := req.Context().Value(gqlCaptureKey{}).(*gqlCapture); ok {
		c.errors = out.Errors
	}
	return resp, nil
}

// gaveUp reports whether a message is GitHub's for a query it gave up on
// as too slow: "Something went wrong while executing your query. This may
// be the result of a timeout, ..." (GraphQL) or "We couldn't respond to
// your request in time" (its 10-second limit).
func gaveUp(msg string) bool {
	return strings.HasPrefix(msg, "Something went wrong while executing your query") || strings.Contains(msg, "couldn't respond to your request in time")
}

// query runs the GraphQL query q with vars. It returns the errors GitHub
// answered beside the data (q then holds what could be resolved), or an
// error when there is no data at all.
func (a *Adapter) query(ctx context.Context, q any, vars map[string]any) ([]gqlError, error) {
	c := &gqlCapture{}
	err := a.graphql.Query(context.WithValue(ctx, gqlCaptureKey{}, c), q, vars)
	switch {
	case err == nil:
		return c.errors, nil
	case len(c.errors) > 0 && err.Error() == c.errors[0].Message:
		// githubv4 decoded the data, then reported the first error.
		return c.errors, nil
	}
	return nil, fmt.Errorf("github: GraphQL query: %w", err)
}

// The queries. githubv4 writes a query from a struct, a field's name (or
// its graphql tag) and arguments. A batch reads many pull requests in one
// query through aliases, "p0: pullRequest(number: $n0)", one field each,
// made with reflect.StructOf; the templates below are the fields of one
// pull request, with "$N" standing for its variable ($n0, $n1, ...), and
// use no named struct types but time.Time, so that a query's struct is
// built from them with reflect and read back into them.
//
// A field tagged optional:"Type" may be missing from an older GitHub
// Enterprise Server's schema, where it is left out of the queries once
// GitHub said so (see schemaGaps); a field tagged instead:"Type.field" is
// asked for only where that field is missing; a field tagged with:"name"
// only for the pull requests whose query asks for name.

// probePR is what a probe reads of a pull request: everything a task
// shows changes one of its fields (see the package documentation). Its
// one connection, the contexts of the head's rollup, makes a probe of 149
// pull requests cost one rate-limit point.
type probePR struct {
	Number           int       `graphql:"number"`
	State            string    `graphql:"state"`
	IsDraft          bool      `graphql:"isDraft"`
	HeadRefOid       string    `graphql:"headRefOid"`
	BaseRefName      string    `graphql:"baseRefName"`
	Mergeable        string    `graphql:"mergeable"`
	MergeStateStatus string    `graphql:"mergeStateStatus" optional:"PullRequest"`
	ReviewDecision   *string   `graphql:"reviewDecision"`
	UpdatedAt        time.Time `graphql:"updatedAt"`
	HeadRef          *headRef  `graphql:"headRef"`
}

// headRef is a pull request's head branch: the commit it points at and
// that commit's checks; for a probe of a pull request whose CI the check
// suites may hold back (see flagSuites), its check suites too.
type headRef = struct {
	Target struct {
		Commit struct {
			Oid               string `graphql:"oid"`
			StatusCheckRollup *struct {
				State    string       `graphql:"state"`
				Contexts contextsPage `graphql:"contexts(first: 100)"`
			} `graphql:"statusCheckRollup"`
			CheckSuites *suitesPage `graphql:"checkSuites(first: 100)" with:"suites"`
		} `graphql:"... on Commit"`
	} `graphql:"target"`
}

// suitesPage is a page of a commit's check suites.
type suitesPage = struct {
	Nodes []struct {
		DatabaseID int64  `graphql:"databaseId"`
		Status     string `graphql:"status"`
		Conclusion string `graphql:"conclusion"`
	} `graphql:"nodes"`
	PageInfo struct {
		HasNextPage bool `graphql:"hasNextPage"`
	} `graphql:"pageInfo"`
}

// rollupContext is a check run or a commit status of a head's
// statusCheckRollup.
type rollupContext = struct {
	Typename string `graphql:"__typename"`
	CheckRun struct {
		DatabaseID  int64      `graphql:"databaseId"`
		Name        string     `graphql:"name"`
		Status      string     `graphql:"status"`
		Conclusion  string     `graphql:"conclusion"`
		DetailsURL  string     `graphql:"detailsUrl"`
		StartedAt   *time.Time `graphql:"startedAt"`
		CompletedAt *time.Time `graphql:"completedAt"`
		IsRequired  bool       `graphql:"isRequired(pullRequestNumber: $N)" optional:"CheckRun"`
	} `graphql:"... on CheckRun"`
	StatusContext struct {
		Context    string    `graphql:"context"`
		State      string    `graphql:"state"`
		TargetURL  string    `graphql:"targetUrl"`
		CreatedAt  time.Time `graphql:"createdAt"`
		IsRequired bool      `graphql:"isRequired(pullRequestNumber: $N)" optional:"StatusContext"`
	} `graphql:"... on StatusContext"`
}

// stateCount is a count of a rollup's check runs or commit statuses in
// one state.
type stateCount = struct {
	State string `graphql:"state"`
	Count int    `graphql:"count"`
}

// contextsPage is a page of a statusCheckRollup's contexts, with the
// counts of all of them by state.
type contextsPage = struct {
	TotalCount                 int             `graphql:"totalCount"`
	CheckRunCountsByState      []stateCount    `graphql:"checkRunCountsByState" optional:"StatusCheckRollupContextConnection"`
	StatusContextCountsByState []stateCount    `graphql:"statusContextCountsByState" optional:"StatusCheckRollupContextConnection"`
	Nodes                      []rollupContext `graphql:"nodes"`
	PageInfo                   struct {
		HasNextPage bool   `graphql:"hasNextPage"`
		EndCursor   string `graphql:"endCursor"`
	} `graphql:"pageInfo"`
}

// fullPR is what a full reading reads of a pull request: the probe's
// fields, and its CI and reviews. Its two connections (the contexts, the
// reviews) make 50 of them cost one rate-limit point.
type fullPR struct {
	Number           int       `graphql:"number"`
	State            string    `graphql:"state"`
	IsDraft          bool      `graphql:"isDraft"`
	HeadRefOid       string    `graphql:"headRefOid"`
	BaseRefName      string    `graphql:"baseRefName"`
	Mergeable        string    `graphql:"mergeable"`
	MergeStateStatus string    `graphql:"mergeStateStatus" optional:"PullRequest"`
	ReviewDecision   *string   `graphql:"reviewDecision"`
	UpdatedAt        time.Time `graphql:"updatedAt"`
	HeadRef          *headRef  `graphql:"headRef"`
	URL              string    `graphql:"url"`
	HeadRefName      string    `graphql:"headRefName"`
	Merged           bool      `graphql:"merged"`
	MergeCommit      *struct {
		Oid string `graphql:"oid"`
	} `graphql:"mergeCommit"`
	LatestOpinionatedReviews struct {
		Nodes []struct {
			FullDatabaseID string `graphql:"fullDatabaseId" optional:"PullRequestReview"`
			// DatabaseID is asked for only where fullDatabaseId is
			// missing: github.com deprecates it, and it cannot hold
			// the IDs of its newer reviews.
			DatabaseID *int64 `graphql:"databaseId" instead:"PullRequestReview.fullDatabaseId"`
			Author     *struct {
				Login string `graphql:"login"`
			} `graphql:"author"`
			AuthorAssociation string `graphql:"authorAssociation"`
			State             string `graphql:"state"`
			Body              string `graphql:"body"`
			Commit            *struct {
				Oid string `graphql:"oid"`
			} `graphql:"commit"`
			SubmittedAt *time.Time `graphql:"submittedAt"`
		} `graphql:"nodes"`
	} `graphql:"latestOpinionatedReviews(first: 100)"`
}

// probe returns the probe's fields of a full reading, as a probe of the
// same state reads them.
func (p fullPR) probe() probePR {
	return probePR{Number: p.Number, State: p.State, IsDraft: p.IsDraft, HeadRefOid: p.HeadRefOid, BaseRefName: p.BaseRefName, Mergeable: p.Mergeable,
		MergeStateStatus: p.MergeStateStatus, ReviewDecision: p.ReviewDecision, UpdatedAt: p.UpdatedAt, HeadRef: p.HeadRef}
}

// contextsQuery reads a further page of a head's rollup contexts.
type contextsQuery struct {
	Repository struct {
		PullRequest *struct {
			HeadRef *struct {
				Target struct {
					Commit struct {
						Oid               string `graphql:"oid"`
						StatusCheckRollup *struct {
							Contexts contextsPage `graphql:"contexts(first: 100, after: $after)"`
						} `graphql:"statusCheckRollup"`
					} `graphql:"... on Commit"`
				} `graphql:"target"`
			} `graphql:"headRef"`
		} `graphql:"pullRequest(number: $N)"`
	} `graphql:"repository(owner: $owner, name: $name)"`
	RateLimit *rateLimitField `graphql:"rateLimit"`
}

// rateLimitField is GraphQL's rateLimit, read with every query.
type rateLimitField = struct {
	Cost      int       `graphql:"cost"`
	Limit     int       `graphql:"limit"`
	Remaining int       `graphql:"remaining"`
	ResetAt   time.Time `graphql:"resetAt"`
}

// gqlField returns the name of the GraphQL field a graphql tag asks for:
// without its alias and arguments ("p0: pullRequest(number: $n0)" is
// pullRequest), or "" for a fragment.
func gqlField(tag string) string {
	if strings.HasPrefix(tag, "...") {
		return ""
	}
	if i := strings.IndexAny(tag, ":("); i >= 0 && tag[i] == ':' {
		tag = tag[i+1:]
	}
	name, _, _ := strings.Cut(tag, "(")
	return strings.TrimSpace(name)
}

// optionalFields returns the optional fields of the templates ts, as
// "Type.field".
func optionalFields(ts ...reflect.Type) map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice:
			walk(t.Elem())
		case reflect.Struct:
			if t == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range t.NumField() {
				f := t.Field(i)
				if typ, ok := f.Tag.Lookup("optional"); ok {
					out[typ+"."+gqlField(f.Tag.Get("graphql"))] = true
				}
				walk(f.Type)
			}
		}
	}
	for _, t := range ts {
		walk(t)
	}
	return out
}

// retag returns t with "$N" in its graphql tags replaced by v, rebuilding
// the struct types within it but time.Time, without the fields the
// server's schema lacks (missing, by "Type.field"; see optional and
// instead above), and with the fields tagged with the name with gives
// (none for "").
func retag(t reflect.Type, v string, missing map[string]bool, with string) reflect.Type {
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.PointerTo(retag(t.Elem(), v, missing, with))
	case reflect.Slice:
		return reflect.SliceOf(retag(t.Elem(), v, missing, with))
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return t
		}
		fields := make([]reflect.StructField, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("graphql")
			if typ, ok := f.Tag.Lookup("optional"); ok && missing[typ+"."+gqlField(tag)] {
				continue
			}
			if in, ok := f.Tag.Lookup("instead"); ok && !missing[in] {
				continue
			}
			if w, ok := f.Tag.Lookup("with"); ok && w != with {
				continue
			}
			f.Type = retag(f.Type, v, missing, with)
			f.Tag = reflect.StructTag(`graphql:"` + strings.ReplaceAll(tag, "$N", v) + `"`)
			fields = append(fields, f)
		}
		return reflect.StructOf(fields)
	}
	return t
}

// assign sets dst, of a template's type, from src, of the type retag made
// of it: field by field, by name (the fields retag left out stay zero).
func assign(dst, src reflect.Value) {
	if src.Type() == dst.Type() {
		dst.Set(src)
		return
	}
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		assign(dst.Elem(), src.Elem())
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		dst.Set(reflect.MakeSlice(dst.Type(), src.Len(), src.Len()))
		for i := range src.Len() {
			assign(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		for i := range src.NumField() {
			assign(dst.FieldByName(src.Type().Field(i).Name), src.Field(i))
		}
	default:
		dst.Set(src)
	}
}

// batchQuery is a query of pull requests by number through aliases.
type batchQuery struct {
	value reflect.Value // *struct{Repository struct{P0, P1, ... *T}; RateLimit *rateLimitField}
	vars  map[string]any
}

// newBatchQuery returns the query of the pull requests numbers, each
// read as template T (probePR or fullPR) through alias "p<i>", of shape
// sh, and with the fields with(i) names.
func newBatchQuery[T any](owner, name string, numbers []int, sh shape, with func(i int) string) batchQuery {
	node := reflect.TypeFor[T]()
	vars := map[string]any{"owner": githubv4.String(owner), "name": githubv4.String(name)}
	prs := make([]reflect.StructField, len(numbers))
	for i, n := range numbers {
		v := "$n" + strconv.Itoa(i)
		prs[i] = reflect.StructField{
			Name: "P" + strconv.Itoa(i),
			Type: reflect.PointerTo(sh.retag(node, v, with(i))),
			Tag:  reflect.StructTag(fmt.Sprintf(`graphql:"p%d: pullRequest(number: %s)"`, i, v)),
		}
		vars[v[1:]] = githubv4.Int(n)
	}
	q := reflect.StructOf([]reflect.StructField{
		{Name: "Repository", Type: reflect.StructOf(prs), Tag: `graphql:"repository(owner: $owner, name: $name)"`},
		{Name: "RateLimit", Type: reflect.TypeFor[*rateLimitField](), Tag: `graphql:"rateLimit"`},
	})
	return batchQuery{value: reflect.New(q), vars: vars}
}

// pull returns the pull request of alias i as a T, or false when GitHub
// answered null.
func pull[T any](q batchQuery, i int) (T, bool) {
	var out T
	p := q.value.Elem().Field(0).Field(i)
	if p.IsNil() {
		return out, false
	}
	assign(reflect.ValueOf(&out).Elem(), p.Elem())
	return out, true
}

// rateLimit returns the query's rateLimit, or nil.
func (q batchQuery) rateLimit() *rateLimitField {
	return q.value.Elem().Field(1).Interface().(*rateLimitField)
}

// schemaGaps holds the optional fields the GraphQL schema of the server
// lacks, learned from its answers: a query asking for one is refused
// whole with an error of code undefinedField naming it (GitHub Enterprise
// Server before the field was added), and is asked again without it. It
// keeps the query types made for what it knows (reflect.StructOf is not
// cheap, and a sweep makes a type per alias). It is safe for concurrent
// use.
type schemaGaps struct {
	// optional are the fields that may be missing, "Type.field".
	optional map[string]bool

	mu      sync.Mutex
	missing map[string]bool
	gen     int      // counts what was learned
	types   sync.Map // typeKey → reflect.Type, for gen
}

// shape is what the server's schema has, as a query is made: the fields
// it lacks.
type shape struct {
	g       *schemaGaps
	gen     int
	missing map[string]bool
}

// typeKey names a type retag made.
type typeKey struct {
	t       reflect.Type
	v, with string
	gen     int
}

// snapshot returns the shape the server's schema is known to have.
func (g *schemaGaps) snapshot() shape {
	g.mu.Lock()
	defer g.mu.Unlock()
	return shape{g: g, gen: g.gen, missing: maps.Clone(g.missing)}
}

// retag is retag for the shape, each type made once.
func (sh shape) retag(t reflect.Type, v, with string) reflect.Type {
	k := typeKey{t: t, v: v, with: with, gen: sh.gen}
	if r, ok := sh.g.types.Load(k); ok {
		return r.(reflect.Type)
	}
	r := retag(t, v, sh.missing, with)
	sh.g.types.Store(k, r)
	return r
}

// learn records the optional fields errs say the schema lacks, and
// reports whether any is new. An undefinedField error of a field that is
// not optional teaches nothing: the query fails with it.
func (g *schemaGaps) learn(errs []gqlError) []string {
	var fields []string
	for _, e := range errs {
		if e.Extensions.Code != undefinedField {
			continue
		}
		f := e.Extensions.TypeName + "." + e.Extensions.FieldName
		if !g.optional[f] {
			return nil
		}
		fields = append(fields, f)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var learned []string
	for _, f := range fields {
		if !g.missing[f] {
			g.missing[f] = true
			learned = append(learned, f)
		}
	}
	if len(learned) > 0 {
		g.gen++
		g.types.Clear()
	}
	return learned
}

// run runs the query build makes without the fields the server lacks,
// and, when GitHub answers that it lacks more, learns them and runs it
// again without them. It returns the query build made last, and what
// query returned for it.
func (a *Adapter) run(ctx context.Context, build func(sh shape) (q any, vars map[string]any)) (any, []gqlError, error) {
	for {
		q, vars := build(a.gaps.snapshot())
		errs, err := a.query(ctx, q, vars)
		if err != nil {
			return q, nil, err
		}
		learned := a.gaps.learn(errs)
		if len(learned) == 0 {
			return q, errs, nil
		}
		a.log.InfoContext(ctx, "GitHub's GraphQL schema lacks fields; reading without them from now on", "fields", learned)
	}
}

// alias returns the alias index an error's path names ("repository",
// "p<i>", ...), or -1.
func alias(e gqlError) int {
	if len(e.Path) < 2 || e.Path[0] != "repository" {
		return -1
	}
	s, ok := e.Path[1].(string)
	if !ok || !strings.HasPrefix(s, "p") {
		return -1
	}
	i, err := strconv.Atoi(s[1:])
	if err != nil {
		return -1
	}
	return i
}
