package gitlabtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// car is a merge request on its target branch's merge train (GitLab's
// MergeTrains::Car).
type car struct {
	id                   int64
	iid                  int64
	target               string
	status               string // idle, stale, fresh, merging, merged, skip_merged
	pipeline             int64
	user                 int64
	createdAt, updatedAt time.Time
	mergedAt             time.Time
}

// getBranch answers GET .../repository/branches/:branch in the shape of
// the recorded branch: its name and head commit.
func (s *Server) getBranch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	name, head, ok := s.branchLocked(w, r)
	if !ok {
		return
	}
	b := cloneMap(s.branchTemplate)
	c := cloneMap(s.branchTemplate["commit"].(map[string]any))
	c["id"], c["short_id"], c["parent_ids"] = head, head[:7], []string{}
	b["name"], b["commit"], b["default"] = name, c, name == "main"
	writeJSON(w, http.StatusOK, b)
}

// deleteBranch answers DELETE .../repository/branches/:branch ("Delete
// repository branch"): 204 No Content, 404 for a branch that does not
// exist, or 400 for the default branch, main, with the words of GitLab's
// pre-receive check. In git mode the repository's ref goes too.
func (s *Server) deleteBranch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	name, _, ok := s.branchLocked(w, r)
	if !ok {
		return
	}
	if name == "main" {
		// Branches::DeleteService: the pre-receive check's refusal, 400.
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": strings.TrimPrefix(defaultBranchMessage, "GitLab: ")})
		return
	}
	if s.git != nil {
		if _, err := s.git.try(nil, "", "update-ref", "-d", "refs/heads/"+name); err != nil {
			s.t.Errorf("gitlabtest: delete branch %s: %v", name, err)
			writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "500 Internal Server Error"})
			return
		}
	}
	delete(s.branches, name)
	w.WriteHeader(http.StatusNoContent)
}

// branchLocked returns the name and head of the branch a request names,
// or answers 404 "Branch Not Found", as GitLab does, and returns false.
func (s *Server) branchLocked(w http.ResponseWriter, r *http.Request) (name, head string, ok bool) {
	name = r.PathValue("branch")
	if head, ok = s.branches[name]; !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Branch Not Found"})
	}
	return name, head, ok
}

// listNotes answers GET .../merge_requests/:iid/notes ("List all merge
// request notes") with the system notes the fake writes (a merge
// request's removal from its merge train), sorted by created_at (or
// updated_at with order_by), desc unless sort=asc, paginated.
func (s *Server) listNotes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	notes := slices.Clone(mr.notes)
	sortBy(notes, r.URL.Query().Get("sort"), func(n *gl.Note) string { return timeJSON(*n.CreatedAt) }, func(n *gl.Note) int64 { return n.ID })
	out := make([]gl.Note, 0, len(notes))
	for _, n := range notes {
		out = append(out, *n)
	}
	writePage(w, r, out)
}

// systemNoteLocked writes a system note on mr by user, as GitLab's
// SystemNoteService does.
func (s *Server) systemNoteLocked(mr *mergeRequest, user int64, body string) {
	s.nextID++
	now := s.now()
	u := s.basicUser(user)
	mr.notes = append(mr.notes, &gl.Note{ID: s.nextID, Body: body, System: true, CreatedAt: &now, UpdatedAt: &now,
		Author:     gl.NoteAuthor{ID: u.ID, Username: u.Username, Name: u.Name, State: u.State, WebURL: u.WebURL},
		NoteableID: mr.id, NoteableIID: mr.iid, NoteableType: "MergeRequest", ProjectID: ProjectID})
	s.touch(mr)
}

