// Package gitlabtest is a stateful fake of the parts of GitLab's REST and
// GraphQL APIs that package gitlab uses, on an httptest server, for tests of the
// adapter and of programs built on it (the demo's test runs the whole
// lifecycle against it).
//
// The fake holds one project, [ProjectPath] (ID [ProjectID]), with a
// default branch "main" and the users alice, bob and carol (IDs 1 to 3).
// Merge requests (single and listed), users and webhook payloads are
// served in the shapes of the real GitLab responses recorded in
// client-go's testdata (copied into this package, see
// testdata/README.md), and so are the merge commits of merged-results
// pipelines; the rest (projects, approvals, pipelines, commit statuses,
// deployments) in the shapes GitLab's API documentation gives, as
// client-go's own types encode them. Any access token is accepted; a
// request without one is answered 401.
//
// It keeps time as GitLab does, on [Options.Now]: each answer carries a
// Date; merge requests and pipelines have created_at and updated_at, and
// the lists filter on updated_after. A merge request's updated_at moves
// when it is edited (title, description, labels, reviewers, target
// branch), closed, reopened or merged, and (as GitLab touches it through
// the system notes these make, at most once a minute) when commits are
// pushed to it, it is approved or a reviewer submits a review; its
// mergeability being worked out again does not move it, nor does a push
// to its target branch, nor its pipeline and jobs changing: a pipeline's
// updated_at moves when its own status changes. mergerequests.go says
// where GitLab's source does each. GitLab works out mergeability when a
// request asks for it (a merge request read alone, a list with
// with_merge_status_recheck), by the next request or
// [Options.CheckDelay] later. Lists are paginated as GitLab's offset
// pagination is (per_page 20 by default, at most 100). With
// [Options.RateLimit], each answer carries GitLab's RateLimit-* headers
// and a request past the limit is answered 429 with Retry-After. With
// [Options.MergeTrains], the project has merge trains. Its GraphQL API
// ([RouteGraphQL], see graphql.go) answers queries of the project's merge
// requests from the same state, in the types of GitLab's GraphQL schema.
//
// With [Server.EnableGit] (git mode), the project has a real repository,
// served over git's smart HTTP protocol at its http_url_to_repo: its
// branches are the repository's, tests make real commits
// ([Server.Commit], [Server.SetBranch], [Server.OpenMergeRequest]), and a
// push through the remote has GitLab's effects on merge requests (see
// git.go), after which [Server.OnPush] lets a test play CI
// ([Server.BranchPipeline]). The merge queue's tests use it.
//
// Tests change the project as people and CI would ([Server.Push],
// [Server.PushConflicting], [Server.Pipeline],
// [Server.MergedResultsPipeline], [Server.SetCheck], [Server.Approve],
// [Server.SetReviewerState], [Server.SetTitle], [Server.SetLabels],
// [Server.Retarget], [Server.SetDetailedMergeStatus],
// [Server.FinishTrain], [Server.JobDeployment], [Server.SetDeployment],
// ...), make GitLab misbehave with [Server.Inject], count the calls the
// adapter made with [Server.Calls], and read what GitLab shows without
// disturbing it with [PeekHeader].
package gitlabtest

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

//go:embed testdata
var testdata embed.FS

// The fake's project.
const (
	// ProjectPath is the path_with_namespace of the fake's project.
	ProjectPath = "acme/web"
	// ProjectID is the numeric ID of the fake's project.
	ProjectID int64 = 3
)

