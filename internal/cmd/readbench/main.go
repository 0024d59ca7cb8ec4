// Command readbench measures GET /tasks/{id} over loopback against the
// floor: a bare net/http + database/sql handler that reads the same row of
// the same SQLite file and encodes it with encoding/json.
//
// In one run it seeds a SQLite store with -tasks tasks through a Service,
// creates one API key, and serves three handlers on their own 127.0.0.1
// listeners, one after the other:
//
//   - lifecycle-otel: the Service's handler with the OpenTelemetry SDK:
//     sdk/metric with a ManualReader, sdk/trace with a batch span
//     processor to a discarding exporter and the sampler of -sample
//     (AlwaysSample at 1, the default; ParentBased(TraceIDRatioBased) below);
//   - lifecycle-noop: the same with the no-op providers (the default);
//   - bare: the few lines of bareHandler below.
//
// Each is driven for -duration (after -warmup) by -conns kept-alive
// connections, each sending GET requests for random tasks back to back.
// The load comes from a second process (this program re-run with -client)
// so that the CPU figure, read with getrusage(RUSAGE_SELF) around the
// measured period, is the server's alone; both processes share the
// machine's processors. It prints requests per second, server CPU
// microseconds per request and the ratios lifecycle/bare.
//
//	go run ./internal/cmd/readbench                     # the figures of BENCHMARKS.md
//	go run ./internal/cmd/readbench -rounds 5 -duration 2s -cpuprofile /tmp/get.pprof
//	go run ./internal/cmd/readbench -task-cache -1      # every read reads the whole row
//
// The lifecycle handlers answer from their task cache (Config.TaskCacheBytes)
// once a task has been read: the default 16 MiB holds the answers of the
// 10,000 tasks, so after the warm-up each request reads the task's
// revision and no more. -task-cache sets the cache's size; -1 turns it off.
//
// With several rounds (which alternate the handlers) it also prints the
// medians and their ratios: on a machine shared with other work they move
// less than one round's figures.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type options struct {
	tasks      int
	conns      int
	duration   time.Duration
	warmup     time.Duration
	rounds     int
	sample     float64
	cpuprofile string
	only       string
	taskCache  int64
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-client" {
		if err := client(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "readbench client:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.tasks, "tasks", 10000, "tasks to create")
	flag.IntVar(&o.conns, "conns", 16, "kept-alive connections")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per handler")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measurement")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds of the three handlers")
	flag.Float64Var(&o.sample, "sample", 1, "fraction of traces sampled with the SDK (1: AlwaysSample)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the server during lifecycle-otel's measurement")
	flag.StringVar(&o.only, "only", "", "measure only this handler (lifecycle-otel, lifecycle-noop or bare)")
	flag.Int64Var(&o.taskCache, "task-cache", 0, "the Services' Config.TaskCacheBytes (0: the default; -1: no cache, every read reads the whole row)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "readbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "lifecycle.db")
	store, err := sqlite.New(sqlite.Config{Path: path, Synchronous: sqlite.SynchronousNormal})
	if err != nil {
		return err
	}
	defer store.Close()
	discard := slog.New(slog.DiscardHandler)

	noop, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", Logger: discard, TaskCacheBytes: o.taskCache})
	if err != nil {
		return err
	}
	var sampler sdktrace.Sampler = sdktrace.AlwaysSample()
	if o.sample < 1 {
		sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.sample))
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(ctx)
	defer mp.Shutdown(ctx)
	otel, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", Logger: discard,
		MeterProvider: mp, TracerProvider: tp, TaskCacheBytes: o.taskCache})
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "seeding %d tasks...\n", o.tasks)
	ids := make([]string, o.tasks)
	for i := range ids {
		p := lifecycle.CreateTaskParams{
			Identifier:         fmt.Sprintf("SEED-%d", i),
			Title:              "Fix the login redirect",
			Description:        "Users land on a 404 after login; the redirect target loses its query string.",
			AcceptanceCriteria: []string{"redirects to /home", "keeps the query string"},
			Links:              lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/SEED-%d", i)},
			Labels:             []string{"frontend"},
		}
		if i%3 == 0 {
			p.AssigneeAgentID = "agent-web"
		}
		t, err := noop.CreateTask(ctx, p)
		if err != nil {
			return err
		}
		ids[i] = t.ID
	}
	_, key, err := noop.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "readbench",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}})
	if err != nil {
		return err
	}
	idFile := filepath.Join(dir, "ids")
	if err := os.WriteFile(idFile, []byte(strings.Join(ids, "\n")), 0o600); err != nil {
		return err
	}

	bare, err := newBare(path)
	if err != nil {
		return err
	}
	defer bare.db.Close()

	targets := []struct {
		name string
		h    http.Handler
	}{
		{"lifecycle-otel", otel.Handler()},
		{"lifecycle-noop", noop.Handler()},
		{"bare", bare},
	}
	fmt.Printf("GET /tasks/{id}, %d tasks, %d connections, %s per handler (server CPU by getrusage; load from a second process)\n",
		o.tasks, o.conns, o.duration)
	if o.sample >= 1 {
		fmt.Println("lifecycle-otel: sdk/metric ManualReader, sdk/trace AlwaysSample, batch processor to a discarding exporter")
	} else {
		fmt.Printf("lifecycle-otel: sdk/metric ManualReader, sdk/trace ParentBased(TraceIDRatioBased(%g)), batch processor to a discarding exporter\n", o.sample)
	}
	all := map[string][]result{}
	for round := 1; round <= o.rounds; round++ {
		res := map[string]result{}
		for _, tg := range targets {
			if o.only != "" && tg.name != o.only {
				continue
			}
			profile := ""
			if tg.name == "lifecycle-otel" && round == 1 {
				profile = o.cpuprofile
			}
			r, err := measure(o, tg.h, key, idFile, profile)
			if err != nil {
				return fmt.Errorf("%s: %w", tg.name, err)
			}
			res[tg.name] = r
			all[tg.name] = append(all[tg.name], r)
			fmt.Printf("round %d  %-15s %8.0f req/s  %6.1f µs CPU/request\n", round, tg.name, r.rps, r.cpuPerReq)
		}
		if b, ok := res["bare"]; ok {
			for _, n := range []string{"lifecycle-otel", "lifecycle-noop"} {
				if l, ok := res[n]; ok {
					fmt.Printf("round %d  %s/bare: throughput %.2f, CPU per request %.2f×\n", round, n, l.rps/b.rps, l.cpuPerReq/b.cpuPerReq)
				}
			}
		}
	}
	if o.rounds > 1 {
		// The medians over the rounds, which alternate the handlers, weather
		// a neighbour's load better than one round.
		med := map[string]result{}
		for _, tg := range targets {
			name, rs := tg.name, all[tg.name]
			if len(rs) == 0 {
				continue
			}
			med[name] = result{median(rs, func(r result) float64 { return r.rps }), median(rs, func(r result) float64 { return r.cpuPerReq })}
			fmt.Printf("median   %-15s %8.0f req/s  %6.1f µs CPU/request\n", name, med[name].rps, med[name].cpuPerReq)
		}
		if b, ok := med["bare"]; ok {
			for _, n := range []string{"lifecycle-otel", "lifecycle-noop"} {
				if l, ok := med[n]; ok {
					fmt.Printf("median   %s/bare: throughput %.2f, CPU per request %.2f×\n", n, l.rps/b.rps, l.cpuPerReq/b.cpuPerReq)
				}
			}
		}
	}
	return nil
}

