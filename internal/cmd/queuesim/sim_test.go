package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
)

// defaults are the flags' defaults.
func defaults() params {
	return params{changes: 300, ciDuration: 20 * time.Minute, ciSlots: 8, failureRate: 0.05, flakeRate: 0.05,
		conflictRate: 0.02, arrivalsPerHour: 30, seed: 1, hotfixRate: 0.02}
}

// The queue's invariants hold over many seeds and settings: main is never
// red, every landing is a commit CI passed that keeps what the base held,
// CI never runs more than its slots, and every change lands or is left
// with a person.
func TestInvariants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  func(*params)
	}{
		{"defaults", func(*params) {}},
		{"all at once", func(p *params) { p.arrivalsPerHour = 0 }},
		{"loaded", func(p *params) { p.arrivalsPerHour = 60 }},
		{"failing", func(p *params) { p.failureRate = 0.15 }},
		{"flaky", func(p *params) { p.flakeRate = 0.2 }},
		{"conflicting", func(p *params) { p.conflictRate = 0.3 }},
		{"one slot", func(p *params) { p.ciSlots = 1; p.arrivalsPerHour = 2 }},
		{"hotfixes", func(p *params) { p.hotfixRate = 0.5 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 4; seed++ {
				p := defaults()
				c.set(&p)
				p.seed = seed
				r := simulate(p)
				if r.redMain != 0 || r.landedNotTested != 0 {
					t.Errorf("seed %d: red main %s, landed not tested %d", seed, r.redMain, r.landedNotTested)
				}
				if r.maxBusy > p.ciSlots {
					t.Errorf("seed %d: %d runs at once on %d slots", seed, r.maxBusy, p.ciSlots)
				}
				if r.landed+r.waitingPerson != p.changes {
					t.Errorf("seed %d: %d landed and %d wait for a person, of %d changes", seed, r.landed, r.waitingPerson, p.changes)
				}
			}
		})
	}
}

// The landing check is not a tautology: a landing of a commit CI did not
// pass, or of one that drops a change the base holds, is counted.
func TestLandingCheck(t *testing.T) {
	t.Parallel()
	s := newSim(defaults())
	untested := s.newCommit(map[string]string{"c0": "c0@0"})
	s.land(mergequeue.Land{Candidate: 99, From: s.base, To: untested})
	if s.res.landedNotTested != 1 {
		t.Fatalf("landing an untested commit counted %d times, want 1", s.res.landedNotTested)
	}
	lost := s.newCommit(map[string]string{})
	s.passed[lost] = true
	s.land(mergequeue.Land{Candidate: 99, From: s.base, To: lost})
	if s.res.landedNotTested != 2 {
		t.Fatalf("landing a commit that drops c0 counted %d, want 2", s.res.landedNotTested)
	}
	// A landing from a base the host is no longer at does not move it.
	base := s.base
	s.land(mergequeue.Land{Candidate: 99, From: "elsewhere", To: untested})
	if s.base != base {
		t.Fatalf("landing from a stale base moved the base to %s", s.base)
	}
}

// CI runs take a slot each for about T, and no more run at once than
// there are slots: with one slot, runs follow one another.
func TestSlotsAndDuration(t *testing.T) {
	t.Parallel()
	p := defaults()
	p.changes, p.ciSlots, p.arrivalsPerHour, p.failureRate, p.flakeRate, p.conflictRate = 40, 2, 0, 0, 0, 0
	s := newSim(p)
	s.run()
	if s.res.maxBusy != 2 {
		t.Fatalf("%d runs at once, want 2 (the slots)", s.res.maxBusy)
	}
	// Each run that ended held its slot for T ± 10 %, a cancelled one
	// for cancelTime.
	if lo := time.Duration(float64(s.res.runs-s.res.wasted)*0.9*float64(p.ciDuration)) + time.Duration(s.res.wasted)*cancelTime; s.res.slotTime < lo {
		t.Fatalf("runs held slots for %s, want at least %s", s.res.slotTime, lo)
	}
	if s.res.end.Sub(s.res.start) < time.Duration(s.res.runs-s.res.wasted)*p.ciDuration*9/10/2 {
		t.Fatalf("%d runs on 2 slots ended within %s", s.res.runs, s.res.end.Sub(s.res.start))
	}
}

// Flaky runs fail at about -flake-rate when no change is broken, on jobs
// drawn at random.
func TestFlakes(t *testing.T) {
	t.Parallel()
	p := defaults()
	p.failureRate, p.conflictRate, p.flakeRate, p.changes = 0, 0, 0.2, 1000
	jobs := map[string]bool{}
	s := newSim(p)
	s.trace = func(x any) {
		if ev, ok := x.(mergequeue.Tested); ok {
			for _, j := range ev.FailedJobs {
				jobs[j] = true
			}
		}
	}
	s.run()
	share := float64(s.res.failedRuns) / float64(s.res.failedRuns+s.res.passedRuns)
	if share < 0.15 || share > 0.25 {
		t.Fatalf("%.3f of runs failed at -flake-rate 0.2", share)
	}
	if len(jobs) < 4 {
		t.Fatalf("flakes failed only jobs %v", jobs)
	}
}