// Routes of the fake, as given to [Server.Inject] and [Server.Calls]: the
// ServeMux patterns of GitLab's endpoints.
const (
	RouteProject          = "GET /api/v4/projects/{pid}"
	RouteProjectApprovals = "GET /api/v4/projects/{pid}/approvals"
	RouteListMRs          = "GET /api/v4/projects/{pid}/merge_requests"
	RouteCreateMR         = "POST /api/v4/projects/{pid}/merge_requests"
	RouteGetMR            = "GET /api/v4/projects/{pid}/merge_requests/{iid}"
	RouteUpdateMR         = "PUT /api/v4/projects/{pid}/merge_requests/{iid}"
	RouteMerge            = "PUT /api/v4/projects/{pid}/merge_requests/{iid}/merge"
	RouteApprovals        = "GET /api/v4/projects/{pid}/merge_requests/{iid}/approvals"
	RouteReviewers        = "GET /api/v4/projects/{pid}/merge_requests/{iid}/reviewers"
	RouteListPipelines    = "GET /api/v4/projects/{pid}/pipelines"
	RouteStatuses         = "GET /api/v4/projects/{pid}/repository/commits/{sha}/statuses"
	RouteCommit           = "GET /api/v4/projects/{pid}/repository/commits/{sha}"
	RouteMRNotes          = "GET /api/v4/projects/{pid}/merge_requests/{iid}/notes"
	RouteBranch           = "GET /api/v4/projects/{pid}/repository/branches/{branch}"
	RouteDeleteBranch     = "DELETE /api/v4/projects/{pid}/repository/branches/{branch}"
	RouteGetTrainCar      = "GET /api/v4/projects/{pid}/merge_trains/merge_requests/{iid}"
	RouteAddTrainCar      = "POST /api/v4/projects/{pid}/merge_trains/merge_requests/{iid}"
	RouteListTrain        = "GET /api/v4/projects/{pid}/merge_trains/{branch}"
	RouteUsers            = "GET /api/v4/users"
	RouteListDeployments  = "GET /api/v4/projects/{pid}/deployments"
	RouteCreateDeployment = "POST /api/v4/projects/{pid}/deployments"
	RouteGetDeployment    = "GET /api/v4/projects/{pid}/deployments/{did}"
	RouteUpdateDeployment = "PUT /api/v4/projects/{pid}/deployments/{did}"
	RouteJobTrace         = "GET /api/v4/projects/{pid}/jobs/{jid}/trace"
)

// PeekHeader is a header of the fake, not of GitLab: a request carrying
// it (any value) is answered as any other, but changes nothing and is not
// counted. It starts no mergeability check and finishes none, meets no
// fault and no rate limit. A test reads with it what GitLab shows, to
// compare with what the code under test stored, without disturbing the
// history it drives.
const PeekHeader = "X-Gitlabtest-Peek"

// peek reports whether r is a peek (see PeekHeader).
func peek(r *http.Request) bool { return r.Header.Get(PeekHeader) != "" }

// Options shape the fake's project.
type Options struct {
	// ApprovalsRequired is the number of approvals every merge request
	// needs; one with fewer is not_approved and is not merged. Zero means
	// the project has no approval rules.
	ApprovalsRequired int64
	// ResetApprovalsOnPush drops a merge request's approvals when commits
	// are pushed to it (GitLab's "Remove all approvals when commits are
	// added to the source branch").
	ResetApprovalsOnPush bool
	// MergeMethod is the project's merge method: "merge" (a merge commit,
	// the default) or "ff" (fast-forward; a merge request whose target
	// branch moved on since its last push then needs a rebase).
	MergeMethod string
	// AutoBranch makes a merge request's missing source branch exist, with
	// a new commit, as if the agent had pushed it before submitting (for
	// harnesses that cannot push first, such as adaptertest's). Otherwise,
	// as at GitLab, opening a merge request from a branch nobody pushed is
	// answered 400 {"message":{"source_branch":["does not exist"]}}.
	AutoBranch bool
	// Now tells GitLab's time: the Date of the answers, the created_at and
	// updated_at of what the fake holds, the windows of its rate limit.
	// Defaults to time.Now; give the clock of a test that drives time.
	Now func() time.Time
	// RateLimit is how many requests a minute the token may make, as
	// GitLab's authenticated API rate limit counts them (2,000 on
	// GitLab.com), in windows that start on the minute. With it, every
	// answer carries RateLimit-Name, RateLimit-Limit, RateLimit-Observed,
	// RateLimit-Remaining and RateLimit-Reset (a Unix time), and a
	// request past the limit is answered 429 "Retry later" with
	// Retry-After and RateLimit-ResetTime as well, without being done.
	// Zero means no rate limit and none of these headers.
	RateLimit int
	// MergeabilityAtOnce works out a merge request's mergeability as soon
	// as a reading asks for it, instead of by the next request: for
	// benchmarks that measure the adapter and the Service rather than
	// GitLab's background checks.
	MergeabilityAtOnce bool
	// CheckDelay is how long GitLab takes to work out a merge request's
	// mergeability once a request asked for it (a reading of it alone, a
	// list with with_merge_status_recheck): the check is done by the
	// first request once that long has passed on Now. Zero: right after
	// the answer of the request that asked, so the next request has it.
	CheckDelay time.Duration
	// MergeTrains gives the project merge trains (GitLab Premium): its
	// merge_pipelines_enabled and merge_trains_enabled are true and the
	// Merge Trains API answers (see [Server.TrainCar]). The merge API
	// still merges at once, past the train, as GitLab's does.
	MergeTrains bool
}

