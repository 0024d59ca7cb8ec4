package gitlab_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// fakeGitLab is a stateful fake of the parts of GitLab's REST API the
// adapter uses, on an httptest server. Merge requests and users are served
// in the shapes of client-go's recorded responses (testdata); the rest as
// client-go's own types encode them, whose members are GitLab's.
type fakeGitLab struct {
	t   testing.TB
	srv *httptest.Server

	mu          sync.Mutex
	projectID   int64
	path        string // path_with_namespace
	defBranch   string
	resetOnPush bool
	mergeMethod string // "merge" or "ff"
	approvals   int64  // approvals required on every merge request
	branches    map[string]string
	mrs         []*fakeMR
	users       map[string]int64
	pipelines   map[int64]*fakePipeline
	statuses    []*gl.CommitStatus
	deployments []*gl.Deployment
	nextID      int64
	calls       map[string]int
	faults      map[string][]fault

	mrTemplate   map[string]any
	userTemplate map[string]any
}

type fakeMR struct {
	iid                  int64
	id                   int64
	source, target       string
	title, description   string
	state                string
	sha                  string
	mergeCommit, squashC string
	squash               bool
	reviewers            []int64
	approvedBy           []int64
	headPipeline         int64
	detailed             string
}

type fakePipeline struct {
	id          int64
	sha, ref    string
	status      string
	createdAt   time.Time
	webURL      string
	mergeReqIID int64
}

// fault is an answer the fake gives instead of (or after) doing a call.
type fault struct {
	status int
	header http.Header
	body   string
	apply  bool // do the call, then answer with the fault (a lost answer)
}

func newFake(t testing.TB) *fakeGitLab {
	t.Helper()
	f := &fakeGitLab{
		t: t, projectID: 3, path: "acme/web", defBranch: "main", mergeMethod: "merge",
		branches: map[string]string{"main": sha()}, users: map[string]int64{},
		pipelines: map[int64]*fakePipeline{}, nextID: 100, calls: map[string]int{}, faults: map[string][]fault{},
	}
	f.mrTemplate = readJSON(t, "testdata/get_merge_request.json").(map[string]any)
	f.userTemplate = readJSON(t, "testdata/list_users.json").([]any)[0].(map[string]any)
	for i, name := range []string{"alice", "bob", "carol"} {
		f.users[name] = int64(i + 1)
	}
	mux := http.NewServeMux()
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			key := pattern
			defer func() { // counted once answered
				f.mu.Lock()
				f.calls[key]++
				f.mu.Unlock()
			}()
			f.mu.Lock()
			var flt *fault
			if q := f.faults[key]; len(q) > 0 {
				flt, f.faults[key] = &q[0], q[1:]
			}
			f.mu.Unlock()
			if r.Header.Get("Private-Token") == "" && r.Header.Get("Authorization") == "" {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401 Unauthorized"})
				return
			}
			if flt != nil && !flt.apply {
				flt.write(w)
				return
			}
			if flt != nil {
				h(httptest.NewRecorder(), r)
				flt.write(w)
				return
			}
			h(w, r)
		})
	}
	route("GET /api/v4/projects/{pid}", f.getProject)
	route("GET /api/v4/projects/{pid}/approvals", f.getProjectApprovals)
	route("GET /api/v4/projects/{pid}/merge_requests", f.listMRs)
	route("POST /api/v4/projects/{pid}/merge_requests", f.createMR)
	route("GET /api/v4/projects/{pid}/merge_requests/{iid}", f.getMR)
	route("PUT /api/v4/projects/{pid}/merge_requests/{iid}", f.updateMR)
	route("PUT /api/v4/projects/{pid}/merge_requests/{iid}/merge", f.mergeMR)
	route("GET /api/v4/projects/{pid}/merge_requests/{iid}/approvals", f.getApprovals)
	route("GET /api/v4/projects/{pid}/repository/commits/{sha}/statuses", f.getStatuses)
	route("GET /api/v4/users", f.listUsers)
	route("GET /api/v4/projects/{pid}/deployments", f.listDeployments)
	route("POST /api/v4/projects/{pid}/deployments", f.createDeployment)
	route("GET /api/v4/projects/{pid}/deployments/{did}", f.getDeployment)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (flt *fault) write(w http.ResponseWriter) {
	for k, v := range flt.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(flt.status)
	fmt.Fprint(w, flt.body)
}

