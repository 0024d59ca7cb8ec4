package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
)

// params are the simulation's inputs (the flags).
type params struct {
	changes         int
	ciDuration      time.Duration
	ciSlots         int
	failureRate     float64
	flakeRate       float64
	conflictRate    float64
	arrivalsPerHour float64
	seed            uint64
	hotfixRate      float64
	// queue tunes the queue; its Depth is ciSlots.
	queue mergequeue.Config
}

// The agents' model: how an agent answers a change sent back for rework.
const (
	// rebaseTime is how long an agent takes to rebase a conflicting
	// change and ship it again; it always succeeds.
	rebaseTime = 10 * time.Minute
	// fixTime is how long it takes to fix a change whose checks failed
	// and ship it again; fixSuccess is the chance the fix works (else the
	// change is still broken, and fails again).
	fixTime    = 30 * time.Minute
	fixSuccess = 0.75
	// maxRework is how many rework rounds an agent tries before the
	// change waits for a person.
	maxRework = 3
	// buildTime is how long a candidate's commit takes to make.
	buildTime = 30 * time.Second
	// ciJitter spreads CI durations by up to this share either way.
	ciJitter = 0.1
	// cancelTime is how long a cancelled run holds its slot: CI stops
	// its jobs, which takes a while (the run still counts as a run).
	cancelTime = time.Minute
)

// jobs are the simulated CI's jobs. A broken change fails one of them,
// always the same; a flaky run fails one at random, which may be the
// same job as a broken change's.
var jobs = []string{"build", "lint", "unit", "integration", "e2e"}

// change is one simulated change and the truth about it.
type change struct {
	id       string
	broken   bool            // any tree that holds it fails CI
	job      string          // the job it fails when broken
	stale    bool            // it does not merge onto the base until rebased
	partners map[string]bool // changes it does not merge with, either way round
	hotfix   bool
	rework   int       // rework rounds so far
	enqueued time.Time // when it last entered the queue
	landed   bool
	person   bool // gave up: waits for a person
}

// result is what the simulation prints.
type result struct {
	landed, reworked, requeued, ejectedInnocent int
	runs, wasted, passedRuns, failedRuns        int
	hours                                       float64
	queueTimes                                  []time.Duration
	redMain                                     time.Duration
	landedNotTested                             int
	stats                                       mergequeue.Stats
	waitingPerson                               int
	landings                                    []time.Time // in order
	landedBy95                                  int
	slotTime                                    time.Duration // CI slot time used
	maxBusy                                     int           // most CI runs at once
	end                                         time.Time     // when the last change landed
	changes                                     int
	slots                                       int       // CI slots
	start                                       time.Time // when the simulation began
}

// timed is an event of the simulation, at a time.
type timed struct {
	at  time.Time
	seq int
	fn  func()
}

type timeline []*timed

func (t timeline) Len() int { return len(t) }
func (t timeline) Less(i, j int) bool {
	if !t[i].at.Equal(t[j].at) {
		return t[i].at.Before(t[j].at)
	}
	return t[i].seq < t[j].seq
}
func (t timeline) Swap(i, j int) { t[i], t[j] = t[j], t[i] }
func (t *timeline) Push(x any)   { *t = append(*t, x.(*timed)) }
func (t *timeline) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

// commit is a simulated commit: the changes its tree holds, each at the
// version (head) it was merged at.
type commit struct {
	changes map[string]string
}

// run is a CI run waiting for, or holding, a slot.
type run struct {
	candidate int
	sha       string
	cancelled bool
	done      bool      // it ended and freed its slot
	started   time.Time // when it took its slot
}

// sim is the simulated host, CI and agents around the real queue.
type sim struct {
	p     params
	rng   *rand.Rand
	now   time.Time
	start time.Time
	seq   int
	tl    timeline

	cfg     mergequeue.Config
	q       *mergequeue.State
	commits map[string]*commit
	base    string // the host's base branch: its commit
	nextSHA int
	changes map[string]*change
	order   []string // every change, in arrival order

	passed map[string]bool // commits a CI run passed
	// brokenHeads are the versions of changes that fail CI.
	brokenHeads map[string]bool
	busy        int    // CI slots in use
	waiting     []*run // runs waiting for a slot
	running     map[int]*run
	// cancelled are the candidates the queue dropped: a build of one
	// still under way is not made.
	cancelled map[int]bool

	trace      func(any) // when set, sees every event and action
	res        result
	lastLand   time.Time
	brokenBase time.Time // when the base last became broken, or zero
}

