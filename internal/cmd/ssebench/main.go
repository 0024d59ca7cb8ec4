// Command ssebench measures the event stream of lifecycle on loopback:
//
//   - idle: the server memory (Go heap and goroutine stacks, and the
//     process's resident set) each idle stream holds, over HTTP/1.1 (a connection per stream) and over
//     cleartext HTTP/2 (streams multiplexed on a few connections), next to
//     a bare net/http handler that only holds its connection open;
//   - fanout: publish-to-receive latency while events are published at a
//     fixed rate to many streams;
//   - replay: the rate at which one client receives a large store of
//     events replayed from a cursor.
//
// The server runs in this process; the clients run in a child process (this
// same program), so that only the server's memory is measured. Everything
// is on 127.0.0.1, bounded in count and in time, and stops by itself.
//
//	go run ./internal/cmd/ssebench                      # every scenario
//	go run ./internal/cmd/ssebench -scenarios replay -replay-events 100000
//
// See BENCHMARKS.md for the method and the figures.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// options are the flags of both roles.
type options struct {
	scenarios     string
	idleStreams   int
	fanoutStreams int
	fanoutProto   string
	rate          int
	duration      time.Duration
	replayEvents  int
	batchWindow   time.Duration
	timeout       time.Duration
	cpuprofile    string
	telemetry     string
	idleCases     string
	memprofile    string

	// Client role (set by the server when it starts the child).
	client string
	url    string
	key    string
	proto  string
	n      int
	cursor string
}

