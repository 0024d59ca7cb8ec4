package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
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

// bounds are the attributes the Adapter's telemetry may record.
func bounds() hostcalltest.Bounds {
	ops := []string{hostcall.OperationGraphQL, hostcall.OperationOther}
	for _, r := range restRoutes {
		ops = append(ops, r.Operation)
	}
	return hostcalltest.Bounds{
		keyHost:               hostcalltest.OneOf("github"),
		keyOperation:          hostcalltest.OneOf(ops...),
		"http.request.method": hostcalltest.OneOf("GET", "POST", "PUT", "PATCH", "DELETE"),
		keyStatus:             hostcalltest.AnyInt,
		"server.address":      hostcalltest.OneOf("127.0.0.1"),
		"server.port":         hostcalltest.AnyInt,
		"error.type":          hostcalltest.OneOf("400", "401", "403", "404", "405", "409", "422", "429", "500", "502", "503", "timeout", "canceled"),
		keyResource:           hostcalltest.OneOf("core", "graphql"),
		keyOutcome:            hostcalltest.OneOf("accepted", "duplicate", "ignored", "invalid_signature", "invalid", "failed"),
	}
}

// TestTelemetry runs a pull request's life through an Adapter with the
// SDK's providers, under a span as a submission would, and checks what
// each instrument records as each call happens.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	key, keyPEM := appKey(t)
	f := newFakeGitHubWith(t, githubtest.Options{App: &githubtest.App{ID: 424242, InstallationID: 5151, PublicKey: &key.PublicKey}})
	s := hostcalltest.New(t)
	wire := &hostcalltest.Headers{}
	a := f.adapter(t, Config{
		App:        &AppAuth{AppID: 424242, InstallationID: 5151, PrivateKey: keyPEM},
		HTTPClient: &http.Client{Transport: wire}, MeterProvider: s.Meters, TracerProvider: s.Spans,
		WebhookSecret: testSecret,
	})
	requests := func(op string, status ...int) float64 {
		match := []attribute.KeyValue{keyHost.String("github"), keyOperation.String(op)}
		if len(status) > 0 {
			match = append(match, keyStatus.Int(status[0]))
		}
		return hostcalltest.Sum(s.Collect(t), "lifecycle.host.requests", match...)
	}

	reset := time.Now().Add(time.Hour)
	f.SetRateLimit(5000, reset)
	f.SetGraphQLRateLimit(5000, reset)

	ctx, parent := s.Spans.Tracer("test").Start(t.Context(), "submit")
	f.Push("lifecycle/eng-1")
	pr, err := a.EnsurePullRequest(ctx, lifecycle.PullRequestRequest{Task: testTask(1), SubmissionID: "sub_1", Reviewers: []string{"octocat"}})
	if err != nil {
		t.Fatal(err)
	}
	for op, status := range map[string]int{"apps.create-installation-access-token": 201, "repos.get": 200, "pulls.list": 200, "pulls.create": 201} {
		if n := requests(op, status); n != 1 {
			t.Errorf("after EnsurePullRequest: lifecycle.host.requests{%s, %d} = %v, want 1", op, status, n)
		}
	}
	if n := requests("graphql"); n != 0 {
		t.Errorf("graphql requests before any batched reading: %v", n)
	}
	if _, err := a.ReadPullRequests(ctx, lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef}}}); err != nil {
		t.Fatal(err)
	}
	if n := requests("graphql", 200); n < 1 {
		t.Errorf("after ReadPullRequests: graphql requests %v, want at least 1", n)
	}
	f.Inject(githubtest.RouteMerge, githubtest.Error(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
	if _, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err == nil {
		t.Fatal("a merge GitHub refused succeeded")
	}
	if _, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err != nil {
		t.Fatal(err)
	}
	if n405, n200 := requests("pulls.merge", 405), requests("pulls.merge", 200); n405 != 1 || n200 != 1 {
		t.Errorf("pulls.merge: %v refused and %v merged, want 1 and 1", n405, n200)
	}
	parent.End()

	// Every request went out, and was recorded, once, as a client span of
	// the caller's whose traceparent went to GitHub.
	rm := s.Collect(t)
	sent := wire.Take()
	spans := s.CheckRequests(t, rm, sent, parent)
	if n := requests(hostcall.OperationOther); n != 0 {
		t.Errorf("%v requests of no known operation: the route table misses one of %q", n, sent)
	}
	names := map[string]bool{}
	for _, sp := range spans {
		names[sp.Name()] = true
	}
	for _, want := range []string{"POST apps.create-installation-access-token", "POST pulls.create", "POST graphql", "PUT pulls.merge"} {
		if !names[want] {
			t.Errorf("no span %q among %v", want, names)
		}
	}

	// The rate-limit gauges read what GitHub said last.
	for _, resource := range []string{"core", "graphql"} {
		rl, ok := a.RateLimit(resource)
		got := hostcalltest.Sum(rm, "lifecycle.host.rate_limit.remaining", keyHost.String("github"), keyResource.String(resource))
		if !ok || rl.Remaining >= 5000 || got != float64(rl.Remaining) {
			t.Errorf("rate_limit.remaining{%s} = %v, want %d", resource, got, rl.Remaining)
		}
		if reset := hostcalltest.Sum(rm, "lifecycle.host.rate_limit.reset", keyResource.String(resource)); reset <= 0 || reset > 3600 {
			t.Errorf("rate_limit.reset{%s} = %v s, want within the hour", resource, reset)
		}
	}

	// Webhook deliveries, by outcome.
	sink := &recorder{}
	h := a.WebhookHandler(sink)
	deliver := func(req *http.Request) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	payload := f.PullRequestPayload(pr.Number, "synchronize")
	webhooks := func(outcome string) float64 {
		return hostcalltest.Sum(s.Collect(t), "lifecycle.host.webhooks", keyHost.String("github"), keyOutcome.String(outcome))
	}
	steps := []struct {
		req     func() *http.Request
		sinkErr error
		code    int
		outcome string
	}{
		{func() *http.Request { return signedDelivery(t, "pull_request", "d-1", payload) }, nil, 200, "accepted"},
		{func() *http.Request { return signedDelivery(t, "pull_request", "d-1", payload) }, nil, 200, "duplicate"},
		{func() *http.Request { return signedDelivery(t, "pull_request", "d-2", payload) }, nil, 200, "duplicate"}, // the body again
		{func() *http.Request { return signedDelivery(t, "ping", "d-3", f.PingPayload()) }, nil, 204, "ignored"},
		{func() *http.Request {
			return signedDelivery(t, "pull_request", "d-4", f.PullRequestPayload(pr.Number, "labeled"))
		}, nil, 204, "ignored"},
		{func() *http.Request {
			return githubtest.Delivery("/hooks/github", "pull_request", "d-5", "not the secret", payload)
		}, nil, 401, "invalid_signature"},
		{func() *http.Request {
			r := signedDelivery(t, "pull_request", "d-6", payload)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, nil, 401, "invalid_signature"},
		{func() *http.Request { return signedDelivery(t, "pull_request", "d-7", []byte("{not json")) }, nil, 400, "invalid"},
		{func() *http.Request {
			r := signedDelivery(t, "pull_request", "d-8", payload)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, nil, 415, "invalid"},
		{func() *http.Request {
			return signedDelivery(t, "pull_request", "d-9", f.PullRequestPayload(pr.Number, "reopened"))
		}, errors.New("the store is down"), 503, "failed"},
	}
	for i, st := range steps {
		before := webhooks(st.outcome)
		sink.mu.Lock()
		sink.err = st.sinkErr
		sink.mu.Unlock()
		if code := deliver(st.req()); code != st.code {
			t.Errorf("step %d: answered %d, want %d", i, code, st.code)
		}
		if got := webhooks(st.outcome); got != before+1 {
			t.Errorf("step %d: lifecycle.host.webhooks{%s} went from %v to %v, want one more", i, st.outcome, before, got)
		}
	}
	if total := hostcalltest.Sum(s.Collect(t), "lifecycle.host.webhooks"); int(total) != len(steps) {
		t.Errorf("%v deliveries counted, want %d", total, len(steps))
	}

	s.CheckBounded(t, bounds(), githubtest.Owner, githubtest.Repo, pr.Head, "eng-1", pr.HeadSHA, f.URL, "/repos/", fmt.Sprint("/", pr.Number))
}

// TestTelemetryOfTransportErrors checks that a request without an answer
// is recorded with error.type and no status, and a 5xx with its status.
func TestTelemetryOfTransportErrors(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	s := hostcalltest.New(t)
	a := f.adapter(t, Config{MeterProvider: s.Meters, TracerProvider: s.Spans})
	pr := open(t, f, a, 1)
	f.Inject(githubtest.RouteGetPull, githubtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"Server Error"}`})
	if _, err := a.PullRequest(t.Context(), pr.PullRequestRef); !errors.Is(err, lifecycle.ErrTemporary) {
		t.Fatalf("PullRequest on a 502 = %v, want temporary", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.PullRequest(ctx, pr.PullRequestRef); err == nil {
		t.Fatal("a reading with its context canceled succeeded")
	}
	rm := s.Collect(t)
	if n := hostcalltest.Sum(rm, "lifecycle.host.requests", keyOperation.String("pulls.get"), keyStatus.Int(502)); n != 1 {
		t.Errorf("pulls.get 502: %v, want 1", n)
	}
	var failed float64
	for _, p := range hostcalltest.Points(rm, "http.client.request.duration") {
		if v, ok := p.Attrs.Value("error.type"); ok {
			if _, has := p.Attrs.Value(keyStatus); has || v.AsString() != "canceled" {
				t.Errorf("a request without an answer recorded %v", p.Attrs.Encoded(attribute.DefaultEncoder()))
			}
			failed += p.Value
		}
	}
	if failed != 1 {
		t.Errorf("%v requests without an answer recorded, want the canceled one", failed)
	}
	s.CheckBounded(t, bounds(), githubtest.Owner, githubtest.Repo, "eng-1")
}

// canned answers every request with a pull request, allocating the same
// for every request.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"number":1,"state":"open","head":{"ref":"lifecycle/eng-1","sha":"0123456789abcdef0123456789abcdef01234567"}}`)), Request: req}, nil
}