// carJSON renders a car in the shape of the recorded one.
func (s *Server) carJSON(c *car) map[string]any {
	mr := s.mr(c.iid)
	m := cloneMap(s.carTemplate)
	mj := cloneMap(s.carTemplate["merge_request"].(map[string]any))
	mj["id"], mj["iid"], mj["project_id"], mj["title"], mj["description"], mj["state"] = mr.id, mr.iid, ProjectID, mr.title, mr.description, mr.state
	mj["created_at"], mj["updated_at"] = timeJSON(mr.createdAt), timeJSON(mr.updatedAt)
	mj["web_url"] = fmt.Sprintf("%s/%s/-/merge_requests/%d", s.URL, ProjectPath, mr.iid)
	m["merge_request"] = mj
	m["user"] = s.basicUserJSON(c.user)
	m["pipeline"] = nil
	if p := s.pipelines[c.pipeline]; p != nil {
		pj := cloneMap(s.carTemplate["pipeline"].(map[string]any))
		pj["id"], pj["iid"], pj["project_id"], pj["sha"], pj["ref"], pj["status"], pj["source"], pj["web_url"] = p.id, p.iid, ProjectID, p.sha, p.ref, p.status, p.source, p.webURL
		pj["created_at"], pj["updated_at"] = timeJSON(p.createdAt), timeJSON(p.updatedAt)
		m["pipeline"] = pj
	}
	m["id"], m["target_branch"], m["status"] = c.id, c.target, c.status
	m["created_at"], m["updated_at"] = timeJSON(c.createdAt), timeJSON(c.updatedAt)
	m["merged_at"], m["duration"] = nil, nil
	if !c.mergedAt.IsZero() {
		m["merged_at"] = timeJSON(c.mergedAt)
		m["duration"] = int64(c.mergedAt.Sub(c.createdAt).Seconds())
	}
	return m
}

// trainsLocked answers 403 as GitLab does where the project has no merge
// trains, and reports whether it has.
func (s *Server) trainsLocked(w http.ResponseWriter) bool {
	if !s.opts.MergeTrains {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "403 Forbidden"})
	}
	return s.opts.MergeTrains
}

// getTrainCar answers GET .../merge_trains/merge_requests/:iid: the car
// of the merge request, on its train or merged by it; 404 when it has
// none (never added, or removed: GitLab destroys the car of a merge
// request it drops from the train).
func (s *Server) getTrainCar(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil || !s.trainsLocked(w) {
		return
	}
	c := s.cars[mr.iid]
	if c == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Merge Train Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, s.carJSON(c))
}

// listTrain answers GET .../merge_trains/:target_branch ("List merge
// requests in a merge train"): the cars of the train into the target
// branch, filtered by scope (active: to be merged; complete: merged;
// both without it), sorted by id, desc unless sort=asc (GitLab's
// MergeTrains::CarsFinder, desc by default), paginated; 403 without merge
// trains.
func (s *Server) listTrain(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) || !s.trainsLocked(w) {
		return
	}
	target, scope := r.PathValue("branch"), r.URL.Query().Get("scope")
	var cars []*car
	for _, c := range s.cars {
		done := c.status == "merged" || c.status == "skip_merged"
		if c.target == target && (scope == "" || scope == "active" && !done || scope == "complete" && done) {
			cars = append(cars, c)
		}
	}
	sortBy(cars, r.URL.Query().Get("sort"), func(*car) string { return "" }, func(c *car) int64 { return c.id })
	out := make([]map[string]any, 0, len(cars))
	for _, c := range cars {
		out = append(out, s.carJSON(c))
	}
	writePage(w, r, out)
}

