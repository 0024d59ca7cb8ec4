// Command metricsbench measures how fast the demo answers GET /metrics
// with the state of a busy Service: it runs the demo (examples/demo, on
// SQLite and local git) on 127.0.0.1, creates 10,000 tasks, opens 1,000
// event streams (5 per API key, the default limit) and 100 webhook
// subscriptions to an HTTPS receiver on loopback (6 in 10 answering 200,
// one slowly, two 503 and one 410, which disables it), lets agents work
// for a few seconds so that every instrument has series, and then scrapes
// /metrics again and again in three phases:
//
//   - quiet: no agents; the failed deliveries are retried on their
//     schedule;
//   - steady: 2 agents taking tasks through create, start, submit, CI,
//     review and ship with pauses of up to 500 ms, each event going to
//     the 1,000 streams and the subscriptions;
//   - saturated: 8 agents without pauses, which on a small machine leaves
//     the demo no idle processor: its figures show queueing, not the cost
//     of a scrape, and the limit does not apply to them.
//
// Each scrape is timed from the request to the body's last byte over a
// kept-alive connection, as Prometheus scrapes, and is followed by a GET
// /healthz timed alike: the control, the same path through the server
// without the metrics. The demo's processor use is read from /proc.
//
//	go run ./internal/cmd/metricsbench                    # the figures of BENCHMARKS.md
//	go run ./internal/cmd/metricsbench -tasks 1000 -streams 100 -scrapes 50
//
// The target is every scrape under 50 ms; the exit status is 1 when the
// 99th percentile of the quiet or the steady phase is over -limit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/cmd/internal/demoload"
)

// options are the benchmark's flags.
type options struct {
	tasks, streams, subscriptions int
	scrapes                       int
	interval                      time.Duration
	agents                        int
	pause                         time.Duration
	limit                         time.Duration
	demo                          string
	keep                          bool
	identifiers                   bool
	dump                          string
	demoCPUs                      string
}