// simulate runs the simulation to its end.
func simulate(p params) result {
	s := newSim(p)
	s.run()
	return s.res
}

// newSim returns a simulation of p, ready to run.
func newSim(p params) *sim {
	s := &sim{
		p:           p,
		rng:         rand.New(rand.NewPCG(p.seed, p.seed^0x9e3779b97f4a7c15)),
		now:         time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		cfg:         p.queue,
		commits:     map[string]*commit{},
		changes:     map[string]*change{},
		running:     map[int]*run{},
		cancelled:   map[int]bool{},
		passed:      map[string]bool{},
		brokenHeads: map[string]bool{},
	}
	s.cfg.Depth = p.ciSlots
	s.start = s.now
	base := s.newCommit(map[string]string{})
	s.base = base
	s.q = mergequeue.New(base)
	s.arrivals()
	return s
}

// run runs the simulation to its end and fills in its result.
func (s *sim) run() {
	p := s.p
	for s.tl.Len() > 0 {
		ev := heap.Pop(&s.tl).(*timed)
		s.now = ev.at
		ev.fn()
	}
	// Throughput while the queue is loaded: the changes landed until 95 %
	// of those landed had, over that time. The last few are the
	// stragglers of rework rounds, which a queue cannot hurry.
	if n := len(s.res.landings); n > 0 {
		k := max(int(math.Ceil(0.95*float64(n))), 1)
		s.res.hours = s.res.landings[k-1].Sub(s.start).Hours()
		s.res.landedBy95 = k
	}
	s.res.stats = s.q.Stats
	s.res.changes = p.changes
	s.res.slots, s.res.start = p.ciSlots, s.start
	for _, c := range s.changes {
		if c.person {
			s.res.waitingPerson++
		}
	}
}

// at schedules fn at t.
func (s *sim) at(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.tl, &timed{at: t, seq: s.seq, fn: fn})
}

// arrivals schedules the changes' arrivals: a Poisson process of
// arrivalsPerHour, or all at once when it is 0. The shares of changes
// that break CI, conflict and are hotfixes are exact (rounded), drawn at
// random positions: a run at -failure-rate 0.05 has 5 % broken changes,
// so that a seed measures the queue, not a draw of more failures (with a
// chance per change, 1,000 changes at 0.05 held from 3.1 % to 7.1 %
// broken ones over 80 seeds, and CI runs per landed change followed).
func (s *sim) arrivals() {
	n := s.p.changes
	broken := s.share(n, s.p.failureRate, 0)
	stale := s.share(n, s.p.conflictRate/2, 0)
	linked := s.share(n, s.p.conflictRate/2, 1)
	hotfix := s.share(n, s.p.hotfixRate, 0)
	t := s.now
	for i := range n {
		if s.p.arrivalsPerHour > 0 {
			gap := s.rng.ExpFloat64() / s.p.arrivalsPerHour
			t = t.Add(time.Duration(gap * float64(time.Hour)))
		}
		c := &change{id: "c" + strconv.Itoa(i), broken: broken[i], job: jobs[s.rng.IntN(len(jobs))],
			stale: stale[i], hotfix: hotfix[i], partners: map[string]bool{}}
		if linked[i] {
			// It touches what a recent change touches: neither merges
			// onto a tree that holds the other.
			other := s.changes["c"+strconv.Itoa(max(0, i-1-s.rng.IntN(min(i, 20))))]
			c.partners[other.id], other.partners[c.id] = true, true
		}
		s.changes[c.id] = c
		s.order = append(s.order, c.id)
		s.at(t, func() { s.enqueue(c) })
	}
}

