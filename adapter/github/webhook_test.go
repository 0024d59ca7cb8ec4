package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// examplesIndex is the index of GitHub's published webhook examples, from
// the npm package @octokit/webhooks-examples pinned in
// testdata/webhooks-examples (npm ci --prefix adapter/github/testdata/webhooks-examples).
const examplesIndex = "testdata/webhooks-examples/node_modules/@octokit/webhooks-examples/api.github.com/index.json"

// recorder is a sink that records events.
type recorder struct {
	mu  sync.Mutex
	evs []lifecycle.ProviderEvent
	err error
}

func (r *recorder) ApplyProviderEvent(_ context.Context, ev lifecycle.ProviderEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return r.err
}

func (r *recorder) take() []lifecycle.ProviderEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

// TestMain prints, once, which tests skipped for want of a tool, and how
// to install it (see internal/testenv).
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var sha40 = regexp.MustCompile(`^[0-9a-f]{40}$`)

// TestOctokitWebhookExamples feeds every published example payload to the
// handler, signed, and checks what it makes of those it uses.
func TestOctokitWebhookExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.FromSlash(examplesIndex))
	if err != nil {
		testenv.Require(t, testenv.GitHubExamples, err.Error())
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	used := map[string]int{}
	for _, group := range index {
		for i, ex := range group.Examples {
			var head struct {
				Action     string `json:"action"`
				Repository *struct {
					Name  string `json:"name"`
					Owner struct {
						Login string `json:"login"`
					} `json:"owner"`
				} `json:"repository"`
				PullRequest *struct {
					Number int  `json:"number"`
					Merged bool `json:"merged"`
				} `json:"pull_request"`
				Changes struct {
					Base json.RawMessage `json:"base"`
				} `json:"changes"`
			}
			if err := json.Unmarshal(ex, &head); err != nil {
				t.Fatalf("%s example %d: %v", group.Name, i, err)
			}
			owner, repo := "someone", "else"
			if head.Repository != nil {
				owner, repo = head.Repository.Owner.Login, head.Repository.Name
			}
			a, err := New(Config{Owner: owner, Repo: repo, Token: "t", WebhookSecret: testSecret})
			if err != nil {
				t.Fatal(err)
			}
			sink := new(recorder)
			rec := httptest.NewRecorder()
			a.WebhookHandler(sink).ServeHTTP(rec, signedDelivery(t, group.Name, "d-"+group.Name, ex))
			evs := sink.take()

			var want lifecycle.ProviderEventKind
			switch group.Name + "." + head.Action {
			case "pull_request.synchronize":
				want = lifecycle.ProviderHeadChanged
			case "pull_request.closed":
				want = lifecycle.ProviderPullRequestClosed
				if head.PullRequest.Merged {
					want = lifecycle.ProviderPullRequestMerged
				}
			case "pull_request.reopened":
				want = lifecycle.ProviderPullRequestReopened
			case "pull_request.ready_for_review", "pull_request.converted_to_draft":
				want = lifecycle.ProviderPullRequestEdited
			case "pull_request.edited":
				if len(head.Changes.Base) > 0 {
					want = lifecycle.ProviderPullRequestEdited
				}
			case "pull_request_review.submitted":
				want = lifecycle.ProviderReviewSubmitted
			case "pull_request_review.dismissed":
				want = lifecycle.ProviderReviewDismissed
			}
			switch group.Name {
			case "check_run", "check_suite", "status":
				want = lifecycle.ProviderChecksChanged
			case "deployment_status":
				want = lifecycle.ProviderDeploymentStatus
			}
			if want == "" {
				if rec.Code != http.StatusNoContent || len(evs) != 0 {
					t.Errorf("%s.%s example %d: answered %d with events %+v, want 204 and none", group.Name, head.Action, i, rec.Code, evs)
				}
				continue
			}
			used[group.Name]++
			if rec.Code != http.StatusOK || len(evs) != 1 {
				t.Errorf("%s.%s example %d: answered %d with %d events, want 200 and one %s", group.Name, head.Action, i, rec.Code, len(evs), want)
				continue
			}
			ev := evs[0]
			if ev.Kind != want || ev.Source != "github" || ev.DeliveryID != "d-"+group.Name {
				t.Errorf("%s.%s example %d: event %+v, want kind %s from github with the delivery ID", group.Name, head.Action, i, ev, want)
			}
			if ev.HeadSHA != "" && !sha40.MatchString(ev.HeadSHA) {
				t.Errorf("%s example %d: HeadSHA %q", group.Name, i, ev.HeadSHA)
			}
			switch {
			case head.PullRequest != nil && strings.HasPrefix(group.Name, "pull_request"):
				if ev.PullRequest != (lifecycle.PullRequestRef{Owner: owner, Repo: repo, Number: head.PullRequest.Number}) || ev.HeadSHA == "" {
					t.Errorf("%s example %d: pull request %s head %q, want %s/%s#%d and its head", group.Name, i, ev.PullRequest, ev.HeadSHA, owner, repo, head.PullRequest.Number)
				}
			case want == lifecycle.ProviderChecksChanged:
				if ev.HeadSHA == "" {
					t.Errorf("%s example %d: no head SHA", group.Name, i)
				}
			case want == lifecycle.ProviderDeploymentStatus:
				if ev.Deployment == nil || ev.Deployment.ID == "" || ev.Deployment.State == "" {
					t.Errorf("%s example %d: deployment %+v", group.Name, i, ev.Deployment)
				}
			}
		}
	}
	for _, name := range []string{"pull_request", "pull_request_review", "check_run", "check_suite", "status", "deployment_status"} {
		if used[name] == 0 {
			t.Errorf("no example of %s was used", name)
		}
	}
	t.Logf("examples used: %v", used)
}

