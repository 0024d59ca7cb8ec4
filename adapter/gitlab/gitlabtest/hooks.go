package gitlabtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
