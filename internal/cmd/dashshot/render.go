package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// dashboard is what dashshot reads of a Grafana dashboard.
type dashboard struct {
	Title      string   `json:"title"`
	Tags       []string `json:"tags"`
	Panels     []panel  `json:"panels"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Label    string `json:"label"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

// panel is one panel of the dashboard.
type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit     string   `json:"unit"`
			Decimals *int     `json:"decimals"`
			Min      *float64 `json:"min"`
			Custom   struct {
				FillOpacity float64 `json:"fillOpacity"`
				LineWidth   float64 `json:"lineWidth"`
				Stacking    struct {
					Mode string `json:"mode"`
				} `json:"stacking"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
	} `json:"targets"`
}

// loadDashboard reads a Grafana dashboard's JSON.
func loadDashboard(file string) (*dashboard, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &d, nil
}

// page is the rendered dashboard.
type page struct {
	html           string
	height         int
	panels, series int
}

// Grafana's grid: 24 columns, rows of 30 px, 8 px between panels.
const (
	cellHeight = 30
	margin     = 8
	pad        = 16 // around the grid
	headerH    = 92 // the title and the variables above the grid
)

// palette is Grafana's classic palette.
var palette = []string{"#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
	"#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477"}

// render queries every panel of d over [start, end] and draws the
// dashboard as an HTML page width pixels wide.
func render(p *prometheus, d *dashboard, start, end time.Time, scrape time.Duration, width int) (page, error) {
	ctx := context.Background()
	rng := end.Sub(start)
	step := max(scrape/2, (rng / 240).Round(time.Second))
	rateInterval := max(4*scrape, step+scrape)

	// The variables as a user would set them: every job, and the four
	// routes with the most requests (all of them make a legend of dozens).
	vars := map[string]string{
		"$__rate_interval": fmt.Sprintf("%ds", int(rateInterval.Seconds())),
		"$__range":         fmt.Sprintf("%ds", int(rng.Seconds())),
		"$job":             ".+",
	}
	varText := []string{"Data source", "Prometheus", "Job", "All"}
	top, err := p.query(ctx, fmt.Sprintf(`topk(4, sum by (http_route) (increase(http_server_request_duration_seconds_count{http_route!="", http_route!="/task-events/stream"}[%s])))`, vars["$__range"]), end)
	if err != nil {
		return page{}, err
	}
	var routes, quoted []string
	for _, s := range top {
		routes = append(routes, s.labels["http_route"])
	}
	slices.Sort(routes)
	for _, r := range routes {
		quoted = append(quoted, strings.ReplaceAll(regexp.QuoteMeta(r), `\`, `\\`))
	}
	vars["$route"] = ".*"
	if len(routes) > 0 {
		vars["$route"] = "(" + strings.Join(quoted, "|") + ")"
		varText = append(varText, "Route", strings.Join(routes, " + "))
	}
	subst := func(expr string) string {
		// Longest names first: $__rate_interval before $__range.
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
		for _, k := range keys {
			expr = strings.ReplaceAll(expr, k, vars[k])
		}
		return expr
	}

	colW := float64(width-2*pad-23*margin) / 24
	var b strings.Builder
	bottom := 0
	out := page{}
	for _, pn := range d.Panels {
		g := pn.GridPos
		x := pad + int(math.Round(float64(g.X)*(colW+margin)))
		y := headerH + g.Y*(cellHeight+margin)
		w := int(math.Round(float64(g.W)*colW + float64(g.W-1)*margin))
		h := g.H*cellHeight + (g.H-1)*margin
		bottom = max(bottom, y+h)
		if pn.Type == "row" {
			fmt.Fprintf(&b, `<div class="row" style="left:%dpx;top:%dpx;width:%dpx;height:%dpx">⌄ %s</div>`, x, y, w, h, html.EscapeString(pn.Title))
			continue
		}
		out.panels++
		var data []drawn
		for _, t := range pn.Targets {
			expr := subst(t.Expr)
			var res []series
			if t.Instant || pn.Type == "stat" {
				res, err = p.query(ctx, expr, end)
			} else {
				res, err = p.queryRange(ctx, expr, start, end, step)
			}
			if err != nil {
				return page{}, err
			}
			var part []drawn
			for _, s := range res {
				part = append(part, drawn{series: s, name: legend(t.LegendFormat, s.labels)})
			}
			slices.SortFunc(part, func(a, b drawn) int { return strings.Compare(a.name, b.name) })
			data = append(data, part...)
		}
		for i := range data {
			data[i].color = palette[i%len(palette)]
		}
		out.series += len(data)
		fmt.Fprintf(&b, `<div class="panel" style="left:%dpx;top:%dpx;width:%dpx;height:%dpx"><div class="title">%s</div>`, x, y, w, h, html.EscapeString(pn.Title))
		switch pn.Type {
		case "stat":
			b.WriteString(drawStat(pn, data, w, h-32))
		default:
			b.WriteString(drawTimeSeries(pn, data, start, end, w, h-32))
		}
		b.WriteString(`</div>`)
	}
	out.height = bottom + pad
	var head strings.Builder
	fmt.Fprintf(&head, `<div class="head"><div class="crumbs">Dashboards › <b>%s</b>`, html.EscapeString(d.Title))
	for _, t := range d.Tags {
		fmt.Fprintf(&head, ` <span class="tag">%s</span>`, html.EscapeString(t))
	}
	fmt.Fprintf(&head, `</div><div class="range">%s to %s UTC · refresh 30s</div></div><div class="vars">`, start.UTC().Format("2006-01-02 15:04:05"), end.UTC().Format("15:04:05"))
	for i := 0; i+1 < len(varText); i += 2 {
		fmt.Fprintf(&head, `<span class="var"><span class="k">%s</span><span class="v">%s</span></span>`, html.EscapeString(varText[i]), html.EscapeString(varText[i+1]))
	}
	head.WriteString(`</div>`)
	out.html = fmt.Sprintf(pageHTML, width, out.height, head.String()+b.String())
	return out, nil
}

// pageHTML is the page: Grafana's dark theme, roughly.
const pageHTML = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>
html, body { margin: 0; background: #111217; color: #ccccdc; font-family: Inter, "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
body { position: relative; width: %dpx; height: %dpx; overflow: hidden; }
.head { position: absolute; left: 16px; right: 16px; top: 10px; height: 32px; display: flex; justify-content: space-between; align-items: center; font-size: 16px; }
.crumbs b { color: #ffffff; font-weight: 500; }
.tag { font-size: 12px; background: #3d71d9; color: #fff; border-radius: 3px; padding: 1px 6px; margin-left: 6px; }
.range { font-size: 13px; border: 1px solid rgba(204,204,220,0.2); border-radius: 2px; padding: 5px 10px; background: #181b1f; }
.vars { position: absolute; left: 16px; top: 50px; display: flex; gap: 8px; font-size: 13px; }
.var { display: inline-flex; border: 1px solid rgba(204,204,220,0.2); border-radius: 2px; overflow: hidden; }
.var .k { background: #22252b; padding: 5px 9px; color: #6e9fff; }
.var .v { background: #111217; padding: 5px 9px; }
.row { position: absolute; font-size: 15px; font-weight: 500; color: #d8d9da; display: flex; align-items: center; }
.panel { position: absolute; background: #181b1f; border: 1px solid rgba(204,204,220,0.12); border-radius: 2px; box-sizing: border-box; overflow: hidden; }
.title { height: 32px; line-height: 32px; padding: 0 8px; font-size: 14px; font-weight: 500; color: #ccccdc; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 14px; padding: 0 10px; font-size: 12px; color: #ccccdc; }
.legend span { display: inline-flex; align-items: center; white-space: nowrap; }
.legend i { display: inline-block; width: 14px; height: 4px; border-radius: 2px; margin-right: 6px; }
.nodata { display: flex; align-items: center; justify-content: center; color: rgba(204,204,220,0.65); font-size: 14px; }
svg text { font-family: Inter, "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
</style></head><body>%s</body></html>
`

// drawn is a series with its legend and color.
type drawn struct {
	series
	name, color string
}

// legend fills a legend format's {{label}}s with s's labels.
func legend(format string, labels map[string]string) string {
	if format == "" {
		var parts []string
		for k, v := range labels {
			parts = append(parts, k+"="+v)
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	out := regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`).ReplaceAllStringFunc(format, func(m string) string {
		return labels[strings.Trim(m, "{} ")]
	})
	return strings.Join(strings.Fields(out), " ")
}

// drawTimeSeries draws a time series panel's plot and legend in w×h.
func drawTimeSeries(pn panel, data []drawn, start, end time.Time, w, h int) string {
	if len(data) == 0 {
		return fmt.Sprintf(`<div class="nodata" style="height:%dpx">No data</div>`, h-8)
	}
	def := pn.FieldConfig.Defaults
	stacked := def.Custom.Stacking.Mode == "normal"
	// The legend's height, from its items' widths.
	legendRows, rowW := 1, 10
	for _, d := range data {
		iw := 20 + 7*len([]rune(d.name)) + 14
		if rowW+iw > w-10 && rowW > 10 {
			legendRows++
			rowW = 10
		}
		rowW += iw
	}
	legendH := legendRows*18 + 6
	plotH := h - legendH

	// Stacked series are drawn on the sum of those before them.
	ys := make([][]float64, len(data))
	lows := make([][]float64, len(data))
	base := map[int64]float64{}
	for i, d := range data {
		ys[i] = make([]float64, len(d.values))
		lows[i] = make([]float64, len(d.values))
		for j, v := range d.values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				ys[i][j], lows[i][j] = math.NaN(), math.NaN()
				continue
			}
			k := d.times[j].UnixMilli()
			if stacked {
				lows[i][j] = base[k]
				base[k] += v
				ys[i][j] = base[k]
			} else {
				ys[i][j] = v
			}
		}
	}
	// The axis starts at the field's min (0 on most panels) or, without
	// one, below the lowest value, as Grafana's does.
	hi, lo := math.Inf(-1), math.Inf(1)
	for _, row := range ys {
		for _, v := range row {
			if !math.IsNaN(v) {
				hi = max(hi, v)
				lo = min(lo, v)
			}
		}
	}
	if math.IsInf(hi, 0) {
		hi, lo = 1, 0
	}
	if def.Min != nil {
		lo = min(lo, *def.Min)
	} else if span := hi - lo; span > 0 {
		lo = max(0, lo-span/4)
	}
	ticks, top := niceTicks(lo, hi, pn.FieldConfig.Defaults.Unit)
	lo = ticks[0]
	labels := make([]string, len(ticks))
	labelW := 0
	for i, t := range ticks {
		labels[i] = formatValue(t, def.Unit, top, def.Decimals, ticks)
		labelW = max(labelW, 7*len([]rune(labels[i])))
	}
	left, right, topPad, bottomPad := float64(labelW+14), float64(w-12), 6.0, float64(plotH-22)
	px := func(t time.Time) float64 {
		return left + (right-left)*float64(t.Sub(start))/float64(end.Sub(start))
	}
	py := func(v float64) float64 { return bottomPad - (bottomPad-topPad)*(v-lo)/(top-lo) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, w, plotH)
	for i, t := range ticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="rgba(204,204,220,0.09)"/>`, left, right, y, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="rgba(204,204,220,0.65)" font-size="12" text-anchor="end">%s</text>`, left-8, y+4, html.EscapeString(labels[i]))
	}
	ticksAt, layout := timeTicks(start, end, int(right-left))
	for _, t := range ticksAt {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="rgba(204,204,220,0.09)"/>`, x, x, topPad, bottomPad)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="rgba(204,204,220,0.65)" font-size="12" text-anchor="middle">%s</text>`, x, bottomPad+16, t.UTC().Format(layout))
	}
	opacity := def.Custom.FillOpacity / 100
	if stacked {
		opacity = max(opacity, 0.35)
	}
	lineW := max(def.Custom.LineWidth, 1)
	for i, d := range data {
		var line, fill []string
		var lowPts []string
		for j, t := range d.times {
			if math.IsNaN(ys[i][j]) {
				continue
			}
			x := px(t)
			line = append(line, fmt.Sprintf("%.1f,%.1f", x, py(ys[i][j])))
			lowPts = append(lowPts, fmt.Sprintf("%.1f,%.1f", x, py(max(lows[i][j], lo))))
		}
		if len(line) == 0 {
			continue
		}
		fill = append(fill, line...)
		slices.Reverse(lowPts)
		fill = append(fill, lowPts...)
		fmt.Fprintf(&b, `<polygon points="%s" fill="%s" fill-opacity="%.2f"/>`, strings.Join(fill, " "), d.color, opacity)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round"/>`, strings.Join(line, " "), d.color, lineW)
	}
	b.WriteString(`</svg><div class="legend">`)
	for _, d := range data {
		fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, d.color, html.EscapeString(d.name))
	}
	b.WriteString(`</div>`)
	return b.String()
}

