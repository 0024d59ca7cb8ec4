package gitlabtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// RouteGraphQL is GitLab's GraphQL endpoint, as given to [Server.Inject]
// and [Server.Calls]. One query is one request, as GitLab's rate limit
// counts it.
const RouteGraphQL = "POST /api/graphql"

// The fake's GraphQL API answers queries of the part of GitLab's schema
// (doc/api/graphql/reference) that package gitlab reads:
//
//	project(fullPath: ID!) { id fullPath mergeRequests(iids: [String!], state: MergeRequestState, first: Int) {
//	  count pageInfo { hasNextPage } nodes {
//	    iid updatedAt title draft state diffHeadSha sourceBranch targetBranch sourceProjectId targetProjectId
//	    detailedMergeStatus mergeStatusEnum conflicts
//	    approvedBy(first: Int) { nodes { id username } pageInfo { hasNextPage } }
//	    reviewers(first: Int) { nodes { id username mergeRequestInteraction { reviewState approved reviewed } } pageInfo { hasNextPage } }
//	} } }
//
// from the same state as the REST API, with GitLab's types: Time in ISO
// 8601 to the second (Types::TimeType renders value.iso8601), enums by
// their GraphQL names (DetailedMergeStatus, MergeStatus, the lower-case
// MergeRequestState, MergeRequestReviewState), users by global ID
// (gid://gitlab/User/<id>). A connection gives at most 100 nodes a page
// (GitLab's max_page_size). Like GitLab's, reading a merge request
// through GraphQL starts no mergeability check: detailedMergeStatus is
// worked out from the merge status as it stands. A field or argument
// outside this part of the schema is answered as GitLab answers one that
// does not exist: 200 with {"errors": [{"message": "Field 'x' doesn't
// exist on type 'T'"}]} and no data.

// gqlField is a field of a query's selection set.
type gqlField struct {
	name string
	args map[string]any // literals, or gqlVar
	sel  []*gqlField
}

// gqlVar is a variable an argument names.
type gqlVar string

// gqlParser reads the subset of GraphQL's query language the fake
// answers: one operation (query keyword, name and variable definitions
// optional), fields with arguments (variables, strings, numbers, enums,
// booleans, lists) and selection sets; no fragments, aliases or
// directives.
type gqlParser struct {
	src string
	pos int
}

func (p *gqlParser) skip() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == ',' || unicode.IsSpace(rune(c)):
			p.pos++
		default:
			return
		}
	}
}

func (p *gqlParser) peek() byte {
	p.skip()
	if p.pos >= len(p.src) {
		return 0
	}
	return p.src[p.pos]
}

func (p *gqlParser) expect(c byte) error {
	if p.peek() != c {
		return fmt.Errorf("syntax error: expected %q at %d", c, p.pos)
	}
	p.pos++
	return nil
}

func (p *gqlParser) name() (string, error) {
	p.skip()
	start := p.pos
	for p.pos < len(p.src) {
		c := rune(p.src[p.pos])
		if c != '_' && !unicode.IsLetter(c) && !(p.pos > start && unicode.IsDigit(c)) {
			break
		}
		p.pos++
	}
	if p.pos == start {
		return "", fmt.Errorf("syntax error: expected a name at %d", start)
	}
	return p.src[start:p.pos], nil
}

// document reads an operation and returns its selection set.
func (p *gqlParser) document() ([]*gqlField, error) {
	if p.peek() != '{' {
		kw, err := p.name()
		if err != nil || kw != "query" {
			return nil, fmt.Errorf("syntax error: only a query is answered")
		}
		if c := p.peek(); c != '{' && c != '(' {
			if _, err := p.name(); err != nil {
				return nil, err
			}
		}
		if p.peek() == '(' { // variable definitions: their types are not checked
			for depth := 0; p.pos < len(p.src); p.pos++ {
				if p.src[p.pos] == '(' {
					depth++
				} else if p.src[p.pos] == ')' {
					if depth--; depth == 0 {
						p.pos++
						break
					}
				}
			}
		}
	}
	sel, err := p.selection()
	if err != nil {
		return nil, err
	}
	if p.peek() != 0 {
		return nil, fmt.Errorf("syntax error: unexpected text at %d", p.pos)
	}
	return sel, nil
}