// inject queues a fault for the next call of a route (its pattern).
func (f *fakeGitLab) inject(pattern string, flt fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[pattern] = append(f.faults[pattern], flt)
}

// count returns how many calls a route had.
func (f *fakeGitLab) count(pattern string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[pattern]
}

// total returns how many calls the fake had.
func (f *fakeGitLab) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// push moves a branch to a new commit, as an agent pushing would, and
// returns the commit.
func (f *fakeGitLab) push(branch string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pushLocked(branch)
}

func (f *fakeGitLab) pushLocked(branch string) string {
	s := sha()
	f.branches[branch] = s
	for _, mr := range f.mrs {
		if mr.source == branch && mr.state == "opened" {
			mr.sha = s
			if f.resetOnPush {
				mr.approvedBy = nil
			}
		}
	}
	return s
}

// pipeline runs a pipeline for merge request iid at its current head,
// makes it the head pipeline, and records its jobs as commit statuses.
func (f *fakeGitLab) pipeline(iid int64, status string, jobs ...*gl.CommitStatus) *fakePipeline {
	f.mu.Lock()
	defer f.mu.Unlock()
	mr := f.mrs[iid-1]
	f.nextID++
	p := &fakePipeline{id: f.nextID, sha: mr.sha, ref: mr.source, status: status, createdAt: time.Now().UTC(), mergeReqIID: iid,
		webURL: fmt.Sprintf("%s/%s/-/pipelines/%d", f.srv.URL, f.path, f.nextID)}
	f.pipelines[p.id] = p
	mr.headPipeline = p.id
	for _, j := range jobs {
		f.nextID++
		j.ID, j.SHA, j.Ref, j.PipelineID = f.nextID, mr.sha, mr.source, p.id
		f.statuses = append(f.statuses, j)
	}
	return p
}

// approve records an approval of merge request iid by a user.
func (f *fakeGitLab) approve(iid int64, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mr := f.mrs[iid-1]
	mr.approvedBy = append(mr.approvedBy, f.users[user])
}

// mr returns a copy of merge request iid.
func (f *fakeGitLab) mr(iid int64) fakeMR {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.mrs[iid-1]
}

func (f *fakeGitLab) setDeployment(id int64, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.deployments {
		if d.ID == id {
			d.Status = status
			now := time.Now().UTC()
			d.UpdatedAt = &now
		}
	}
}

// project checks the {pid} of a request: the numeric ID or the path.
func (f *fakeGitLab) project(w http.ResponseWriter, r *http.Request) bool {
	pid := r.PathValue("pid")
	if pid == strconv.FormatInt(f.projectID, 10) || pid == f.path {
		return true
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Project Not Found"})
	return false
}

func (f *fakeGitLab) getProject(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	name := f.path[strings.LastIndex(f.path, "/")+1:]
	writeJSON(w, http.StatusOK, &gl.Project{
		ID: f.projectID, Name: name, Path: name, PathWithNamespace: f.path, DefaultBranch: f.defBranch,
		WebURL: f.srv.URL + "/" + f.path, MergeMethod: gl.MergeMethodValue(f.mergeMethod),
	})
}

func (f *fakeGitLab) getProjectApprovals(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, &gl.ProjectApprovals{ResetApprovalsOnPush: f.resetOnPush, ApprovalsBeforeMerge: f.approvals})
}

