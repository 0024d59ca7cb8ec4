// Command submitbench measures POST /tasks/{id}/submit over loopback, with
// the in-memory adapter and the SQLite store at its durable default
// (synchronous=FULL), with the disk's fsyncs made slow on purpose so that
// the figure does not depend on how fast (or how idle) the machine's disk
// is.
//
// The server runs in a child process (this same program) with a small
// shared object preloaded (LD_PRELOAD) that wraps fsync and fdatasync: it
// counts them, sums their time and, when told, sleeps a fixed delay after
// each. Its source is embedded and built with the machine's C compiler
// into a temporary directory at every run. This process is the client: for
// each fsync delay (-delays) it starts a server on a fresh database, seeds
// it with started tasks (the delay off), then, the delay on, submits
// -submits tasks at each concurrency (-clients), -runs times, and prints
// submits per second (the range over the runs), the latency and the
// fsyncs per submit.
//
// Everything is on 127.0.0.1, bounded in count and in time, and stops by
// itself. Linux only (LD_PRELOAD, gcc or cc).
//
//	go run ./internal/cmd/submitbench
//	go run ./internal/cmd/submitbench -delays 1ms -clients 64 -runs 1
//
// See BENCHMARKS.md for the figures.
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

//go:embed shim/fsyncshim.c
var shimSource string

// The slots of the shim's shared file (see shim/fsyncshim.c).
const (
	slotFsync = iota
	slotFdatasync
	slotNanos
	slotDelay
	shimFileSize = 4096
)

type options struct {
	delays  string
	clients string
	runs    int
	submits int
	timeout time.Duration
	cc      string
	dir     string
	profile string

	// Server role.
	server bool
	tasks  int
	ids    string
}

func main() {
	var o options
	flag.StringVar(&o.delays, "delays", "0,1ms", "comma-separated fsync delays to inject, each on a fresh server (0..20ms)")
	flag.StringVar(&o.clients, "clients", "16,64,256", "comma-separated concurrent clients (1..1024)")
	flag.IntVar(&o.runs, "runs", 3, "runs at each concurrency (1..10)")
	flag.IntVar(&o.submits, "submits", 3000, "submits per run (100..20000)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "stop everything after this long")
	flag.StringVar(&o.cc, "cc", "", "C compiler for the fsync shim (default gcc, else cc)")
	flag.StringVar(&o.dir, "dir", defaultDir(), "directory for the databases (default /dev/shm, a tmpfs whose fsync costs nothing, so that the injected delay is the disk's whole cost)")
	flag.StringVar(&o.profile, "cpuprofile", "", "write the server's CPU profile of the measured submits (after seeding) to this file; with several delays, the last server's")
	flag.BoolVar(&o.server, "server", false, "internal: run as the server")
	flag.IntVar(&o.tasks, "tasks", 0, "internal: started tasks to seed")
	flag.StringVar(&o.ids, "ids", "", "internal: file to write the seeded task IDs to")
	flag.Parse()
	var err error
	if o.server {
		err = serve(o)
	} else {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "submitbench:", err)
		os.Exit(1)
	}
}