func (p *gqlParser) selection() ([]*gqlField, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	var out []*gqlField
	for p.peek() != '}' {
		if p.peek() == 0 {
			return nil, fmt.Errorf("syntax error: unclosed selection")
		}
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		f := &gqlField{name: n, args: map[string]any{}}
		if p.peek() == ':' {
			return nil, fmt.Errorf("aliases are not supported by the fake")
		}
		if p.peek() == '(' {
			p.pos++
			for p.peek() != ')' {
				an, err := p.name()
				if err != nil {
					return nil, err
				}
				if err := p.expect(':'); err != nil {
					return nil, err
				}
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				f.args[an] = v
			}
			p.pos++
		}
		if p.peek() == '{' {
			if f.sel, err = p.selection(); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	p.pos++
	return out, nil
}

func (p *gqlParser) value() (any, error) {
	switch c := p.peek(); {
	case c == '$':
		p.pos++
		n, err := p.name()
		return gqlVar(n), err
	case c == '"':
		end := strings.IndexByte(p.src[p.pos+1:], '"')
		if end < 0 {
			return nil, fmt.Errorf("syntax error: unclosed string")
		}
		s := p.src[p.pos+1 : p.pos+1+end]
		p.pos += end + 2
		return s, nil
	case c == '[':
		p.pos++
		list := []any{}
		for p.peek() != ']' {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		p.pos++
		return list, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos++; p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9'; p.pos++ {
		}
		n, err := strconv.ParseInt(p.src[start:p.pos], 10, 64)
		return float64(n), err
	default:
		n, err := p.name()
		switch n {
		case "true":
			return true, err
		case "false":
			return false, err
		case "null":
			return nil, err
		}
		return n, err // an enum value
	}
}

// gqlError is an error of a query, answered as GitLab answers one.
type gqlError string

func (e gqlError) Error() string { return string(e) }

// graphQL answers POST /api/graphql.
func (s *Server) graphQL(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Query == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []any{map[string]any{"message": "No query string was present"}}})
		return
	}
	sel, err := (&gqlParser{src: body.Query}).document()
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": err.Error()}}})
		return
	}
	s.mu.Lock()
	data, err := s.gqlQuery(sel, body.Variables)
	s.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": err.Error()}}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// arg returns argument name of f, a variable's value in its place.
func arg(f *gqlField, vars map[string]any, name string) any {
	v := f.args[name]
	if n, ok := v.(gqlVar); ok {
		return vars[string(n)]
	}
	return v
}

// checkArgs fails for an argument of f not in known.
func checkArgs(f *gqlField, known ...string) error {
	for a := range f.args {
		if !slices.Contains(known, a) {
			return gqlError(fmt.Sprintf("Field '%s' doesn't accept argument '%s'", f.name, a))
		}
	}
	return nil
}

func noField(f *gqlField, typ string) error {
	return gqlError(fmt.Sprintf("Field '%s' doesn't exist on type '%s'", f.name, typ))
}

// pageSize is a connection's page: first, at most GitLab's max_page_size.
func pageSize(f *gqlField, vars map[string]any) int {
	if n, ok := arg(f, vars, "first").(float64); ok && n >= 0 {
		return min(int(n), 100)
	}
	return 100
}

