package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/postgres"
)

// The store-fault mode (-faults store) leaves the demo's processes alone
// and makes their Store fail under load, in two parts:
//
//  1. PostgreSQL restarted: a private cluster (a temporary directory, a
//     free port of 127.0.0.1, trust authentication; never the machine's
//     own) is shared by three demo replicas, the workload spread over
//     them and each one's event stream followed; the cluster is restarted
//     three times: pg_ctl restart -m fast, then stopped -m fast and
//     started 3 s later, then stopped -m immediate (a crash: the restart
//     recovers from the WAL) and started 3 s later.
//  2. SQLite's disk full: a demo whose data directory is a small tmpfs,
//     filled with a file until writes fail with ENOSPC, kept full for
//     4 s under load and freed, twice. Its git repositories (the code
//     host) are kept off the small disk, so that what fails is the
//     Store. Where the process may not mount, this part is skipped
//     (under CI=true, it fails).
//
// Through each fault it checks that every request gets an answer within
// the client's timeout, 30 s, well above the demo's Config.RequestTimeout
// (20 s: its ProviderTimeout, 5 s, plus 15 s): 503 store_unavailable
// with Retry-After while the store fails, no other 5xx; /readyz answers
// 200 ready or 503 not_ready. The workload retries a 503 after 100 ms,
// sooner than its Retry-After, so that the figures measure the service.
// Once a write has failed, the event streams drop their connections and
// reconnect with Last-Event-ID while the store is down. From the store's
// return (PostgreSQL answering a query again, the disk freed) it measures
// how soon each replica makes its first successful write (a prober
// creates a task through each, every 50 ms) and answers /readyz 200, how
// soon each stream and the webhook receiver get an event again, and when
// the ship operations the fault caught finish: each within 5 s. Once the
// faults are done it checks the kill mode's invariants; PostgreSQL's
// event sequences may skip numbers (see target.gapless), no stream may
// miss or repeat an event.

// errMountRefused means the process may not mount a filesystem.
var errMountRefused = errors.New("not permitted")

const (
	// recoveryTarget is how soon after the store's return every replica
	// is to write again and be ready.
	recoveryTarget = 5 * time.Second
	// recoveryLimit is how long the harness waits for a replica to
	// recover before it records a failure and goes on.
	recoveryLimit = 30 * time.Second
	// probeInterval is how often a prober writes, and asks /readyz,
	// while a fault lasts.
	probeInterval = 50 * time.Millisecond
	// storeClientTimeout is the store-fault mode's client timeout: an
	// answer later than this is a hang.
	storeClientTimeout = 30 * time.Second
	// storeSettle bounds how long each part's final checks wait for the
	// work to settle.
	storeSettle = 60 * time.Second
	// smallDiskSize is the size of the SQLite part's tmpfs.
	smallDiskSize = 64 << 20
)

// runStoreFaults runs the store-fault mode: PostgreSQL restarted, then
// SQLite's disk full.
func runStoreFaults(o options) error {
	// Stopped by a signal (timeout(1) sends SIGTERM), the harness still
	// stops what it started: the demos, the cluster, the mount.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "crashharness-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("data directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.demo, err = buildDemo(o.demo, dir); err != nil {
		return err
	}
	fmt.Printf("crash harness, store faults: %d workers, seed %d\n", o.workers, o.seed)
	rnd := rand.New(rand.NewPCG(o.seed, o.seed>>1|1))

	var failed []string
	pctx, cancel := context.WithTimeout(ctx, 150*time.Second)
	err = postgresFaults(pctx, o, filepath.Join(dir, "postgres"), rnd)
	cancel()
	if err != nil {
		failed = append(failed, "PostgreSQL restarted: "+err.Error())
	}
	if ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 100*time.Second)
		err = diskFullFaults(sctx, o, filepath.Join(dir, "sqlite"), rnd)
		cancel()
		if err != nil {
			failed = append(failed, "SQLite's disk full: "+err.Error())
		}
	}
	if ctx.Err() != nil {
		failed = append(failed, "stopped by a signal")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	fmt.Println("crash harness, store faults: every invariant held")
	return nil
}

