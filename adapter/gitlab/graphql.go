package gitlab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// mergeRequestsQuery reads, for up to a hundred merge requests of a
// project, what a sweep compares with a Version: what their list shows
// (updatedAt, here to the second, as GitLab's Time type gives it; head,
// state, mergeability) and what no list of the REST API shows, their
// approvals and their reviewers' states. Every field and argument is in
// GitLab's GraphQL reference (doc/api/graphql/reference): Query.project
// (fullPath: ID!), Project.mergeRequests (iids: [String!]), MergeRequest
// (iid, updatedAt, title, draft, state, diffHeadSha, sourceBranch,
// targetBranch, sourceProjectId, targetProjectId, detailedMergeStatus,
// mergeStatusEnum, conflicts, approvedBy, reviewers), UserCore and
// MergeRequestReviewer (id, username, mergeRequestInteraction),
// UserMergeRequestInteraction (reviewState). approvedBy and reviewers are
// of GitLab Free (approvalsLeft and approvalsRequired are Premium, and
// not asked). GitLab refuses a query whose complexity is over its limit
// (250 for an authenticated request); the adapter then asks of fewer
// merge requests a query (see mergeRequestsGraphQL).
const mergeRequestsQuery = `query($fullPath: ID!, $iids: [String!]) {
  project(fullPath: $fullPath) {
    mergeRequests(iids: $iids, first: 100) {
      nodes {
        iid updatedAt title draft state diffHeadSha sourceBranch targetBranch sourceProjectId targetProjectId
        detailedMergeStatus mergeStatusEnum conflicts
        approvedBy(first: 100) { nodes { id } pageInfo { hasNextPage } }
        reviewers(first: 100) { nodes { id username mergeRequestInteraction { reviewState } } pageInfo { hasNextPage } }
      }
    }
  }
}`

// gqlMergeRequest is a merge request as mergeRequestsQuery reads it.
type gqlMergeRequest struct {
	IID                 string    `json:"iid"`
	UpdatedAt           time.Time `json:"updatedAt"`
	Title               string    `json:"title"`
	Draft               bool      `json:"draft"`
	State               string    `json:"state"`
	DiffHeadSHA         string    `json:"diffHeadSha"`
	SourceBranch        string    `json:"sourceBranch"`
	TargetBranch        string    `json:"targetBranch"`
	SourceProjectID     *int64    `json:"sourceProjectId"`
	TargetProjectID     int64     `json:"targetProjectId"`
	DetailedMergeStatus string    `json:"detailedMergeStatus"`
	MergeStatusEnum     string    `json:"mergeStatusEnum"`
	Conflicts           bool      `json:"conflicts"`
	ApprovedBy          struct {
		Nodes    []gqlUser   `json:"nodes"`
		PageInfo gqlPageInfo `json:"pageInfo"`
	} `json:"approvedBy"`
	Reviewers struct {
		Nodes    []gqlReviewer `json:"nodes"`
		PageInfo gqlPageInfo   `json:"pageInfo"`
	} `json:"reviewers"`
}

type gqlUser struct {
	ID string `json:"id"`
}

type gqlReviewer struct {
	ID                      string `json:"id"`
	Username                string `json:"username"`
	MergeRequestInteraction *struct {
		ReviewState *string `json:"reviewState"`
	} `json:"mergeRequestInteraction"`
}

type gqlPageInfo struct {
	HasNextPage bool `json:"hasNextPage"`
}

