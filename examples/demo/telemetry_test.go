package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// GET /metrics answers without a key in Prometheus's text format, with
// the Service's instruments: after a read of a task, the request's
// duration under its route, and the events the seed committed; GET
// /healthz and GET /readyz still answer.
func TestMetricsAreServed(t *testing.T) {
	base := startDemo(t)
	c := client{t: t, base: base}
	id := firstTaskID(t, c)
	c.do("GET", "/tasks/"+id, nil)

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s", path, resp.Status)
		}
	}

	families := scrape(t, base)
	h := families["http_server_request_duration_seconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram http_server_request_duration_seconds in /metrics; families: %v", names(families))
	}
	var found bool
	for _, m := range h.GetMetric() {
		l := labels(m)
		if l["http_route"] == "/tasks/{id}" && l["http_request_method"] == "GET" && l["http_response_status_code"] == "200" {
			found = m.GetHistogram().GetSampleCount() >= 1
		}
		if strings.Contains(l["http_route"], id) {
			t.Errorf("a task ID in a route: %v", l)
		}
	}
	if !found {
		t.Errorf("no GET /tasks/{id} 200 in http_server_request_duration_seconds: %v", h.GetMetric())
	}
	if f := families["lifecycle_outbox_events_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("no counter lifecycle_outbox_events_total: the seed committed events; families: %v", names(families))
	}
	if f := families["target_info"]; f == nil || labels(f.GetMetric()[0])["service_name"] != defaultServiceName {
		t.Errorf("target_info = %v, want service_name %q", f, defaultServiceName)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the demo exports spans over
// OTLP/HTTP (protobuf): a submit sent with a traceparent is a server span
// "POST /tasks/{id}/submit" in that trace, its Store transactions are
// "store.tx" spans under it, and the spans still in the batch when the
// demo stops are flushed then (the batch's delay is an hour here).
func TestTracesAreExportedOverOTLP(t *testing.T) {
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "demo-under-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only the shutdown flushes
	base, stop := launchStoppable(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-admin-key-file", secretFile(t, testAdminKey))
	c := client{t: t, base: base}

	task := c.do("POST", "/tasks", map[string]any{"identifier": "OTEL-1", "title": "Trace a submit",
		"links": map[string]any{"issue": "https://issues.example.com/OTEL-1"}, "context": map[string]any{"project": "web"}})
	id := task["id"].(string)
	c.do("POST", "/tasks/"+id+"/start", map[string]any{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/tasks/"+id+"/submit",
		strings.NewReader(`{"summary": "Traced.", "mode": "artifact", "checks": [{"name": "unit", "status": "passed"}]}`))
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "submit-otel-1")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("submit: %s %s", resp.Status, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("demo: %v", err)
	}

	spans, services := rcv.received()
	if len(services) == 0 || services[0] != "demo-under-test" {
		t.Errorf("service.name of the exports = %v, want demo-under-test (OTEL_SERVICE_NAME)", services)
	}
	var server *tracepb.Span
	children := map[string][]*tracepb.Span{} // by parent span ID
	for _, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID {
			continue
		}
		if s.GetName() == "POST /tasks/{id}/submit" && s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			server = s
		}
		p := hex.EncodeToString(s.GetParentSpanId())
		children[p] = append(children[p], s)
	}
	if server == nil {
		t.Fatalf("no server span POST /tasks/{id}/submit in trace %s among %d spans: %v", traceID, len(spans), spanNames(spans))
	}
	if p := hex.EncodeToString(server.GetParentSpanId()); p != "00f067aa0ba902b7" {
		t.Errorf("the server span's parent = %s, want the traceparent's 00f067aa0ba902b7", p)
	}
	var txs int
	var walk func(s *tracepb.Span)
	walk = func(s *tracepb.Span) {
		for _, child := range children[hex.EncodeToString(s.GetSpanId())] {
			if child.GetName() == "store.tx" {
				txs++
			}
			walk(child)
		}
	}
	walk(server)
	if txs == 0 {
		t.Errorf("no store.tx span under the submit's server span; trace %s: %v", traceID, spanNames(spans))
	}
}

