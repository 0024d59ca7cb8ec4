package gitlabtest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

type pipeline struct {
	id, iid              int64
	sha, ref             string
	source               string // push, merge_request_event
	status               string
	webURL               string
	createdAt, updatedAt time.Time
}

// status is a commit status: a job of a pipeline, or a status another CI
// system posted into one. A status retried (another of its name in its
// pipeline came after it) is left out of the statuses GitLab lists by
// default.
type status struct {
	gl.CommitStatus
	retried bool
}

// Pipeline runs a branch pipeline for merge request iid at its current
// head (ref its source branch), makes it the head pipeline, records its
// jobs (Name, Status and optionally AllowFailure and TargetURL set) as
// commit statuses of the pipeline, and returns its ID. Its status is
// status until a job changes (see [Server.SetCheck]); "" makes it follow
// its jobs from the start. A pipeline GitLab could not run, an invalid
// .gitlab-ci.yml, is failed with no jobs: Pipeline(iid, "failed").
func (s *Server) Pipeline(iid int64, status string, jobs ...*gl.CommitStatus) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	p := s.newPipelineLocked(mr, mr.sha, mr.source, "push", status)
	s.addJobsLocked(p, jobs)
	if status == "" {
		s.settleLocked(p)
	}
	return p.id
}

// HeadPipeline returns the ID, status and jobs (the latest status of each
// name) of merge request iid's head pipeline; id is 0 when it has none.
func (s *Server) HeadPipeline(iid int64) (id int64, status string, jobs []gl.CommitStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pipelines[s.mr(iid).headPipeline]
	if p == nil {
		return 0, "", nil
	}
	for _, st := range s.statuses {
		if st.PipelineID == p.id && !st.retried {
			jobs = append(jobs, st.CommitStatus)
		}
	}
	return p.id, p.status, jobs
}

// MergeRequestPipeline runs a merge request pipeline (GitLab's pipelines
// for merge requests: ref refs/merge-requests/<iid>/head) for merge
// request iid at its current head, makes it the head pipeline, records
// its jobs and takes its status as [Server.Pipeline] does, and returns
// its ID.
func (s *Server) MergeRequestPipeline(iid int64, status string, jobs ...*gl.CommitStatus) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	p := s.newPipelineLocked(mr, mr.sha, fmt.Sprintf("refs/merge-requests/%d/head", iid), "merge_request_event", status)
	s.addJobsLocked(p, jobs)
	if status == "" {
		s.settleLocked(p)
	}
	return p.id
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
	p := s.newPipelineLocked(mr, mergeSHA, fmt.Sprintf("refs/merge-requests/%d/merge", iid), "merge_request_event", status)
	s.addJobsLocked(p, jobs)
	return p.id, mergeSHA
}

func (s *Server) newPipelineLocked(mr *mergeRequest, sha, ref, source, status string) *pipeline {
	s.nextID++
	s.nextPipeIID++
	now := s.now()
	p := &pipeline{id: s.nextID, iid: s.nextPipeIID, sha: sha, ref: ref, source: source, status: status,
		webURL:    fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, ProjectPath, s.nextID),
		createdAt: now, updatedAt: now}
	s.pipelines[p.id] = p
	if mr != nil {
		mr.headPipeline = p.id
	}
	return p
}

func (s *Server) addJobsLocked(p *pipeline, jobs []*gl.CommitStatus) {
	for _, j := range jobs {
		st := *j
		st.SHA, st.Ref, st.PipelineID = p.sha, p.ref, p.id
		s.addStatusLocked(&st)
	}
}

// addStatusLocked records a status, the one before it of its name in its
// pipeline retried.
func (s *Server) addStatusLocked(st *gl.CommitStatus) {
	if st.ID == 0 {
		s.nextID++
		st.ID = s.nextID
	}
	if st.CreatedAt == nil {
		now := s.now()
		st.CreatedAt = &now
	}
	for _, old := range s.statuses {
		if old.PipelineID == st.PipelineID && old.SHA == st.SHA && old.Name == st.Name {
			old.retried = true
		}
	}
	s.statuses = append(s.statuses, &status{CommitStatus: *st})
}

// SetCheck makes the head pipeline of the open merge request whose head
// is sha report a job name with a GitLab status (success, failed,
// running, ...), starting a branch pipeline when it has none of that
// commit. The pipeline's status follows its jobs as GitLab's does, and
// its updated_at moves when its status changes.
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
		p = s.newPipelineLocked(mr, sha, mr.source, "push", "running")
	}
	s.addStatusLocked(&gl.CommitStatus{SHA: sha, Ref: p.ref, Name: name, Status: status, TargetURL: targetURL, PipelineID: p.id})
	s.settleLocked(p)
}

// AddStatus records a commit status as it is, such as one of another
// pipeline of the same commit. A zero ID is given the next one. When its
// pipeline is one the fake ran, the pipeline's status follows.
func (s *Server) AddStatus(st *gl.CommitStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *st
	s.addStatusLocked(&c)
	st.ID = c.ID
	if p := s.pipelines[c.PipelineID]; p != nil {
		s.settleLocked(p)
	}
}

// PipelineUpdatedAt returns pipeline id's updated_at.
func (s *Server) PipelineUpdatedAt(id int64) time.Time {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pipelines[id]
	if p == nil {
		s.t.Fatalf("gitlabtest: no pipeline %d", id)
	}
	return p.updatedAt
}