// gqlAnswer is GitLab's answer to mergeRequestsQuery: data, and errors
// when GitLab could not resolve some of it (GraphQL answers them with 200).
type gqlAnswer struct {
	Data struct {
		Project *struct {
			MergeRequests struct {
				Nodes []*gqlMergeRequest `json:"nodes"`
			} `json:"mergeRequests"`
		} `json:"project"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// detailedMergeStatuses maps the names of GraphQL's DetailedMergeStatus
// to the values of the REST API's detailed_merge_status, where they
// differ (app/graphql/types/merge_requests/detailed_merge_status_enum.rb):
// the others are the value in upper case.
var detailedMergeStatuses = map[string]string{
	"BLOCKED_STATUS":               "merge_request_blocked",
	"EXTERNAL_STATUS_CHECKS":       "status_checks_must_pass",
	"JIRA_ASSOCIATION":             "jira_association_missing",
	"SECURITY_POLICIES_VIOLATIONS": "security_policy_violations",
	"TITLE_NOT_MATCHING":           "title_regex",
}

// restDetailedMergeStatus returns the REST API's detailed_merge_status of
// GraphQL's name of it.
func restDetailedMergeStatus(name string) string {
	if v, ok := detailedMergeStatuses[name]; ok {
		return v
	}
	return strings.ToLower(name)
}

// gidNumber returns the number of a GraphQL global ID
// (gid://gitlab/User/42), or 0.
func gidNumber(gid string) int64 {
	i := strings.LastIndexByte(gid, '/')
	if i < 0 || !strings.HasPrefix(gid, "gid://gitlab/") {
		return 0
	}
	n, err := strconv.ParseInt(gid[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// reviewFacts are what a sweep compares, beside the list's fields, of a
// merge request read through GraphQL: what a reading shows of it that
// moves its updated_at (GraphQL gives updatedAt to the second only:
// these find a change within the second of the last), and its approvals
// and reviewers' states, which move nothing GitLab lists while
// ThrottledTouch drops their touch.
type reviewFacts struct {
	Head, Base string
	Draft      bool
	// Reviewers are the reviewers' usernames, Approvers the user IDs
	// of the approvals and States "<user ID>:<state>" of each reviewer,
	// each sorted.
	Reviewers []string
	Approvers []int64
	States    []string
}

// digest returns f's digest, as a Version records it.
func (f reviewFacts) digest() string {
	f.Reviewers, f.Approvers, f.States = slices.Clone(f.Reviewers), slices.Clone(f.Approvers), slices.Clone(f.States)
	if f.Reviewers == nil {
		f.Reviewers = []string{}
	}
	if f.Approvers == nil {
		f.Approvers = []int64{}
	}
	if f.States == nil {
		f.States = []string{}
	}
	slices.Sort(f.Reviewers)
	slices.Sort(f.Approvers)
	slices.Sort(f.States)
	return digest(f)
}

// facts returns what mr shows of its reviewFacts; ok is false when a
// connection has more than a page, or an ID is not a user's: the sweep
// then reads mr in full.
func (mr *gqlMergeRequest) facts() (f reviewFacts, ok bool) {
	if mr.ApprovedBy.PageInfo.HasNextPage || mr.Reviewers.PageInfo.HasNextPage {
		return reviewFacts{}, false
	}
	f = reviewFacts{Head: mr.SourceBranch, Base: mr.TargetBranch, Draft: mr.Draft || draftTitle(mr.Title),
		Reviewers: []string{}, Approvers: []int64{}, States: []string{}}
	for _, u := range mr.ApprovedBy.Nodes {
		id := gidNumber(u.ID)
		if id == 0 {
			return reviewFacts{}, false
		}
		f.Approvers = append(f.Approvers, id)
	}
	for _, r := range mr.Reviewers.Nodes {
		id := gidNumber(r.ID)
		if id == 0 {
			return reviewFacts{}, false
		}
		f.Reviewers = append(f.Reviewers, r.Username)
		state := ""
		if r.MergeRequestInteraction != nil && r.MergeRequestInteraction.ReviewState != nil {
			state = strings.ToLower(*r.MergeRequestInteraction.ReviewState)
		}
		f.States = append(f.States, strconv.FormatInt(id, 10)+":"+state)
	}
	return f, true
}

// listed returns mr as the REST API lists it, for the fields a sweep
// compares (see changed).
func (mr *gqlMergeRequest) listed() *listedMergeRequest {
	iid, _ := strconv.ParseInt(mr.IID, 10, 64)
	l := &listedMergeRequest{MergeStatus: strings.ToLower(mr.MergeStatusEnum)}
	l.IID, l.SHA, l.State = iid, mr.DiffHeadSHA, mr.State
	l.SourceBranch, l.TargetBranch, l.TargetProjectID = mr.SourceBranch, mr.TargetBranch, mr.TargetProjectID
	if mr.SourceProjectID != nil {
		l.SourceProjectID = *mr.SourceProjectID
	}
	l.DetailedMergeStatus, l.HasConflicts = restDetailedMergeStatus(mr.DetailedMergeStatus), mr.Conflicts
	updated := mr.UpdatedAt
	l.UpdatedAt = &updated
	return l
}

// errGraphQL marks GitLab's answer to a GraphQL query that carries
// errors, or no project.
var errGraphQL = errors.New("GraphQL answered with errors")

// maxGraphQLPage and minGraphQLPage bound how many merge requests a
// GraphQL query reads: GitLab's max_page_size, and the fewest the
// adapter goes down to when GitLab finds a query over its complexity
// limit.
const (
	maxGraphQLPage = 100
	minGraphQLPage = 10
)

// overComplexity reports whether GraphQL's error messages say the query
// was over GitLab's complexity limit ("Query has complexity of 300, which
// exceeds max complexity of 250").
func overComplexity(msgs []string) bool {
	for _, m := range msgs {
		if strings.Contains(m, "exceeds max complexity") {
			return true
		}
	}
	return false
}

// mergeRequestsGraphQL reads merge requests iids of project s through
// GraphQL, a hundred a request, and returns them by IID with GitLab's
// time (its Date) of the first answer. A query GitLab finds over its
// complexity limit is asked again of half as many merge requests, down
// to minGraphQLPage, and the adapter keeps to that many.
func (a *Adapter) mergeRequestsGraphQL(ctx context.Context, s *settings, iids []int64) (map[int64]*gqlMergeRequest, time.Time, error) {
	out := make(map[int64]*gqlMergeRequest, len(iids))
	var first time.Time
	for len(iids) > 0 {
		a.mu.Lock()
		page := a.gqlPage
		a.mu.Unlock()
		chunk := iids[:min(page, len(iids))]
		vars := make([]string, len(chunk))
		for i, iid := range chunk {
			vars[i] = strconv.FormatInt(iid, 10)
		}
		q := gl.GraphQLQuery{Query: mergeRequestsQuery, Variables: map[string]any{"fullPath": s.owner + "/" + s.repo, "iids": vars}}
		var ans gqlAnswer
		what := fmt.Sprintf("read %d merge requests through GraphQL", len(chunk))
		resp, err := a.client.GraphQL.Do(q, &ans, gl.WithContext(ctx))
		if err != nil {
			return nil, time.Time{}, a.fail(ctx, what, resp, err)
		}
		if len(ans.Errors) > 0 || ans.Data.Project == nil {
			msgs := make([]string, 0, len(ans.Errors))
			for _, e := range ans.Errors {
				msgs = append(msgs, e.Message)
			}
			if overComplexity(msgs) && page > minGraphQLPage {
				a.mu.Lock()
				a.gqlPage = max(page/2, minGraphQLPage)
				a.mu.Unlock()
				a.log.WarnContext(ctx, "GitLab found the sweep's GraphQL query too complex: asking it of fewer merge requests", "merge_requests", max(page/2, minGraphQLPage), "error", strings.Join(msgs, "; "))
				continue
			}
			return nil, time.Time{}, fmt.Errorf("gitlab: %s: %w: %s", what, errGraphQL, strings.Join(msgs, "; "))
		}
		if first.IsZero() {
			first = dateOf(resp)
		}
		for _, mr := range ans.Data.Project.MergeRequests.Nodes {
			if mr == nil {
				continue
			}
			if iid, err := strconv.ParseInt(mr.IID, 10, 64); err == nil && slices.Contains(chunk, iid) {
				out[iid] = mr
			}
		}
		iids = iids[len(chunk):]
	}
	if first.IsZero() {
		first = a.clock.Now()
	}
	return out, first, nil
}

// rateLimited reports whether err is a TemporaryError of a rate limit.
func rateLimited(err error) bool {
	te := (*lifecycle.TemporaryError)(nil)
	return errors.As(err, &te) && te.RateLimited
}

// isTemporary reports whether err is a TemporaryError.
func isTemporary(err error) bool {
	te := (*lifecycle.TemporaryError)(nil)
	return errors.As(err, &te)
}