// TestNoopTelemetryAddsNoAllocation measures a REST call through the
// Adapter's client with noop providers, and with the global ones unset,
// against the same call with the instrumented transport taken out: the
// allocations per call are the same.
func TestNoopTelemetryAddsNoAllocation(t *testing.T) {
	if !strings.HasPrefix(fmt.Sprintf("%T", otel.GetTracerProvider()), "*global.") {
		t.Skip("the global TracerProvider is set in this test binary")
	}
	for name, cfg := range map[string]Config{
		"noop":   {MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()},
		"global": {},
	} {
		// A Client as given, so that the Adapter's transport is the
		// client's, with no authentication over it.
		cfg.Owner, cfg.Repo = "acme", "widgets"
		cfg.Client = gh.NewClient(&http.Client{Transport: canned{}})
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		call := func() {
			if _, _, err := a.client.PullRequests.Get(context.Background(), "acme", "widgets", 1); err != nil {
				t.Fatal(err)
			}
		}
		instrumented := hostcalltest.AllocsPerCall(1000, call)
		ht := a.client.Client().Transport.(*hostTransport)
		if _, ok := ht.base.(*hostcall.Transport); !ok {
			t.Fatalf("the Adapter's transport is over %T, not the instrumented one", ht.base)
		}
		ht.base = canned{}
		bare := hostcalltest.AllocsPerCall(1000, call)
		if math.Abs(instrumented-bare) > hostcalltest.AllocSlack {
			t.Errorf("%s: %.2f allocations per call, %.2f without the instrumented transport", name, instrumented, bare)
		}
	}
}

