package gitlab_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
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

// A delivery over the body budget (16 MiB by default) is answered 413
// without being parsed or passed on; one just at the bound is read (and,
// not being JSON, refused 400).
func TestWebhookBodyOverTheBoundIsRefused(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
	sink := &recordingSink{}
	h := a.WebhookHandler(sink)
	for _, tc := range []struct {
		size int
		want int
	}{{25<<20 + 1, http.StatusRequestEntityTooLarge}, {16<<20 + 1, http.StatusRequestEntityTooLarge}, {16 << 20, http.StatusBadRequest}} {
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

// failingSink fails every event with err.
type failingSink struct{ err error }

func (s failingSink) ApplyProviderEvent(context.Context, lifecycle.ProviderEvent) error { return s.err }

// GitLab does not deliver a failed delivery again, and four failures in a
// row disable the hook for a while (forty for good). A delivery the sink
// took is answered 2xx even when applying it could not read GitLab (the
// Service has then marked its tasks to be read again): 202. One the sink
// could not take at all (the Store failing) is a 500, which only shows in
// the hook's recent events: the reconciler reads every task in review
// anyway.
func TestWebhookAnswersWhatWasTaken(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken })
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"GitLab could not be read", &lifecycle.ProviderError{Op: "read the pull request", Err: &lifecycle.TemporaryError{Err: errors.New("gitlab: 429 Too Many Requests"), RetryAfter: time.Minute}}, http.StatusAccepted},
		{"the Store failed", errors.New("the store is down"), http.StatusInternalServerError},
	} {
		h := a.WebhookHandler(failingSink{tc.err})
		if rec := serve(h, f.Delivery(gitlabtest.EventJob, hookToken, nil)); rec.Code != tc.want {
			t.Errorf("%s: answered %d, want %d", tc.name, rec.Code, tc.want)
		}
	}
}

// The project's settings are read again once SettingsTTL has passed; when
// GitLab cannot be read then, a delivery is mapped with the settings last
// read, and passed on. Before any reading has succeeded it cannot be
// mapped: it is answered 202, since failing it would only count toward
// disabling the hook, and the reconciler reads GitLab again anyway.
func TestWebhookWhileTheProjectCannotBeRead(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := newAdapter(t, f, func(c *gitlab.Config) { c.WebhookToken = hookToken; c.Clock = clock })
	sink := &recordingSink{}
	h := a.WebhookHandler(sink)
	down := gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`}

	f.Inject(gitlabtest.RouteProject, down)
	if rec := serve(h, f.Delivery(gitlabtest.EventJob, hookToken, nil)); rec.Code != http.StatusAccepted || len(sink.events) != 0 {
		t.Errorf("never read: answered %d with %d events, want 202 and none", rec.Code, len(sink.events))
	}
	if rec := serve(h, f.Delivery(gitlabtest.EventJob, hookToken, nil)); rec.Code != http.StatusOK || len(sink.events) != 1 {
		t.Fatalf("read: answered %d with %d events, want 200 and one", rec.Code, len(sink.events))
	}
	clock.Advance(2 * time.Minute) // past SettingsTTL
	f.Inject(gitlabtest.RouteProject, down)
	if rec := serve(h, f.Delivery(gitlabtest.EventJob, hookToken, nil)); rec.Code != http.StatusOK || len(sink.events) != 2 {
		t.Errorf("settings expired, GitLab down: answered %d with %d events, want 200 and the event passed on", rec.Code, len(sink.events))
	}
}