// drawStat draws a stat panel: its value, large, green under 1, red from
// 1 (the dashboard's thresholds).
func drawStat(pn panel, data []drawn, w, h int) string {
	if len(data) == 0 || len(data[0].values) == 0 {
		return fmt.Sprintf(`<div class="nodata" style="height:%dpx">No data</div>`, h-8)
	}
	v := data[0].values[len(data[0].values)-1]
	color := "#73BF69"
	if v >= 1 {
		color = "#F2495C"
	}
	text := formatValue(math.Round(v), pn.FieldConfig.Defaults.Unit, v, nil, nil)
	return fmt.Sprintf(`<div style="height:%dpx;display:flex;align-items:center;justify-content:center;font-size:%dpx;font-weight:500;color:%s">%s</div>`,
		h-8, min(w/3, 64), color, html.EscapeString(text))
}

// niceTicks returns about five round values from lo to at least hi, and
// the top of the axis.
func niceTicks(lo, hi float64, unit string) ([]float64, float64) {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if unit == "short" || unit == "opm" {
		step = max(step, 1) // counts: no fractional ticks
	}
	var ticks []float64
	start := math.Floor(lo/step) * step
	for t := start; t <= hi+step*0.999; t += step {
		ticks = append(ticks, math.Round(t/step)*step)
	}
	return ticks, ticks[len(ticks)-1]
}