func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	a := f.adapter(t, Config{WebhookSecret: testSecret})
	pr := open(t, f, a, 1)
	event, payload := f.webhookPayload(pr, lifecycle.ProviderHeadChanged)
	sink := new(recorder)
	h := a.WebhookHandler(sink)
	serve := func(req *http.Request) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	bad := signedDelivery(t, event, "d1", payload)
	bad.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	if code := serve(bad); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	sha1Only := signedDelivery(t, event, "d2", payload)
	sha1Only.Header.Del("X-Hub-Signature-256")
	sha1Only.Header.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")
	if code := serve(sha1Only); code != http.StatusUnauthorized {
		t.Errorf("SHA-1 signature only: %d, want 401", code)
	}
	big := bytes.Repeat([]byte(" "), MaxWebhookBody+1)
	if code := serve(signedDelivery(t, event, "d3", big)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("body over 25 MB: %d, want 413", code)
	}
	noSecret := f.adapter(t, Config{})
	rec := httptest.NewRecorder()
	noSecret.WebhookHandler(sink).ServeHTTP(rec, signedDelivery(t, event, "d4", payload))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("no secret configured: %d, want 401", rec.Code)
	}
	if evs := sink.take(); len(evs) != 0 {
		t.Errorf("refused deliveries gave events %+v", evs)
	}
	if code := serve(signedDelivery(t, "gollum", "d5", []byte(`{"pages":[]}`))); code != http.StatusNoContent {
		t.Errorf("unknown event: %d, want 204", code)
	}
	sink.err = context.DeadlineExceeded
	if code := serve(signedDelivery(t, event, "d6", payload)); code != http.StatusServiceUnavailable {
		t.Errorf("sink failed: %d, want 503", code)
	}
}

// TestDraftWebhooks: a pull request marked ready for review, or made a
// draft again, at GitHub is one on the task as soon as the webhook is
// applied, without waiting for a sweep.
func TestDraftWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	task, sub := e.submitted(t)
	for i, action := range []string{"converted_to_draft", "ready_for_review"} {
		draft := action == "converted_to_draft"
		e.f.SetDraft(sub.PRNumber, draft)
		req := signedDelivery(t, "pull_request", fmt.Sprintf("draft-%d", i), e.f.PullRequestPayload(sub.PRNumber, action))
		rec := httptest.NewRecorder()
		e.a.WebhookHandler(e.svc).ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s delivery: answered %d, want 200", action, rec.Code)
		}
		got, err := e.svc.Task(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Facts.Draft != draft {
			t.Errorf("after %s: the task's draft is %v", action, got.Facts.Draft)
		}
	}
}