func main() {
	var o options
	flag.IntVar(&o.tasks, "tasks", 10000, "tasks to create before measuring")
	flag.IntVar(&o.streams, "streams", 1000, "event streams to hold open (5 per API key)")
	flag.IntVar(&o.subscriptions, "subscriptions", 100, "webhook subscriptions")
	flag.IntVar(&o.scrapes, "scrapes", 300, "scrapes measured in each phase")
	flag.DurationVar(&o.interval, "interval", 20*time.Millisecond, "pause between scrapes")
	flag.IntVar(&o.agents, "agents", 2, "agents working in the steady phase (8 in the saturated one)")
	flag.DurationVar(&o.pause, "pause", 500*time.Millisecond, "the longest pause between an agent's steps in the steady phase (none in the saturated one)")
	flag.DurationVar(&o.limit, "limit", 50*time.Millisecond, "the 99th percentile a scrape must stay under")
	flag.StringVar(&o.demo, "demo", "", "the demo binary; default: built from ./examples/demo")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory")
	flag.BoolVar(&o.identifiers, "metric-identifiers", true, "run the demo with -metric-identifiers: a backlog and a lag per subscription, the deliveries' durations per receiver (the larger scrape, that of BENCHMARKS.md's figures)")
	flag.StringVar(&o.demoCPUs, "demo-cpus", "", "run the demo on these CPUs only (taskset -c, Linux), such as 1 while this program runs under taskset -c 0")
	flag.StringVar(&o.dump, "dump", "", "write the last scrape's body to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "metricsbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "metricsbench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("data directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.demo == "" {
		if o.demo, err = demoload.Build(dir); err != nil {
			return err
		}
	}
	rcv, err := demoload.NewReceiver(dir)
	if err != nil {
		return err
	}
	defer rcv.Close()
	rcv.Slow = 100 * time.Millisecond
	start := demoload.Options{Bin: o.demo, Data: filepath.Join(dir, "data"), Args: []string{"-allow-private-webhooks", "-webhook-ca", rcv.CAFile}}
	if o.identifiers {
		start.Args = append(start.Args, "-metric-identifiers")
	}
	if o.demoCPUs != "" {
		start.Wrapper = []string{"taskset", "-c", o.demoCPUs}
	}
	demo, err := demoload.Start(start)
	if err != nil {
		return err
	}
	defer demo.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fmt.Printf("metricsbench: %s/%s, %d CPUs, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	t0 := time.Now()
	if err := demo.CreateTasks(ctx, "MB", "bench", o.tasks, 16); err != nil {
		return err
	}
	fmt.Printf("setup: %d tasks created in %s\n", o.tasks, time.Since(t0).Round(time.Millisecond))
	perKey := 5
	keys, err := demo.CreateKeys(ctx, (o.streams+perKey-1)/perKey, "events:read")
	if err != nil {
		return err
	}
	streamCtx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	streams, err := demo.OpenStreams(streamCtx, keys, perKey)
	if err != nil {
		return fmt.Errorf("%w\ndemo log:\n%s", err, lastLines(demo.Log(), 20))
	}
	fmt.Printf("setup: %d event streams open\n", streams.Open())
	kinds := []string{"ok", "ok", "ok", "ok", "ok", "ok", "slow", "fail", "fail", "gone"}
	if _, err := demo.Subscribe(ctx, rcv, o.subscriptions, kinds...); err != nil {
		return err
	}
	fmt.Printf("setup: %d webhook subscriptions (ok, slow, 503, 410 in the ratio %s)\n", o.subscriptions, ratio(kinds))

	// Some traffic first, so that every instrument has series; then the
	// deliveries it queued drain: the webhook backlog (of the demo's own
	// gauge) stays put for three seconds, the 503 and 410 receivers' part
	// of it included, whose deliveries go on being retried on their
	// schedule.
	var counts demoload.Counts
	warm, stopWarm := context.WithTimeout(ctx, 3*time.Second)
	demo.Agents(warm, 2, 0, 1, &counts)
	stopWarm()
	scraper := &http.Client{Timeout: 10 * time.Second}
	drained := time.Now()
	for last, calm := -1.0, 0; calm < 3 && time.Since(drained) < 3*time.Minute; {
		time.Sleep(time.Second)
		n, err := backlog(scraper, demo.Metrics)
		if err != nil {
			return err
		}
		if n == last {
			calm++
		} else {
			calm = 0
		}
		last = n
	}
	fmt.Printf("setup: warmed up; %d deliveries, drained in %s\n", rcv.Deliveries(), time.Since(drained).Round(time.Second))

	phases := []struct {
		name   string
		agents int
		pause  time.Duration // between an agent's steps
		limit  bool          // the limit applies
	}{
		{"quiet", 0, 0, true},
		{"steady", o.agents, o.pause, true},
		{"saturated", 8, 0, false},
	}
	fmt.Printf("\n| phase | agents | demo CPU | events/s to streams | deliveries/s | /metrics p50 | p95 | p99 | max | /healthz p50 | p99 |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	var worst time.Duration
	var size, series int
	for _, ph := range phases {
		loadCtx, stopLoad := context.WithCancel(ctx)
		loadDone := make(chan struct{})
		agents := "none"
		if ph.agents > 0 {
			agents = fmt.Sprintf("%d, pause ≤ %s", ph.agents, ph.pause)
			go func() { demo.Agents(loadCtx, ph.agents, ph.pause, uint64(len(ph.name)), &counts); close(loadDone) }()
		} else {
			close(loadDone)
		}
		events, deliveries := streams.Events(), rcv.Deliveries()
		cpu0, _ := demo.CPUTime()
		t0 := time.Now()
		ds, control, sz, n, err := measure(scraper, demo.Metrics, demo.Base, o.scrapes, o.interval)
		took := time.Since(t0)
		cpu1, cpuOK := demo.CPUTime()
		stopLoad()
		<-loadDone
		if err != nil {
			return err
		}
		size, series = sz, n
		if o.dump != "" {
			if err := dumpMetrics(scraper, demo.Metrics, o.dump); err != nil {
				return err
			}
		}
		cpu := "?"
		if cpuOK {
			cpu = fmt.Sprintf("%.0f %%", 100*(cpu1-cpu0).Seconds()/took.Seconds())
		}
		fmt.Printf("| %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |\n", ph.name, agents, cpu,
			float64(streams.Events()-events)/took.Seconds(), float64(rcv.Deliveries()-deliveries)/took.Seconds(),
			ms(percentile(ds, 50)), ms(percentile(ds, 95)), ms(percentile(ds, 99)), ms(slices.Max(ds)),
			ms(percentile(control, 50)), ms(percentile(control, 99)))
		if ph.limit {
			worst = max(worst, percentile(ds, 99))
		}
	}
	fmt.Printf("\n/metrics: %d samples, %d kB (uncompressed); %d streams open at the end (%d ended by the demo)\n", series, size/1024, streams.Open(), streams.Ends())
	fmt.Printf("agents: %d tasks created, %d submitted, %d shipped, %d requests refused on purpose\n",
		counts.Created.Load(), counts.Submitted.Load(), counts.Shipped.Load(), counts.Refused.Load())

	stopStreams()
	streams.Wait()
	if worst > o.limit {
		return fmt.Errorf("the 99th percentile of a scrape, quiet or steady, is %s, over %s", ms(worst), o.limit)
	}
	fmt.Printf("metricsbench: p99 quiet or steady %s, under %s\n", ms(worst), o.limit)
	return nil
}

// measure scrapes metrics (the URL of GET /metrics) n times, pause apart,
// and returns each scrape's duration, each duration of a GET /healthz of
// the API at base sent right after it (a control: the same kind of
// request through a server without the metrics), and the last body's
// size and series count.
func measure(c *http.Client, metrics, base string, n int, pause time.Duration) (ds, control []time.Duration, size, series int, err error) {
	get := func(url string) (time.Duration, []byte, error) {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			return 0, nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
		}
		return d, body, err
	}
	for i := range n {
		d, body, err := get(metrics)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		ds = append(ds, d)
		if i == n-1 {
			size, series = len(body), countSeries(string(body))
		}
		if d, _, err = get(base + "/healthz"); err != nil {
			return nil, nil, 0, 0, err
		}
		control = append(control, d)
		time.Sleep(pause)
	}
	if len(ds) == 0 {
		return nil, nil, 0, 0, errors.New("no scrape")
	}
	return ds, control, size, series, nil
}

// backlog returns the sum of the demo's lifecycle_webhook_backlog series
// (0 when it has none), read from metrics, the URL of GET /metrics.
func backlog(c *http.Client, metrics string) (float64, error) {
	resp, err := c.Get(metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for line := range strings.Lines(string(body)) {
		// One series per subscription (-metric-identifiers), or one with
		// no labels.
		if rest, ok := strings.CutPrefix(line, "lifecycle_webhook_backlog"); ok && (rest[0] == '{' || rest[0] == ' ') {
			value := rest[strings.LastIndexByte(rest, ' ')+1:]
			v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
			sum += v
		}
	}
	return sum, nil
}

// dumpMetrics writes a scrape of metrics, the URL of GET /metrics, to
// file.
func dumpMetrics(c *http.Client, metrics, file string) error {
	resp, err := c.Get(metrics)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

// countSeries counts the samples of a text-format body.
func countSeries(body string) int {
	n := 0
	for line := range strings.Lines(body) {
		if line != "\n" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ms writes d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// ratio writes how often each kind comes in kinds, such as 6:1:2:1.
func ratio(kinds []string) string {
	var order []string
	n := map[string]int{}
	for _, k := range kinds {
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprint(n[k]))
	}
	return strings.Join(parts, ":")
}