// median returns the median of f over rs.
func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// bareHandler is the floor: database/sql on the same SQLite file, the same
// row, encoding/json.
type bareHandler struct {
	db   *sql.DB
	stmt *sql.Stmt
}

// bareTask holds the served columns of a task; encoding/json encodes it.
type bareTask struct {
	ID                 string          `json:"id"`
	Identifier         string          `json:"identifier"`
	Title              string          `json:"title"`
	Description        string          `json:"description"`
	Status             string          `json:"status"`
	Priority           string          `json:"priority"`
	UpdatedAt          int64           `json:"updatedAt"`
	AssigneeAgentID    *string         `json:"assigneeAgentId"`
	AssigneeName       *string         `json:"assigneeName"`
	AssignmentSource   *string         `json:"assignmentSource"`
	RoutingDecisionID  *string         `json:"routingDecisionId"`
	RoutingReason      json.RawMessage `json:"routingReason"`
	RoutingConfidence  *float64        `json:"routingConfidence"`
	TriageQueueID      *string         `json:"triageQueueId"`
	SubmissionID       *string         `json:"submissionId"`
	PRURL              *string         `json:"prUrl"`
	PRNumber           *int64          `json:"prNumber"`
	Branch             *string         `json:"branch"`
	BaseBranch         *string         `json:"baseBranch"`
	HeadSHA            *string         `json:"headSha"`
	AcceptanceCriteria json.RawMessage `json:"acceptanceCriteria"`
	Issue              string          `json:"issue"`
	ParentIssue        *string         `json:"parentIssue"`
	Project            *string         `json:"project"`
	Goal               string          `json:"goal"`
	Blocker            json.RawMessage `json:"blocker"`
}