// postgresFaults runs three demo replicas on a private PostgreSQL cluster
// and restarts the cluster under load three times.
func postgresFaults(ctx context.Context, o options, dir string, rnd *rand.Rand) error {
	fmt.Println("--- PostgreSQL restarted under load, 3 replicas")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	c, err := startCluster(ctx)
	if err != nil {
		return err
	}
	defer c.destroy()
	fmt.Printf("cluster: %s (%s), port %d\n", c.dir, c.bin, c.port)

	recv, err := newReceiver(dir)
	if err != nil {
		return err
	}
	defer recv.close()
	// The replicas share one data directory, for the git repositories
	// that stand in for the code host (a task submitted on one replica
	// is shipped on another) and the webhook secret's sealing key, and
	// each has an instance ID of its own.
	data := filepath.Join(dir, "data")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var servers []*server
	for _, name := range []string{"a", "b", "c"} {
		srv, err := newServer(name, o.demo, data, recv, log,
			"LIFECYCLE_POSTGRES_DSN="+c.dsn(), "LIFECYCLE_INSTANCE_ID=crashharness-"+name)
		if err != nil {
			return err
		}
		srv.client.Timeout = storeClientTimeout
		defer srv.stop()
		// One after the other: the first subscribes the receiver, the
		// others find its subscription.
		if err := srv.start(); err != nil {
			return err
		}
		servers = append(servers, srv)
	}
	tg := target{
		servers: servers,
		data:    data,
		openStore: func(ctx context.Context) (lifecycle.Store, error) {
			return postgres.New(ctx, postgres.Config{DSN: c.dsn()})
		},
		dump: func(ctx context.Context) ([]byte, error) {
			return c.output(ctx, "pg_dump", "--data-only", "-d", c.dsn())
		},
	}
	// Each restart returns when PostgreSQL, seen down, first answered a
	// query again.
	restart := func(steps func(ctx context.Context) error) func(ctx context.Context) (time.Time, error) {
		return func(ctx context.Context) (time.Time, error) {
			type result struct {
				up  time.Time
				err error
			}
			// The watcher ends with the restart: when the steps fail, it
			// would otherwise poll the cluster for its two minutes.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			back := make(chan result, 1)
			go func() {
				up, err := c.downUp(wctx)
				back <- result{up, err}
			}()
			if err := steps(ctx); err != nil {
				cancel()
				<-back
				return time.Time{}, err
			}
			r := <-back
			return r.up, r.err
		}
	}
	stopStart := func(mode string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := c.stop(ctx, mode); err != nil {
				return err
			}
			pause(ctx, 3*time.Second)
			return c.start(ctx)
		}
	}
	restarts := []fault{
		{name: "pg_ctl restart -m fast", induce: restart(func(ctx context.Context) error { return c.restart(ctx, "fast") })},
		{name: "pg_ctl stop -m fast, 3 s down, pg_ctl start", induce: restart(stopStart("fast"))},
		{name: "pg_ctl stop -m immediate (a crash), 3 s down, pg_ctl start", induce: restart(stopStart("immediate"))},
	}
	err = faultRun(ctx, o, tg, recv, restarts, rnd)
	if err != nil {
		fmt.Println("--- the cluster's last log:")
		fmt.Println(c.lastLog(30))
	}
	return err
}

