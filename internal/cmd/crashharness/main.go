// Command crashharness runs the demo server (examples/demo, on SQLite and
// local git) under a mixed workload, kills it with SIGKILL again and
// again, restarts it at once, and then checks that nothing was lost:
//
//   - every acknowledged mutation is visible (tasks created, submissions,
//     ship operations);
//   - every accepted ship is terminal and succeeded, and its task is merged
//     exactly once (one merge commit per task in the git repository);
//   - the event stream, followed across every restart with Last-Event-ID,
//     saw every stored event once, in sequence, without a gap or a
//     duplicate;
//   - the HTTPS webhook receiver got every event at least once, each with a
//     valid signature;
//   - no answer was a 5xx (connections refused while the server is down
//     are not answers);
//   - the webhook secret is not stored in the clear.
//
// Kills come at random moments and at targeted ones: right after a submit
// or a ship is acknowledged. After a targeted kill it measures how long a
// retried submit takes to replay its answer, and how long the queued ship
// takes to complete, from the kill.
//
// With -merge-queue the demo ships through the lifecycle's own merge queue
// (its -merge-queue, with a candidate check that takes -queue-check and
// logs every candidate it passed, synced, in a tested log), and kills
// come also while a candidate is under test (seen on GET /merge-queues).
// The one merge commit per task then becomes: each task's change is on
// main's first-parent history exactly once (the queue's merge commits,
// Lifecycle-Queue-Pull trailers, at most once each); every accepted ship
// succeeded with the candidate that carried its change; and every commit
// main moved to is in the tested log, and is where a task.merge_queue
// event says entries landed. It measures how long the ships of a
// candidate killed under test take to complete, from the kill.
//
// With -faults store it leaves the processes alone and fails their store
// instead (see faults.go): a private PostgreSQL cluster, shared by three
// demo replicas, is restarted under load three times; then a single demo's
// SQLite disk (a small tmpfs) is filled up twice under load. It checks the
// same invariants, with every request answered (503 store_unavailable with
// Retry-After while the store fails, no other 5xx, none past the client's
// timeout), and measures how soon each replica writes again and is ready
// once the store is back: within 5 s, or the run fails.
//
//	go run ./internal/cmd/crashharness                 # 10 kills, as CI runs it
//	go run ./internal/cmd/crashharness -kills 100      # the long run of RELIABILITY.md
//	go run ./internal/cmd/crashharness -faults store   # store faults, as CI runs it too
//	go run ./internal/cmd/crashharness -kills 10 -merge-queue   # kills while the merge queue tests candidates
//
// Everything runs on 127.0.0.1 in a temporary directory, bounded in time
// (-deadline); the exit status is 1 when an invariant fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// options are the harness's flags.
type options struct {
	faults   string
	kills    int
	workers  int
	seed     uint64
	deadline time.Duration
	demo     string
	keep     bool
	// mergeQueue runs the kill mode with the demo's merge queue on, its
	// candidate check taking queueCheck.
	mergeQueue bool
	queueCheck time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.faults, "faults", "kill", "what fails: kill (SIGKILL the demo) or store (restart its PostgreSQL, fill its SQLite disk)")
	flag.IntVar(&o.kills, "kills", 10, "how many times to SIGKILL the server")
	flag.IntVar(&o.workers, "workers", 4, "concurrent clients taking tasks through their lifecycle")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed; 0 picks one (printed)")
	flag.DurationVar(&o.deadline, "deadline", 170*time.Second, "the longest the final checks wait for ships and deliveries to settle (with -faults store, at most 60s a part)")
	flag.StringVar(&o.demo, "demo", "", "the demo binary; default: built from ./examples/demo")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory")
	flag.BoolVar(&o.mergeQueue, "merge-queue", false, "with -faults kill: ship through the demo's merge queue, and kill also while candidates are under test")
	flag.DurationVar(&o.queueCheck, "queue-check", 1500*time.Millisecond, "with -merge-queue: how long the demo's check of a candidate takes")
	flag.Parse()
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	var err error
	switch o.faults {
	case "kill":
		err = run(o)
	case "store":
		err = runStoreFaults(o)
	default:
		err = fmt.Errorf("-faults %q: use kill or store", o.faults)
	}
	if o.mergeQueue && o.faults != "kill" {
		err = fmt.Errorf("-merge-queue goes with -faults kill only")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashharness:", err)
		os.Exit(1)
	}
}

// run runs the kill mode.
func run(o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
	rnd := rand.New(rand.NewPCG(o.seed, o.seed>>1|1))
	var queue *queueRun
	if o.mergeQueue {
		queue = newQueueRun(dir, o.queueCheck)
		fmt.Printf("crash harness: %d kills, %d workers, seed %d; merge queue on, candidate check %s, poll %s\n", o.kills, o.workers, o.seed, queue.check, queue.poll)
	} else {
		fmt.Printf("crash harness: %d kills, %d workers, seed %d\n", o.kills, o.workers, o.seed)
	}

	recv, err := newReceiver(dir)
	if err != nil {
		return err
	}
	defer recv.close()
	srv, err := newServer("demo", o.demo, filepath.Join(dir, "data"), recv, log)
	if err != nil {
		return err
	}
	defer srv.stop()
	if queue != nil {
		srv.args = queue.demoArgs()
	}
	if err := srv.start(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newState(o.workers, srv)
	if queue != nil {
		st.shipsInFlight = queueShipsInFlight
	}
	obs := newObserver(srv, st)
	go obs.run(ctx)
	workDone := make(chan struct{})
	workCtx, stopWork := context.WithCancel(ctx)
	go func() { st.runWorkers(workCtx, rnd.Uint64()); close(workDone) }()

	started := time.Now()
	for k := 0; k < o.kills; k++ {
		time.Sleep(time.Duration(300+rnd.IntN(1700)) * time.Millisecond)
		// The first kills are targeted, so that every run measures each
		// kind; then a kind at random (with the merge queue, kills while
		// a candidate is under test are as likely as the others together).
		kinds := []string{"random", "submit", "ship"}
		targeted := kinds[1:]
		if queue != nil {
			kinds = append(kinds, "testing", "testing", "testing")
			targeted = kinds[1:4]
		}
		kind := kinds[rnd.IntN(len(kinds))]
		if k < len(targeted) {
			kind = targeted[k]
		}
		var underTest []string // the tasks of a candidate killed under test
		switch kind {
		case "random":
			srv.kill("random")
		case "testing":
			underTest = queue.killWhileTesting(st, rnd)
		default:
			st.killAfterNext(kind)
		}
		if err := srv.restart(); err != nil {
			stopWork()
			return err
		}
		if kind == "testing" {
			queue.followShips(st, underTest, srv.lastKill())
			queue.snapshotNow(st, "after the restart")
		}
	}
	time.Sleep(500 * time.Millisecond) // the last restart serves a little
	stopWork()
	<-workDone
	workload := time.Since(started)

	tg := sqliteTarget(srv)
	tg.queue = queue
	res := check(ctx, o.deadline, tg, st, []*observer{obs}, recv)
	res.workload = workload
	res.print(tg, st, killFigures(srv, st))
	if len(res.violations) > 0 {
		return fmt.Errorf("%d invariants failed", len(res.violations))
	}
	fmt.Println("crash harness: every invariant held")
	return nil
}

// buildDemo returns bin, or when it is empty the demo built from
// ./examples/demo into dir.
func buildDemo(bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", bin, "./examples/demo")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the demo (run from the repository root): %w", err)
	}
	return bin, nil
}
