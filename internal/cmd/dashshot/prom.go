package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// prometheus is a Prometheus process scraping the demo.
type prometheus struct {
	base   string
	cmd    *exec.Cmd
	exited chan struct{}
	client *http.Client
}

// startPrometheus starts Prometheus with its data in dir, scraping
// target's /metrics every interval as the job lifecycle-demo, and returns
// once it is ready.
func startPrometheus(bin, dir, target string, interval time.Duration) (*prometheus, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	config := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: lifecycle-demo
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, interval, interval, target)
	if err := os.WriteFile(config, []byte(yml), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Prometheus: %w", err)
	}
	p := &prometheus{base: "http://" + addr, cmd: cmd, exited: make(chan struct{}), client: &http.Client{Timeout: 30 * time.Second}}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-p.exited:
			raw, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			return nil, fmt.Errorf("prometheus exited: %s", raw)
		default:
		}
		if resp, err := p.client.Get(p.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
	}
	p.stop()
	return nil, errors.New("prometheus was not ready within 30 s")
}

// stop stops Prometheus and waits for it.
func (p *prometheus) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// series is one series of a range query's answer.
type series struct {
	labels map[string]string
	times  []time.Time
	values []float64
}

// queryRange runs a PromQL range query.
func (p *prometheus) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query_range?"+q.Encode(), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	var res []series
	for _, r := range out.Data.Result {
		s := series{labels: r.Metric}
		for _, v := range r.Values {
			t, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				continue
			}
			s.times = append(s.times, time.Unix(0, int64(t*1e9)))
			s.values = append(s.values, f)
		}
		res = append(res, s)
	}
	return res, nil
}

// query runs an instant PromQL query at t and returns its series' labels
// and values.
func (p *prometheus) query(ctx context.Context, expr string, t time.Time) ([]series, error) {
	q := url.Values{"query": {expr}, "time": {unix(t)}}
	var out struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?"+q.Encode(), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	var res []series
	for _, r := range out.Data.Result {
		str, _ := r.Value[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			continue
		}
		res = append(res, series{labels: r.Metric, times: []time.Time{t}, values: []float64{f}})
	}
	return res, nil
}

// get reads a JSON answer of Prometheus's HTTP API into v.
func (p *prometheus) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	return json.Unmarshal(raw, v)
}

// unix writes t as Prometheus's API takes it.
func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}