// diskFullFaults runs a demo on SQLite whose data directory is a small
// tmpfs, and fills the disk under load twice.
func diskFullFaults(ctx context.Context, o options, dir string, rnd *rand.Rand) error {
	fmt.Println("--- SQLite's disk full under load")
	disk := filepath.Join(dir, "disk")
	if err := os.MkdirAll(disk, 0o700); err != nil {
		return err
	}
	if err := mountSmallDisk(disk, smallDiskSize); err != nil {
		switch {
		case errors.Is(err, errMountRefused) && os.Getenv("CI") == "true":
			return fmt.Errorf("%w: under CI=true this part runs, as root", err)
		case errors.Is(err, errMountRefused):
			fmt.Printf("SKIPPED: %v; the disk-full part needs a process that may mount a tmpfs (root, or CAP_SYS_ADMIN)\n", err)
			return nil
		}
		return err
	}
	defer func() {
		if err := unmountSmallDisk(disk); err != nil {
			fmt.Fprintf(os.Stderr, "crashharness: unmount %s: %v\n", disk, err)
		}
	}()
	fmt.Printf("disk: a tmpfs of %d MiB on %s\n", smallDiskSize>>20, disk)
	// The code host's repositories and the deployments live off the small
	// disk: a full disk there is the code host failing (502
	// provider_error), not the Store.
	for _, sub := range []string{"repos", "deploy"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join(dir, sub), filepath.Join(disk, sub)); err != nil {
			return err
		}
	}
	recv, err := newReceiver(dir)
	if err != nil {
		return err
	}
	defer recv.close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := newServer("demo", o.demo, disk, recv, log)
	if err != nil {
		return err
	}
	srv.client.Timeout = storeClientTimeout
	defer srv.stop() // before the unmount
	if err := srv.start(); err != nil {
		return err
	}
	// The disk is full for 4 s, then freed: the store is back when the
	// file that filled it is gone.
	fill := filepath.Join(disk, "fill")
	defer os.Remove(fill)
	full := func(ctx context.Context) (time.Time, error) {
		n, err := fillDisk(fill)
		if err != nil {
			return time.Time{}, err
		}
		fmt.Printf("   filled the disk: %d MiB written until ENOSPC\n", n>>20)
		pause(ctx, 4*time.Second)
		err = os.Remove(fill)
		return time.Now(), err
	}
	faults := []fault{
		{name: "disk full for 4 s", induce: full},
		{name: "disk full for 4 s", induce: full},
	}
	return faultRun(ctx, o, sqliteTarget(srv), recv, faults, rnd)
}

