// Command dashshot draws docs/dashboard.png, the picture of the Grafana
// dashboard (docs/grafana-dashboard.json) on real metrics of the demo
// under load, where Grafana itself cannot be installed.
//
// It builds and runs the demo (examples/demo) on 127.0.0.1, with its local
// git repositories and with a fake GitHub (adapter/github/githubtest, rate
// limited like GitHub and failing a request now and then) for the tasks of
// project github; it drives the demo with agents that create, start,
// submit, check, review and ship tasks (some merges are refused at the
// fake GitHub, some requests are refused by the demo), holds event streams open (some closed and opened
// again, some ended by revoking their key) and subscribes an HTTPS
// receiver whose subscriptions answer 200, slowly, 503, 410 or, for a
// while, 503 and then 200 again. A local Prometheus (Debian's prometheus)
// scrapes the demo's /metrics every 5 s. At the end dashshot runs each
// panel's own PromQL through Prometheus's HTTP API (query_range), draws
// the panels in the dashboard's grid as SVG in an HTML page, with their
// titles, series, axes and legends, and takes its picture with headless
// Chromium.
//
//	apt-get install prometheus chromium   # once
//	go run ./internal/cmd/dashshot -duration 5m -out docs/dashboard.png
//
// Run it from the repository's root. Everything stays on loopback, in a
// temporary directory, and stops by itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/cmd/internal/demoload"
)

// options are dashshot's flags.
type options struct {
	duration   time.Duration
	scrape     time.Duration
	out        string
	html       string
	dashboard  string
	demo       string
	prometheus string
	chromium   string
	width      int
	keep       bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the demo runs under load (the dashboard's time range)")
	flag.DurationVar(&o.scrape, "scrape-interval", 5*time.Second, "Prometheus's scrape interval")
	flag.StringVar(&o.out, "out", "docs/dashboard.png", "the PNG to write")
	flag.StringVar(&o.html, "html", "", "also keep the rendered HTML page here")
	flag.StringVar(&o.dashboard, "dashboard", "docs/grafana-dashboard.json", "the Grafana dashboard to draw")
	flag.StringVar(&o.demo, "demo", "", "the demo binary; default: built from ./examples/demo")
	flag.StringVar(&o.prometheus, "prometheus", "prometheus", "the Prometheus binary")
	flag.StringVar(&o.chromium, "chromium", "chromium", "the Chromium binary")
	flag.IntVar(&o.width, "width", 1800, "the picture's width in pixels")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (Prometheus's data, the demo's, the page)")
	flag.Parse()
	for _, bin := range []*string{&o.prometheus, &o.chromium} {
		path, err := exec.LookPath(*bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashshot: %s not found: apt-get install prometheus chromium\n", *bin)
			os.Exit(1)
		}
		*bin = path
	}
	var c cleanups
	err := run(&c, o)
	c.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashshot:", err)
		os.Exit(1)
	}
}

// cleanups collects the cleanups of the fake GitHub (a
// githubtest.TB), run in reverse order.
type cleanups []func()

func (c *cleanups) Helper()          {}
func (c *cleanups) Cleanup(f func()) { *c = append(*c, f) }

func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