// Server is the fake GitLab. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the instance, to give as the adapter's
	// Config.BaseURL (the API is under URL/api/v4/).
	URL string

	t    testing.TB
	srv  *httptest.Server
	mux  *http.ServeMux
	opts Options
	// pushMu serialises pushes through the git remote (git mode).
	pushMu sync.Mutex

	mu          sync.Mutex
	branches    map[string]string
	mrs         []*mergeRequest
	users       map[string]int64
	pipelines   map[int64]*pipeline
	statuses    []*status
	parents     map[string][]string // merge ref commits by SHA: their parents
	deployments []*gl.Deployment
	nextID      int64
	nextPipeIID int64
	calls       map[string]int
	traces      map[int64]string // job logs by job ID
	faults      map[string][]Fault
	window      time.Time // start of the rate limit's current window
	observed    int       // requests in it

	cars           map[int64]*car // merge train cars by merge request IID
	mrTemplate     map[string]any
	branchTemplate map[string]any
	carTemplate    map[string]any
	listKeys       map[string]bool // members of a merge request in a list
	userTemplate   map[string]any
	commitTemplate map[string]any
	// git is the project's repository in git mode, or nil (see
	// EnableGit).
	git *gitRepo
}

// Fault is an answer the fake gives instead of doing a call, or, with
// Apply, after doing it (an answer lost on the way back).
type Fault struct {
	// Status is the answer's HTTP status.
	Status int
	// Header holds headers of the answer (Retry-After, RateLimit-Reset).
	Header http.Header
	// Body is the answer's body, GitLab's JSON error.
	Body string
	// Apply does the call before answering with the fault.
	Apply bool
	// Delay holds the answer back that long (a slow GitLab), or until the
	// client gives up on the request.
	Delay time.Duration
}

// NewServer starts a fake GitLab, closed when t's test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.MergeMethod == "" {
		opts.MergeMethod = "merge"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		t: t, opts: opts, users: map[string]int64{},
		pipelines: map[int64]*pipeline{}, parents: map[string][]string{}, nextID: 100, calls: map[string]int{}, traces: map[int64]string{}, faults: map[string][]Fault{},
	}
	s.branches = map[string]string{"main": NewSHA()}
	s.mrTemplate = s.payload("get_merge_request.json").(map[string]any)
	s.commitTemplate = s.payload("get_commit.json").(map[string]any)
	s.branchTemplate = s.payload("get_branch.json").(map[string]any)
	s.carTemplate = s.payload("get_merge_request_in_merge_train.json").(map[string]any)
	s.cars = map[int64]*car{}
	s.userTemplate = s.payload("list_users.json").([]any)[0].(map[string]any)
	s.listKeys = map[string]bool{}
	for k := range s.payload("get_merge_requests.json").([]any)[0].(map[string]any) {
		s.listKeys[k] = true
	}
	// Members GitLab's documentation gives a listed merge request that
	// the recording, made with an older GitLab, lacks.
	for _, k := range []string{"draft", "merge_status", "squash_commit_sha", "has_conflicts", "blocking_discussions_resolved"} {
		s.listKeys[k] = true
	}
	for i, name := range []string{"alice", "bob", "carol"} {
		s.users[name] = int64(i + 1)
	}
	mux := http.NewServeMux()
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if peek(r) {
				s.mu.Lock()
				w.Header().Set("Date", s.now().Format(http.TimeFormat))
				s.mu.Unlock()
				h(w, r)
				return
			}
			defer func() { // counted once answered
				s.mu.Lock()
				s.calls[pattern]++
				s.mu.Unlock()
			}()
			s.mu.Lock()
			s.dueChecksLocked()
			w.Header().Set("Date", s.now().Format(http.TimeFormat))
			if !s.rateLimitLocked(w) {
				s.mu.Unlock()
				_, _ = io.Copy(io.Discard, r.Body)
				return
			}
			var flt *Fault
			if q := s.faults[pattern]; len(q) > 0 {
				flt, s.faults[pattern] = &q[0], q[1:]
			}
			s.mu.Unlock()
			if r.Header.Get("Private-Token") == "" && r.Header.Get("Authorization") == "" {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401 Unauthorized"})
				return
			}
			if flt != nil {
				if flt.Apply {
					h(httptest.NewRecorder(), r)
				}
				// With the body read, the server notices a client that
				// gives up.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-time.After(flt.Delay):
				case <-r.Context().Done():
				}
				flt.write(w)
				return
			}
			h(w, r)
		})
	}
	route(RouteProject, s.getProject)
	route(RouteProjectApprovals, s.getProjectApprovals)
	route(RouteListMRs, s.listMRs)
	route(RouteCreateMR, s.createMR)
	route(RouteGetMR, s.getMR)
	route(RouteUpdateMR, s.updateMR)
	route(RouteMerge, s.mergeMR)
	route(RouteApprovals, s.getApprovals)
	route(RouteReviewers, s.getReviewers)
	route(RouteListPipelines, s.listPipelines)
	route(RouteStatuses, s.getStatuses)
	route(RouteCommit, s.getCommit)
	route(RouteMRNotes, s.listNotes)
	route(RouteBranch, s.getBranch)
	route(RouteGetTrainCar, s.getTrainCar)
	route(RouteAddTrainCar, s.addTrainCar)
	route(RouteListTrain, s.listTrain)
	route(RouteUsers, s.listUsers)
	route(RouteListDeployments, s.listDeployments)
	route(RouteCreateDeployment, s.createDeployment)
	route(RouteGetDeployment, s.getDeployment)
	route(RouteUpdateDeployment, s.updateDeployment)
	route(RouteJobTrace, s.getTrace)
	route(RouteGraphQL, s.graphQL)
	route(RouteDeleteBranch, s.deleteBranch)
	s.mux = mux
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func (flt *Fault) write(w http.ResponseWriter) {
	for k, v := range flt.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(flt.Status)
	fmt.Fprint(w, flt.Body)
}

