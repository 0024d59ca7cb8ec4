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
//	go run ./internal/cmd/crashharness                 # 10 kills, as CI runs it
//	go run ./internal/cmd/crashharness -kills 100      # the long run of RELIABILITY.md
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
	kills    int
	workers  int
	seed     uint64
	deadline time.Duration
	demo     string
	keep     bool
}

func main() {
	var o options
	flag.IntVar(&o.kills, "kills", 10, "how many times to SIGKILL the server")
	flag.IntVar(&o.workers, "workers", 4, "concurrent clients taking tasks through their lifecycle")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed; 0 picks one (printed)")
	flag.DurationVar(&o.deadline, "deadline", 170*time.Second, "the longest the final checks wait for ships and deliveries to settle")
	flag.StringVar(&o.demo, "demo", "", "the demo binary; default: built from ./examples/demo")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory")
	flag.Parse()
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "crashharness:", err)
		os.Exit(1)
	}
}

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
	if o.demo == "" {
		o.demo = filepath.Join(dir, "demo")
		build := exec.Command("go", "build", "-o", o.demo, "./examples/demo")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the demo (run from the repository root): %w", err)
		}
	}
	rnd := rand.New(rand.NewPCG(o.seed, o.seed>>1|1))
	fmt.Printf("crash harness: %d kills, %d workers, seed %d\n", o.kills, o.workers, o.seed)

	recv, err := newReceiver(dir)
	if err != nil {
		return err
	}
	defer recv.close()
	srv, err := newServer(o.demo, filepath.Join(dir, "data"), recv, log)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := srv.start(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs := newObserver(srv)
	go obs.run(ctx)
	st := newState(srv, o.workers)
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

	res := check(ctx, o, srv, st, obs, recv, dir)
	res.workload = workload
	res.print(srv, st)
	if len(res.violations) > 0 {
		return fmt.Errorf("%d invariants failed", len(res.violations))
	}
	fmt.Println("crash harness: every invariant held")
	return nil
}
