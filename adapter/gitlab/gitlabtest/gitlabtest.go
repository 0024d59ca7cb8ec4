// Package gitlabtest is a stateful fake of the parts of GitLab's REST API
// that package gitlab uses, on an httptest server, for tests of the
// adapter and of programs built on it (the demo's test runs the whole
// lifecycle against it).
//
// The fake holds one project, [ProjectPath] (ID [ProjectID]), with a
// default branch "main" and the users alice, bob and carol (IDs 1 to 3).
// Merge requests, users and webhook payloads are served in the shapes of
// the real GitLab responses recorded in client-go's testdata (copied into
// this package, see testdata/README.md), and so are the merge commits of
// merged-results pipelines; the rest (projects, approvals, commit
// statuses, deployments) as client-go's own types encode them, whose
// members are GitLab's. Any access token is accepted; a request
// without one is answered 401.
//
// Tests change the project as people and CI would ([Server.Push],
// [Server.Pipeline], [Server.MergedResultsPipeline], [Server.Approve],
// [Server.SetReviewerState], [Server.JobDeployment],
// [Server.SetDeployment], ...), make GitLab misbehave with
// [Server.Inject], and count the calls the adapter made with
// [Server.Calls].
package gitlabtest

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
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
	RouteStatuses         = "GET /api/v4/projects/{pid}/repository/commits/{sha}/statuses"
	RouteCommit           = "GET /api/v4/projects/{pid}/repository/commits/{sha}"
	RouteUsers            = "GET /api/v4/users"
	RouteListDeployments  = "GET /api/v4/projects/{pid}/deployments"
	RouteCreateDeployment = "POST /api/v4/projects/{pid}/deployments"
	RouteGetDeployment    = "GET /api/v4/projects/{pid}/deployments/{did}"
	RouteUpdateDeployment = "PUT /api/v4/projects/{pid}/deployments/{did}"
)

// Options shape the fake's project.
type Options struct {
	// ApprovalsRequired is the number of approvals every merge request
	// needs. Zero means the project has no approval rules.
	ApprovalsRequired int64
	// ResetApprovalsOnPush drops a merge request's approvals when commits
	// are pushed to it (GitLab's "Remove all approvals when commits are
	// added to the source branch").
	ResetApprovalsOnPush bool
	// MergeMethod is the project's merge method: "merge" (a merge commit,
	// the default) or "ff" (fast-forward).
	MergeMethod string
	// AutoBranch makes a merge request's missing source branch exist, with
	// a new commit, as if the agent had pushed it before submitting (for
	// harnesses that cannot push first, such as adaptertest's). Otherwise,
	// as at GitLab, opening a merge request from a branch nobody pushed is
	// answered 400 {"message":{"source_branch":["does not exist"]}}.
	AutoBranch bool
}

// Server is the fake GitLab. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the instance, to give as the adapter's
	// Config.BaseURL (the API is under URL/api/v4/).
	URL string

	t    testing.TB
	srv  *httptest.Server
	opts Options

	mu          sync.Mutex
	branches    map[string]string
	mrs         []*mergeRequest
	users       map[string]int64
	pipelines   map[int64]*pipeline
	statuses    []*gl.CommitStatus
	parents     map[string][]string // merge ref commits by SHA: their parents
	deployments []*gl.Deployment
	nextID      int64
	calls       map[string]int
	faults      map[string][]Fault

	mrTemplate     map[string]any
	userTemplate   map[string]any
	commitTemplate map[string]any
}

type mergeRequest struct {
	iid                  int64
	id                   int64
	sourceProject        int64 // ProjectID, or a fork's ID
	source, target       string
	title, description   string
	state                string
	sha                  string
	mergeCommit, squashC string
	squash               bool
	reviewers            []int64
	reviewerState        map[int64]string
	approvedBy           []int64
	headPipeline         int64
	detailed             string
}

type pipeline struct {
	id       int64
	sha, ref string
	status   string
	webURL   string
}