func run(tb githubtest.TB, o options) error {
	dash, err := loadDashboard(o.dashboard)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dashshot-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("dashshot: temporary directory", dir)
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
	rcv.Slow = 1500 * time.Millisecond

	gh := githubtest.NewServer(tb, githubtest.Options{})
	reset := time.Now().Add(time.Hour)
	gh.SetRateLimit(5000, reset)
	gh.SetGraphQLRateLimit(5000, reset)

	demo, err := demoload.Start(demoload.Options{Bin: o.demo, Data: filepath.Join(dir, "data"),
		Env: []string{"GITHUB_TOKEN=" + githubtest.Token, "GITHUB_WEBHOOK_SECRET=" + githubSecret},
		// -metric-identifiers: the dashboard's webhook panels show each
		// subscription.
		Args: []string{"-allow-private-webhooks", "-webhook-ca", rcv.CAFile, "-metric-identifiers",
			"-github-repo", githubtest.Owner + "/" + githubtest.Repo, "-github-api-url", gh.APIURL()}})
	if err != nil {
		return err
	}
	defer demo.Stop()

	prom, err := startPrometheus(o.prometheus, dir, strings.TrimSuffix(strings.TrimPrefix(demo.Metrics, "http://"), "/metrics"), o.scrape)
	if err != nil {
		return err
	}
	defer prom.stop()
	fmt.Printf("dashshot: demo %s, Prometheus %s, %s of load\n", demo.Base, prom.base, o.duration)

	start := time.Now()
	// The streams stay open until the picture's data is read, so that
	// they do not end in it.
	streams, closeStreams := context.WithCancel(context.Background())
	defer closeStreams()
	if err := drive(streams, demo, rcv, gh, o.duration); err != nil {
		return fmt.Errorf("%w\ndemo log:\n%s", err, demo.Log())
	}
	end := time.Now()
	// Two more scrapes, so that the last moments are in Prometheus.
	time.Sleep(2*o.scrape + time.Second)

	page, err := render(prom, dash, start, end, o.scrape, o.width)
	if err != nil {
		return err
	}
	htmlFile := filepath.Join(dir, "dashboard.html")
	if err := os.WriteFile(htmlFile, []byte(page.html), 0o644); err != nil {
		return err
	}
	if o.html != "" {
		if err := os.WriteFile(o.html, []byte(page.html), 0o644); err != nil {
			return err
		}
	}
	if err := screenshot(o.chromium, dir, htmlFile, o.out, o.width, page.height); err != nil {
		return err
	}
	fmt.Printf("dashshot: %s (%d×%d), %d panels, %d series\n", o.out, o.width, page.height, page.panels, page.series)
	return nil
}

// githubSecret is the secret of the fake GitHub's webhook to the demo.
const githubSecret = "dashshot-github-webhook-secret"

// drive runs the load for d: agents in two waves, GitHub's agents, event
// streams opened, closed and revoked, webhook receivers that fail for a
// while, and failures of the fake GitHub now and then. The long-lived
// event streams stay open until streams is done.
func drive(streams context.Context, demo *demoload.Demo, rcv *demoload.Receiver, gh *githubtest.Server, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	at := func(f float64) time.Duration { return time.Duration(f * float64(d)) }

	if _, err := demo.Subscribe(ctx, rcv, 12, "ok", "ok", "ok", "slow", "ok", "flaky", "ok", "fail", "ok", "slow", "gone", "ok"); err != nil {
		return err
	}
	keys, err := demo.CreateKeys(ctx, 12, "events:read")
	if err != nil {
		return err
	}
	// Long-lived streams on eight keys; two keys' streams are closed and
	// opened again now and then; two keys are revoked at 70 %.
	if _, err := demo.OpenStreams(streams, keys[:8], 4); err != nil {
		return err
	}
	if _, err := demo.OpenStreams(streams, keys[10:], 3); err != nil {
		return err
	}

	var wg sync.WaitGroup
	var counts demoload.Counts
	spawn := func(from, to float64, f func(ctx context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(at(from)):
			}
			c, stop := context.WithTimeout(ctx, at(to-from))
			defer stop()
			f(c)
		}()
	}
	// Agents on the local repositories: two throughout, four more in the
	// middle of the run.
	spawn(0, 1, func(c context.Context) { demo.Agents(c, 2, 600*time.Millisecond, 1, &counts) })
	spawn(0.25, 0.65, func(c context.Context) { demo.Agents(c, 4, 300*time.Millisecond, 2, &counts) })
	// Agents on GitHub.
	spawn(0, 1, func(c context.Context) { githubAgents(c, demo, gh, 2, 3) })
	spawn(0.3, 0.6, func(c context.Context) { githubAgents(c, demo, gh, 2, 4) })
	// A receiver down for a while, then back.
	spawn(0.35, 0.6, func(c context.Context) {
		rcv.SetFlaky(true)
		<-c.Done()
		rcv.SetFlaky(false)
	})
	// Streams closed by their clients and opened again.
	spawn(0, 1, func(c context.Context) {
		for c.Err() == nil {
			sc, stop := context.WithTimeout(c, 20*time.Second)
			if s, err := demo.OpenStreams(sc, keys[8:10], 2); err == nil {
				<-sc.Done()
				s.Wait()
			}
			stop()
		}
	})
	// Two keys revoked, ending their streams.
	spawn(0.7, 1, func(c context.Context) {
		list, err := demo.Do(c, "", "GET", "/api-keys?limit=200", nil, "")
		if err != nil {
			return
		}
		items, _ := list.Body["data"].([]any)
		for _, it := range items {
			k, _ := it.(map[string]any)
			if name, _ := k["name"].(string); name == "load 10" || name == "load 11" {
				id, _ := k["id"].(string)
				demo.Do(c, "", "DELETE", "/api-keys/"+id, nil, "")
			}
		}
	})
	// GitHub fails a request now and then, as it does: a 502, which the
	// adapter retries, or a merge refused, which fails the ship.
	spawn(0, 1, func(c context.Context) {
		rnd := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case <-c.Done():
				return
			case <-time.After(time.Duration(4+rnd.IntN(8)) * time.Second):
			}
			if rnd.IntN(4) == 0 {
				gh.Inject(githubtest.RouteMerge, githubtest.Error(405, "Pull Request is not mergeable"))
				continue
			}
			gh.Inject([]string{githubtest.RouteGetPull, githubtest.RouteCheckRuns, githubtest.RouteMerge}[rnd.IntN(3)],
				githubtest.Error(502, "Server Error"))
		}
	})
	wg.Wait()
	fmt.Printf("dashshot: %d tasks created, %d submitted, %d shipped, %d requests refused on purpose; %d webhook deliveries\n",
		counts.Created.Load(), counts.Submitted.Load(), counts.Shipped.Load(), counts.Refused.Load(), rcv.Deliveries())
	if counts.Shipped.Load() == 0 {
		return errors.New("no task was shipped: the load did not run")
	}
	return nil
}

