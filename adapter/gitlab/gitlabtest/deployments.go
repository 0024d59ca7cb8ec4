package gitlabtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

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
	now := s.now()
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
			now := s.now()
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
	d := s.newDeploymentLocked(body.Environment, body.Ref, body.SHA, body.Status, s.now())
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
	now := s.now()
	d.UpdatedAt = &now
	writeJSON(w, http.StatusOK, deploymentJSON(d))
}