// MergeRequest is what the fake holds of a merge request.
type MergeRequest struct {
	// IID is its number in the project.
	IID int64
	// SourceProjectID is the project of its source branch: ProjectID, or
	// a fork's.
	SourceProjectID int64
	// SourceBranch and TargetBranch are its branches.
	SourceBranch, TargetBranch string
	// Title and Description are as last set.
	Title, Description string
	// State is opened, closed, merged, or locked (while a merge runs).
	State string
	// SHA is its head commit.
	SHA string
	// MergeCommitSHA is its merge commit; empty unless merged with one.
	MergeCommitSHA string
	// SquashCommitSHA is its squash commit; empty unless squashed.
	SquashCommitSHA string
	// ReviewerIDs are the user IDs of its reviewers.
	ReviewerIDs []int64
	// ReviewerStates are the reviewers' states by user ID.
	ReviewerStates map[int64]string
	// ApprovedBy are the user IDs of those who approved it.
	ApprovedBy []int64
	// DetailedMergeStatus is GitLab's detailed_merge_status.
	DetailedMergeStatus string
	// HeadPipelineID is the ID of its head pipeline, or 0.
	HeadPipelineID int64
	// SquashOnMerge is its squash setting.
	SquashOnMerge bool
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
	s := &Server{
		t: t, opts: opts,
		branches: map[string]string{"main": NewSHA()}, users: map[string]int64{},
		pipelines: map[int64]*pipeline{}, parents: map[string][]string{}, nextID: 100, calls: map[string]int{}, faults: map[string][]Fault{},
	}
	s.mrTemplate = s.payload("get_merge_request.json").(map[string]any)
	s.commitTemplate = s.payload("get_commit.json").(map[string]any)
	s.userTemplate = s.payload("list_users.json").([]any)[0].(map[string]any)
	for i, name := range []string{"alice", "bob", "carol"} {
		s.users[name] = int64(i + 1)
	}
	mux := http.NewServeMux()
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			defer func() { // counted once answered
				s.mu.Lock()
				s.calls[pattern]++
				s.mu.Unlock()
			}()
			s.mu.Lock()
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
	route(RouteStatuses, s.getStatuses)
	route(RouteCommit, s.getCommit)
	route(RouteUsers, s.listUsers)
	route(RouteListDeployments, s.listDeployments)
	route(RouteCreateDeployment, s.createDeployment)
	route(RouteGetDeployment, s.getDeployment)
	route(RouteUpdateDeployment, s.updateDeployment)
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

// Inject queues a fault for the next call of a route (one of the Route
// constants).
func (s *Server) Inject(route string, flt Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[route] = append(s.faults[route], flt)
}

// Calls returns how many calls of a route were answered.
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

// Push moves a branch to a new commit (creating the branch if needed), as
// an agent pushing would, and returns the commit. Open merge requests
// from the branch get it as their head; where approvals are reset on
// push, they lose theirs.
func (s *Server) Push(branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushLocked(branch)
}

func (s *Server) pushLocked(branch string) string {
	c := NewSHA()
	s.branches[branch] = c
	for _, mr := range s.mrs {
		if mr.sourceProject == ProjectID && mr.source == branch && mr.state == "opened" {
			mr.sha = c
			if s.opts.ResetApprovalsOnPush {
				mr.approvedBy = nil
			}
		}
	}
	return c
}

// OpenForkMergeRequest opens a merge request into the project's target
// branch from branch of another project, a fork whose ID is
// sourceProjectID, as someone outside the project may, and returns its
// IID. Its head is a commit of the fork; pushes to the project's own
// branch of that name do not move it. GitLab's list of the project's merge
// requests filtered by source_branch includes it, whatever its source
// project.
func (s *Server) OpenForkMergeRequest(sourceProjectID int64, branch, target, title string) int64 {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sourceProjectID == ProjectID {
		s.t.Fatalf("gitlabtest: a fork's project ID must not be the project's (%d)", ProjectID)
	}
	if _, ok := s.branches[target]; !ok {
		s.t.Fatalf("gitlabtest: no target branch %q", target)
	}
	s.nextID++
	mr := &mergeRequest{iid: int64(len(s.mrs) + 1), id: s.nextID, sourceProject: sourceProjectID, source: branch, target: target,
		title: title, state: "opened", sha: NewSHA(), detailed: "mergeable", reviewerState: map[int64]string{}}
	s.mrs = append(s.mrs, mr)
	return mr.iid
}

// Pipeline runs a pipeline for merge request iid at its current head,
// makes it the head pipeline, records its jobs (Name, Status and
// optionally AllowFailure and TargetURL set) as commit statuses of the
// pipeline, and returns its ID.
func (s *Server) Pipeline(iid int64, status string, jobs ...*gl.CommitStatus) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	p := s.newPipelineLocked(mr, status)
	for _, j := range jobs {
		s.nextID++
		j.ID, j.SHA, j.Ref, j.PipelineID = s.nextID, mr.sha, mr.source, p.id
		s.statuses = append(s.statuses, j)
	}
	return p.id
}