// BenchmarkHostCall is one REST call (GET pulls.get) through the
// Adapter's client, with noop providers and with the SDK's (every trace
// sampled, each span exported to an exporter that drops it, metrics
// aggregated in memory), under a caller's span as a submission makes it:
// to the fake over loopback HTTP (a 304 after the first, as GitHub
// answers a conditional GET), and to an in-process answer that isolates
// the instrumentation's own cost.
func BenchmarkHostCall(b *testing.B) {
	mp, tp := hostcalltest.Discarding(b)
	providers := []struct {
		name string
		cfg  Config
	}{
		{"noop", Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()}},
		{"sdk", Config{MeterProvider: mp, TracerProvider: tp}},
	}
	for _, target := range []string{"fake", "canned"} {
		for _, p := range providers {
			b.Run(target+"/"+p.name, func(b *testing.B) {
				cfg := p.cfg
				var a *Adapter
				number := 1
				if target == "fake" {
					f := newFakeGitHub(b)
					a = f.adapter(b, cfg)
					number = open(b, f, a, 1).Number
				} else {
					cfg.Owner, cfg.Repo = "acme", "widgets"
					cfg.Client = gh.NewClient(&http.Client{Transport: canned{}})
					var err error
					if a, err = New(cfg); err != nil {
						b.Fatal(err)
					}
				}
				ctx, span := tp.Tracer("bench").Start(context.Background(), "submit")
				defer span.End()
				if p.name == "noop" {
					ctx = context.Background()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, _, err := a.client.PullRequests.Get(ctx, a.cfg.Owner, a.cfg.Repo, number); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
