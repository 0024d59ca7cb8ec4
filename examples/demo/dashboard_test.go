package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The Grafana dashboard (docs/grafana-dashboard.json) queries only
// metrics that exist: every metric name in its queries is served by the
// demo's GET /metrics after some traffic, or is one of the instruments
// docs/operations.md lists (under its Prometheus name); every label its
// queries group by is one the demo serves for that metric or one of the
// instrument's attributes. Every panel uses the dashboard's data source
// variable. And every lifecycle instrument the demo serves is listed in
// docs/operations.md.
func TestDashboardQueriesUseKnownMetrics(t *testing.T) {
	base := startDemo(t)
	c := client{t: t, base: base}
	task := c.do("POST", "/tasks", map[string]any{"identifier": "DASH-1", "title": "Traffic for the dashboard",
		"links": map[string]any{"issue": "https://issues.example.com/DASH-1"}, "context": map[string]any{"project": "web"}})
	id := task["id"].(string)
	c.do("POST", "/tasks/"+id+"/start", map[string]any{})
	c.do("GET", "/tasks/"+id, nil)
	c.post("/tasks/"+id+"/submit", map[string]any{"summary": "Done.", "mode": "artifact"})
	families := scrape(t, base)

	documented := documentedInstruments(t)
	served := map[string]map[string]bool{} // series name → its label names
	for name, f := range families {
		series := []string{name}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			series = []string{name + "_bucket", name + "_sum", name + "_count"}
		}
		labelNames := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labelNames[l.GetName()] = true
			}
		}
		for _, s := range series {
			served[s] = labelNames
		}
		if (strings.HasPrefix(name, "lifecycle_") || strings.HasPrefix(name, "http_")) && documented[series[0]] == nil {
			t.Errorf("the demo serves %s, which docs/operations.md does not list", name)
		}
	}

	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		SchemaVersion int `json:"schemaVersion"`
		Panels        []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	if dash.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: Grafana 10 dashboards are 36 or later", dash.SchemaVersion)
	}
	var exprs []string
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: data source %q, want ${DS_PROMETHEUS}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
			queries++
		}
	}
	if queries < 15 {
		t.Errorf("%d queries in the dashboard: the panels are missing", queries)
	}
	for _, expr := range exprs {
		names := metricName.FindAllStringSubmatch(expr, -1)
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			names = append(names, m)
		}
		if len(names) == 0 {
			t.Errorf("no metric in %q: every metric has a selector, such as {job=~\"$job\"}", expr)
		}
		for _, n := range names {
			name := n[1]
			labels, isServed := served[name]
			attrs, isDocumented := documented[name]
			if !isServed && !isDocumented {
				t.Errorf("%s (in %q) is neither served by the demo nor listed in docs/operations.md", name, expr)
				continue
			}
			for _, by := range groupBy.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(by[1], ",") {
					if l = strings.TrimSpace(l); l != "le" && !labels[l] && !attrs[l] {
						t.Errorf("%s has no label %s (in %q)", name, l, expr)
					}
				}
			}
		}
	}
}

var (
	// metricName finds the metric names of a PromQL expression: each is
	// followed by its selector.
	metricName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
	// labelValues finds the metric of a Grafana variable's
	// label_values(metric, label).
	labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),`)
	// groupBy finds the labels of by (...) clauses.
	groupBy = regexp.MustCompile(`\bby \(([^)]*)\)`)
	// backticked finds `quoted` words.
	backticked = regexp.MustCompile("`([^`]+)`")
)

// documentedInstruments returns the Prometheus series names of the
// instruments docs/operations.md lists in its tables, each with the label
// names its attributes give (and whatever else the row quotes).
func documentedInstruments(t *testing.T) map[string]map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for line := range strings.Lines(string(raw)) {
		cols := strings.Split(line, "|")
		if len(cols) < 6 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`") || !strings.HasPrefix(strings.TrimSpace(cols[2]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cols[2]), "`")
		labels := map[string]bool{}
		for _, m := range backticked.FindAllStringSubmatch(cols[4], -1) {
			labels[strings.ReplaceAll(m[1], ".", "_")] = true
			if k, _, ok := strings.Cut(m[1], "="); ok {
				labels[strings.ReplaceAll(k, ".", "_")] = true
			}
		}
		series := []string{name}
		if strings.HasPrefix(strings.TrimSpace(cols[3]), "histogram") {
			series = []string{name + "_bucket", name + "_sum", name + "_count"}
		}
		for _, s := range series {
			out[s] = labels
		}
	}
	if len(out) < 25 || out["lifecycle_webhook_lag_seconds"] == nil {
		t.Fatalf("docs/operations.md lists %d series: its instrument tables were not found", len(out))
	}
	return out
}