// run is the client: it builds the shim and measures each delay on a
// server of its own.
func run(o options) error {
	delays, err := parseList(o.delays, func(s string) (time.Duration, error) {
		if s == "0" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err == nil && (d < 0 || d > 20*time.Millisecond) {
			err = errors.New("out of range")
		}
		return d, err
	})
	if err != nil {
		return fmt.Errorf("-delays: %w", err)
	}
	clients, err := parseList(o.clients, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && (n < 1 || n > 1024) {
			err = errors.New("out of range")
		}
		return n, err
	})
	if err != nil {
		return fmt.Errorf("-clients: %w", err)
	}
	if o.runs < 1 || o.runs > 10 || o.submits < 100 || o.submits > 20000 {
		return errors.New("-runs must be 1..10 and -submits 100..20000")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp(o.dir, "submitbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	shim, err := buildShim(ctx, dir, o.cc)
	if err != nil {
		return err
	}
	fmt.Printf("submitbench: POST /tasks/{id}/submit over loopback, in-memory adapter, SQLite synchronous=FULL in %s; %d submits per run, %d runs\n", o.dir, o.submits, o.runs)
	fmt.Printf("%-7s %-8s %-28s %-8s %-8s %-14s %-13s %s\n", "delay", "clients", "submits/s: range (runs)", "p50 ms", "p99 ms", "fsyncs/submit", "ms per fsync", "server CPU µs/submit")
	for i, d := range delays {
		if err := measureDelay(ctx, o, filepath.Join(dir, strconv.Itoa(i)), shim, d, clients); err != nil {
			return fmt.Errorf("delay %v: %w", d, err)
		}
	}
	return nil
}

// defaultDir is /dev/shm when it is there, else the temporary directory.
func defaultDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// buildShim compiles the embedded shim into dir and returns its path.
func buildShim(ctx context.Context, dir, cc string) (string, error) {
	if cc == "" {
		cc = "gcc"
		if _, err := exec.LookPath(cc); err != nil {
			cc = "cc"
		}
	}
	src, so := filepath.Join(dir, "fsyncshim.c"), filepath.Join(dir, "fsyncshim.so")
	if err := os.WriteFile(src, []byte(shimSource), 0o600); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, cc, "-O2", "-shared", "-fPIC", "-o", so, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the fsync shim with %s: %w\n%s", cc, err, out)
	}
	return so, nil
}

// shimFile is the client's view of the shim's shared counters.
type shimFile struct{ f *os.File }

func (s shimFile) slot(i int) int64 {
	var b [8]byte
	if _, err := s.f.ReadAt(b[:], int64(8*i)); err != nil {
		panic(err)
	}
	return int64(binary.NativeEndian.Uint64(b[:]))
}

func (s shimFile) setDelay(d time.Duration) error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(d.Nanoseconds()))
	_, err := s.f.WriteAt(b[:], 8*slotDelay)
	return err
}

// counts are the shim's counters at a moment.
type counts struct{ syncs, nanos int64 }

func (s shimFile) counts() counts {
	return counts{s.slot(slotFsync) + s.slot(slotFdatasync), s.slot(slotNanos)}
}

// measureDelay starts a server on a fresh database in dir, seeds it, sets
// the delay and measures each concurrency.
func measureDelay(ctx context.Context, o options, dir, shim string, delay time.Duration, clients []int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "shim.counters"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(shimFileSize); err != nil {
		return err
	}
	counters := shimFile{f}
	total := 0
	for _, c := range clients {
		total += o.runs * max(o.submits, c)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	idsPath := filepath.Join(dir, "ids")
	args := []string{"-server", "-tasks", strconv.Itoa(total), "-ids", idsPath}
	if o.profile != "" {
		p, err := filepath.Abs(o.profile)
		if err != nil {
			return err
		}
		args = append(args, "-cpuprofile", p)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim, "FSYNCSHIM_FILE="+f.Name())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close() // the server stops when its stdin closes
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	var ready struct{ URL, Key string }
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("server did not start: %w", err)
	}
	if err := json.Unmarshal(line, &ready); err != nil {
		return fmt.Errorf("server said %q: %w", line, err)
	}
	if counters.counts().syncs == 0 {
		return errors.New("the fsync shim counted no fsync while the server seeded its database: it is not loaded")
	}
	raw, err := os.ReadFile(idsPath)
	if err != nil {
		return err
	}
	ids := strings.Fields(string(raw))
	if len(ids) != total {
		return fmt.Errorf("server seeded %d tasks, want %d", len(ids), total)
	}
	if err := counters.setDelay(delay); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"summary": "Fixed the redirect and added a regression test.",
		"checks":  []map[string]any{{"name": "unit", "status": "passed"}},
	})
	for _, c := range clients {
		var rates []float64
		var lat []time.Duration
		var syncs, nanos, submits int64
		var cpu time.Duration
		for range o.runs {
			n := max(o.submits, c)
			batch := ids[:n]
			ids = ids[n:]
			before, cpu0 := counters.counts(), cpuTime(cmd.Process.Pid)
			r, err := load(ctx, ready.URL, ready.Key, body, batch, c)
			if err != nil {
				return err
			}
			after := counters.counts()
			cpu += cpuTime(cmd.Process.Pid) - cpu0
			rates = append(rates, float64(n)/r.elapsed.Seconds())
			lat = append(lat, r.latencies...)
			syncs += after.syncs - before.syncs
			nanos += after.nanos - before.nanos
			submits += int64(n)
		}
		slices.Sort(lat)
		slices.Sort(rates)
		var runs []string
		for _, r := range rates {
			runs = append(runs, fmt.Sprintf("%.0f", r))
		}
		perSync := 0.0
		if syncs > 0 {
			perSync = float64(nanos) / float64(syncs) / 1e6
		}
		fmt.Printf("%-7v %-8d %-28s %-8.1f %-8.1f %-14.3f %-13.2f %.0f\n", delay, c,
			fmt.Sprintf("%.0f–%.0f (%s)", rates[0], rates[len(rates)-1], strings.Join(runs, ", ")),
			ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), float64(syncs)/float64(submits), perSync,
			float64(cpu.Microseconds())/float64(submits))
	}
	return nil
}

