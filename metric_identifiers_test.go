package lifecycle_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// promScrape is a Prometheus endpoint over a Service's MeterProvider, as
// a host serves it (the demo's setup): what a scrape without a key reads.
type promScrape struct {
	t   *testing.T
	srv *httptest.Server
}

// newPromScrape returns the endpoint and the Config mutation that gives
// its MeterProvider (and a recording TracerProvider, spans) to a Service.
func newPromScrape(t *testing.T, spans *tracetest.SpanRecorder) (*promScrape, func(*lifecycle.Config)) {
	t.Helper()
	reg := promclient.NewRegistry()
	exp, err := prometheus.New(prometheus.WithRegisterer(reg), prometheus.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &promScrape{t: t, srv: srv}, func(c *lifecycle.Config) { c.MeterProvider, c.TracerProvider = mp, tp }
}

// get returns the text of a scrape, and its families.
func (p *promScrape) get() (string, map[string]*dto.MetricFamily) {
	p.t.Helper()
	resp, err := http.Get(p.srv.URL + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		p.t.Fatalf("scrape: %v", err)
	}
	return string(raw), families
}

// gaugeValues returns the values of a gauge family by the value of label
// ("" for points without it).
func gaugeValues(f *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var v string
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				v = l.GetValue()
			}
		}
		out[v] = m.GetGauge().GetValue()
	}
	return out
}

// A Prometheus scrape after webhook deliveries names no subscription and
// no receiver by default: the backlog and lag are one series each for
// every subscription (their sum, the greatest lag), and the deliveries'
// http.client.request.duration has no server.address. With
// Config.MetricIdentifiers both appear, per subscription and per
// receiver. Spans name both either way.
func TestMetricIdentifiers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		identifiers bool
	}{
		{"default", false},
		{"MetricIdentifiers", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t)
			hold := make(chan struct{})
			rc.Hold(hold)
			spans := tracetest.NewSpanRecorder()
			scrape, withProm := newPromScrape(t, spans)
			e := newHookEnv(t, rc, withProm, func(cfg *lifecycle.Config) {
				// A receiver's host name, found nowhere else in a scrape.
				cfg.WebhookResolver = fakeResolver{"example.com": "127.0.0.1"}
				cfg.MetricIdentifiers = c.identifiers
			})
			u, err := url.Parse(rc.url("/hooks?token=tok_secret"))
			if err != nil {
				t.Fatal(err)
			}
			u.Host = "example.com:" + u.Port() // the test server's certificate names example.com
			subs := []string{
				e.Subscribe(subBody(u.String()))["id"].(string),
				e.Subscribe(subBody(u.String()))["id"].(string),
			}
			apitest.WaitFor(t, func() bool { w, _ := e.Svc.WebhookStateForTest(); return w == 2 })

			// Each subscription's event is in flight for 30 s, and the
			// second's next event unread for 10 s more.
			e.CreateTask(apitest.TaskBody("ENG-1"))
			apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 2 })
			e.Clock.Advance(30 * time.Second)
			e.CreateTask(apitest.TaskBody("ENG-2"))
			e.Clock.Advance(10 * time.Second)

			want := map[string]float64{"": 4} // backlogs by subscription
			wantLag := map[string]float64{"": 40}
			if c.identifiers {
				want = map[string]float64{subs[0]: 2, subs[1]: 2}
				wantLag = map[string]float64{subs[0]: 40, subs[1]: 40}
			}
			label := "lifecycle_subscription_id"
			var backlog, lag map[string]float64
			apitest.WaitFor(t, func() bool {
				_, fams := scrape.get()
				backlog = gaugeValues(fams["lifecycle_webhook_backlog"], label)
				lag = gaugeValues(fams["lifecycle_webhook_lag_seconds"], label)
				return equalValues(backlog, want) && equalValues(lag, wantLag)
			})

			close(hold)
			for range 4 {
				rc.next()
			}
			for _, id := range subs {
				e.WaitDeliveries(id, 2)
			}
			apitest.WaitFor(t, func() bool {
				_, fams := scrape.get()
				for _, v := range gaugeValues(fams["lifecycle_webhook_backlog"], label) {
					if v != 0 {
						return false
					}
				}
				return true
			})

			text, fams := scrape.get()
			durations := fams["http_client_request_duration_seconds"]
			if durations == nil || len(durations.GetMetric()) != 1 {
				t.Fatalf("http_client_request_duration_seconds = %v, want one series of deliveries", durations)
			}
			named := map[string]bool{"example.com": false, "tok_secret": false}
			for _, id := range subs {
				named[id] = false
			}
			for v := range named {
				named[v] = strings.Contains(text, v)
			}
			if named["tok_secret"] {
				t.Errorf("the scrape holds the receiver URL's token:\n%s", text)
			}
			for _, v := range append([]string{"example.com"}, subs...) {
				if named[v] != c.identifiers {
					t.Errorf("the scrape names %s: %v, want %v", v, named[v], c.identifiers)
				}
			}
			if c.identifiers && !strings.Contains(text, `server_address="example.com"`) {
				t.Errorf("no server_address=\"example.com\" in the scrape:\n%s", text)
			}

			// Spans are not served on /metrics: they keep both.
			var traced int
			for _, s := range spans.Ended() {
				if s.Name() != "webhook.deliver" {
					continue
				}
				traced++
				attrs := map[string]string{}
				for _, kv := range s.Attributes() {
					attrs[string(kv.Key)] = kv.Value.String()
				}
				if attrs["server.address"] != "example.com" || (attrs["lifecycle.subscription.id"] != subs[0] && attrs["lifecycle.subscription.id"] != subs[1]) {
					t.Errorf("span attributes %v, want the subscription and the receiver", attrs)
				}
			}
			if traced != 4 {
				t.Errorf("%d delivery spans, want 4", traced)
			}
		})
	}
}

// equalValues reports whether two maps of values are the same.
func equalValues(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