func (s *Server) newPipelineLocked(mr *mergeRequest, status string) *pipeline {
	s.nextID++
	p := &pipeline{id: s.nextID, sha: mr.sha, ref: mr.source, status: status,
		webURL: fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, ProjectPath, s.nextID)}
	s.pipelines[p.id] = p
	mr.headPipeline = p.id
	return p
}

// MergedResultsPipeline runs a merged-results pipeline (GitLab Premium's
// "pipelines for merged results", also what a merge train runs) for merge
// request iid: a pipeline on refs/merge-requests/<iid>/merge at a new
// commit merging the merge request's head into its target branch, which
// becomes the head pipeline. Its jobs (Name, Status and optionally
// AllowFailure and TargetURL set) are recorded as commit statuses of that
// merge commit. It returns the pipeline's ID and the merge commit's SHA.
//
// As at GitLab, the head pipeline stays this one after a push until a
// pipeline of the new head is run.
func (s *Server) MergedResultsPipeline(iid int64, status string, jobs ...*gl.CommitStatus) (id int64, mergeSHA string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mergeSHA = NewSHA()
	s.parents[mergeSHA] = []string{s.branches[mr.target], mr.sha}
	s.nextID++
	ref := fmt.Sprintf("refs/merge-requests/%d/merge", iid)
	p := &pipeline{id: s.nextID, sha: mergeSHA, ref: ref, status: status,
		webURL: fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, ProjectPath, s.nextID)}
	s.pipelines[p.id] = p
	mr.headPipeline = p.id
	for _, j := range jobs {
		s.nextID++
		j.ID, j.SHA, j.Ref, j.PipelineID = s.nextID, mergeSHA, ref, p.id
		s.statuses = append(s.statuses, j)
	}
	return p.id, mergeSHA
}

// SetCheck makes the head pipeline of the open merge request whose head
// is sha report a job name with a GitLab status (success, failed,
// running, ...), starting a pipeline when it has none of that commit.
func (s *Server) SetCheck(sha, name, status, targetURL string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var mr *mergeRequest
	for _, m := range s.mrs {
		if m.sha == sha {
			mr = m
		}
	}
	if mr == nil {
		s.t.Fatalf("gitlabtest: no merge request has head %s", sha)
	}
	p := s.pipelines[mr.headPipeline]
	if p == nil || p.sha != sha {
		p = s.newPipelineLocked(mr, "running")
	}
	s.nextID++
	s.statuses = append(s.statuses, &gl.CommitStatus{ID: s.nextID, SHA: sha, Ref: mr.source, Name: name, Status: status, TargetURL: targetURL, PipelineID: p.id})
}

// AddStatus records a commit status as it is, such as one of another
// pipeline of the same commit. A zero ID is given the next one.
func (s *Server) AddStatus(st *gl.CommitStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.ID == 0 {
		s.nextID++
		st.ID = s.nextID
	}
	s.statuses = append(s.statuses, st)
}

// Approve records an approval of merge request iid by a user (alice, bob
// or carol); a reviewer's state becomes approved.
func (s *Server) Approve(iid int64, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr, id := s.mr(iid), s.user(user)
	if !slices.Contains(mr.approvedBy, id) {
		mr.approvedBy = append(mr.approvedBy, id)
	}
	if _, ok := mr.reviewerState[id]; ok {
		mr.reviewerState[id] = "approved"
	}
}