// now returns GitLab's time, in UTC.
func (s *Server) now() time.Time { return s.opts.Now().UTC() }

// rateLimitName is the throttle the fake's rate limit stands for.
const rateLimitName = "throttle_authenticated_api"

// rateLimitLocked counts a request against the rate limit and writes the
// headers GitLab sends with every answer; past the limit it answers 429
// as GitLab does and reports false.
func (s *Server) rateLimitLocked(w http.ResponseWriter) bool {
	if s.opts.RateLimit <= 0 {
		return true
	}
	// GitLab's windows start at multiples of the period since the epoch,
	// and it counts in whole seconds.
	now := s.now().Unix()
	retry := 60 - now%60
	reset := time.Unix(now+retry, 0).UTC()
	if start := reset.Add(-time.Minute); !start.Equal(s.window) {
		s.window, s.observed = start, 0
	}
	s.observed++
	h := w.Header()
	h.Set("RateLimit-Name", rateLimitName)
	h.Set("RateLimit-Limit", strconv.Itoa(s.opts.RateLimit))
	h.Set("RateLimit-Observed", strconv.Itoa(s.observed))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(s.opts.RateLimit-s.observed, 0)))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	if s.observed <= s.opts.RateLimit {
		return true
	}
	h.Set("Retry-After", strconv.FormatInt(retry, 10))
	h.Set("RateLimit-ResetTime", reset.Format(http.TimeFormat))
	h.Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprint(w, "Retry later\n")
	return false
}

// Inject queues a fault for the next call of a route (one of the Route
// constants).
func (s *Server) Inject(route string, flt Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[route] = append(s.faults[route], flt)
}

// DropFaults forgets the faults queued for a route that no call has met
// yet.
func (s *Server) DropFaults(route string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, route)
}

// Calls returns how many calls of a route were answered (a 429 of the
// rate limit included).
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

// TotalCalls returns how many calls the fake answered.
func (s *Server) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// AllCalls returns how many calls of each route the fake answered.
func (s *Server) AllCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// writePage answers a list with the page of items a request asks for, as
// GitLab's offset pagination does: per_page (20 unless given, at most
// 100) and page (from 1), with the X-Page, X-Per-Page, X-Next-Page,
// X-Prev-Page, X-Total and X-Total-Pages headers and a Link header.
func writePage[T any](w http.ResponseWriter, r *http.Request, items []T) {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = 20
	}
	per = min(per, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	pages := max(1, (len(items)+per-1)/per)
	from, to := min((page-1)*per, len(items)), min(page*per, len(items))
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(len(items)))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	link := func(p int, rel string) string {
		u := *r.URL
		v := u.Query()
		v.Set("page", strconv.Itoa(p))
		v.Set("per_page", strconv.Itoa(per))
		u.RawQuery = v.Encode()
		return fmt.Sprintf("<http://%s%s>; rel=%q", r.Host, u.RequestURI(), rel)
	}
	var links []string
	if page > 1 && page <= pages {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		links = append(links, link(page-1, "prev"))
	}
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		links = append(links, link(page+1, "next"))
	}
	links = append(links, link(1, "first"), link(pages, "last"))
	h.Set("Link", strings.Join(links, ", "))
	page0 := items[from:to]
	if page0 == nil {
		page0 = []T{}
	}
	writeJSON(w, http.StatusOK, page0)
}