// share marks at random the given share of n changes (rounded), among
// those from the from-th on.
func (s *sim) share(n int, share float64, from int) []bool {
	marked := make([]bool, n)
	if n <= from {
		return marked
	}
	k := min(int(math.Round(share*float64(n))), n-from)
	for _, i := range s.rng.Perm(n - from)[:k] {
		marked[from+i] = true
	}
	return marked
}

// enqueue ships c into the queue.
func (s *sim) enqueue(c *change) {
	c.enqueued = s.now
	s.brokenHeads[head(c)] = c.broken
	pr := mergequeue.Normal
	if c.hotfix {
		pr = mergequeue.Hotfix
	}
	s.apply(mergequeue.Add{Entry: mergequeue.Entry{ID: c.id, Head: head(c), Priority: pr}})
}

// newCommit records a commit holding changes and returns its SHA.
func (s *sim) newCommit(changes map[string]string) string {
	s.nextSHA++
	sha := fmt.Sprintf("%040x", s.nextSHA)
	s.commits[sha] = &commit{changes: changes}
	return sha
}

// apply applies ev to the queue and carries out what it asks.
func (s *sim) apply(ev mergequeue.Event) {
	if s.trace != nil {
		s.trace(ev)
	}
	for _, a := range s.q.Apply(s.cfg, s.now, ev) {
		s.do(a)
	}
}

// do carries out one action of the queue.
func (s *sim) do(a mergequeue.Action) {
	if s.trace != nil {
		s.trace(a)
	}
	switch a := a.(type) {
	case mergequeue.Build:
		s.at(s.now.Add(buildTime), func() { s.build(a) })
	case mergequeue.Test:
		s.startRun(&run{candidate: a.Candidate, sha: a.SHA})
	case mergequeue.Cancel:
		s.cancelled[a.Candidate] = true
		if r := s.running[a.Candidate]; r != nil && !r.cancelled {
			r.cancelled = true
			s.at(s.now.Add(cancelTime), func() { s.finishRun(r) })
		}
		for _, r := range s.waiting {
			if r.candidate == a.Candidate {
				r.cancelled = true
			}
		}
	case mergequeue.Land:
		s.at(s.now, func() { s.land(a) })
	case mergequeue.Rework:
		s.rework(a)
	case mergequeue.Done:
		c := s.changes[a.Entry]
		if s.commits[s.base].changes[a.Entry] != head(c) || a.SHA != s.base {
			panic(fmt.Sprintf("%s done in %s, which is not the base or does not hold it", a.Entry, a.SHA))
		}
		c.landed = true
		s.res.landed++
		s.res.queueTimes = append(s.res.queueTimes, s.now.Sub(c.enqueued))
		s.res.landings = append(s.res.landings, s.now)
		s.res.end = s.now
		s.lastLand = s.now
	}
}

// build makes a candidate's commit, or finds the first head that does
// not merge.
func (s *sim) build(a mergequeue.Build) {
	if s.cancelled[a.Candidate] {
		return
	}
	parent := s.commits[a.Parent]
	tree := make(map[string]string, len(parent.changes)+len(a.Heads))
	for id, h := range parent.changes {
		tree[id] = h
	}
	base := s.commits[s.base]
	for _, h := range a.Heads {
		c := s.changes[h.Entry]
		if h.SHA != head(c) {
			panic(fmt.Sprintf("build of candidate %d merges %s at %s, not at its head %s", a.Candidate, h.Entry, h.SHA, head(c)))
		}
		if c.stale || conflicts(c, tree) {
			onBase := c.stale || conflicts(c, base.changes)
			s.apply(mergequeue.Conflict{Candidate: a.Candidate, Entry: h.Entry, Base: onBase})
			return
		}
		tree[h.Entry] = h.SHA
	}
	s.apply(mergequeue.Built{Candidate: a.Candidate, SHA: s.newCommit(tree)})
}

// conflicts reports whether c does not merge onto a tree that holds
// changes.
func conflicts(c *change, tree map[string]string) bool {
	for id := range c.partners {
		if tree[id] != "" {
			return true
		}
	}
	return false
}

// head returns the commit of c's latest version.
func head(c *change) string {
	return c.id + "@" + strconv.Itoa(c.rework)
}