// SetReviewerState sets a user's reviewer state on merge request iid, as
// submitting a review at GitLab does: "reviewed" (a review without
// approval), "requested_changes" (which, as at GitLab, takes the user's
// approval back), "unreviewed" (review requested again). The user becomes
// a reviewer if not one.
func (s *Server) SetReviewerState(iid int64, user, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr, id := s.mr(iid), s.user(user)
	if !slices.Contains(mr.reviewers, id) {
		mr.reviewers = append(mr.reviewers, id)
	}
	mr.reviewerState[id] = state
	if state == "requested_changes" {
		mr.approvedBy = slices.DeleteFunc(mr.approvedBy, func(u int64) bool { return u == id })
	}
}

// SetDetailedMergeStatus sets merge request iid's detailed_merge_status;
// any value but "mergeable" makes a merge answer 405, as GitLab does for a
// merge request that cannot be merged (not approved, a draft, conflicts,
// blocking discussions, a failed or running pipeline, mergeability not
// checked yet: checking, unchecked, preparing, approvals_syncing, ...).
func (s *Server) SetDetailedMergeStatus(iid int64, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mr(iid).detailed = status
}

// LockForMerge makes merge request iid locked, the state GitLab gives a
// merge request while it merges it (a person pressed the merge button, a
// merge train merges it): a merge meanwhile answers 405. MergeByHand then
// finishes the merge.
func (s *Server) LockForMerge(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mr(iid).state = "locked"
}

// MergeByHand merges merge request iid at its head with a merge commit,
// as a person pressing the merge button does, and returns the commit.
func (s *Server) MergeByHand(iid int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state, mr.mergeCommit, mr.detailed = "merged", NewSHA(), "not_open"
	s.branches[mr.target] = mr.mergeCommit
	return mr.mergeCommit
}

// Close closes merge request iid without merging it.
func (s *Server) Close(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state, mr.detailed = "closed", "not_open"
}

// Reopen reopens merge request iid.
func (s *Server) Reopen(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state, mr.detailed = "opened", "mergeable"
}

// MergeRequest returns what the fake holds of merge request iid.
func (s *Server) MergeRequest(iid int64) MergeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	return MergeRequest{
		IID: mr.iid, SourceProjectID: mr.sourceProject, SourceBranch: mr.source, TargetBranch: mr.target, Title: mr.title, Description: mr.description,
		State: mr.state, SHA: mr.sha, MergeCommitSHA: mr.mergeCommit, SquashCommitSHA: mr.squashC,
		ReviewerIDs: slices.Clone(mr.reviewers), DetailedMergeStatus: mr.detailed, ApprovedBy: slices.Clone(mr.approvedBy),
		HeadPipelineID: mr.headPipeline, ReviewerStates: maps.Clone(mr.reviewerState), SquashOnMerge: mr.squash,
	}
}

// RunningDeployment returns the ID of the running deployment of sha to
// the environment env recorded through the Deployments API (not by a CI
// job), or 0.
func (s *Server) RunningDeployment(env, sha string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deployments {
		if d.Environment.Name == env && d.SHA == sha && d.Status == "running" && d.Deployable.ID == 0 {
			return d.ID
		}
	}
	return 0
}

// Deployment returns the status of deployment id and whether a CI job made
// it, failing the test if there is none.
func (s *Server) Deployment(id int64) (status string, byJob bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deployments {
		if d.ID == id {
			return d.Status, d.Deployable.ID != 0
		}
	}
	s.t.Fatalf("gitlabtest: no deployment %d", id)
	return "", false
}

// JobDeployment records the deployment a CI job with environment: env
// makes for a pipeline of ref at sha, as GitLab does when it creates the
// pipeline: linked to the job (its "deployable"), with status created
// (the job waits or is manual), and later running, success, failed,
// canceled, skipped or blocked (waiting for approval) as the job goes,
// which [Server.SetDeployment] sets. GitLab refuses to update such a
// deployment through the API. It returns the deployment's ID.
func (s *Server) JobDeployment(env, sha, ref, status string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	d := s.newDeploymentLocked(env, ref, sha, status, now)
	s.nextID++
	pipeline := s.nextID
	s.nextID++
	d.Deployable = gl.DeploymentDeployable{ID: s.nextID, Status: jobStatus(status), Stage: "deploy", Name: "deploy-" + env, Ref: ref, CreatedAt: &now,
		Pipeline: gl.DeploymentDeployablePipeline{ID: pipeline, SHA: sha, Ref: ref, Status: jobStatus(status), CreatedAt: &now, UpdatedAt: &now}}
	return d.ID
}

