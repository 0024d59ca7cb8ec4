package gitlab

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	gl "gitlab.com/gitlab-org/api/client-go"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall/hostcalltest"
)

// canned answers every request with a merge request, allocating the same
// for every request.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"id":101,"iid":1,"project_id":42,"state":"opened","source_branch":"lifecycle/eng-1","sha":"0123456789abcdef0123456789abcdef01234567"}`)), Request: req}, nil
}

// TestNoopTelemetryAddsNoAllocation measures a call through the adapter's
// client with noop providers, and with the global ones unset, against the
// same call with the instrumented transport taken out: the allocations
// per call are the same.
func TestNoopTelemetryAddsNoAllocation(t *testing.T) {
	if !strings.HasPrefix(fmt.Sprintf("%T", otel.GetTracerProvider()), "*global.") {
		t.Skip("the global TracerProvider is set in this test binary")
	}
	for name, cfg := range map[string]Config{
		"noop":   {MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()},
		"global": {},
	} {
		cfg.Token, cfg.Project, cfg.BaseURL = "glpat-test", "acme/web", "https://gitlab.example.com"
		cfg.HTTPClient = &http.Client{Transport: canned{}}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		call := func() {
			if _, _, err := a.client.MergeRequests.GetMergeRequest(42, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		instrumented := hostcalltest.AllocsPerCall(1000, call)
		obs := a.client.HTTPClient().Transport.(*observer)
		if _, ok := obs.next.(*hostcall.Transport); !ok {
			t.Fatalf("the adapter's transport is over %T, not the instrumented one", obs.next)
		}
		obs.next = canned{}
		bare := hostcalltest.AllocsPerCall(1000, call)
		if math.Abs(instrumented-bare) > hostcalltest.AllocSlack {
			t.Errorf("%s: %.2f allocations per call, %.2f without the instrumented transport", name, instrumented, bare)
		}
	}
}

// BenchmarkHostCall is one call (GET merge_requests.get) through the
// adapter's client, with noop providers and with the SDK's (every trace
// sampled, each span exported to an exporter that drops it, metrics
// aggregated in memory), under a caller's span as a submission makes it:
// to the fake over loopback HTTP, and to an in-process answer that
// isolates the instrumentation's own cost.
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
				cfg.Token, cfg.Project = "glpat-test", gitlabtest.ProjectPath
				pid, iid := gitlabtest.ProjectID, int64(1)
				if target == "fake" {
					f := gitlabtest.NewServer(b, gitlabtest.Options{RateLimit: 1 << 30})
					cfg.BaseURL = f.URL
					f.Push("lifecycle/eng-1")
				} else {
					cfg.BaseURL = "https://gitlab.example.com"
					cfg.HTTPClient = &http.Client{Transport: canned{}}
				}
				a, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if target == "fake" {
					project := "gitlab"
					pr, err := a.EnsurePullRequest(b.Context(), lifecycle.PullRequestRequest{Task: lifecycle.Task{ID: "tsk_1", Identifier: "ENG-1", Title: "Fix", Context: lifecycle.TaskContext{Project: &project}}})
					if err != nil {
						b.Fatal(err)
					}
					iid = int64(pr.Number)
				}
				ctx, span := tp.Tracer("bench").Start(context.Background(), "submit")
				defer span.End()
				if p.name == "noop" {
					ctx = context.Background()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, _, err := a.client.MergeRequests.GetMergeRequest(pid, iid, nil, gl.WithContext(ctx)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