func newBare(path string) (*bareHandler, error) {
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_journal_mode=WAL&_query_only=1&_busy_timeout=5000")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	stmt, err := db.Prepare(`SELECT id, identifier, title, description, status, priority, updated_at,
		assignee_agent_id, assignee_name, assignment_source, routing_decision_id, routing_reason, routing_confidence,
		triage_queue_id, submission_id, pr_url, pr_number, branch, base_branch, head_sha,
		acceptance_criteria, issue_url, parent_issue_url, project, goal, blocker FROM tasks WHERE id = ?`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &bareHandler{db: db, stmt: stmt}, nil
}

func (b *bareHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/tasks/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	var t bareTask
	var reason, criteria, blocker []byte
	err := b.stmt.QueryRowContext(r.Context(), id).Scan(&t.ID, &t.Identifier, &t.Title, &t.Description, &t.Status,
		&t.Priority, &t.UpdatedAt, &t.AssigneeAgentID, &t.AssigneeName, &t.AssignmentSource, &t.RoutingDecisionID,
		&reason, &t.RoutingConfidence, &t.TriageQueueID, &t.SubmissionID, &t.PRURL, &t.PRNumber, &t.Branch,
		&t.BaseBranch, &t.HeadSHA, &criteria, &t.Issue, &t.ParentIssue, &t.Project, &t.Goal, &blocker)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	t.RoutingReason, t.AcceptanceCriteria, t.Blocker = nullRaw(reason), criteria, nullRaw(blocker)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": t})
}

// nullRaw is b, or JSON null when b is empty.
func nullRaw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

type result struct {
	rps, cpuPerReq float64
}

// measure serves h on a loopback listener, runs the client process
// against it, and reads the server's CPU time around the measured period.
func measure(o options, h http.Handler, key, idFile, profile string) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(self, "-client", ln.Addr().String(), key, idFile, strconv.Itoa(o.conns), o.warmup.String(), o.duration.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "go" {
		cmd.Process.Kill()
		return result{}, fmt.Errorf("client did not start: %q", sc.Text())
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
	}
	cpu0, t0 := cpuTime(), time.Now()
	if !sc.Scan() {
		return result{}, errors.New("client ended early")
	}
	cpu1, t1 := cpuTime(), time.Now()
	if profile != "" {
		pprof.StopCPUProfile()
	}
	n, err := strconv.ParseInt(sc.Text(), 10, 64)
	if err != nil {
		return result{}, fmt.Errorf("client: %q", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		return result{}, err
	}
	if n == 0 {
		return result{}, errors.New("no requests completed")
	}
	return result{rps: float64(n) / t1.Sub(t0).Seconds(), cpuPerReq: float64((cpu1 - cpu0).Microseconds()) / float64(n)}, nil
}

// cpuTime is the user and system time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// client sends GET requests on conns connections: warmup unmeasured,
// then "go" on stdout, then duration measured, then the count of
// responses completed in it.
func client(args []string) error {
	if len(args) != 6 {
		return errors.New("usage: -client addr key idfile conns warmup duration")
	}
	addr, key, idFile := args[0], args[1], args[2]
	conns, _ := strconv.Atoi(args[3])
	warmup, _ := time.ParseDuration(args[4])
	duration, _ := time.ParseDuration(args[5])
	raw, err := os.ReadFile(idFile)
	if err != nil {
		return err
	}
	ids := strings.Split(string(raw), "\n")
	var measuring atomic.Bool
	var stop atomic.Bool
	var count atomic.Int64
	errc := make(chan error, conns)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			errc <- load(addr, key, ids, uint64(c), &measuring, &stop, &count)
		})
	}
	time.Sleep(warmup)
	measuring.Store(true)
	fmt.Println("go")
	time.Sleep(duration)
	n := count.Load()
	fmt.Println(n)
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

// load sends requests back to back on one connection until stop.
func load(addr, key string, ids []string, seed uint64, measuring, stop *atomic.Bool, count *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(seed, 42))
	reqs := make([][]byte, 256)
	for i := range reqs {
		reqs[i] = []byte("GET /tasks/" + ids[rng.IntN(len(ids))] + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + key + "\r\n\r\n")
	}
	br := bufio.NewReaderSize(c, 64<<10)
	for i := 0; !stop.Load(); i++ {
		if _, err := c.Write(reqs[i%len(reqs)]); err != nil {
			return err
		}
		if err := readResponse(br); err != nil {
			return err
		}
		if measuring.Load() {
			count.Add(1)
		}
	}
	return nil
}

// readResponse reads one response with a Content-Length and checks its
// status is 200.
func readResponse(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("status %q", bytes.TrimSpace(line))
	}
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 {
		return errors.New("no Content-Length")
	}
	_, err = br.Discard(length)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
