// Command queuesim runs the merge queue's own code (internal/mergequeue)
// against a simulated code host, CI and agents, on a virtual clock, and
// prints what it came to, one "key: value" per line:
//
//	go run ./internal/cmd/queuesim -changes 1000 -ci-duration 20m -ci-slots 8 -failure-rate 0.05
//
// Changes arrive as a Poisson process (-arrivals-per-hour; 0: all at
// once). A share -failure-rate of the changes is broken (exactly, drawn
// at random): any tree holding that version of such a change fails CI,
// on one job of five (build, lint, unit, integration, e2e), always the
// same for the change. A CI run fails for nothing with chance
// -flake-rate, on a job drawn at random (which may be a broken change's
// job too). A share -conflict-rate of the changes conflicts: half of
// those do not merge onto the base until rebased, the other half with a
// recent change (either way round); a share -hotfix-rate ships as
// hotfixes. CI runs last
// -ci-duration, ±10 %, at most -ci-slots at once (a run waits for a free
// slot; a cancelled run frees its slot a minute later, and still counts as
// a run); the queue keeps as many candidates under test. Trees hold the
// versions of changes merged into them; a landing is checked against the
// host's own base and the commits CI passed. The simulation runs the real
// internal/mergequeue code on a virtual clock, and is deterministic for a
// -seed.
//
// Agents answer rework as coding agents do: a conflict is rebased and
// shipped again after 10 minutes; failing checks are fixed after 30
// minutes, and the fix works three times in four (else the change fails
// again); after three rounds a change waits for a person.
//
// The figures:
//
//	landed_per_hour      changes landed per hour while the queue is loaded: those landed until 95 % of them had, over that time
//	ci_runs_per_landed   CI runs started (retries and runs of dropped candidates included) per change landed
//	queue_time_p50/p95   time from a change's last entry into the queue to its landing
//	red_main_minutes     minutes the base branch held a broken change
//	landed_not_tested    landings of a commit CI did not pass, or whose tree lost a change the base held
//	flaky_ejections      share of the changes shipped that were sent back for failing checks without being broken
//	reworked_requeued    share of changes sent back that their agent shipped again, with no person
//	ci_slot_use          share of the CI slots' time used, until the last landing
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	var p params
	flag.IntVar(&p.changes, "changes", 1000, "changes to ship")
	flag.DurationVar(&p.ciDuration, "ci-duration", 20*time.Minute, "duration of a CI run (T)")
	flag.IntVar(&p.ciSlots, "ci-slots", 8, "CI runs at once")
	flag.Float64Var(&p.failureRate, "failure-rate", 0.05, "share of changes that break CI (p)")
	flag.Float64Var(&p.flakeRate, "flake-rate", 0.05, "chance that a CI run fails for nothing")
	flag.Float64Var(&p.conflictRate, "conflict-rate", 0.02, "share of changes that conflict")
	flag.Float64Var(&p.arrivalsPerHour, "arrivals-per-hour", 0, "mean arrivals per hour; 0: every change at once")
	flag.Uint64Var(&p.seed, "seed", 1, "seed of the simulation")
	flag.Float64Var(&p.hotfixRate, "hotfix-rate", 0.02, "share of changes shipped as hotfixes")
	flag.IntVar(&p.queue.Speculation, "speculation", 0, "candidates of the landing chain under test at once; 0: the queue's default")
	flag.IntVar(&p.queue.MaxBatch, "max-batch", 0, "entries of a candidate at most; 0: the queue's default")
	flag.Float64Var(&p.queue.TargetPass, "target-pass", 0, "chance that a batch passes the batch size aims at; 0: the queue's default")
	flag.IntVar(&p.queue.Alternatives, "alternatives", 0, "alternatives of a round at most; 0: the queue's default; -1: none")
	flag.Parse()
	if err := check(p); err != nil {
		fmt.Fprintln(os.Stderr, "queuesim:", err)
		os.Exit(2)
	}
	print(os.Stdout, simulate(p))
}

// check refuses parameters the simulation cannot run.
func check(p params) error {
	switch {
	case p.changes <= 0:
		return fmt.Errorf("-changes must be positive")
	case p.ciDuration <= 0:
		return fmt.Errorf("-ci-duration must be positive")
	case p.ciSlots <= 0:
		return fmt.Errorf("-ci-slots must be positive")
	case p.failureRate < 0 || p.failureRate >= 1, p.flakeRate < 0 || p.flakeRate >= 1, p.conflictRate < 0 || p.conflictRate > 1,
		p.hotfixRate < 0 || p.hotfixRate > 1:
		return fmt.Errorf("rates must be within [0, 1), -conflict-rate and -hotfix-rate within [0, 1]")
	case p.arrivalsPerHour < 0:
		return fmt.Errorf("-arrivals-per-hour must not be negative")
	}
	return nil
}

// print writes the figures of r.
func print(w io.Writer, r result) {
	perHour, runsPerLanded, flaky, requeued := 0.0, 0.0, 0.0, 0.0
	if r.hours > 0 {
		perHour = float64(r.landedBy95) / r.hours
	}
	if r.landed > 0 {
		runsPerLanded = float64(r.runs) / float64(r.landed)
	}
	if r.changes > 0 {
		flaky = float64(r.ejectedInnocent) / float64(r.changes)
	}
	use := 0.0
	if span := r.end.Sub(r.start); span > 0 {
		use = r.slotTime.Seconds() / (span.Seconds() * float64(r.slots))
	}
	if r.reworked > 0 {
		requeued = float64(r.requeued) / float64(r.reworked)
	}
	fmt.Fprintf(w, "landed: %d\n", r.landed)
	fmt.Fprintf(w, "landed_per_hour: %.1f\n", perHour)
	fmt.Fprintf(w, "ci_runs_per_landed: %.2f\n", runsPerLanded)
	fmt.Fprintf(w, "queue_time_p50: %s\n", percentile(r.queueTimes, 0.5).Round(time.Second))
	fmt.Fprintf(w, "queue_time_p95: %s\n", percentile(r.queueTimes, 0.95).Round(time.Second))
	fmt.Fprintf(w, "red_main_minutes: %.0f\n", r.redMain.Minutes())
	fmt.Fprintf(w, "landed_not_tested: %d\n", r.landedNotTested)
	fmt.Fprintf(w, "flaky_ejections: %.4f\n", flaky)
	fmt.Fprintf(w, "reworked_requeued: %.2f\n", requeued)
	fmt.Fprintf(w, "waiting_for_a_person: %d\n", r.waitingPerson)
	fmt.Fprintf(w, "max_bisection_depth: %d\n", r.stats.MaxBisection)
	fmt.Fprintf(w, "ci_slot_use: %.2f\n", use)
}