// jobStatus is the status of a deploy job whose deployment has status st.
func jobStatus(st string) string {
	if st == "blocked" {
		return "manual" // waiting for a deployment approval
	}
	return st
}

// SetDeployment sets the status of deployment id (running, success,
// failed, canceled, ...), as the team's deploy job or deploy system does.
func (s *Server) SetDeployment(id int64, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deployments {
		if d.ID == id {
			d.Status = status
			now := time.Now().UTC()
			d.UpdatedAt = &now
			if d.Deployable.ID != 0 {
				d.Deployable.Status = jobStatus(status)
				d.Deployable.Pipeline.Status = jobStatus(status)
			}
		}
	}
}

func (s *Server) newDeploymentLocked(env, ref, sha, status string, now time.Time) *gl.Deployment {
	s.nextID++
	d := &gl.Deployment{ID: s.nextID, IID: int64(len(s.deployments) + 1), Ref: ref, SHA: sha, Status: status,
		CreatedAt: &now, UpdatedAt: &now,
		Environment: &gl.Environment{ID: 7, Name: env, Slug: env, ExternalURL: "https://" + env + ".example.com"}}
	s.deployments = append(s.deployments, d)
	return d
}

// deploymentJSON renders a deployment as GitLab does: "deployable" is the
// job that made it, or null for one recorded through the API.
func deploymentJSON(d *gl.Deployment) map[string]any {
	b, _ := json.Marshal(d)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if d.Deployable.ID == 0 {
		m["deployable"] = nil
	}
	return m
}

