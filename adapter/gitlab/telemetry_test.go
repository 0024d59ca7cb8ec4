package gitlab_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall/hostcalltest"
)

var (
	keyHost      = attribute.Key("lifecycle.host")
	keyOperation = attribute.Key("lifecycle.host.operation")
	keyStatus    = attribute.Key("http.response.status_code")
	keyResource  = attribute.Key("lifecycle.host.resource")
	keyOutcome   = attribute.Key("lifecycle.outcome")
)

// operations are the operations the adapter names.
var operations = []string{
	"projects.get", "projects.get-approval-configuration", "merge_requests.list", "merge_requests.create",
	"merge_requests.get", "merge_requests.update", "merge_requests.merge", "merge_request_approvals.get",
	"merge_requests.list-reviewers", "pipelines.list", "commits.get", "commits.list-statuses", "users.list",
	"deployments.list", "deployments.create", "deployments.get", "deployments.update", "graphql",
}

func bounds() hostcalltest.Bounds {
	return hostcalltest.Bounds{
		keyHost:               hostcalltest.OneOf("gitlab"),
		keyOperation:          hostcalltest.OneOf(append([]string{hostcall.OperationOther}, operations...)...),
		"http.request.method": hostcalltest.OneOf("GET", "POST", "PUT", "PATCH", "DELETE"),
		keyStatus:             hostcalltest.AnyInt,
		"server.address":      hostcalltest.OneOf("127.0.0.1"),
		"server.port":         hostcalltest.AnyInt,
		"error.type":          hostcalltest.OneOf("400", "401", "403", "404", "405", "409", "422", "429", "500", "502", "503", "timeout", "canceled"),
		// Only the limit GitLab reports, not the adapter's own account of
		// a 429's wait.
		keyResource: hostcalltest.OneOf("api"),
		keyOutcome:  hostcalltest.OneOf("accepted", "duplicate", "ignored", "invalid_signature", "invalid", "failed"),
	}
}