// firstTaskID returns the ID of the first task the demo lists.
func firstTaskID(t *testing.T, c client) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base+"/tasks?limit=1", nil)
	req.Header.Set("Authorization", "Bearer "+c.bearer())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_, rest, ok := bytes.Cut(raw, []byte(`"id":"`))
	id, _, ok2 := bytes.Cut(rest, []byte(`"`))
	if !ok || !ok2 {
		t.Fatalf("GET /tasks?limit=1: no task: %s", raw)
	}
	return string(id)
}

// scrape reads GET /metrics of the demo at base, on its metrics'
// listener and without a key, and parses it as Prometheus's text format.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	families, _ := scrapeText(t, base)
	return families
}

// scrapeText is scrape, with the scrape's text.
func scrapeText(t *testing.T, base string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, err := http.Get(metricsURL(t, base))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %s, Content-Type %q: %.300s", resp.Status, resp.Header.Get("Content-Type"), raw)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("GET /metrics is not in Prometheus's text format: %v", err)
	}
	return families, string(raw)
}

// labels returns a metric's labels by name.
func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// names returns the names of metric families, for failure messages.
func names(families map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range families {
		out = append(out, n)
	}
	return out
}

// spanNames lists spans as name@trace, for failure messages.
func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s@%x", s.GetName(), s.GetTraceId()))
	}
	return out
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the
// ExportTraceServiceRequests posted to /v1/traces (protobuf) and keeps
// their spans.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource that sent spans
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &export)
		}
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP receiver: %s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					r.services = append(r.services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// received returns the spans received so far and the service names that
// sent them.
func (r *otlpReceiver) received() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}

// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc sends the spans over OTLP/gRPC
// to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
func TestTracesAreExportedOverOTLPgRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := &grpcReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, rcv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	base, stop := launchStoppable(t, "-addr", "127.0.0.1:0", "-data", t.TempDir(), "-admin-key-file", secretFile(t, testAdminKey))
	client{t: t, base: base}.do("GET", "/tasks", nil)
	if err := stop(); err != nil {
		t.Fatalf("demo: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		if s.GetName() == "GET /tasks" && s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			return
		}
	}
	t.Errorf("no server span GET /tasks over gRPC: %v", spanNames(rcv.spans))
}