// githubAgents run workers agents on the fake GitHub until ctx is done:
// each creates a task of project github, starts it, pushes its branch,
// submits it (a pull request opens at the fake), has CI pass and a
// reviewer approve at the fake, tells the demo so through GitHub's
// webhooks, and ships it (a merge at the fake).
func githubAgents(ctx context.Context, demo *demoload.Demo, gh *githubtest.Server, workers int, seed uint64) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				githubTask(ctx, demo, gh, fmt.Sprintf("GH-%d%d%d", seed, w, n))
			}
		}()
	}
	wg.Wait()
}

// githubTask takes one task of project github through its lifecycle; it
// gives up at the first unexpected answer.
func githubTask(ctx context.Context, demo *demoload.Demo, gh *githubtest.Server, ident string) {
	pause := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	a, err := demo.Do(ctx, "", "POST", "/tasks", map[string]any{"identifier": ident, "title": "GitHub task " + ident,
		"links": map[string]any{"issue": "https://issues.example.com/" + ident}, "context": map[string]any{"project": "github"}}, "")
	if err != nil || a.Status != 201 {
		pause(time.Second)
		return
	}
	id, _ := a.Data()["id"].(string)
	if a, err = demo.Do(ctx, "", "POST", "/tasks/"+id+"/start", map[string]any{}, ""); err != nil || a.Status != 200 {
		return
	}
	head := gh.Push("lifecycle/" + strings.ToLower(ident))
	if !pause(time.Second) {
		return
	}
	if a, err = demo.Do(ctx, "", "POST", "/tasks/"+id+"/submit", map[string]any{"summary": "Done."}, "submit-"+id); err != nil || a.Status != 202 {
		return
	}
	n := int(number(a.Data()["prNumber"]))
	hook := func(event string, payload []byte) {
		_, _ = demo.Deliver(ctx, "/hooks/github", githubtest.Delivery("/hooks/github", event,
			fmt.Sprintf("%08x-cc78-11e3-81ab-%012d", time.Now().UnixNano()&0xffffffff, n), githubSecret, payload))
	}
	if !pause(2 * time.Second) {
		return
	}
	gh.CheckRun(head, "build", "success")
	hook("check_run", gh.CheckRunPayload(head, "build", "success"))
	if !pause(2 * time.Second) {
		return
	}
	gh.Review(n, "octocat", "APPROVED", head)
	hook("pull_request_review", gh.ReviewPayload(n, "submitted", "octocat", "approved"))
	for range 30 {
		if !pause(time.Second) {
			return
		}
		a, err := demo.Do(ctx, "", "GET", "/tasks/"+id, nil, "")
		if err != nil {
			return
		}
		if actions, _ := a.Body["availableActions"].([]any); contains(actions, "ship") {
			demo.Do(ctx, "", "POST", "/tasks/"+id+"/ship", map[string]any{"mode": "merge_only", "targetEnvironment": "production", "expectedHeadSha": head}, "ship-"+id)
			pause(3 * time.Second)
			return
		}
	}
}

// number reads a JSON number.
func number(v any) float64 {
	f, _ := v.(float64)
	return f
}

// contains reports whether list holds s.
func contains(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