// TestTelemetry runs a merge request's life through an adapter with the
// SDK's providers, under a span as a submission would, and checks what
// each instrument records as each call happens.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{RateLimit: 2000, MergeabilityAtOnce: true})
	s := hostcalltest.New(t)
	wire := &hostcalltest.Headers{}
	a := newAdapter(t, f, func(c *gitlab.Config) {
		c.HTTPClient = &http.Client{Transport: wire}
		c.MeterProvider, c.TracerProvider = s.Meters, s.Spans
		c.WebhookToken = hookToken
	})
	requests := func(op string, status ...int) float64 {
		match := []attribute.KeyValue{keyHost.String("gitlab"), keyOperation.String(op)}
		if len(status) > 0 {
			match = append(match, keyStatus.Int(status[0]))
		}
		return hostcalltest.Sum(s.Collect(t), "lifecycle.host.requests", match...)
	}

	ctx, parent := s.Spans.Tracer("test").Start(t.Context(), "submit")
	f.Push("lifecycle/eng-1")
	pr, err := a.EnsurePullRequest(ctx, lifecycle.PullRequestRequest{Task: task("ENG-1"), Reviewers: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	for op, status := range map[string]int{"projects.get": 200, "merge_requests.list": 200, "merge_requests.create": 201, "users.list": 200} {
		if n := requests(op, status); n != 1 {
			t.Errorf("after EnsurePullRequest: lifecycle.host.requests{%s, %d} = %v, want 1", op, status, n)
		}
	}
	if n := requests("merge_requests.merge"); n != 0 {
		t.Errorf("merges before any: %v", n)
	}
	f.Pipeline(int64(pr.Number), "success", &gl.CommitStatus{Name: "build", Status: "success"})
	got, err := a.ReadPullRequests(ctx, lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := requests("merge_requests.get", 200); n < 1 {
		t.Errorf("after ReadPullRequests: merge_requests.get %v, want at least 1", n)
	}
	// A sweep within the minute of its change reads it through GraphQL.
	if _, err := a.ReadPullRequests(ctx, lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA, Version: got[0].Version}}}); err != nil {
		t.Fatal(err)
	}
	if n := requests("graphql", 200); n != 1 {
		t.Errorf("after a sweep: graphql %v, want 1", n)
	}
	f.Inject(gitlabtest.RouteMerge, gitlabtest.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"30"}}, Body: `{"message":"Retry later"}`})
	if _, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Fatalf("Merge on a 429 = %v, want temporary", err)
	}
	if n := requests("merge_requests.merge", 429); n != 1 {
		t.Errorf("merge_requests.merge 429: %v, want 1", n)
	}
	parent.End()

	// Every request went out, and was recorded, once, as a client span of
	// the caller's whose traceparent went to GitLab.
	rm := s.Collect(t)
	sent := wire.Take()
	s.CheckRequests(t, rm, sent, parent)
	if n := requests(hostcall.OperationOther); n != 0 {
		t.Errorf("%v requests of no known operation: the route table misses one of %q", n, sent)
	}

	// The rate-limit gauges read what GitLab said last, and not the
	// adapter's account of the 429.
	remaining := hostcalltest.Points(rm, "lifecycle.host.rate_limit.remaining")
	if len(remaining) != 1 || remaining[0].Value <= 0 || remaining[0].Value >= 2000 {
		t.Errorf("rate_limit.remaining = %+v, want one point of the api limit, below 2000", remaining)
	}
	if reset := hostcalltest.Sum(rm, "lifecycle.host.rate_limit.reset", keyHost.String("gitlab"), keyResource.String("api")); reset <= 0 || reset > 60 {
		t.Errorf("rate_limit.reset = %v s, want within the minute", reset)
	}

	// Webhook deliveries, by outcome.
	webhooks := func(outcome string) float64 {
		return hostcalltest.Sum(s.Collect(t), "lifecycle.host.webhooks", keyHost.String("gitlab"), keyOutcome.String(outcome))
	}
	first := f.Delivery(gitlabtest.EventJob, hookToken, nil)
	again := f.Delivery(gitlabtest.EventJob, hookToken, nil)
	again.Header.Set("Idempotency-Key", first.Header.Get("Idempotency-Key"))
	wrongMethod := f.Delivery(gitlabtest.EventJob, hookToken, nil)
	wrongMethod.Method = http.MethodGet
	notJSON := f.Delivery(gitlabtest.EventJob, hookToken, nil)
	notJSON.Body = http.NoBody
	notJSON.ContentLength = 0
	down := &lifecycle.ProviderError{Op: "read the pull request", Err: &lifecycle.TemporaryError{Err: errors.New("gitlab: 502"), RetryAfter: time.Minute}}
	steps := []struct {
		req     *http.Request
		sink    lifecycle.ProviderEventSink
		code    int
		outcome string
	}{
		{first, &recordingSink{}, 200, "accepted"},
		{again, &recordingSink{}, 200, "duplicate"},
		{f.Delivery(gitlabtest.EventPush, hookToken, nil), &recordingSink{}, 204, "ignored"},
		{f.Delivery(gitlabtest.EventJob, hookToken, func(p map[string]any) { p["project_id"] = 31537070 }), &recordingSink{}, 204, "ignored"},
		{f.Delivery(gitlabtest.EventJob, "not the token", nil), &recordingSink{}, 401, "invalid_signature"},
		{wrongMethod, &recordingSink{}, 405, "invalid"},
		{notJSON, &recordingSink{}, 400, "invalid"},
		{f.Delivery(gitlabtest.EventJob, hookToken, nil), failingSink{down}, 202, "accepted"},
		{f.Delivery(gitlabtest.EventJob, hookToken, nil), failingSink{errors.New("the store is down")}, 500, "failed"},
	}
	for i, st := range steps {
		before := webhooks(st.outcome)
		if rec := serve(a.WebhookHandler(st.sink), st.req); rec.Code != st.code {
			t.Errorf("step %d: answered %d, want %d", i, rec.Code, st.code)
		}
		if got := webhooks(st.outcome); got != before+1 {
			t.Errorf("step %d: lifecycle.host.webhooks{%s} went from %v to %v, want one more", i, st.outcome, before, got)
		}
	}
	if total := hostcalltest.Sum(s.Collect(t), "lifecycle.host.webhooks"); int(total) != len(steps) {
		t.Errorf("%v deliveries counted, want %d", total, len(steps))
	}

	s.CheckBounded(t, bounds(), gitlabtest.ProjectPath, "acme", pr.Head, "eng-1", pr.HeadSHA, f.URL, "/projects/")
}

// TestWebhookFailedWhileTheProjectCannotBeRead: a delivery answered 202
// without being passed on, the project never read, is failed.
func TestWebhookFailedWhileTheProjectCannotBeRead(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	s := hostcalltest.New(t)
	a := newAdapter(t, f, func(c *gitlab.Config) {
		c.MeterProvider, c.TracerProvider = s.Meters, s.Spans
		c.WebhookToken = hookToken
	})
	f.Inject(gitlabtest.RouteProject, gitlabtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`})
	sink := &recordingSink{}
	if rec := serve(a.WebhookHandler(sink), f.Delivery(gitlabtest.EventJob, hookToken, nil)); rec.Code != http.StatusAccepted || len(sink.events) != 0 {
		t.Fatalf("answered %d with %d events, want 202 and none", rec.Code, len(sink.events))
	}
	rm := s.Collect(t)
	if n := hostcalltest.Sum(rm, "lifecycle.host.webhooks", keyOutcome.String("failed")); n != 1 {
		t.Errorf("lifecycle.host.webhooks{failed} = %v, want 1", n)
	}
	if n := hostcalltest.Sum(rm, "lifecycle.host.requests", keyOperation.String("projects.get"), keyStatus.Int(502)); n != 1 {
		t.Errorf("projects.get 502: %v, want 1", n)
	}
	s.CheckBounded(t, bounds(), gitlabtest.ProjectPath, f.URL)
}