func (f *fakeGitLab) listMRs(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	q := r.URL.Query()
	out := []any{}
	for _, mr := range f.mrs {
		if (q.Get("state") == "" || q.Get("state") == mr.state) &&
			(q.Get("source_branch") == "" || q.Get("source_branch") == mr.source) &&
			(q.Get("target_branch") == "" || q.Get("target_branch") == mr.target) {
			out = append(out, f.mrJSON(mr))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGitLab) createMR(w http.ResponseWriter, r *http.Request) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	if _, ok := f.branches[body.TargetBranch]; !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": []string{"Target branch is invalid"}})
		return
	}
	for _, mr := range f.mrs {
		if mr.source == body.SourceBranch && mr.target == body.TargetBranch && mr.state == "opened" {
			writeJSON(w, http.StatusConflict, map[string]any{"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", mr.iid)}})
			return
		}
	}
	if _, ok := f.branches[body.SourceBranch]; !ok {
		f.pushLocked(body.SourceBranch) // the agent pushed its work
	}
	f.nextID++
	mr := &fakeMR{iid: int64(len(f.mrs) + 1), id: f.nextID, source: body.SourceBranch, target: body.TargetBranch, title: body.Title,
		description: body.Description, state: "opened", sha: f.branches[body.SourceBranch], reviewers: body.ReviewerIDs,
		squash: body.Squash, detailed: "mergeable"}
	f.mrs = append(f.mrs, mr)
	writeJSON(w, http.StatusCreated, f.mrJSON(mr))
}

// theMR returns the merge request of a request's {iid}, or answers 404.
func (f *fakeGitLab) theMR(w http.ResponseWriter, r *http.Request) *fakeMR {
	if !f.project(w, r) {
		return nil
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	if iid < 1 || iid > len(f.mrs) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
		return nil
	}
	return f.mrs[iid-1]
}

func (f *fakeGitLab) getMR(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mr := f.theMR(w, r); mr != nil {
		writeJSON(w, http.StatusOK, f.mrJSON(mr))
	}
}

func (f *fakeGitLab) updateMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title       *string  `json:"title"`
		Description *string  `json:"description"`
		ReviewerIDs *[]int64 `json:"reviewer_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	mr := f.theMR(w, r)
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
		mr.reviewers = *body.ReviewerIDs
	}
	writeJSON(w, http.StatusOK, f.mrJSON(mr))
}

// mergeMR answers as GitLab's PUT .../merge: 405 when the merge request
// is not open or not mergeable, 409 when sha is not its head, 200 with
// the merged merge request.
func (f *fakeGitLab) mergeMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SHA    string `json:"sha"`
		Squash *bool  `json:"squash"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	mr := f.theMR(w, r)
	if mr == nil {
		return
	}
	switch {
	case mr.state != "opened":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		return
	case mr.detailed != "mergeable":
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Branch cannot be merged"})
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
		mr.squashC = sha()
		head = mr.squashC
	}
	if f.mergeMethod == "ff" {
		f.branches[mr.target] = head
	} else {
		mr.mergeCommit = sha()
		f.branches[mr.target] = mr.mergeCommit
	}
	mr.state = "merged"
	mr.detailed = "not_open"
	writeJSON(w, http.StatusOK, f.mrJSON(mr))
}

func (f *fakeGitLab) getApprovals(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mr := f.theMR(w, r)
	if mr == nil {
		return
	}
	a := &gl.MergeRequestApprovals{ID: mr.id, IID: mr.iid, ProjectID: f.projectID, Title: mr.title, State: mr.state,
		ApprovalsRequired: f.approvals, HasApprovalRules: f.approvals > 0}
	for _, id := range mr.approvedBy {
		a.ApprovedBy = append(a.ApprovedBy, &gl.MergeRequestApproverUser{User: f.basicUser(id)})
	}
	a.ApprovalsLeft = max(0, f.approvals-int64(len(mr.approvedBy)))
	a.Approved = a.ApprovalsLeft == 0
	writeJSON(w, http.StatusOK, a)
}

