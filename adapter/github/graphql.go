package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
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

// gqlError is one of the errors of a GraphQL answer.
type gqlError struct {
	Type    string `json:"type"`
	Path    []any  `json:"path"`
	Message string `json:"message"`
}

// gqlCapture receives the errors of the answer to the query made with a
// context carrying it.
type gqlCapture struct {
	errors []gqlError
}

type gqlCaptureKey struct{}

// graphqlTransport reads the errors of GraphQL answers into the request's
// gqlCapture, and turns an answer saying that the GraphQL rate limit is
// spent (GitHub answers it 200 with an error of type RATE_LIMIT, earlier
// RATE_LIMITED) into a *lifecycle.TemporaryError that is RateLimited,
// with the wait until the reset the answer names.
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
		Errors []gqlError `json:"errors"`
	}
	if json.Unmarshal(body, &out) != nil {
		return resp, nil // githubv4 reports what it cannot decode
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
// use no named struct types, so that the struct made for each alias
// converts back to the template.

// probePR is what a probe reads of a pull request: fields that cost no
// connection, so that 200 of them cost one rate-limit point, and that
// change whenever anything the lifecycle decides on does.
type probePR struct {
	Number           int       `graphql:"number"`
	State            string    `graphql:"state"`
	IsDraft          bool      `graphql:"isDraft"`
	HeadRefOid       string    `graphql:"headRefOid"`
	BaseRefName      string    `graphql:"baseRefName"`
	Mergeable        string    `graphql:"mergeable"`
	MergeStateStatus string    `graphql:"mergeStateStatus"`
	ReviewDecision   *string   `graphql:"reviewDecision"`
	UpdatedAt        time.Time `graphql:"updatedAt"`
	HeadRef          *struct {
		Target struct {
			Commit struct {
				Oid               string `graphql:"oid"`
				StatusCheckRollup *struct {
					State string `graphql:"state"`
				} `graphql:"statusCheckRollup"`
			} `graphql:"... on Commit"`
		} `graphql:"target"`
	} `graphql:"headRef"`
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
		IsRequired  bool       `graphql:"isRequired(pullRequestNumber: $N)"`
	} `graphql:"... on CheckRun"`
	StatusContext struct {
		Context    string    `graphql:"context"`
		State      string    `graphql:"state"`
		TargetURL  string    `graphql:"targetUrl"`
		CreatedAt  time.Time `graphql:"createdAt"`
		IsRequired bool      `graphql:"isRequired(pullRequestNumber: $N)"`
	} `graphql:"... on StatusContext"`
}

// contextsPage is a page of a statusCheckRollup's contexts.
type contextsPage = struct {
	Nodes    []rollupContext `graphql:"nodes"`
	PageInfo struct {
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
	MergeStateStatus string    `graphql:"mergeStateStatus"`
	ReviewDecision   *string   `graphql:"reviewDecision"`
	UpdatedAt        time.Time `graphql:"updatedAt"`
	URL              string    `graphql:"url"`
	HeadRefName      string    `graphql:"headRefName"`
	Merged           bool      `graphql:"merged"`
	MergeCommit      *struct {
		Oid string `graphql:"oid"`
	} `graphql:"mergeCommit"`
	HeadRef *struct {
		Target struct {
			Commit struct {
				Oid               string `graphql:"oid"`
				StatusCheckRollup *struct {
					State    string       `graphql:"state"`
					Contexts contextsPage `graphql:"contexts(first: 100)"`
				} `graphql:"statusCheckRollup"`
			} `graphql:"... on Commit"`
		} `graphql:"target"`
	} `graphql:"headRef"`
	LatestOpinionatedReviews struct {
		Nodes []struct {
			FullDatabaseID string `graphql:"fullDatabaseId"`
			Author         *struct {
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

// retag returns t with "$N" in its graphql tags replaced by v, rebuilding
// the unnamed struct types within it (named types, such as time.Time, are
// kept).
func retag(t reflect.Type, v string) reflect.Type {
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.PointerTo(retag(t.Elem(), v))
	case reflect.Slice:
		return reflect.SliceOf(retag(t.Elem(), v))
	case reflect.Struct:
		if t.Name() != "" && t != reflect.TypeFor[probePR]() && t != reflect.TypeFor[fullPR]() && t != reflect.TypeFor[contextsQuery]() {
			return t
		}
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			f.Type = retag(f.Type, v)
			if tag, ok := f.Tag.Lookup("graphql"); ok {
				f.Tag = reflect.StructTag(`graphql:"` + strings.ReplaceAll(tag, "$N", v) + `"`)
			}
			fields[i] = f
		}
		return reflect.StructOf(fields)
	}
	return t
}

// batchQuery is a query of pull requests by number through aliases.
type batchQuery struct {
	value reflect.Value // *struct{Repository struct{P0, P1, ... *T}; RateLimit *rateLimitField}
	vars  map[string]any
}

// newBatchQuery returns the query of the pull requests numbers, each
// read as template T (probePR or fullPR) through alias "p<i>".
func newBatchQuery[T any](owner, name string, numbers []int) batchQuery {
	node := reflect.TypeFor[T]()
	vars := map[string]any{"owner": githubv4.String(owner), "name": githubv4.String(name)}
	prs := make([]reflect.StructField, len(numbers))
	for i, n := range numbers {
		v := "$n" + strconv.Itoa(i)
		prs[i] = reflect.StructField{
			Name: "P" + strconv.Itoa(i),
			Type: reflect.PointerTo(retag(node, v)),
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
	return p.Elem().Convert(reflect.TypeFor[T]()).Interface().(T), true
}

// rateLimit returns the query's rateLimit, or nil.
func (q batchQuery) rateLimit() *rateLimitField {
	return q.value.Elem().Field(1).Interface().(*rateLimitField)
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