// mr returns merge request iid, failing the test if there is none.
func (s *Server) mr(iid int64) *mergeRequest {
	if iid < 1 || iid > int64(len(s.mrs)) {
		s.t.Fatalf("gitlabtest: no merge request !%d", iid)
	}
	return s.mrs[iid-1]
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
		WebURL: s.URL + "/" + ProjectPath, MergeMethod: gl.MergeMethodValue(s.opts.MergeMethod),
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

func (s *Server) listMRs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	q := r.URL.Query()
	out := []any{}
	for _, mr := range s.mrs {
		if (q.Get("state") == "" || q.Get("state") == mr.state) &&
			(q.Get("source_branch") == "" || q.Get("source_branch") == mr.source) &&
			(q.Get("target_branch") == "" || q.Get("target_branch") == mr.target) {
			out = append(out, s.mrJSON(mr))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title        string  `json:"title"`
		Description  string  `json:"description"`
		SourceBranch string  `json:"source_branch"`
		TargetBranch string  `json:"target_branch"`
		ReviewerIDs  []int64 `json:"reviewer_ids"`
		Squash       bool    `json:"squash"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	// GitLab's validation errors: 400 with the model's errors keyed by
	// attribute.
	invalid := map[string][]string{}
	if _, ok := s.branches[body.TargetBranch]; !ok {
		invalid["target_branch"] = []string{"does not exist"}
	}
	if _, ok := s.branches[body.SourceBranch]; !ok && !s.opts.AutoBranch {
		invalid["source_branch"] = []string{"does not exist"}
	}
	if len(invalid) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": invalid})
		return
	}
	for _, mr := range s.mrs {
		if mr.sourceProject == ProjectID && mr.source == body.SourceBranch && mr.target == body.TargetBranch && mr.state == "opened" {
			writeJSON(w, http.StatusConflict, map[string]any{"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", mr.iid)}})
			return
		}
	}
	if _, ok := s.branches[body.SourceBranch]; !ok {
		s.pushLocked(body.SourceBranch) // AutoBranch: the agent pushed its work
	}
	s.nextID++
	mr := &mergeRequest{iid: int64(len(s.mrs) + 1), id: s.nextID, sourceProject: ProjectID, source: body.SourceBranch, target: body.TargetBranch, title: body.Title,
		description: body.Description, state: "opened", sha: s.branches[body.SourceBranch],
		squash: body.Squash, detailed: "mergeable", reviewerState: map[int64]string{}}
	mr.setReviewers(body.ReviewerIDs)
	s.mrs = append(s.mrs, mr)
	writeJSON(w, http.StatusCreated, s.mrJSON(mr))
}

// setReviewers makes ids the reviewers, keeping the states of those who
// stay; new ones are unreviewed.
func (mr *mergeRequest) setReviewers(ids []int64) {
	mr.reviewers = slices.Clone(ids)
	for id := range mr.reviewerState {
		if !slices.Contains(ids, id) {
			delete(mr.reviewerState, id)
		}
	}
	for _, id := range ids {
		if _, ok := mr.reviewerState[id]; !ok {
			mr.reviewerState[id] = "unreviewed"
		}
	}
}

// theMR returns the merge request of a request's {iid}, or answers 404.
func (s *Server) theMR(w http.ResponseWriter, r *http.Request) *mergeRequest {
	if !s.project(w, r) {
		return nil
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	if iid < 1 || iid > len(s.mrs) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
		return nil
	}
	return s.mrs[iid-1]
}

func (s *Server) getMR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mr := s.theMR(w, r); mr != nil {
		writeJSON(w, http.StatusOK, s.mrJSON(mr))
	}
}

func (s *Server) updateMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title       *string  `json:"title"`
		Description *string  `json:"description"`
		ReviewerIDs *[]int64 `json:"reviewer_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	if body.Title != nil {
		mr.title = *body.Title
	}
	if body.Description != nil {
		mr.description = *body.Description
	}
	if body.ReviewerIDs != nil {
		mr.setReviewers(*body.ReviewerIDs)
	}
	writeJSON(w, http.StatusOK, s.mrJSON(mr))
}

// mergeMR answers as GitLab's PUT .../merge ("Merge a merge request"):
// 405 Method Not Allowed when it cannot be merged (not open: closed,
// merged, or locked while a merge runs; or its detailed_merge_status is
// not mergeable), 409 when sha is not its head, 200 with the merged merge
// request. GitLab's 422 "Branch cannot be merged", a merge that failed
// while being made, is given with [Server.Inject].
func (s *Server) mergeMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SHA    string `json:"sha"`
		Squash *bool  `json:"squash"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	switch {
	case mr.state != "opened":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		return
	case mr.detailed != "mergeable":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		return
	case body.SHA != "" && body.SHA != mr.sha:
		writeJSON(w, http.StatusConflict, map[string]any{"message": "SHA does not match HEAD of source branch: " + mr.sha})
		return
	}
	squash := mr.squash
	if body.Squash != nil {
		squash = *body.Squash
	}
	head := mr.sha
	if squash {
		mr.squashC = NewSHA()
		head = mr.squashC
	}
	if s.opts.MergeMethod == "ff" {
		s.branches[mr.target] = head
	} else {
		mr.mergeCommit = NewSHA()
		s.branches[mr.target] = mr.mergeCommit
	}
	mr.state = "merged"
	mr.detailed = "not_open"
	writeJSON(w, http.StatusOK, s.mrJSON(mr))
}

func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	required := s.opts.ApprovalsRequired
	a := &gl.MergeRequestApprovals{ID: mr.id, IID: mr.iid, ProjectID: ProjectID, Title: mr.title, State: mr.state,
		ApprovalsRequired: required, HasApprovalRules: required > 0}
	for _, id := range mr.approvedBy {
		a.ApprovedBy = append(a.ApprovedBy, &gl.MergeRequestApproverUser{User: s.basicUser(id)})
	}
	a.ApprovalsLeft = max(0, required-int64(len(mr.approvedBy)))
	a.Approved = a.ApprovalsLeft == 0
	writeJSON(w, http.StatusOK, a)
}

// getReviewers answers GET .../reviewers: each reviewer as
// {"user": {...}, "state": ..., "created_at": ...}.
func (s *Server) getReviewers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	out := []any{}
	for _, id := range mr.reviewers {
		out = append(out, map[string]any{"user": s.basicUserJSON(id), "state": mr.reviewerState[id], "created_at": "2026-03-01T12:00:00.000Z"})
	}
	writeJSON(w, http.StatusOK, out)
}

// getStatuses answers GET .../commits/:sha/statuses, filtered by ref and
// pipeline_id as GitLab does.
func (s *Server) getStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	q := r.URL.Query()
	pid, _ := strconv.ParseInt(q.Get("pipeline_id"), 10, 64)
	out := []*gl.CommitStatus{}
	for _, st := range s.statuses {
		if st.SHA == r.PathValue("sha") && (pid == 0 || st.PipelineID == pid) && (q.Get("ref") == "" || q.Get("ref") == st.Ref) {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getCommit answers GET .../repository/commits/:sha for the merge commits
// of merged-results pipelines, in the shape of the recorded commit.
func (s *Server) getCommit(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	sha := r.PathValue("sha")
	parents, ok := s.parents[sha]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Commit Not Found"})
		return
	}
	c := maps.Clone(s.commitTemplate)
	c["id"], c["short_id"], c["parent_ids"], c["project_id"] = sha, sha[:11], parents, ProjectID
	c["title"] = "Merge branch into target"
	c["message"], c["last_pipeline"], c["status"] = c["title"], nil, nil
	writeJSON(w, http.StatusOK, c)
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

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	env := r.URL.Query().Get("environment")
	out := []any{}
	for _, d := range slices.Backward(s.deployments) { // order_by id, sort desc
		if env == "" || d.Environment.Name == env {
			out = append(out, deploymentJSON(d))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Environment string `json:"environment"`
		Ref         string `json:"ref"`
		SHA         string `json:"sha"`
		Status      string `json:"status"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	d := s.newDeploymentLocked(body.Environment, body.Ref, body.SHA, body.Status, time.Now().UTC())
	writeJSON(w, http.StatusCreated, deploymentJSON(d))
}

