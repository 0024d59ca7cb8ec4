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
	fmt.Printf("crash harness: %d kills, %d workers, seed %d\n", o.kills, o.workers, o.seed)

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
	if err := srv.start(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newState(o.workers, srv)
	obs := newObserver(srv, st)
	go obs.run(ctx)
	workDone := make(chan struct{})
	workCtx, stopWork := context.WithCancel(ctx)
	go func() { st.runWorkers(workCtx, rnd.Uint64()); close(workDone) }()

	started := time.Now()
	for k := 0; k < o.kills; k++ {
		time.Sleep(time.Duration(300+rnd.IntN(1700)) * time.Millisecond)
		// The first two kills are targeted, so that every run measures both;
		// then a third of them each.
		kind := []string{"random", "submit", "ship"}[rnd.IntN(3)]
		if k < 2 {
			kind = []string{"submit", "ship"}[k]
		}
		if kind == "random" {
			srv.kill("random")
		} else {
			st.killAfterNext(kind)
		}
		if err := srv.restart(); err != nil {
			stopWork()
			return err
		}
	}
	time.Sleep(500 * time.Millisecond) // the last restart serves a little
	stopWork()
	<-workDone
	workload := time.Since(started)

	tg := sqliteTarget(srv)
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