// fillDisk writes zeros to a new file name until its filesystem is full,
// and returns how many bytes it wrote. Any error but ENOSPC is returned.
func fillDisk(name string) (int64, error) {
	f, err := os.Create(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, size := range []int{1 << 20, 4 << 10, 1} {
		chunk := make([]byte, size)
		for {
			k, err := f.Write(chunk)
			n += int64(k)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// fault is one fault of the store, and what was measured of it.
type fault struct {
	number int // 1, 2, ...
	name   string
	// induce makes the store fail, brings it back, and returns when it
	// was back: PostgreSQL answering a query again, the disk freed.
	induce func(ctx context.Context) (time.Time, error)

	begin, up, recovered time.Time
	writes, ready        []time.Duration // per server: from up to its first successful write, to its first ready /readyz
	streams              []time.Duration // per server: from up to its stream's first frame
	webhook              time.Duration   // from up to the receiver's first delivery
	failedWrites         int             // the probes' writes that failed while the store failed
	unavailable          int             // 503 store_unavailable answers from begin to recovered
	caught               int             // ship operations that finished after begin
	shipAfter            time.Duration   // the last of them finished this long after up
	dropped              time.Time       // when the streams dropped their connections; zero: never
}

// faultRun runs the workload on tg's servers, induces faults one after
// the other (a few seconds of load before each), measures each one's
// recovery, and then checks the invariants.
func faultRun(ctx context.Context, o options, tg target, recv *receiver, faults []fault, rnd *rand.Rand) error {
	st := newState(o.workers, tg.servers...)
	st.faults = true
	var streams []*observer
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	for _, srv := range tg.servers {
		obs := newObserver(srv, st)
		streams = append(streams, obs)
		go obs.run(obsCtx)
	}
	workDone := make(chan struct{})
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	go func() { st.runWorkers(workCtx, rnd.Uint64()); close(workDone) }()

	started := time.Now()
	var failed error
	for i := range faults {
		f := &faults[i]
		f.number = i + 1
		if !pause(ctx, time.Duration(2000+rnd.IntN(2000))*time.Millisecond) {
			break
		}
		if err := f.run(ctx, st, streams); err != nil {
			failed = fmt.Errorf("%s: %w", f.name, err)
			break
		}
		fmt.Printf("%d. %s: the store failed for %s\n", i+1, f.name, secs(f.up.Sub(f.begin)))
	}
	pause(ctx, 2*time.Second) // the store serves a little after the last fault
	stopWork()
	<-workDone
	workload := time.Since(started)
	if failed != nil {
		return failed
	}
	for i := range faults {
		if err := faults[i].measure(ctx, st, streams, recv); err != nil {
			return fmt.Errorf("%s: %w", faults[i].name, err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for i, f := range faults {
		fmt.Printf("%d. %s\n%s", i+1, f.name, f.report(tg.servers))
	}

	res := check(ctx, min(o.deadline, storeSettle), tg, st, streams, recv)
	res.workload = workload
	for _, f := range faults {
		res.checkFault(f, tg.servers)
	}
	res.print(tg, st, recoveryFigures(faults, tg.servers))
	if len(res.violations) > 0 {
		return fmt.Errorf("%d invariants failed", len(res.violations))
	}
	return nil
}

// run induces the fault under load, with a prober on every server, and
// measures the recovery.
func (f *fault) run(ctx context.Context, st *state, streams []*observer) error {
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	probers := make([]*prober, len(st.servers))
	for i, srv := range st.servers {
		probers[i] = &prober{srv: srv, st: st, prefix: fmt.Sprintf("PROBE-%d-%s", f.number, strings.ToUpper(srv.name))}
		go probers[i].run(probeCtx)
	}
	f.begin = time.Now()
	// Once a write failed, the streams lose their connections and
	// reconnect, with Last-Event-ID, while the store fails.
	dropped := make(chan time.Time, 1)
	go func() {
		for pause(probeCtx, 10*time.Millisecond) {
			for _, p := range probers {
				if _, failing := p.first(&p.failed, f.begin); failing {
					for _, o := range streams {
						o.drop()
					}
					dropped <- time.Now()
					return
				}
			}
		}
		dropped <- time.Time{}
	}()
	defer func() {
		stopProbes()
		f.dropped = <-dropped
	}()
	var err error
	if f.up, err = f.induce(ctx); err != nil {
		return err
	}
	// Wait until every server wrote and was ready since the store came
	// back, or the limit.
	limit := f.up.Add(recoveryLimit)
	for time.Now().Before(limit) && ctx.Err() == nil {
		done := true
		for _, p := range probers {
			_, w := p.first(&p.writes, f.up)
			_, r := p.first(&p.readies, f.up)
			done = done && w && r
		}
		if done || !pause(ctx, probeInterval) {
			break
		}
	}
	stopProbes()
	f.recovered = time.Now()
	for _, p := range probers {
		f.writes = append(f.writes, f.since(p.first(&p.writes, f.up)))
		f.ready = append(f.ready, f.since(p.first(&p.readies, f.up)))
		p.mu.Lock()
		for _, t := range p.failed {
			if t.After(f.begin) && !t.After(f.up) {
				f.failedWrites++
			}
		}
		p.mu.Unlock()
	}
	st.mu.Lock()
	for _, t := range st.unavailable {
		if t.After(f.begin) && !t.After(f.recovered) {
			f.unavailable++
		}
	}
	st.mu.Unlock()
	return nil
}

// since returns how long after the store came back t was, or -1 when ok
// is false (it never happened).
func (f *fault) since(t time.Time, ok bool) time.Duration {
	if !ok {
		return -1
	}
	return t.Sub(f.up)
}

// measure measures, once the workload is over, when the streams and the
// webhook receiver got an event again after the store's return, and how
// soon the ship operations the fault caught finished.
func (f *fault) measure(ctx context.Context, st *state, streams []*observer, recv *receiver) error {
	for _, o := range streams {
		f.streams = append(f.streams, f.since(o.firstAfter(f.up)))
	}
	f.webhook = f.since(recv.firstAfter(f.up))
	var ops []string
	st.mu.Lock()
	for _, t := range st.tasks {
		if t.shipOp != "" && t.shipAcked.After(f.begin.Add(-recoveryLimit)) && t.shipAcked.Before(f.up) {
			ops = append(ops, t.shipOp)
		}
	}
	st.mu.Unlock()
	// The ship operations accepted before the store came back: those that
	// finished after the fault began were caught by it.
	for _, op := range ops {
		finished, err := st.shipFinished(ctx, op, time.Now().Add(recoveryLimit))
		if err != nil {
			return err
		}
		if finished.After(f.begin) {
			f.caught++
			f.shipAfter = max(f.shipAfter, finished.Sub(f.up))
		}
	}
	return nil
}

// report returns the figures of a fault, a line per server and one for
// the fault.
func (f *fault) report(servers []*server) string {
	var b strings.Builder
	for i, srv := range servers {
		fmt.Fprintf(&b, "   %s: first write %s, ready %s, stream %s after the store's return\n",
			srv.name, secs(f.writes[i]), secs(f.ready[i]), secs(f.streams[i]))
	}
	dropped := "the streams were not dropped (no write failed)"
	if !f.dropped.IsZero() {
		dropped = fmt.Sprintf("the streams dropped %s after it began to fail, and reconnected with Last-Event-ID", secs(f.dropped.Sub(f.begin)))
	}
	ships := "no ship operation caught"
	if f.caught > 0 {
		ships = fmt.Sprintf("%d ship operations caught, the last finished %s after", f.caught, secs(f.shipAfter))
	}
	fmt.Fprintf(&b, "   store failing for %s (%d probe writes refused); %s; %d answers 503 store_unavailable; first webhook delivery %s after; %s\n",
		secs(f.up.Sub(f.begin)), f.failedWrites, dropped, f.unavailable, secs(f.webhook), ships)
	return b.String()
}

// secs formats a duration in seconds; a negative one is "never".
func secs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// checkFault records what a fault broke: a replica that did not write
// again or become ready within recoveryTarget of the store's return, a
// ship operation, a stream or the webhooks not going on within it, and a
// fault that failed no write (it tested nothing).
func (r *results) checkFault(f fault, servers []*server) {
	for i, srv := range servers {
		if f.writes[i] < 0 || f.writes[i] > recoveryTarget {
			r.fail("%s: %s wrote again %s after the store's return, over %s", f.name, srv.name, secs(f.writes[i]), recoveryTarget)
		}
		if f.ready[i] < 0 || f.ready[i] > recoveryTarget {
			r.fail("%s: %s was ready again %s after the store's return, over %s", f.name, srv.name, secs(f.ready[i]), recoveryTarget)
		}
	}
	if f.failedWrites == 0 {
		r.fail("%s: no probe write failed while the store was down: the fault tested nothing", f.name)
	}
	if f.caught > 0 && f.shipAfter > recoveryTarget {
		r.fail("%s: a ship operation caught by the fault finished %s after the store's return, over %s", f.name, secs(f.shipAfter), recoveryTarget)
	}
	// The probes write an event on every server as soon as it can: the
	// streams and the webhooks carry them on.
	for i, srv := range servers {
		if f.streams[i] < 0 || f.streams[i] > recoveryTarget {
			r.fail("%s: the stream of %s carried an event again %s after the store's return, over %s", f.name, srv.name, secs(f.streams[i]), recoveryTarget)
		}
	}
	if f.webhook < 0 || f.webhook > recoveryTarget {
		r.fail("%s: the webhook receiver got a delivery again %s after the store's return, over %s", f.name, secs(f.webhook), recoveryTarget)
	}
}

// recoveryFigures returns the recovery times over every fault and server.
func recoveryFigures(faults []fault, servers []*server) []string {
	var writes, ready []time.Duration
	for _, f := range faults {
		for i := range servers {
			writes = append(writes, max(f.writes[i], 0))
			ready = append(ready, max(f.ready[i], 0))
		}
	}
	return []string{
		fmt.Sprintf("store back → first successful write: %s", spread(writes)),
		fmt.Sprintf("store back → /readyz 200: %s", spread(ready)),
	}
}

// shipFinished waits until the ship operation op is terminal, until
// limit, and returns when it finished.
func (st *state) shipFinished(ctx context.Context, op string, limit time.Time) (time.Time, error) {
	ctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	for {
		a, err := st.call(ctx, "GET", "/ship-operations/"+op, nil, "")
		if err != nil {
			return time.Time{}, fmt.Errorf("ship operation %s not terminal %s after the store's return", op, recoveryLimit)
		}
		if s := a.data()["status"]; s == "succeeded" || s == "failed" {
			at, _ := a.data()["finishedAt"].(string)
			return time.Parse(time.RFC3339Nano, at)
		}
		if !pause(ctx, 50*time.Millisecond) {
			return time.Time{}, ctx.Err()
		}
	}
}

// pause waits d and reports whether ctx is still alive.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// downUp returns when the cluster accepted a connection and answered a
// query again, after it was seen down (a connection failed).
func (c *cluster) downUp(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if !c.answers(ctx) {
			return c.up(ctx)
		}
		pause(ctx, 10*time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("PostgreSQL was never seen down: %w", ctx.Err())
}

// prober writes through one server (POST /tasks) and asks it /readyz,
// each every probeInterval, recording when each succeeded.
type prober struct {
	srv    *server
	st     *state
	prefix string // of the identifiers of the tasks it creates

	mu      sync.Mutex
	n       int
	writes  []time.Time // successful writes
	failed  []time.Time // writes answered 503 store_unavailable
	readies []time.Time // /readyz answered 200
}

// run probes until ctx ends.
func (p *prober) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.every(ctx, p.write) }()
	go func() { defer wg.Done(); p.every(ctx, p.ready) }()
	wg.Wait()
}

func (p *prober) every(ctx context.Context, probe func(context.Context)) {
	for ctx.Err() == nil {
		probe(ctx)
		pause(ctx, probeInterval)
	}
}

// write creates a task through the server: an acknowledged write, checked
// with the others.
func (p *prober) write(ctx context.Context) {
	p.mu.Lock()
	p.n++
	t := &taskState{identifier: fmt.Sprintf("%s-%d", p.prefix, p.n), project: "probe"}
	p.mu.Unlock()
	body := fmt.Sprintf(`{"identifier":%q,"title":"Probe","links":{"issue":"https://issues.example.com/%s"},"context":{"project":"probe"}}`, t.identifier, t.identifier)
	a, err := p.st.once(ctx, p.srv, "POST", "/tasks", []byte(body), "")
	now := time.Now()
	switch {
	case err != nil && ctx.Err() == nil:
		p.st.mu.Lock()
		p.st.noAnswer = append(p.st.noAnswer, fmt.Sprintf("POST /tasks on %s: %v", p.srv.name, err))
		p.st.mu.Unlock()
	case err != nil:
	case a.status == 201:
		t.id, _ = a.data()["id"].(string)
		p.st.mu.Lock()
		p.st.tasks = append(p.st.tasks, t)
		p.st.mu.Unlock()
		p.mu.Lock()
		p.writes = append(p.writes, now)
		p.mu.Unlock()
	case a.storeUnavailable():
		p.mu.Lock()
		p.failed = append(p.failed, now)
		p.mu.Unlock()
	default:
		p.st.violation("POST /tasks (a probe) on %s: %d %v", p.srv.name, a.status, a.body)
	}
}

// ready asks the server's /healthz, without a key, which answers 200
// whatever the store does, and its /readyz: 200 ready, or 503 not_ready
// with Retry-After.
func (p *prober) ready(ctx context.Context) {
	req, _ := http.NewRequestWithContext(ctx, "GET", p.srv.base+"/healthz", nil)
	if resp, err := p.srv.client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			p.st.violation("GET /healthz on %s: %d, want 200 while the process serves", p.srv.name, resp.StatusCode)
		}
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", p.srv.base+"/readyz", nil)
	resp, err := p.srv.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			p.st.mu.Lock()
			p.st.noAnswer = append(p.st.noAnswer, fmt.Sprintf("GET /readyz on %s: %v", p.srv.name, err))
			p.st.mu.Unlock()
		}
		return
	}
	var h lifecycle.Health
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	now := time.Now()
	switch {
	case resp.StatusCode == 200 && err == nil && h.Status == "ready":
		p.mu.Lock()
		p.readies = append(p.readies, now)
		p.mu.Unlock()
	case resp.StatusCode == 503 && err == nil && h.Status == "not_ready" && resp.Header.Get("Retry-After") != "":
	default:
		p.st.violation("GET /readyz on %s: %d %+v (Retry-After %q); want 200 ready or 503 not_ready with Retry-After", p.srv.name, resp.StatusCode, h, resp.Header.Get("Retry-After"))
	}
}

// first returns the first of the times *ts after t.
func (p *prober) first(ts *[]time.Time, t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return firstAfter(*ts, t)
}