// deployment returns the deployment of a request's {did}, or answers 404.
func (s *Server) deployment(w http.ResponseWriter, r *http.Request) *gl.Deployment {
	if !s.project(w, r) {
		return nil
	}
	id, _ := strconv.ParseInt(r.PathValue("did"), 10, 64)
	for _, d := range s.deployments {
		if d.ID == id {
			return d
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
	return nil
}

func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.deployment(w, r); d != nil {
		writeJSON(w, http.StatusOK, deploymentJSON(d))
	}
}

// updateDeployment answers PUT .../deployments/:id {"status": ...}; a
// deployment made by a CI job is GitLab's 403.
func (s *Server) updateDeployment(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deployment(w, r)
	if d == nil {
		return
	}
	if d.Deployable.ID != 0 {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "403 Forbidden - Deployments created using GitLab CI can not be updated using the API"})
		return
	}
	d.Status = body.Status
	now := time.Now().UTC()
	d.UpdatedAt = &now
	writeJSON(w, http.StatusOK, deploymentJSON(d))
}

// mrJSON renders a merge request in the shape of the recorded response.
func (s *Server) mrJSON(mr *mergeRequest) map[string]any {
	m := maps.Clone(s.mrTemplate)
	web := fmt.Sprintf("%s/%s/-/merge_requests/%d", s.URL, ProjectPath, mr.iid)
	m["id"], m["iid"], m["project_id"] = mr.id, mr.iid, ProjectID
	m["source_project_id"], m["target_project_id"] = mr.sourceProject, ProjectID
	m["title"], m["description"], m["state"] = mr.title, mr.description, mr.state
	m["source_branch"], m["target_branch"] = mr.source, mr.target
	m["sha"], m["merge_commit_sha"], m["squash_commit_sha"] = mr.sha, nullable(mr.mergeCommit), nullable(mr.squashC)
	m["draft"] = strings.HasPrefix(mr.title, "Draft:")
	m["work_in_progress"] = m["draft"]
	m["squash"], m["web_url"], m["reference"] = mr.squash, web, fmt.Sprintf("!%d", mr.iid)
	m["detailed_merge_status"], m["merge_status"], m["has_conflicts"] = mr.detailed, "can_be_merged", mr.detailed == "conflict"
	m["blocking_discussions_resolved"] = mr.detailed != "discussions_not_resolved"
	m["diff_refs"] = map[string]any{"base_sha": s.branches[mr.target], "head_sha": mr.sha, "start_sha": s.branches[mr.target]}
	reviewers := []any{}
	for _, id := range mr.reviewers {
		reviewers = append(reviewers, s.userJSON(id))
	}
	m["reviewers"] = reviewers
	m["head_pipeline"], m["pipeline"] = nil, nil
	if p := s.pipelines[mr.headPipeline]; p != nil {
		hp := maps.Clone(s.mrTemplate["head_pipeline"].(map[string]any))
		hp["id"], hp["sha"], hp["ref"], hp["status"], hp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		m["head_pipeline"] = hp
		pp := maps.Clone(s.mrTemplate["pipeline"].(map[string]any))
		pp["id"], pp["sha"], pp["ref"], pp["status"], pp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		m["pipeline"] = pp
	}
	return m
}