// timeParam reads a time parameter of a list (updated_after, ...) as
// GitLab does: ISO 8601, with or without a time. It answers 400 and
// reports false for one it cannot read.
func timeParam(w http.ResponseWriter, q url.Values, name string) (time.Time, bool) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": name + " is invalid"})
	return time.Time{}, false
}

// user returns the ID of a user, failing the test if there is none.
func (s *Server) user(name string) int64 {
	id, ok := s.users[name]
	if !ok {
		s.t.Fatalf("gitlabtest: no user %q (alice, bob and carol are)", name)
	}
	return id
}

// project checks the {pid} of a request: the numeric ID or the path.
func (s *Server) project(w http.ResponseWriter, r *http.Request) bool {
	pid := r.PathValue("pid")
	if pid == strconv.FormatInt(ProjectID, 10) || pid == ProjectPath {
		return true
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Project Not Found"})
	return false
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	name := ProjectPath[strings.LastIndex(ProjectPath, "/")+1:]
	writeJSON(w, http.StatusOK, &gl.Project{
		ID: ProjectID, Name: name, Path: name, PathWithNamespace: ProjectPath, DefaultBranch: "main",
		WebURL: s.URL + "/" + ProjectPath, HTTPURLToRepo: s.URL + "/" + ProjectPath + ".git", MergeMethod: gl.MergeMethodValue(s.opts.MergeMethod),
		MergePipelinesEnabled: s.opts.MergeTrains, MergeTrainsEnabled: s.opts.MergeTrains,
	})
}

func (s *Server) getProjectApprovals(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, &gl.ProjectApprovals{ResetApprovalsOnPush: s.opts.ResetApprovalsOnPush})
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	if id, ok := s.users[r.URL.Query().Get("username")]; ok {
		out = append(out, s.userJSON(id))
	}
	writeJSON(w, http.StatusOK, out)
}

// userJSON renders a user in the shape of the recorded list of users.
func (s *Server) userJSON(id int64) map[string]any {
	u := cloneMap(s.userTemplate)
	for name, uid := range s.users {
		if uid == id {
			u["id"], u["username"], u["name"], u["web_url"] = id, name, strings.ToUpper(name[:1])+name[1:], s.URL+"/"+name
		}
	}
	return u
}

// basicUserJSON renders a user in the shape of the recorded merge
// request's author (GitLab's UserBasic).
func (s *Server) basicUserJSON(id int64) map[string]any {
	u := cloneMap(s.mrTemplate["author"].(map[string]any))
	for name, uid := range s.users {
		if uid == id {
			u["id"], u["username"], u["name"], u["web_url"] = id, name, strings.ToUpper(name[:1])+name[1:], s.URL+"/"+name
		}
	}
	return u
}

func (s *Server) basicUser(id int64) *gl.BasicUser {
	b, _ := json.Marshal(s.basicUserJSON(id))
	var u gl.BasicUser
	_ = json.Unmarshal(b, &u)
	return &u
}

// payload returns a recorded response or webhook payload of testdata,
// decoded into maps and slices.
func (s *Server) payload(name string) any {
	s.t.Helper()
	b, err := testdata.ReadFile("testdata/" + name)
	if err != nil {
		s.t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		s.t.Fatalf("gitlabtest: %s: %v", name, err)
	}
	return v
}

// cloneMap copies the top level of m.
func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// timeJSON renders a time as GitLab does: UTC, to the millisecond.
func timeJSON(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// NewSHA returns a random commit SHA.
func NewSHA() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sortBy orders items by key, ascending unless sort is "desc" (GitLab's
// default), and then by id the same way.
func sortBy[T any](items []T, sort string, key func(T) string, id func(T) int64) {
	slices.SortStableFunc(items, func(a, b T) int {
		c := strings.Compare(key(a), key(b))
		if c == 0 {
			c = int(id(a) - id(b))
			if c > 0 {
				c = 1
			} else if c < 0 {
				c = -1
			}
		}
		if sort != "asc" {
			c = -c
		}
		return c
	})
}