func (s *Server) gqlQuery(sel []*gqlField, vars map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range sel {
		if f.name != "project" {
			return nil, noField(f, "Query")
		}
		if err := checkArgs(f, "fullPath"); err != nil {
			return nil, err
		}
		if path, _ := arg(f, vars, "fullPath").(string); path != ProjectPath {
			out["project"] = nil
			continue
		}
		p := map[string]any{}
		for _, pf := range f.sel {
			switch pf.name {
			case "id":
				p["id"] = fmt.Sprintf("gid://gitlab/Project/%d", ProjectID)
			case "fullPath":
				p["fullPath"] = ProjectPath
			case "mergeRequests":
				c, err := s.gqlMergeRequests(pf, vars)
				if err != nil {
					return nil, err
				}
				p["mergeRequests"] = c
			default:
				return nil, noField(pf, "Project")
			}
		}
		out["project"] = p
	}
	return out, nil
}

func (s *Server) gqlMergeRequests(f *gqlField, vars map[string]any) (map[string]any, error) {
	if err := checkArgs(f, "iids", "state", "first"); err != nil {
		return nil, err
	}
	var iids []int64
	if list, ok := arg(f, vars, "iids").([]any); ok {
		for _, v := range list {
			sv, _ := v.(string)
			iid, err := strconv.ParseInt(sv, 10, 64)
			if err != nil {
				return nil, gqlError(fmt.Sprintf("Argument 'iids' on Field 'mergeRequests' has an invalid value (%v)", v))
			}
			iids = append(iids, iid)
		}
	}
	state, _ := arg(f, vars, "state").(string)
	var list []*mergeRequest
	for _, mr := range s.mrs {
		if (arg(f, vars, "iids") == nil || slices.Contains(iids, mr.iid)) && (state == "" || state == "all" || state == mr.state) {
			list = append(list, mr)
		}
	}
	// Sorted as GitLab's default, created_desc.
	sortBy(list, "desc", func(mr *mergeRequest) string { return timeJSON(mr.createdAt) }, func(mr *mergeRequest) int64 { return mr.id })
	return connection(f, vars, "MergeRequestConnection", list, func(sel []*gqlField, mr *mergeRequest) (map[string]any, error) {
		return s.gqlMergeRequest(sel, vars, mr)
	})
}

// connection answers a connection's selection: count, pageInfo
// (hasNextPage) and nodes, the first page of items.
func connection[T any](f *gqlField, vars map[string]any, typ string, items []T, node func([]*gqlField, T) (map[string]any, error)) (map[string]any, error) {
	n := pageSize(f, vars)
	page := items[:min(n, len(items))]
	out := map[string]any{}
	for _, cf := range f.sel {
		switch cf.name {
		case "count":
			out["count"] = len(items)
		case "pageInfo":
			pi := map[string]any{}
			for _, pf := range cf.sel {
				if pf.name != "hasNextPage" {
					return nil, noField(pf, "PageInfo")
				}
				pi["hasNextPage"] = len(items) > n
			}
			out["pageInfo"] = pi
		case "nodes":
			nodes := []any{}
			for _, it := range page {
				m, err := node(cf.sel, it)
				if err != nil {
					return nil, err
				}
				nodes = append(nodes, m)
			}
			out["nodes"] = nodes
		default:
			return nil, noField(cf, typ)
		}
	}
	return out, nil
}

// gqlTime renders a time as GitLab's Time type does: ISO 8601, to the
// second.
func gqlTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// gqlDetailedMergeStatus is the GraphQL name of a detailed_merge_status
// (app/graphql/types/merge_requests/detailed_merge_status_enum.rb).
func gqlDetailedMergeStatus(v string) string {
	switch v {
	case "merge_request_blocked":
		return "BLOCKED_STATUS"
	case "status_checks_must_pass":
		return "EXTERNAL_STATUS_CHECKS"
	case "jira_association_missing":
		return "JIRA_ASSOCIATION"
	case "security_policy_violations":
		return "SECURITY_POLICIES_VIOLATIONS"
	case "title_regex":
		return "TITLE_NOT_MATCHING"
	}
	return strings.ToUpper(v)
}