// userJSON renders a user in the shape of the recorded list of users.
func (s *Server) userJSON(id int64) map[string]any {
	u := maps.Clone(s.userTemplate)
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
	u := maps.Clone(s.mrTemplate["author"].(map[string]any))
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

// Webhook events the fake delivers, as X-Gitlab-Event names them.
const (
	EventMergeRequest = "Merge Request Hook"
	EventPipeline     = "Pipeline Hook"
	EventJob          = "Job Hook"
	EventDeployment   = "Deployment Hook"
	EventPush         = "Push Hook"
)

// Delivery returns a new delivery of the project's webhook, authenticated
// with token, made from the recorded payload of event (one of the Event
// constants) with this project's values, after edit has changed it (edit
// may be nil). Each delivery has its own X-Gitlab-Event-UUID and
// Idempotency-Key. The request's URL is /hooks/gitlab: give its body and
// headers to the handler under test.
func (s *Server) Delivery(event, token string, edit func(payload map[string]any)) *http.Request {
	s.t.Helper()
	file := map[string]string{EventMergeRequest: "merge_request.json", EventPipeline: "pipeline.json", EventJob: "job.json",
		EventDeployment: "deployment.json", EventPush: "push.json"}[event]
	if file == "" {
		s.t.Fatalf("gitlabtest: no recorded payload of %q", event)
	}
	payload := s.payload("webhooks/" + file).(map[string]any)
	if proj, ok := payload["project"].(map[string]any); ok && event != EventPush {
		proj["id"], proj["path_with_namespace"] = ProjectID, ProjectPath
	}
	if event == EventJob {
		payload["project_id"] = ProjectID
	}
	if edit != nil {
		edit(payload)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		s.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("X-Gitlab-Token", token)
	uuid := newUUID()
	req.Header.Set("X-Gitlab-Event-UUID", uuid)
	req.Header.Set("Idempotency-Key", uuid)
	return req
}

// MergeRequestHook returns a delivery of a Merge Request Hook for merge
// request iid with action (update, approved, merge, ...) and last_commit
// its current head; newCommits sets oldrev, as GitLab does for an update
// that pushed commits.
func (s *Server) MergeRequestHook(iid int64, action string, newCommits bool, token string) *http.Request {
	s.t.Helper()
	head := s.MergeRequest(iid).SHA
	return s.Delivery(EventMergeRequest, token, func(p map[string]any) {
		attrs := p["object_attributes"].(map[string]any)
		attrs["iid"], attrs["action"], attrs["target_project_id"], attrs["source_project_id"] = iid, action, ProjectID, ProjectID
		attrs["last_commit"].(map[string]any)["id"] = head
		if newCommits {
			attrs["oldrev"] = NewSHA()
		}
	})
}

// DeploymentHook returns a delivery of a Deployment Hook saying
// deployment id is now status.
func (s *Server) DeploymentHook(id int64, status, token string) *http.Request {
	s.t.Helper()
	return s.Delivery(EventDeployment, token, func(p map[string]any) {
		p["deployment_id"], p["status"] = id, status
	})
}

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

// newUUID returns a random UUID, as GitLab's delivery IDs are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
