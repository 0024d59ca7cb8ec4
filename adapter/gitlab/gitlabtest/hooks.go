package gitlabtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

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

// newUUID returns a random UUID, as GitLab's delivery IDs are.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// PipelineHook returns a delivery of a Pipeline Hook for pipeline id as it
// is now: its ID, ref, commit and status, and, for a pipeline of a merge
// request (ref refs/merge-requests/<iid>/...), that merge request.
func (s *Server) PipelineHook(id int64, token string) *http.Request {
	s.t.Helper()
	s.mu.Lock()
	p := s.pipelines[id]
	if p == nil {
		s.mu.Unlock()
		s.t.Fatalf("gitlabtest: no pipeline %d", id)
	}
	pc := *p
	var mr map[string]any
	for _, m := range s.mrs {
		if strings.HasPrefix(pc.ref, fmt.Sprintf("refs/merge-requests/%d/", m.iid)) {
			mr = map[string]any{"id": m.id, "iid": m.iid, "source_branch": m.source, "target_branch": m.target,
				"source_project_id": m.sourceProject, "target_project_id": ProjectID, "state": m.state, "detailed_merge_status": s.detailed(m)}
		}
	}
	s.mu.Unlock()
	return s.Delivery(EventPipeline, token, func(payload map[string]any) {
		attrs := payload["object_attributes"].(map[string]any)
		attrs["id"], attrs["iid"], attrs["ref"], attrs["sha"], attrs["status"], attrs["source"] = pc.id, pc.iid, pc.ref, pc.sha, pc.status, pc.source
		payload["merge_request"] = nil
		if mr != nil {
			payload["merge_request"] = mr
		}
		payload["builds"] = []any{}
	})
}

// JobHook returns a delivery of a Job Hook for the latest status named
// name of pipeline id, as it is now.
func (s *Server) JobHook(id int64, name, token string) *http.Request {
	s.t.Helper()
	s.mu.Lock()
	var st *status
	for _, c := range s.statuses {
		if c.PipelineID == id && c.Name == name {
			st = c
		}
	}
	if st == nil {
		s.mu.Unlock()
		s.t.Fatalf("gitlabtest: pipeline %d has no job %q", id, name)
	}
	c := st.CommitStatus
	s.mu.Unlock()
	return s.Delivery(EventJob, token, func(payload map[string]any) {
		payload["sha"], payload["ref"], payload["pipeline_id"], payload["build_id"] = c.SHA, c.Ref, id, c.ID
		payload["build_name"], payload["build_status"], payload["build_allow_failure"] = c.Name, c.Status, c.AllowFailure
	})
}