// formatValue writes v in unit, as Grafana writes axis values: seconds
// in ms below one, rates with their unit, counts with k and M.
func formatValue(v float64, unit string, scale float64, decimals *int, ticks []float64) string {
	dec := func(v float64) string {
		d := 0
		if decimals != nil {
			d = *decimals
		} else if len(ticks) > 1 {
			step := math.Abs(ticks[1] - ticks[0])
			for d = 0; d < 3 && math.Abs(step*math.Pow(10, float64(d))-math.Round(step*math.Pow(10, float64(d)))) > 1e-9; d++ {
			}
		} else if v != math.Trunc(v) {
			d = 2
		}
		return fmt.Sprintf("%.*f", d, v)
	}
	if v == 0 {
		switch unit {
		case "s":
			return "0 s"
		case "reqps":
			return "0 req/s"
		case "ops":
			return "0 ops/s"
		case "opm":
			return "0 ops/min"
		}
		return "0"
	}
	switch unit {
	case "s":
		if scale < 1 {
			ms := make([]float64, len(ticks))
			for i, t := range ticks {
				ms[i] = t * 1000
			}
			return formatValue(v*1000, "", 0, decimals, ms) + " ms"
		}
		return dec(v) + " s"
	case "reqps":
		return dec(v) + " req/s"
	case "ops":
		return dec(v) + " ops/s"
	case "opm":
		return dec(v) + " ops/min"
	}
	switch {
	case math.Abs(scale) >= 1e6:
		return fmt.Sprintf("%.1f M", v/1e6)
	case math.Abs(scale) >= 1e4:
		return fmt.Sprintf("%.0f K", v/1e3)
	}
	return dec(v)
}

// timeTicks returns round times between start and end, about every 90
// pixels of width, and the layout to write them in.
func timeTicks(start, end time.Time, width int) ([]time.Time, string) {
	want := max(2, width/90)
	span := end.Sub(start)
	step := time.Hour
	for _, s := range []time.Duration{10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour} {
		if span/s <= time.Duration(want) {
			step = s
			break
		}
	}
	layout := "15:04"
	if step < time.Minute {
		layout = "15:04:05"
	}
	var out []time.Time
	for t := start.Truncate(step).Add(step); t.Before(end); t = t.Add(step) {
		out = append(out, t)
	}
	return out, layout
}