// grpcReceiver is an OTLP/gRPC trace receiver that keeps the spans.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// The OTLP settings follow the specification's variables: the traces'
// own win, the protocol defaults to http/protobuf, and no endpoint means
// no traces.
func TestOTLPTraceSettings(t *testing.T) {
	for _, c := range []struct {
		env                map[string]string
		endpoint, protocol string
	}{
		{nil, "", "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318", "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http://b:4318/v1/traces", "grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "http://a:4317", "grpc"},
	} {
		endpoint, protocol := otlpTraceSettings(func(k string) string { return c.env[k] })
		if endpoint != c.endpoint || protocol != c.protocol {
			t.Errorf("%v: %q %q, want %q %q", c.env, endpoint, protocol, c.endpoint, c.protocol)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if tel, err := setupTelemetry(t.Context(), os.Getenv, slog.New(slog.DiscardHandler)); err == nil {
		_ = tel.shutdown(t.Context())
		t.Error("http/json was accepted: the demo has no exporter for it")
	}
}

// GET /metrics is served on the metrics' own listener (-metrics-addr),
// which serves nothing else; the API's port answers /metrics as it
// answers any unknown route, with a key or without.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	base := startDemo(t)
	murl := metricsURL(t, base)
	if !strings.HasPrefix(murl, "http://127.0.0.1:") || strings.HasPrefix(murl, base) {
		t.Fatalf("metrics at %s, want a loopback listener apart from the API's %s", murl, base)
	}
	scrape(t, base) // 200, in Prometheus's text format

	get := func(url, key string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(raw)
	}
	for _, key := range []string{"", testAdminKey} {
		status, ctype, body := get(base+"/metrics", key)
		t.Logf("GET /metrics on the API's port (key %t): %d %s", key != "", status, body)
		wantStatus, wantType, wantBody := get(base+"/no-such-route", key)
		if status != wantStatus || ctype != wantType || strings.Replace(wantBody, "/no-such-route", "/metrics", -1) != body {
			t.Errorf("GET /metrics on the API's port (key %t) = %d %s %s; an unknown route = %d %s %s",
				key != "", status, ctype, body, wantStatus, wantType, wantBody)
		}
		// docs/api.md: 404 not_found for no route at that path.
		if status != http.StatusNotFound || !strings.Contains(body, `{"error":{"code":"not_found"`) {
			t.Errorf("GET /metrics on the API's port (key %t) = %d %s, want the API's 404 not_found", key != "", status, body)
		}
	}
	metricsBase := strings.TrimSuffix(murl, "/metrics")
	for _, path := range []string{"/", "/tasks", "/healthz", "/console/"} {
		if status, _, _ := get(metricsBase+path, testAdminKey); status != http.StatusNotFound {
			t.Errorf("GET %s on the metrics' listener = %d, want 404: it serves /metrics only", path, status)
		}
	}
}

// -metrics-addr defaults to loopback, port 9464; "" serves no metrics,
// and an address in use stops the demo before it touches its data
// directory, saying what to pass.
func TestMetricsAddrFlag(t *testing.T) {
	o, err := parseFlags(nil, func(string) string { return "" })
	if err != nil || o.metricsAddr != "127.0.0.1:9464" || o.metricIdentifiers {
		t.Fatalf("defaults: -metrics-addr %q, -metric-identifiers %t (%v); want 127.0.0.1:9464 and false", o.metricsAddr, o.metricIdentifiers, err)
	}

	base := startDemo(t, "-metrics-addr", "")
	if _, ok := metricsURLs.Load(base); ok {
		t.Error("-metrics-addr '' served metrics")
	}
	client{t: t, base: base}.do("GET", "/tasks", nil)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-metrics-addr", busy.Addr().String(), "-data", dir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-metrics-addr") {
		t.Errorf("metrics' address in use: %v, want an error naming -metrics-addr", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was made (%v) though the demo could not listen", err)
	}
}

// A scrape after webhook deliveries names neither the subscription nor
// its receiver's host, unless -metric-identifiers asks for them.
func TestMetricsNameNoSubscription(t *testing.T) {
	for _, identifiers := range []bool{false, true} {
		t.Run(fmt.Sprintf("identifiers=%t", identifiers), func(t *testing.T) {
			got := make(chan struct{}, 100)
			rc := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got <- struct{}{} }))
			t.Cleanup(rc.Close)
			ca := filepath.Join(t.TempDir(), "ca.pem")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"-webhook-url", rc.URL + "/hooks?token=tok_secret", "-webhook-secret-file", secretFile(t, "demo-secret-0123456789"), "-webhook-ca", ca}
			if identifiers {
				args = append(args, "-metric-identifiers")
			}
			base := startDemo(t, args...)
			c := client{t: t, base: base}
			subID := firstSubscriptionID(t, c)
			c.do("POST", "/tasks", map[string]any{"identifier": "MET-1", "title": "t", "links": map[string]any{"issue": "https://issues.example.com/MET-1"}})
			select {
			case <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("the -webhook-url subscription received nothing")
			}
			var families map[string]*dto.MetricFamily
			var text string
			if !testenv.WaitUntil(10*time.Second, func() bool {
				families, text = scrapeText(t, base)
				return families["http_client_request_duration_seconds"] != nil && families["lifecycle_webhook_backlog"] != nil
			}) {
				t.Fatalf("no delivery measured; families %v", names(families))
			}
			host := "127.0.0.1" // the receiver's
			var addressed, perSub bool
			for _, m := range families["http_client_request_duration_seconds"].GetMetric() {
				addressed = addressed || labels(m)["server_address"] == host
			}
			for _, m := range families["lifecycle_webhook_backlog"].GetMetric() {
				perSub = perSub || labels(m)["lifecycle_subscription_id"] == subID
			}
			if named := strings.Contains(text, subID); named != identifiers || perSub != identifiers {
				t.Errorf("the scrape names the subscription %s: %t (on the backlog: %t), want %t", subID, named, perSub, identifiers)
			}
			if addressed != identifiers || strings.Contains(text, `"`+host+`"`) != identifiers {
				t.Errorf("the scrape names the receiver's host: %t, want %t", addressed, identifiers)
			}
			if strings.Contains(text, "tok_secret") {
				t.Error("the scrape holds the receiver URL's token")
			}
		})
	}
}

// firstSubscriptionID returns the ID of the demo's first subscription.
func firstSubscriptionID(t *testing.T, c client) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base+"/event-subscriptions", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Data) == 0 || page.Data[0].ID == "" {
		t.Fatalf("GET /event-subscriptions: %v, %+v", err, page)
	}
	return page.Data[0].ID
}