// A broken change fails every run of a tree that holds it, always on its
// own job; once its agent fixed it, its new version passes.
func TestBrokenChanges(t *testing.T) {
	t.Parallel()
	p := defaults()
	p.flakeRate, p.conflictRate, p.failureRate = 0, 0, 0.2
	s := newSim(p)
	shas := map[int]string{}
	s.trace = func(x any) {
		switch x := x.(type) {
		case mergequeue.Built:
			shas[x.Candidate] = x.SHA
		case mergequeue.Tested:
			want := map[string]bool{}
			for id, h := range s.commits[shas[x.Candidate]].changes {
				if s.brokenHeads[h] {
					want[s.changes[id].job] = true
				}
			}
			if len(want) != len(x.FailedJobs) {
				t.Errorf("candidate %d failed %v; its broken changes fail %v", x.Candidate, x.FailedJobs, want)
			}
			for _, j := range x.FailedJobs {
				if !want[j] {
					t.Errorf("candidate %d failed %v; its broken changes fail %v", x.Candidate, x.FailedJobs, want)
				}
			}
		case mergequeue.Rework:
			if x.Reason == mergequeue.ReworkChecksFailed && len(x.Jobs) == 0 {
				t.Errorf("%s sent back with no failed job", x.Entry)
			}
		}
	}
	s.run()
	if s.res.reworked == 0 || s.res.requeued == 0 {
		t.Fatalf("reworked %d, requeued %d: broken changes were not sent back and shipped again", s.res.reworked, s.res.requeued)
	}
}

// Changes sent back come back after the agent's delay: 10 minutes for a
// conflict, 30 for failed checks.
func TestReworkDelay(t *testing.T) {
	t.Parallel()
	p := defaults()
	p.conflictRate, p.failureRate = 0.2, 0.1
	s := newSim(p)
	sent := map[string]time.Time{}
	why := map[string]string{}
	seen := map[string]int{}
	s.trace = func(x any) {
		switch x := x.(type) {
		case mergequeue.Rework:
			sent[x.Entry], why[x.Entry] = s.now, x.Reason
		case mergequeue.Add:
			if at, ok := sent[x.Entry.ID]; ok {
				want := rebaseTime
				if why[x.Entry.ID] == mergequeue.ReworkChecksFailed {
					want = fixTime
				}
				if got := s.now.Sub(at); got != want {
					t.Errorf("%s came back after %s, want %s", x.Entry.ID, got, want)
				}
				seen[why[x.Entry.ID]]++
				delete(sent, x.Entry.ID)
			}
		}
	}
	s.run()
	if seen[mergequeue.ReworkConflict] == 0 || seen[mergequeue.ReworkChecksFailed] == 0 {
		t.Fatalf("came back: %v", seen)
	}
}

// The shares the flags give are exact, at positions that change with the
// seed: a run at -failure-rate 0.05 measures the queue on 5 % broken
// changes, not on a draw of more or fewer.
func TestShares(t *testing.T) {
	t.Parallel()
	count := func(s *sim) (broken, stale, linked, hotfix int) {
		for _, c := range s.changes {
			if c.broken {
				broken++
			}
			if c.stale {
				stale++
			}
			if c.hotfix {
				hotfix++
			}
			linked += len(c.partners)
		}
		return broken, stale, linked, hotfix
	}
	var first []string
	for seed := uint64(1); seed <= 3; seed++ {
		p := defaults()
		p.changes, p.seed, p.failureRate, p.conflictRate, p.hotfixRate = 1000, seed, 0.05, 0.04, 0.03
		s := newSim(p)
		broken, stale, linked, hotfix := count(s)
		// A linked change has a partner, which has it: two marks a link,
		// fewer when two links share a change.
		if broken != 50 || stale != 20 || hotfix != 30 || linked < 30 || linked > 40 {
			t.Errorf("seed %d: %d broken, %d stale, %d partner marks, %d hotfixes of 1000; want 50, 20, 30–40, 30", seed, broken, stale, linked, hotfix)
		}
		var ids []string
		for _, id := range s.order {
			if s.changes[id].broken {
				ids = append(ids, id)
			}
		}
		if seed == 1 {
			first = ids
		} else if slices.Equal(ids, first) {
			t.Errorf("seeds 1 and %d break the same changes", seed)
		}
	}
}

// The same seed gives the same figures.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	var a, b strings.Builder
	print(&a, simulate(defaults()))
	print(&b, simulate(defaults()))
	if a.String() != b.String() {
		t.Fatalf("two runs of one seed differ:\n%s\n%s", a.String(), b.String())
	}
}

// The figures the queue is held to, at -changes 1000 with the default T
// and slots, over three seeds (BENCHMARKS.md gives the ranges).
func TestTargets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the simulation at full size")
	}
	for seed := uint64(1); seed <= 3; seed++ {
		p := defaults()
		p.changes, p.seed, p.arrivalsPerHour = 1000, seed, 60
		r := simulate(p)
		perHour := float64(r.landedBy95) / r.hours
		if perHour < 25 {
			t.Errorf("seed %d: %.1f landed per hour at failure rate 0.05, want ≥ 25", seed, perHour)
		}
		if f := float64(r.ejectedInnocent) / float64(r.changes); f > 0.01 {
			t.Errorf("seed %d: %.4f flaky ejections, want ≤ 0.01", seed, f)
		}
		if runs := float64(r.runs) / float64(r.landed); runs > 0.6 {
			t.Errorf("seed %d: %.3f CI runs per landed change at failure rate 0.05, want ≤ 0.6", seed, runs)
		}
		if q := float64(r.requeued) / float64(r.reworked); q < 0.6 {
			t.Errorf("seed %d: %.2f reworked requeued, want ≥ 0.6", seed, q)
		}
		p.failureRate = 0.15
		r = simulate(p)
		if perHour := float64(r.landedBy95) / r.hours; perHour < 12 {
			t.Errorf("seed %d: %.1f landed per hour at failure rate 0.15, want ≥ 12", seed, perHour)
		}
	}
}