// startRun runs r when a slot is free, else queues it.
func (s *sim) startRun(r *run) {
	if s.busy >= s.p.ciSlots {
		s.waiting = append(s.waiting, r)
		return
	}
	s.res.runs++
	s.busy++
	s.res.maxBusy = max(s.res.maxBusy, s.busy)
	r.started = s.now
	s.running[r.candidate] = r
	d := float64(s.p.ciDuration) * (1 + ciJitter*(2*s.rng.Float64()-1))
	s.at(s.now.Add(time.Duration(d)), func() { s.finishRun(r) })
}

// finishRun ends r, frees its slot for the next run waiting, and reports
// its result unless it was cancelled.
func (s *sim) finishRun(r *run) {
	if r.done {
		return // cancelled, and ended then
	}
	r.done = true
	s.busy--
	s.res.slotTime += s.now.Sub(r.started)
	delete(s.running, r.candidate)
	for len(s.waiting) > 0 && s.busy < s.p.ciSlots {
		next := s.waiting[0]
		s.waiting = s.waiting[1:]
		if next.cancelled {
			continue
		}
		s.startRun(next)
	}
	if r.cancelled {
		s.res.wasted++
		return
	}
	failed := map[string]bool{}
	for id, h := range s.commits[r.sha].changes {
		if s.brokenHeads[h] {
			failed[s.changes[id].job] = true
		}
	}
	if s.rng.Float64() < s.p.flakeRate {
		failed[jobs[s.rng.IntN(len(jobs))]] = true
	}
	var failedJobs []string
	for _, j := range jobs {
		if failed[j] {
			failedJobs = append(failedJobs, j)
		}
	}
	passed := len(failedJobs) == 0
	if passed {
		s.res.passedRuns++
		s.passed[r.sha] = true
	} else {
		s.res.failedRuns++
	}
	s.apply(mergequeue.Tested{Candidate: r.candidate, Passed: passed, FailedJobs: failedJobs})
}

// land moves the base to a candidate's commit if it is still at From,
// and checks that the landed tree is the tested one.
func (s *sim) land(a mergequeue.Land) {
	if s.base != a.From {
		s.apply(mergequeue.BaseMoved{SHA: s.base})
		return
	}
	// The host moves the base to a.To: what lands is a.To's tree, which
	// must be a tree CI passed, and must keep what the base held.
	landed, old := s.commits[a.To], s.commits[s.base]
	lost := false
	for id, h := range old.changes {
		lost = lost || landed.changes[id] != h
	}
	if landed == nil || !s.passed[a.To] || lost {
		s.res.landedNotTested++
	}
	broken := false
	for _, h := range landed.changes {
		broken = broken || s.brokenHeads[h]
	}
	switch {
	case broken && s.brokenBase.IsZero():
		s.brokenBase = s.now
	case !broken && !s.brokenBase.IsZero():
		s.res.redMain += s.now.Sub(s.brokenBase)
		s.brokenBase = time.Time{}
	}
	s.base = a.To
	s.apply(mergequeue.Landed{Candidate: a.Candidate})
}

// rework sends a change back to its agent, who fixes it and ships it
// again, or gives up after maxRework rounds.
func (s *sim) rework(a mergequeue.Rework) {
	c := s.changes[a.Entry]
	s.res.reworked++
	if a.Reason == mergequeue.ReworkChecksFailed && !c.broken {
		s.res.ejectedInnocent++
	}
	c.rework++
	if c.rework > maxRework {
		c.person = true
		return
	}
	s.res.requeued++
	wait := rebaseTime
	if a.Reason == mergequeue.ReworkConflict {
		c.stale = false
		for id := range c.partners {
			if s.changes[id].landed {
				// Rebased onto it.
				delete(c.partners, id)
				delete(s.changes[id].partners, c.id)
			}
		}
	} else {
		wait = fixTime
		if c.broken && s.rng.Float64() < fixSuccess {
			c.broken = false
		}
	}
	s.at(s.now.Add(wait), func() { s.enqueue(c) })
}

// percentile returns the p-th percentile of ds (0 < p ≤ 1).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