func (s *Server) gqlMergeRequest(sel []*gqlField, vars map[string]any, mr *mergeRequest) (map[string]any, error) {
	out := map[string]any{}
	detailed := s.detailed(mr)
	for _, f := range sel {
		if len(f.args) > 0 && f.name != "approvedBy" && f.name != "reviewers" {
			return nil, checkArgs(f)
		}
		switch f.name {
		case "id":
			out["id"] = fmt.Sprintf("gid://gitlab/MergeRequest/%d", mr.id)
		case "iid":
			out["iid"] = strconv.FormatInt(mr.iid, 10)
		case "createdAt":
			out["createdAt"] = gqlTime(mr.createdAt)
		case "updatedAt":
			out["updatedAt"] = gqlTime(mr.updatedAt)
		case "title":
			out["title"] = mr.title
		case "draft":
			out["draft"] = draft(mr.title)
		case "state":
			out["state"] = mr.state
		case "diffHeadSha":
			out["diffHeadSha"] = mr.sha
		case "sourceBranch":
			out["sourceBranch"] = mr.source
		case "targetBranch":
			out["targetBranch"] = mr.target
		case "sourceProjectId":
			out["sourceProjectId"] = mr.sourceProject
		case "targetProjectId":
			out["targetProjectId"] = ProjectID
		case "detailedMergeStatus":
			out["detailedMergeStatus"] = gqlDetailedMergeStatus(detailed)
		case "mergeStatusEnum":
			st := mr.mergeStatus // public_merge_status, as the REST API's merge_status
			if st == "preparing" || st == "cannot_be_merged_rechecking" {
				st = "checking"
			}
			out["mergeStatusEnum"] = strings.ToUpper(st)
		case "conflicts":
			out["conflicts"] = mr.mergeStatus == "cannot_be_merged" || detailed == "conflict"
		case "approvedBy":
			if err := checkArgs(f, "first"); err != nil {
				return nil, err
			}
			c, err := connection(f, vars, "UserCoreConnection", mr.approvedBy, func(sel []*gqlField, id int64) (map[string]any, error) {
				return s.gqlUser(sel, id, "UserCore", nil)
			})
			if err != nil {
				return nil, err
			}
			out["approvedBy"] = c
		case "reviewers":
			if err := checkArgs(f, "first"); err != nil {
				return nil, err
			}
			c, err := connection(f, vars, "MergeRequestReviewerConnection", mr.reviewers, func(sel []*gqlField, id int64) (map[string]any, error) {
				return s.gqlUser(sel, id, "MergeRequestReviewer", mr)
			})
			if err != nil {
				return nil, err
			}
			out["reviewers"] = c
		default:
			return nil, noField(f, "MergeRequest")
		}
	}
	return out, nil
}

// gqlUser answers a user's selection; a reviewer (of merge request mr)
// has mergeRequestInteraction.
func (s *Server) gqlUser(sel []*gqlField, id int64, typ string, mr *mergeRequest) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range sel {
		switch f.name {
		case "id":
			out["id"] = fmt.Sprintf("gid://gitlab/User/%d", id)
		case "username":
			name := ""
			for n, uid := range s.users {
				if uid == id {
					name = n
				}
			}
			out["username"] = name
		case "mergeRequestInteraction":
			if mr == nil {
				return nil, noField(f, typ)
			}
			in := map[string]any{}
			state, isReviewer := mr.reviewerState[id]
			for _, inf := range f.sel {
				switch inf.name {
				case "reviewState":
					in["reviewState"] = nil
					if isReviewer {
						in["reviewState"] = strings.ToUpper(state)
					}
				case "reviewed":
					in["reviewed"] = state == "reviewed"
				case "approved":
					in["approved"] = slices.Contains(mr.approvedBy, id)
				default:
					return nil, noField(inf, "UserMergeRequestInteraction")
				}
			}
			out["mergeRequestInteraction"] = in
		default:
			return nil, noField(f, typ)
		}
	}
	return out, nil
}
