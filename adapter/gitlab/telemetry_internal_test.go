package gitlab

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/internal/hostcall/hostcalltest"
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