// addTrainCar answers POST .../merge_trains/merge_requests/:iid ("Add a
// merge request to a merge train"): 201 with the train into the merge
// request's target branch once it is on it, a car whose merge train
// pipeline (ref refs/merge-requests/<iid>/train, at a new commit merging
// its head into the target) starts at once, and a system note; one
// already on the train stays where it is. 409 when sha is not its head;
// 400 when it cannot be merged (not open; its detailed_merge_status, CI
// aside, is not mergeable; its head pipeline is not complete, which
// GitLab's AutoMerge::MergeTrainService requires); 403 without merge
// trains. [Server.FinishTrain] and [Server.DropFromTrain] end the ride.
func (s *Server) addTrainCar(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SHA    string `json:"sha"`
		Squash *bool  `json:"squash"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil || !s.trainsLocked(w) {
		return
	}
	if c := s.cars[mr.iid]; c != nil && c.status != "merged" && c.status != "skip_merged" {
		writeJSON(w, http.StatusCreated, s.trainLocked(c.target))
		return
	}
	s.check(mr)
	hp := s.pipelines[mr.headPipeline]
	switch st := s.detailed(mr); {
	case mr.state != "opened":
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Failed to merge: the merge request is " + mr.state})
		return
	case body.SHA != "" && body.SHA != mr.sha:
		writeJSON(w, http.StatusConflict, map[string]any{"message": "SHA does not match HEAD of source branch: " + mr.sha})
		return
	case st != "mergeable" && st != "ci_must_pass" && st != "ci_still_running":
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Failed to merge: the merge request cannot be merged (" + st + ")"})
		return
	case hp == nil || !complete(hp.status):
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Failed to merge: the merge request's pipeline is not complete"})
		return
	}
	if body.Squash != nil {
		mr.squash = *body.Squash
	}
	mergeSHA := NewSHA()
	s.parents[mergeSHA] = []string{s.branches[mr.target], mr.sha}
	s.nextID++
	s.nextPipeIID++
	now := s.now()
	p := &pipeline{id: s.nextID, iid: s.nextPipeIID, sha: mergeSHA, ref: fmt.Sprintf("refs/merge-requests/%d/train", mr.iid),
		source: "merge_request_event", status: "running", createdAt: now, updatedAt: now,
		webURL: fmt.Sprintf("%s/%s/-/pipelines/%d", s.URL, ProjectPath, s.nextID)}
	s.pipelines[p.id] = p
	s.nextID++
	user := s.users["alice"]
	c := &car{id: s.nextID, iid: mr.iid, target: mr.target, status: "fresh", pipeline: p.id, user: user, createdAt: now, updatedAt: now}
	s.cars[mr.iid] = c
	s.systemNoteLocked(mr, user, "started a merge train")
	writeJSON(w, http.StatusCreated, s.trainLocked(c.target))
}

// complete reports whether a pipeline status is final, as
// Ci::Pipeline#complete? does.
func complete(status string) bool {
	switch status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
}

// trainLocked returns the cars on the train into target, in order.
func (s *Server) trainLocked(target string) []map[string]any {
	var cars []*car
	for _, c := range s.cars {
		if c.target == target && c.status != "merged" && c.status != "skip_merged" {
			cars = append(cars, c)
		}
	}
	slices.SortFunc(cars, func(a, b *car) int { return int(a.id - b.id) })
	out := []map[string]any{}
	for _, c := range cars {
		out = append(out, s.carJSON(c))
	}
	return out
}

// TrainCar returns the status of merge request iid's merge train car
// (idle, stale, fresh, merging, merged, skip_merged) and its merge train
// pipeline's ID; ok is false when it has none.
func (s *Server) TrainCar(iid int64) (status string, pipelineID int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cars[iid]
	if c == nil {
		return "", 0, false
	}
	return c.status, c.pipeline, true
}

// FinishTrain ends the merge train pipeline of merge request iid with a
// status, as GitLab's merge train does when it completes: success merges
// the merge request (a merge commit into its target branch; the car is
// merged); failed or canceled drops it from the train (see
// [Server.DropFromTrain]) with the reason GitLab gives, "pipeline did not
// succeed". It returns the merge commit, or "".
func (s *Server) FinishTrain(iid int64, status string) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cars[iid]
	if c == nil {
		s.t.Fatalf("gitlabtest: merge request !%d is on no merge train", iid)
	}
	p := s.pipelines[c.pipeline]
	p.status, p.updatedAt = status, s.now()
	if status != "success" {
		s.dropLocked(iid, "pipeline did not succeed")
		return ""
	}
	mr := s.mr(iid)
	landed := s.mergeLocked(mr, mr.squash)
	c.status, c.mergedAt, c.updatedAt = "merged", s.now(), s.now()
	return landed
}

// DropFromTrain removes merge request iid from its merge train as GitLab
// does when it can no longer be merged (AutoMerge::MergeTrainService's
// abort): the car is destroyed and a system note says "removed this
// merge request from the merge train because <reason>", or, with no
// reason (a person removed it), "removed this merge request from the
// merge train".
func (s *Server) DropFromTrain(iid int64, reason string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cars[iid] == nil {
		s.t.Fatalf("gitlabtest: merge request !%d is on no merge train", iid)
	}
	s.dropLocked(iid, reason)
}

func (s *Server) dropLocked(iid int64, reason string) {
	c := s.cars[iid]
	delete(s.cars, iid)
	body := "removed this merge request from the merge train"
	if reason != "" {
		body += " because " + reason
	}
	s.systemNoteLocked(s.mr(iid), c.user, body)
}

// Notes returns the bodies of the system notes on merge request iid,
// oldest first.
func (s *Server) Notes(iid int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.mr(iid).notes {
		out = append(out, n.Body)
	}
	return out
}