// cpuTime returns the user and system CPU time a process has used, read
// from /proc (in clock ticks, taken as 100 a second); 0 when it cannot.
func cpuTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// result is one run's outcome.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration
}

// load submits each task of ids once from c concurrent clients, each on
// a keep-alive connection of its own.
func load(ctx context.Context, url, key string, body []byte, ids []string, c int) (result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next atomic.Int64
	lat := make([]time.Duration, len(ids))
	errs := make(chan error, c)
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/tasks/"+ids[i]+"/submit", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "submitbench-"+ids[i])
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("submit %s: status %d: %s", ids[i], resp.StatusCode, b)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return result{}, err
	}
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return result{elapsed, lat}, nil
}

// parseList parses a comma-separated list.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// serve is the server: a Service on a SQLite database in the working
// directory, with the in-memory adapter live for every project, seeded
// with o.tasks started tasks, served on 127.0.0.1 until stdin closes.
func serve(o options) error {
	ctx := context.Background()
	store, err := sqlite.New(sqlite.Config{Path: "bench.db"})
	if err != nil {
		return err
	}
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{
		Store:    store,
		BaseURL:  "http://127.0.0.1",
		Logger:   slog.New(slog.DiscardHandler),
		Adapters: []lifecycle.AdapterBinding{{Adapter: memory.New(memory.Config{})}},
	})
	if err != nil {
		return err
	}
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "submitbench",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite},
		Actor:  lifecycle.Actor{ID: "submitbench", Role: lifecycle.RoleUser}})
	if err != nil {
		return err
	}
	ids, err := seed(ctx, svc, o.tasks)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.ids, []byte(strings.Join(ids, "\n")), 0o600); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ready, _ := json.Marshal(map[string]string{"URL": "http://" + ln.Addr().String(), "Key": key})
	fmt.Printf("%s\n", ready)
	io.Copy(io.Discard, os.Stdin) // until the client closes it
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// seed creates n tasks and starts them, from concurrent callers (group
// commit makes that fast), and returns their IDs in creation order.
func seed(ctx context.Context, svc *lifecycle.Service, n int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{
					Identifier: fmt.Sprintf("SB-%d", i),
					Title:      "Fix the login redirect",
					Links:      lifecycle.TaskLinks{Issue: "https://issues.example.com/x"},
				})
				if err == nil {
					_, err = svc.StartTask(ctx, t.ID, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "submitbench", Role: lifecycle.RoleAgent}})
				}
				if err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					return
				}
				ids[i] = t.ID
			}
		}()
	}
	wg.Wait()
	return ids, first
}

// cmp returns a when it is not nil, else b.
func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
