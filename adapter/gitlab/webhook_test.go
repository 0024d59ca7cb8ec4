package gitlab_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// recordingSink keeps the events it is given.
type recordingSink struct {
	mu     sync.Mutex
	events []lifecycle.ProviderEvent
}

func (s *recordingSink) ApplyProviderEvent(_ context.Context, ev lifecycle.ProviderEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return nil
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A Job Hook (client-go's recorded payload) is checks_changed of the
// job's commit, in lower case, with the delivery's ID; a job of another
// project is answered 204 and passed on to nobody.
func TestJobHookIsChecksChanged(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
	sink := &recordingSink{}
	h := a.WebhookHandler(sink)
	head := gitlabtest.NewSHA()

	req := f.Delivery(gitlabtest.EventJob, hookToken, func(p map[string]any) { p["sha"] = strings.ToUpper(head) })
	if rec := serve(h, req); rec.Code != http.StatusOK {
		t.Fatalf("Job Hook answered %d: %s", rec.Code, rec.Body)
	}
	if len(sink.events) != 1 {
		t.Fatalf("events = %+v, want one", sink.events)
	}
	ev := sink.events[0]
	if ev.Kind != lifecycle.ProviderChecksChanged || ev.HeadSHA != head || ev.Source != "gitlab" || ev.DeliveryID != req.Header.Get("Idempotency-Key") || ev.DeliveryID == "" {
		t.Errorf("event = %+v, want checks_changed of %s from gitlab with the delivery's ID", ev, head)
	}

	other := f.Delivery(gitlabtest.EventJob, hookToken, func(p map[string]any) { p["project_id"] = 31537070 })
	if rec := serve(h, other); rec.Code != http.StatusNoContent || len(sink.events) != 1 {
		t.Errorf("a job of another project: %d and %d events, want 204 and none new", rec.Code, len(sink.events))
	}
}

// A delivery over 25 MiB is answered 413 without being parsed or passed
// on; one just at the bound is read (and, not being JSON, refused 400).
func TestWebhookBodyOverTheBoundIsRefused(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
	sink := &recordingSink{}
	h := a.WebhookHandler(sink)
	for _, tc := range []struct {
		size int
		want int
	}{{25<<20 + 1, http.StatusRequestEntityTooLarge}, {25 << 20, http.StatusBadRequest}} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(bytes.Repeat([]byte("x"), tc.size)))
		req.Header.Set("X-Gitlab-Event", gitlabtest.EventMergeRequest)
		req.Header.Set("X-Gitlab-Token", hookToken)
		if rec := serve(h, req); rec.Code != tc.want {
			t.Errorf("a body of %d bytes: %d, want %d", tc.size, rec.Code, tc.want)
		}
	}
	if len(sink.events) != 0 {
		t.Errorf("events passed on: %+v", sink.events)
	}
}