func (f *fakeGitLab) getStatuses(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	pid, _ := strconv.ParseInt(r.URL.Query().Get("pipeline_id"), 10, 64)
	out := []*gl.CommitStatus{}
	for _, s := range f.statuses {
		if s.SHA == r.PathValue("sha") && (pid == 0 || s.PipelineID == pid) {
			out = append(out, s)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGitLab) listUsers(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []any{}
	if id, ok := f.users[r.URL.Query().Get("username")]; ok {
		out = append(out, f.userJSON(id))
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGitLab) listDeployments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	env := r.URL.Query().Get("environment")
	out := []*gl.Deployment{}
	for _, d := range slices.Backward(f.deployments) { // order_by id, sort desc
		if env == "" || d.Environment.Name == env {
			out = append(out, d)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGitLab) createDeployment(w http.ResponseWriter, r *http.Request) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	f.nextID++
	now := time.Now().UTC()
	d := &gl.Deployment{ID: f.nextID, IID: int64(len(f.deployments) + 1), Ref: body.Ref, SHA: body.SHA, Status: body.Status,
		CreatedAt: &now, UpdatedAt: &now,
		Environment: &gl.Environment{ID: 7, Name: body.Environment, Slug: body.Environment, ExternalURL: "https://" + body.Environment + ".example.com"}}
	f.deployments = append(f.deployments, d)
	writeJSON(w, http.StatusCreated, d)
}

func (f *fakeGitLab) getDeployment(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.project(w, r) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("did"), 10, 64)
	for _, d := range f.deployments {
		if d.ID == id {
			writeJSON(w, http.StatusOK, d)
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
}

// mrJSON renders a merge request in the shape of the recorded response.
func (f *fakeGitLab) mrJSON(mr *fakeMR) map[string]any {
	m := maps.Clone(f.mrTemplate)
	web := fmt.Sprintf("%s/%s/-/merge_requests/%d", f.srv.URL, f.path, mr.iid)
	m["id"], m["iid"], m["project_id"] = mr.id, mr.iid, f.projectID
	m["source_project_id"], m["target_project_id"] = f.projectID, f.projectID
	m["title"], m["description"], m["state"] = mr.title, mr.description, mr.state
	m["source_branch"], m["target_branch"] = mr.source, mr.target
	m["sha"], m["merge_commit_sha"], m["squash_commit_sha"] = mr.sha, nullable(mr.mergeCommit), nullable(mr.squashC)
	m["draft"] = strings.HasPrefix(mr.title, "Draft:")
	m["work_in_progress"] = m["draft"]
	m["squash"], m["web_url"], m["reference"] = mr.squash, web, fmt.Sprintf("!%d", mr.iid)
	m["detailed_merge_status"], m["merge_status"], m["has_conflicts"] = mr.detailed, "can_be_merged", mr.detailed == "conflict"
	m["blocking_discussions_resolved"] = mr.detailed != "discussions_not_resolved"
	m["diff_refs"] = map[string]any{"base_sha": f.branches[mr.target], "head_sha": mr.sha, "start_sha": f.branches[mr.target]}
	reviewers := []any{}
	for _, id := range mr.reviewers {
		reviewers = append(reviewers, f.userJSON(id))
	}
	m["reviewers"] = reviewers
	m["head_pipeline"], m["pipeline"] = nil, nil
	if p := f.pipelines[mr.headPipeline]; p != nil {
		hp := maps.Clone(f.mrTemplate["head_pipeline"].(map[string]any))
		hp["id"], hp["sha"], hp["ref"], hp["status"], hp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		m["head_pipeline"] = hp
		pp := maps.Clone(f.mrTemplate["pipeline"].(map[string]any))
		pp["id"], pp["sha"], pp["ref"], pp["status"], pp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		m["pipeline"] = pp
	}
	return m
}

func (f *fakeGitLab) userJSON(id int64) map[string]any {
	u := maps.Clone(f.userTemplate)
	for name, uid := range f.users {
		if uid == id {
			u["id"], u["username"], u["name"], u["web_url"] = id, name, strings.ToUpper(name[:1])+name[1:], f.srv.URL+"/"+name
		}
	}
	return u
}

func (f *fakeGitLab) basicUser(id int64) *gl.BasicUser {
	b, _ := json.Marshal(f.userJSON(id))
	var u gl.BasicUser
	_ = json.Unmarshal(b, &u)
	return &u
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

func readJSON(t testing.TB, file string) any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// sha returns a random commit SHA.
func sha() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newUUID returns a random UUID, as GitLab's delivery IDs are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