func main() {
	var o options
	flag.StringVar(&o.scenarios, "scenarios", "idle,fanout,replay", "comma-separated scenarios to run: idle, fanout, replay")
	flag.IntVar(&o.idleStreams, "idle-streams", 10000, "idle streams to hold open (1..20000)")
	flag.IntVar(&o.fanoutStreams, "fanout-streams", 1000, "streams receiving the published events (1..5000)")
	flag.StringVar(&o.fanoutProto, "fanout-proto", "http1", "protocol of the fanout streams: http1 or h2c")
	flag.IntVar(&o.rate, "rate", 200, "events published per second in fanout (1..2000)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long fanout publishes (1s..2m)")
	flag.IntVar(&o.replayEvents, "replay-events", 1000000, "stored events replayed to one client (1..2000000)")
	flag.DurationVar(&o.batchWindow, "batch-window", 0, "Config.StreamBatchWindow of the server (0: the default; negative disables)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "stop everything after this long (at most 30m)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the server process to this file")
	flag.StringVar(&o.telemetry, "telemetry", "sdk", "OpenTelemetry providers of the server: sdk (the SDK, every span sampled, metrics kept for a reader), sampled (one trace in ten) or none (no-op)")
	flag.StringVar(&o.idleCases, "idle-cases", "http1,h2c,bare-http1,bare-h2c", "comma-separated cases of the idle scenario: http1, h2c (lifecycle's stream), bare-http1, bare-h2c (a bare net/http handler)")
	flag.StringVar(&o.memprofile, "memprofile", "", "write a heap profile of the server, taken while the idle streams of the first idle case are open, to this file (every allocation is recorded: the figures are then slower to get)")
	flag.StringVar(&o.client, "client", "", "internal: run as the client process of this scenario")
	flag.StringVar(&o.url, "url", "", "internal: stream URL")
	flag.StringVar(&o.key, "key", "", "internal: API key")
	flag.StringVar(&o.proto, "proto", "http1", "internal: http1 or h2c")
	flag.IntVar(&o.n, "n", 0, "internal: streams or events")
	flag.StringVar(&o.cursor, "cursor", "", "internal: cursor to replay from")
	flag.Parse()
	raiseFileLimit()
	if o.memprofile != "" && o.client == "" {
		runtime.MemProfileRate = 1 // every allocation, to tell what a stream holds
	}
	var err error
	if o.client != "" {
		err = runClient(o)
	} else {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ssebench:", err)
		os.Exit(1)
	}
}

// run is the server role: it runs each scenario in turn.
func run(o options) error {
	switch {
	case o.idleStreams < 1 || o.idleStreams > 20000:
		return errors.New("-idle-streams must be 1..20000")
	case o.fanoutStreams < 1 || o.fanoutStreams > 5000:
		return errors.New("-fanout-streams must be 1..5000")
	case o.fanoutProto != "http1" && o.fanoutProto != "h2c":
		return errors.New("-fanout-proto must be http1 or h2c")
	case o.rate < 1 || o.rate > 2000:
		return errors.New("-rate must be 1..2000")
	case o.duration < time.Second || o.duration > 2*time.Minute:
		return errors.New("-duration must be 1s..2m")
	case o.replayEvents < 1 || o.replayEvents > 2000000:
		return errors.New("-replay-events must be 1..2000000")
	case o.timeout <= 0 || o.timeout > 30*time.Minute:
		return errors.New("-timeout must be at most 30m")
	case o.telemetry != "sdk" && o.telemetry != "sampled" && o.telemetry != "none":
		return errors.New("-telemetry must be sdk, sampled or none")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "ssebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Printf("ssebench: %s/%s, %d CPUs, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, sc := range strings.Split(o.scenarios, ",") {
		var err error
		switch strings.TrimSpace(sc) {
		case "idle":
			err = idle(ctx, o, filepath.Join(dir, "idle"))
		case "fanout":
			err = fanout(ctx, o, filepath.Join(dir, "fanout"))
		case "replay":
			err = replay(ctx, o, filepath.Join(dir, "replay"))
		default:
			err = fmt.Errorf("unknown scenario %q", sc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	return nil
}

// server is a Service on SQLite served on a loopback port, over HTTP/1.1
// and cleartext HTTP/2.
type server struct {
	store *sqlite.Store
	svc   *lifecycle.Service
	srv   *http.Server
	base  string
	key   string
}

// startServer starts a server whose database lives in dir, with the
// batch window and OpenTelemetry providers of o. wrap, if not nil,
// replaces the handler (the bare net/http baseline).
func startServer(ctx context.Context, dir string, o options, wrap func(http.Handler) http.Handler) (*server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		return nil, err
	}
	mp, tp := providers(o.telemetry)
	svc, err := lifecycle.New(lifecycle.Config{
		Store:             store,
		BaseURL:           "http://127.0.0.1",
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		MaxStreamsPerKey:  1 << 20, // every stream of the benchmark uses one key
		TakeOverStreams:   true,
		StreamBatchWindow: o.batchWindow,
		MeterProvider:     mp,
		TracerProvider:    tp,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{
		Name: "ssebench", Scopes: []lifecycle.Scope{lifecycle.ScopeEventsRead, lifecycle.ScopeTasksAdmin},
		Actor: lifecycle.Actor{ID: "ssebench", Role: lifecycle.RoleSystem},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		return nil, err
	}
	var h http.Handler = svc.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		Protocols:         new(http.Protocols),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	return &server{store: store, svc: svc, srv: srv, base: "http://" + ln.Addr().String(), key: key}, nil
}

// providers returns the OpenTelemetry providers of the -telemetry flag:
// the SDK with every span sampled or one trace in ten, spans exported in
// batches to a discarding exporter and metrics kept for a reader (as
// BenchmarkGetTaskTelemetry), or no-op ones.
func providers(which string) (metric.MeterProvider, trace.TracerProvider) {
	if which == "none" {
		return metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()
	}
	sampler := sdktrace.AlwaysSample()
	if which == "sampled" {
		sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
}

// stop ends the streams, the server and the store.
func (s *server) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { s.svc.Close(ctx); close(done) }()
	s.srv.Shutdown(ctx)
	<-done
	s.store.Close()
}

// child is the client process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	once  sync.Once
	cpu   time.Duration // user and system CPU time, once stopped
}

// startChild runs this program as the client of a scenario.
func startChild(ctx context.Context, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out := bufio.NewScanner(stdout)
	out.Buffer(make([]byte, 1<<20), 1<<20)
	return &child{cmd: cmd, stdin: stdin, out: out}, nil
}

// receive decodes the child's next report into v.
func (c *child) receive(v any) error {
	if !c.out.Scan() {
		return fmt.Errorf("the client process stopped: %v", c.out.Err())
	}
	return json.Unmarshal(c.out.Bytes(), v)
}

// stop tells the child to finish, waits for it and returns the CPU time it
// used.
func (c *child) stop() time.Duration {
	c.once.Do(func() {
		c.stdin.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
		if ps := c.cmd.ProcessState; ps != nil {
			c.cpu = ps.UserTime() + ps.SystemTime()
		}
	})
	return c.cpu
}

// memory reads the live heap and the goroutine stacks after collecting
// garbage, so that only what is reachable counts.
func memory() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// bareStream is the baseline handler: what net/http alone holds for a
// response that writes one comment and is kept open, with nothing of
// lifecycle.
func bareStream(http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, ": hello\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
}

// idleSettle is how long the idle streams stay open after the first
// reading, before the RSS is read again (the column "RSS 10 s").
const idleSettle = 9 * time.Second

// idle measures the server memory of idle streams: the live heap and the
// stacks after collecting garbage, and the RSS 1 s after the streams
// settled, 10 s after, and once debug.FreeOSMemory has returned every free
// page.
func idle(ctx context.Context, o options, dir string) error {
	fmt.Printf("\nidle: %d streams, heartbeatSeconds=60, each having delivered one frame; server heap+stacks and RSS per stream after GC; telemetry %s\n", o.idleStreams, o.telemetry)
	fmt.Printf("  %-34s %10s %10s %10s %10s %10s %10s %12s\n", "handler / protocol", "heap", "stacks", "total", "RSS", "RSS 10 s", "RSS freed", "goroutines")
	type idleCase struct {
		key   string
		name  string
		wrap  func(http.Handler) http.Handler
		proto string
	}
	cases := []idleCase{
		{"http1", "lifecycle stream, HTTP/1.1", nil, "http1"},
		{"h2c", "lifecycle stream, HTTP/2 (h2c)", nil, "h2c"},
		{"bare-http1", "bare net/http handler, HTTP/1.1", bareStream, "http1"},
		{"bare-h2c", "bare net/http handler, HTTP/2 (h2c)", bareStream, "h2c"},
	}
	profiled := false
	for _, key := range strings.Split(o.idleCases, ",") {
		i := slices.IndexFunc(cases, func(c idleCase) bool { return c.key == strings.TrimSpace(key) })
		if i < 0 {
			return fmt.Errorf("unknown idle case %q", key)
		}
		c := cases[i]
		s, err := startServer(ctx, filepath.Join(dir, c.key), o, c.wrap)
		if err != nil {
			return err
		}
		err = func() error {
			defer s.stop()
			// Warm up: one stream, so that the broker and the pools exist
			// before the baseline is read.
			bare := c.wrap != nil
			if err := holdStreams(ctx, s, c.proto, 1, bare, nil); err != nil {
				return err
			}
			heap0, stacks0 := memory()
			rss0 := rss()
			g0 := runtime.NumGoroutine()
			return holdStreams(ctx, s, c.proto, o.idleStreams, bare, func() {
				time.Sleep(time.Second) // let the handlers settle into their wait
				heap1, stacks1 := memory()
				rss1 := rss()
				// The streams stay idle: what the process keeps once the
				// runtime's background scavenger has returned the memory
				// freed since the streams settled (it does so within a few
				// seconds), nothing forced.
				time.Sleep(idleSettle)
				rssSettled := rss()
				// What the process keeps once the free memory the Go
				// runtime holds is returned at once.
				debug.FreeOSMemory()
				rss2 := rss()
				n := float64(o.idleStreams)
				fmt.Printf("  %-34s %8.1f Ki %8.1f Ki %8.1f Ki %8.1f Ki %8.1f Ki %8.1f Ki %12.2f\n", c.name,
					float64(heap1-heap0)/n/1024, float64(stacks1-stacks0)/n/1024,
					float64(heap1+stacks1-heap0-stacks0)/n/1024, float64(rss1-rss0)/n/1024,
					float64(rssSettled-rss0)/n/1024, float64(rss2-rss0)/n/1024, float64(runtime.NumGoroutine()-g0)/n)
				if o.memprofile != "" && !profiled {
					profiled = true
					if err := writeHeapProfile(o.memprofile); err != nil {
						fmt.Fprintln(os.Stderr, "ssebench: heap profile:", err)
					}
				}
			})
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeHeapProfile writes the heap profile of the server process to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// holdStreams has a child open n streams, has one frame delivered on each
// (an event, or the bare handler's comment) and calls measure (if not nil)
// before letting them go.
func holdStreams(ctx context.Context, s *server, proto string, n int, bare bool, measure func()) error {
	c, err := startChild(ctx, "-client", "idle", "-url", s.base+"/task-events/stream?heartbeatSeconds=60", "-key", s.key, "-proto", proto, "-n", strconv.Itoa(n))
	if err != nil {
		return err
	}
	defer c.stop()
	var ready struct{ Open int }
	if err := c.receive(&ready); err != nil {
		return err
	}
	if ready.Open != n {
		return fmt.Errorf("%d of %d streams open", ready.Open, n)
	}
	if !bare {
		_, err := s.svc.CreateTask(ctx, lifecycle.CreateTaskParams{
			Identifier: id.New("IDLE-"), Title: "One event for every stream", Actor: lifecycle.Actor{ID: "ssebench", Role: lifecycle.RoleSystem},
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/IDLE"},
		})
		if err != nil {
			return err
		}
	}
	var got struct{ Received int }
	if err := c.receive(&got); err != nil {
		return err
	}
	if got.Received != n {
		return fmt.Errorf("%d of %d streams delivered a frame", got.Received, n)
	}
	if measure != nil {
		measure()
	}
	return nil
}

// fanoutReport is what the fanout client reports.
type fanoutReport struct {
	Streams  int
	Received int
	Missing  int // events a stream did not get
	P50, P90 float64
	P99, Max float64 // milliseconds
}

// fanout publishes events at a fixed rate to many streams and reports the
// publish-to-receive latency the clients saw.
func fanout(ctx context.Context, o options, dir string) error {
	fmt.Printf("\nfanout: %d streams (%s), %d events/s for %s through Service.CreateTask (SQLite, synchronous=FULL)\n", o.fanoutStreams, o.fanoutProto, o.rate, o.duration)
	s, err := startServer(ctx, dir, o, nil)
	if err != nil {
		return err
	}
	defer s.stop()
	c, err := startChild(ctx, "-client", "fanout", "-url", s.base+"/task-events/stream", "-key", s.key, "-proto", o.fanoutProto, "-n", strconv.Itoa(o.fanoutStreams))
	if err != nil {
		return err
	}
	defer c.stop()
	var ready struct{ Open int }
	if err := c.receive(&ready); err != nil {
		return err
	}
	actor := lifecycle.Actor{ID: "ssebench", Role: lifecycle.RoleSystem}
	publish := func(ident string) error {
		_, err := s.svc.CreateTask(ctx, lifecycle.CreateTaskParams{
			Identifier: ident, Title: "Fan-out latency probe", Actor: actor,
			Description: "An event of a realistic size: the data of task.updated carries the links, actions and changed fields.",
			Links:       lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		})
		return err
	}
	interval := time.Second / time.Duration(o.rate)
	cpu0 := cpuTime()
	start := time.Now()
	published := 0
	var commits []int64 // how long each CreateTask took, in ns
	for next := start; time.Since(start) < o.duration; next = next.Add(interval) {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		t0 := time.Now()
		// The client reads the publish time from the identifier.
		if err := publish("LAT-" + strconv.FormatInt(t0.UnixNano(), 10)); err != nil {
			return err
		}
		commits = append(commits, int64(time.Since(t0)))
		published++
	}
	slices.Sort(commits)
	elapsed := time.Since(start)
	if err := publish("END-" + strconv.Itoa(published)); err != nil {
		return err
	}
	var r fanoutReport
	if err := c.receive(&r); err != nil {
		return err
	}
	serverCPU, wall := cpuTime()-cpu0, time.Since(start)
	clientCPU := c.stop()
	fmt.Printf("  published %d events in %.1fs (%.0f/s); CreateTask (validate, route, fsynced commit) ms: p50 %.2f  p99 %.2f  max %.2f\n",
		published, elapsed.Seconds(), float64(published)/elapsed.Seconds(),
		float64(percentile(commits, 50))/1e6, float64(percentile(commits, 99))/1e6, float64(commits[len(commits)-1])/1e6)
	fmt.Printf("  received %d of %d (%d streams); publish-to-receive latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n",
		r.Received, published*o.fanoutStreams, r.Streams, r.P50, r.P90, r.P99, r.Max)
	fmt.Printf("  CPU over %.1fs: server %.1fs, client process %.1fs (of %d CPUs)\n", wall.Seconds(), serverCPU.Seconds(), clientCPU.Seconds(), runtime.NumCPU())
	if r.Missing > 0 || r.Received != published*o.fanoutStreams {
		return fmt.Errorf("%d events missing", published*o.fanoutStreams-r.Received)
	}
	return nil
}

// replayReport is what the replay client reports.
type replayReport struct {
	Events  int
	Seconds float64
	Bytes   int64
}

// replay stores events and measures how fast one client receives them all
// from a cursor.
func replay(ctx context.Context, o options, dir string) error {
	fmt.Printf("\nreplay: %d stored events to one client (HTTP/1.1) from a cursor\n", o.replayEvents)
	s, err := startServer(ctx, dir, o, nil)
	if err != nil {
		return err
	}
	defer s.stop()
	task, err := s.svc.CreateTask(ctx, lifecycle.CreateTaskParams{
		Identifier: "REPLAY-1", Title: "Replay source", Actor: lifecycle.Actor{ID: "ssebench", Role: lifecycle.RoleSystem},
		Description: "The events replayed carry the data of this task's creation.",
		Links:       lifecycle.TaskLinks{Issue: "https://issues.example.com/REPLAY-1"},
	})
	if err != nil {
		return err
	}
	first, err := s.store.Events(ctx, lifecycle.EventFilter{Limit: 1})
	if err != nil || len(first) != 1 {
		return fmt.Errorf("read the first event: %v", err)
	}
	cursor := first[0]
	seedStart := time.Now()
	const batch = 10000
	for done := 0; done < o.replayEvents; done += batch {
		n := min(batch, o.replayEvents-done)
		err := s.store.Update(ctx, func(tx lifecycle.Tx) error {
			for range n {
				e := lifecycle.Event{
					ID: id.New("evt_"), Type: lifecycle.EventTaskUpdated, OccurredAt: lifecycle.NewTimestamp(time.Now()),
					TaskVersion: 1, Data: cursor.Data, TaskID: task.ID,
				}
				if err := tx.AppendEvent(ctx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	fmt.Printf("  seeded in %.1fs\n", time.Since(seedStart).Seconds())
	cpu0 := cpuTime()
	c, err := startChild(ctx, "-client", "replay", "-url", s.base+"/task-events/stream", "-key", s.key, "-proto", "http1",
		"-n", strconv.Itoa(o.replayEvents), "-cursor", cursor.ID)
	if err != nil {
		return err
	}
	defer c.stop()
	var r replayReport
	if err := c.receive(&r); err != nil {
		return err
	}
	serverCPU := cpuTime() - cpu0
	clientCPU := c.stop()
	fmt.Printf("  received %d events (%.0f MB) in %.2fs: %.0f events/s\n", r.Events, float64(r.Bytes)/1e6, r.Seconds, float64(r.Events)/r.Seconds)
	fmt.Printf("  CPU: server %.1fs, client process %.1fs\n", serverCPU.Seconds(), clientCPU.Seconds())
	if r.Events != o.replayEvents {
		return fmt.Errorf("received %d of %d events", r.Events, o.replayEvents)
	}
	return nil
}

// percentile returns the p-th percentile of sorted samples.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(sorted)-1))
	return sorted[i]
}