// settleLocked gives p the status of its latest jobs, as GitLab's
// composite status does, moving its updated_at if it changed.
func (s *Server) settleLocked(p *pipeline) {
	var jobs []*status
	for _, st := range s.statuses {
		if st.PipelineID == p.id && !st.retried {
			jobs = append(jobs, st)
		}
	}
	if st := composite(jobs); st != p.status {
		p.status, p.updatedAt = st, s.now()
	}
}

// composite is the status of a pipeline with these jobs: running while a
// job runs (or waits, once another has finished), manual while a
// blocking manual job waits, then failed, canceled, success or skipped.
// A job allowed to fail counts as passed when it fails, and as skipped
// when it is manual.
func composite(jobs []*status) string {
	seen := map[string]bool{}
	for _, j := range jobs {
		switch st := j.Status; {
		case st == "failed" && j.AllowFailure:
			seen["success"] = true
		case st == "manual" && j.AllowFailure:
			seen["skipped"] = true
		case st == "waiting_for_resource" || st == "preparing" || st == "scheduled":
			seen["pending"] = true
		case st == "canceling":
			seen["canceled"] = true
		default:
			seen[st] = true
		}
	}
	done := seen["success"] || seen["failed"] || seen["canceled"] || seen["skipped"] || seen["manual"]
	switch {
	case len(jobs) == 0:
		return "created"
	case seen["running"], (seen["pending"] || seen["created"]) && done:
		return "running"
	case seen["pending"]:
		return "pending"
	case seen["created"]:
		return "created"
	case seen["manual"]:
		return "manual"
	case seen["failed"]:
		return "failed"
	case seen["canceled"]:
		return "canceled"
	case seen["success"]:
		return "success"
	}
	return "skipped"
}

// listPipelines answers GET .../pipelines ("List project pipelines"):
// filtered by status, ref, sha, source, updated_after and updated_before
// (both inclusive), ordered by order_by (id unless updated_at, status or
// ref) and sort (desc unless asc), paginated, each with the members
// GitLab's documentation gives a listed pipeline.
func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	q := r.URL.Query()
	after, ok := timeParam(w, q, "updated_after")
	if !ok {
		return
	}
	before, ok := timeParam(w, q, "updated_before")
	if !ok {
		return
	}
	var list []*pipeline
	for _, p := range s.pipelines {
		if (q.Get("status") == "" || q.Get("status") == p.status) &&
			(q.Get("ref") == "" || q.Get("ref") == p.ref) &&
			(q.Get("sha") == "" || q.Get("sha") == p.sha) &&
			(q.Get("source") == "" || q.Get("source") == p.source) &&
			(after.IsZero() || !p.updatedAt.Before(after)) &&
			(before.IsZero() || !p.updatedAt.After(before)) {
			list = append(list, p)
		}
	}
	key := func(p *pipeline) string { return fmt.Sprintf("%020d", p.id) }
	switch q.Get("order_by") {
	case "updated_at":
		key = func(p *pipeline) string { return timeJSON(p.updatedAt) }
	case "status":
		key = func(p *pipeline) string { return p.status }
	case "ref":
		key = func(p *pipeline) string { return p.ref }
	}
	sortBy(list, q.Get("sort"), key, func(p *pipeline) int64 { return p.id })
	out := make([]map[string]any, 0, len(list))
	for _, p := range list {
		out = append(out, map[string]any{"id": p.id, "iid": p.iid, "project_id": ProjectID, "sha": p.sha, "ref": p.ref,
			"status": p.status, "source": p.source, "name": nil, "web_url": p.webURL,
			"created_at": timeJSON(p.createdAt), "updated_at": timeJSON(p.updatedAt)})
	}
	writePage(w, r, out)
}

// getStatuses answers GET .../commits/:sha/statuses as GitLab does: the
// statuses of the commit's pipelines, oldest first, filtered by ref, name
// and pipeline_id, the retried ones only with all=true, paginated.
func (s *Server) getStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	q := r.URL.Query()
	pid, _ := strconv.ParseInt(q.Get("pipeline_id"), 10, 64)
	all := q.Get("all") == "true"
	out := []gl.CommitStatus{}
	for _, st := range s.statuses {
		if st.SHA == r.PathValue("sha") && (all || !st.retried) && (pid == 0 || st.PipelineID == pid) &&
			(q.Get("ref") == "" || q.Get("ref") == st.Ref) && (q.Get("name") == "" || q.Get("name") == st.Name) {
			out = append(out, st.CommitStatus)
		}
	}
	writePage(w, r, out)
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
	c := cloneMap(s.commitTemplate)
	c["id"], c["short_id"], c["parent_ids"], c["project_id"] = sha, sha[:11], parents, ProjectID
	c["title"] = "Merge branch into target"
	c["message"], c["last_pipeline"], c["status"] = c["title"], nil, nil
	writeJSON(w, http.StatusOK, c)
}

// SetTrace sets the log of job id, a commit status of a pipeline the fake
// ran (GitLab's jobs are commit statuses of the same ID): what GET
// .../jobs/:id/trace answers.
func (s *Server) SetTrace(id int64, log string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces[id] = log
}

// getTrace answers GET .../jobs/:job_id/trace: the job's log as plain
// text (empty while it has none), or 404 for a job the fake does not
// hold.
func (s *Server) getTrace(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("jid"), 10, 64)
	found := false
	for _, st := range s.statuses {
		found = found || st.ID == id
	}
	if !found {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Job Not Found"})
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, s.traces[id])
}
