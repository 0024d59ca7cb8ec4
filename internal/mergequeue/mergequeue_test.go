package mergequeue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// check returns what is wrong with s, or nil: the links between entries,
// candidates and groups that Apply keeps.
func (s *State) check() error {
	ids := map[int]bool{}
	for i, c := range s.Candidates {
		if ids[c.ID] {
			return fmt.Errorf("candidate %d twice", c.ID)
		}
		if c.Parent != 0 && !ids[c.Parent] {
			return fmt.Errorf("candidate %d (at %d) built on %d, which is not before it", c.ID, i, c.Parent)
		}
		if c.Probe != 0 && c.Parent != 0 {
			return fmt.Errorf("probe %d built on candidate %d", c.ID, c.Parent)
		}
		if p := s.candidate(c.Parent); p != nil && (p.Leaf || p.Probe != 0) {
			return fmt.Errorf("candidate %d built on %d, a leaf or probe", c.ID, c.Parent)
		}
		if b := s.candidate(c.Alt); c.Alt != 0 && (c.Parent != 0 || b == nil || !b.InChain() || b.Parent != 0) {
			return fmt.Errorf("alternative %d of %d, which is not a round's batch on the base", c.ID, c.Alt)
		}
		if c.Probe > 0 && s.group(c.Probe) == nil {
			return fmt.Errorf("probe %d of group %d, which is gone", c.ID, c.Probe)
		}
		if len(c.Entries) == 0 {
			return fmt.Errorf("candidate %d has no entries", c.ID)
		}
		ids[c.ID] = true
		for _, id := range c.Entries {
			e := s.entry(id)
			if e == nil {
				return fmt.Errorf("candidate %d holds entry %s, which is gone", c.ID, id)
			}
			if c.Alt != 0 {
				// An alternative holds entries of its round's batch.
				if e.Candidate != c.Alt {
					return fmt.Errorf("alternative %d of %d holds entry %s, which is in %d", c.ID, c.Alt, id, e.Candidate)
				}
				continue
			}
			if e.Candidate != c.ID {
				return fmt.Errorf("candidate %d holds entry %s, which is in %d", c.ID, id, e.Candidate)
			}
		}
	}
	seen := map[string]bool{}
	for _, e := range s.Entries {
		if seen[e.ID] {
			return fmt.Errorf("entry %s twice", e.ID)
		}
		seen[e.ID] = true
		if e.Candidate != 0 {
			c := s.candidate(e.Candidate)
			if c == nil || !slices.Contains(c.Entries, e.ID) {
				return fmt.Errorf("entry %s in candidate %d, which does not hold it", e.ID, e.Candidate)
			}
		}
		if e.Group != 0 && s.group(e.Group) == nil {
			return fmt.Errorf("entry %s in group %d, which is gone", e.ID, e.Group)
		}
	}
	for _, g := range s.Groups {
		if !slices.ContainsFunc(s.Entries, func(e Entry) bool { return e.Group == g.ID }) {
			return fmt.Errorf("group %d has no entry", g.ID)
		}
	}
	return nil
}

// model is a code host and CI for the queue, whose answers come in any
// order: each answer waits in pending until the test picks it.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	cfg     Config
	q       *State
	now     time.Time
	commits map[string]map[string]bool // SHA: the changes its tree holds
	next    int
	broken  map[string]bool   // changes that fail any tree holding them
	stale   map[string]bool   // changes that do not merge onto anything
	partner map[string]string // a change another does not merge with, either way round
	job     map[string]string // the job a broken change fails
	// together are changes that pass alone but fail a tree that holds
	// both, either way round (on job "e2e").
	together map[string]string
	flake    float64         // the chance that a CI run fails for nothing
	pending  []Event         // answers not given yet
	passed   map[string]bool // SHAs CI passed
	landed   map[string]string
	out      map[string]string // why each entry left: done, rework, removed
	// alone and inferred count the entries sent back for failing checks
	// by a run of a commit that held no other entry still in the queue,
	// and by one that did.
	alone, inferred int
}

func newModel(t *testing.T, seed uint64, cfg Config) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, 7)), cfg: cfg, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		commits: map[string]map[string]bool{}, broken: map[string]bool{}, stale: map[string]bool{},
		passed: map[string]bool{}, landed: map[string]string{}, out: map[string]string{},
		partner: map[string]string{}, job: map[string]string{}, together: map[string]string{}, flake: 0.05}
	m.q = New(m.commit(map[string]bool{}))
	return m
}

func (m *model) commit(tree map[string]bool) string {
	m.next++
	sha := fmt.Sprintf("%040x", m.next)
	m.commits[sha] = tree
	return sha
}

// addEntry adds entry e<n>: broken one time in broken, not merging onto
// the base one in stale, a hotfix one in hotfix; one in ten does not merge
// with a recent entry.
func (m *model) addEntry(n, broken, stale, hotfix int) {
	m.t.Helper()
	id := "e" + strconv.Itoa(n)
	m.broken[id] = m.rng.IntN(broken) == 0
	m.job[id] = jobs[m.rng.IntN(len(jobs))]
	m.stale[id] = m.rng.IntN(stale) == 0
	if n > 0 && m.rng.IntN(10) == 0 {
		p := "e" + strconv.Itoa(n-1-m.rng.IntN(min(n, 5)))
		if m.partner[p] == "" {
			m.partner[id], m.partner[p] = p, id
		}
	}
	p := Normal
	if m.rng.IntN(hotfix) == 0 {
		p = Hotfix
	}
	m.apply(Add{Entry: Entry{ID: id, Head: id + "-head", Priority: p}})
}

// removeEntry removes one of the first n entries at random, if it is
// still in the queue (its task cancelled, say).
func (m *model) removeEntry(n int) {
	m.t.Helper()
	id := "e" + strconv.Itoa(m.rng.IntN(n))
	if m.out[id] != "" || m.q.entry(id) == nil {
		return
	}
	landing := false
	if c := m.q.candidate(m.q.entry(id).Candidate); c != nil && c.State == Landing {
		landing = true
	}
	m.apply(Remove{ID: id})
	if !landing {
		m.out[id] = "removed"
	}
}

// pushBase moves the base as someone pushing to it would: its tree
// keeps what landed.
func (m *model) pushBase() {
	m.t.Helper()
	tree := map[string]bool{}
	for id := range m.commits[m.q.Base] {
		tree[id] = true
	}
	m.apply(BaseMoved{SHA: m.commit(tree)})
}

// answer applies one of the pending answers, at random, and returns it.
func (m *model) answer() Event {
	m.t.Helper()
	i := m.rng.IntN(len(m.pending))
	ev := m.pending[i]
	m.pending = slices.Delete(m.pending, i, i+1)
	m.apply(ev)
	return ev
}

// apply applies ev, checks the queue, and carries out what it asks.
func (m *model) apply(ev Event) {
	m.t.Helper()
	m.now = m.now.Add(time.Minute)
	before := m.commits[m.q.Base]
	actions := m.q.Apply(m.cfg, m.now, ev)
	if err := m.q.check(); err != nil {
		m.t.Fatalf("after %T%+v: %v", ev, ev, err)
	}
	// Vetted is a shortcut: an entry a passing run held, spared the
	// probes later. Against the truth, a vetted entry never breaks CI
	// (a run that passed held no broken change).
	for _, e := range m.q.Entries {
		if e.Vetted && m.broken[e.ID] {
			m.t.Fatalf("after %T%+v: entry %s is vetted, and it is broken", ev, ev, e.ID)
		}
	}
	if chain, probes := m.q.inFlight(); chain+probes > m.cfg.withDefaults().Depth {
		m.t.Fatalf("after %T%+v: %d candidates in flight, more than the depth %d", ev, ev, chain+probes, m.cfg.withDefaults().Depth)
	}
	if _, ok := ev.(Landed); ok {
		for id := range before {
			if !m.commits[m.q.Base][id] {
				m.t.Fatalf("landing %+v dropped %s, which the base held", ev, id)
			}
		}
	}
	for _, a := range actions {
		switch a := a.(type) {
		case Build:
			tree := map[string]bool{}
			for id := range m.commits[a.Parent] {
				tree[id] = true
			}
			var ev Event
			for _, h := range a.Heads {
				p := m.partner[h.Entry]
				if m.stale[h.Entry] || tree[p] {
					onBase := m.stale[h.Entry] || m.commits[m.q.Base][p]
					ev = Conflict{Candidate: a.Candidate, Entry: h.Entry, Base: onBase}
					break
				}
				tree[h.Entry] = true
			}
			if ev == nil {
				ev = Built{Candidate: a.Candidate, SHA: m.commit(tree)}
			}
			m.pending = append(m.pending, ev)
		case Test:
			failed := map[string]bool{}
			if m.rng.Float64() < m.flake {
				failed[jobs[m.rng.IntN(len(jobs))]] = true // flaky
			}
			for id := range m.commits[a.SHA] {
				if m.broken[id] {
					failed[m.job[id]] = true
				}
				if x := m.together[id]; x != "" && m.commits[a.SHA][x] {
					failed["e2e"] = true
				}
			}
			var failedJobs []string
			for _, j := range jobs {
				if failed[j] {
					failedJobs = append(failedJobs, j)
				}
			}
			if len(failedJobs) == 0 {
				m.passed[a.SHA] = true
			}
			m.pending = append(m.pending, Tested{Candidate: a.Candidate, Passed: len(failedJobs) == 0, FailedJobs: failedJobs})
		case Land:
			if !m.passed[a.To] {
				m.t.Fatalf("landing %s, which CI did not pass", a.To)
			}
			if a.From != m.q.Base {
				m.t.Fatalf("landing from %s while the base is %s", a.From, m.q.Base)
			}
			for id := range m.commits[a.To] {
				if m.broken[id] {
					m.t.Fatalf("landing %s, which holds the broken change %s", a.To, id)
				}
			}
			m.pending = append(m.pending, Landed{Candidate: a.Candidate})
		case Done:
			if m.out[a.Entry] != "" {
				m.t.Fatalf("entry %s done after %s", a.Entry, m.out[a.Entry])
			}
			if !m.commits[a.SHA][a.Entry] {
				m.t.Fatalf("entry %s done in %s, which does not hold it", a.Entry, a.SHA)
			}
			m.out[a.Entry] = "done"
		case Rework:
			if m.out[a.Entry] != "" {
				m.t.Fatalf("entry %s sent back after %s", a.Entry, m.out[a.Entry])
			}
			// A conflict with the base: it is stale, or its partner
			// landed (the base's tree only grows).
			if a.Reason == ReworkConflict && !m.stale[a.Entry] && !m.commits[m.q.Base][m.partner[a.Entry]] {
				m.t.Fatalf("entry %s sent back for a conflict it does not have", a.Entry)
			}
			if a.Reason == ReworkChecksFailed {
				if x := m.together[a.Entry]; m.flake == 0 && !m.broken[a.Entry] && (x == "" || !m.commits[a.SHA][x]) {
					var broken []string
					for id := range m.commits[a.SHA] {
						if m.broken[id] {
							broken = append(broken, id)
						}
					}
					m.t.Fatalf("entry %s sent back for failing checks, and it is not broken (CI has no flakes): %+v, whose commit holds the broken %v", a.Entry, a, broken)
				}
				others := 0
				for id := range m.commits[a.SHA] {
					if id != a.Entry && m.out[id] != "done" {
						others++
					}
				}
				if others == 0 {
					m.alone++
				} else {
					m.inferred++
				}
			}
			m.out[a.Entry] = "rework"
		}
	}
}

// jobs are the model CI's jobs.
var jobs = []string{"build", "unit", "e2e"}

// Random histories of entries, answers in any order, removals, pauses
// and pushes to the base: the queue keeps its links, lands only commits
// CI passed that hold no broken change, and every entry ends once: done,
// sent back or removed.
func TestRandomHistories(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			m := newModel(t, seed, Config{Depth: 1 + int(seed%8), MaxBatch: 1 + int(seed%6)})
			entries := 0
			for step := 0; step < 400 || len(m.pending) > 0 || m.q.Paused; step++ {
				switch r := m.rng.IntN(100); {
				case step < 400 && r < 15:
					m.addEntry(entries, 10, 20, 10)
					entries++
				case step < 400 && r < 18 && entries > 0:
					m.removeEntry(entries)
				case step < 400 && r < 20:
					m.apply(Pause{})
				case r < 25 && m.q.Paused:
					m.apply(Resume{})
				case step < 400 && r < 26:
					m.pushBase()
				case len(m.pending) > 0:
					m.answer()
				case m.q.Paused:
					m.apply(Resume{})
				}
			}
			for i := range entries {
				id := "e" + strconv.Itoa(i)
				if m.out[id] == "" {
					t.Errorf("entry %s never ended (queue: %+v; candidates %+v)", id, m.q.entry(id), m.q.Candidates)
				}
				if m.out[id] == "done" && m.broken[id] {
					t.Errorf("broken entry %s landed", id)
				}
			}
		})
	}
}

// With CI that never fails for nothing, every change sent back for
// failing checks is broken, however it was found: by a probe of it alone
// (the slow path), or without a run of its own, its group's others having
// passed after a probe of them with it failed (the shortcut). Each path
// is taken on these histories.
func TestConvictionsWithoutFlakes(t *testing.T) {
	t.Parallel()
	alone, inferred := 0, 0
	for seed := range uint64(200) {
		m := newModel(t, seed, Config{Depth: 2 + int(seed%7), MaxBatch: 4 + int(seed%13)})
		m.flake = 0
		entries := 0
		for step := 0; step < 1000 || len(m.pending) > 0; step++ {
			switch {
			case step < 1000 && m.rng.IntN(100) < 40:
				m.addEntry(entries, 5, 50, 10)
				entries++
			case len(m.pending) > 0:
				m.answer()
			}
		}
		alone, inferred = alone+m.alone, inferred+m.inferred
	}
	if alone == 0 || inferred == 0 {
		t.Errorf("sent back after a run alone: %d, without a run of their own: %d; want both", alone, inferred)
	}
}

// A failed batch of the chain suspects its new entries only; entries a
// probe passed already are batched again when the batch held no others,
// and suspected again only when such a batch failed before.
func TestJudgeSparesVetted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		vetted    []bool
		rebatched bool
		suspected []bool
	}{
		{"new and vetted", []bool{true, false, true}, false, []bool{false, true, false}},
		{"vetted only", []bool{true, true}, false, []bool{false, false}},
		{"vetted only, rebatched", []bool{true, true}, true, []bool{true, true}},
		{"new only", []bool{false, false}, false, []bool{true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := New("base")
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			cand := Candidate{ID: s.newID(), ParentSHA: "base", SHA: "c1", State: Testing}
			for i, v := range c.vetted {
				id := "e" + strconv.Itoa(i)
				s.Entries = append(s.Entries, Entry{ID: id, Head: id, Since: now, Candidate: cand.ID, Vetted: v, Rebatched: c.rebatched})
				cand.Entries = append(cand.Entries, id)
			}
			s.Candidates = []Candidate{cand}
			s.Apply(Config{}, now, Tested{Candidate: cand.ID, FailedJobs: []string{"unit"}})
			if err := s.check(); err != nil {
				t.Fatal(err)
			}
			for i, want := range c.suspected {
				e := s.entry("e" + strconv.Itoa(i))
				if got := e.Group != 0; got != want {
					t.Errorf("e%d suspected: %v, want %v", i, got, want)
				}
				if !want && !e.Vetted {
					t.Errorf("e%d, spared, is no longer vetted", i)
				}
				if !want && e.Candidate == cand.ID {
					t.Errorf("e%d, spared, is still in the failed candidate", i)
				}
			}
		})
	}
}

// An entry sent back for failing checks that comes back is tested alone,
// in the chain when the queue is quiet and as a leaf when it is loaded,
// and the entries behind it are batched without it.
func TestReworkedEntryAlone(t *testing.T) {
	t.Parallel()
	for _, loaded := range []bool{false, true} {
		t.Run(fmt.Sprintf("loaded=%v", loaded), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Depth: 8, MaxBatch: 4}
			s := New("base")
			s.FailRate = 0.01
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			// x fails alone, twice on the same job: it goes back.
			s.Apply(cfg, now, Add{Entry: Entry{ID: "x", Head: "x1"}})
			for range 2 {
				c := s.Candidates[len(s.Candidates)-1]
				s.Apply(cfg, now, Built{Candidate: c.ID, SHA: "sha" + strconv.Itoa(c.ID)})
				s.Apply(cfg, now, Tested{Candidate: c.ID, FailedJobs: []string{"unit"}})
			}
			if s.entry("x") != nil || !slices.Contains(s.Convicted, "x") {
				t.Fatalf("x not sent back: entries %+v, convicted %v", s.Entries, s.Convicted)
			}
			// It comes back first, with others behind it.
			s.Apply(cfg, now, Pause{})
			n := 2
			if loaded {
				n = 6
			}
			s.Apply(cfg, now, Add{Entry: Entry{ID: "x", Head: "x2"}})
			for i := range n {
				s.Apply(cfg, now.Add(time.Duration(i+1)*time.Second), Add{Entry: Entry{ID: "e" + strconv.Itoa(i), Head: "e"}})
			}
			if !s.entry("x").Reworked || slices.Contains(s.Convicted, "x") {
				t.Fatalf("x back: reworked %v, convicted %v", s.entry("x").Reworked, s.Convicted)
			}
			s.Apply(cfg, now, Resume{})
			if err := s.check(); err != nil {
				t.Fatal(err)
			}
			x := s.candidate(s.entry("x").Candidate)
			if !loaded {
				// Quiet: x is in the round's batch, and an alternative
				// leaves it out alone, so that the others land should it
				// fail again.
				if x == nil || !x.InChain() || x.Parent != 0 {
					t.Fatalf("x in %+v, want the round's batch", x)
				}
				alone := slices.ContainsFunc(s.Candidates, func(a Candidate) bool {
					return a.Alt == x.ID && len(a.Entries) == len(x.Entries)-1 && !slices.Contains(a.Entries, "x")
				})
				if !alone {
					t.Fatalf("no alternative of %+v leaves x out alone: %+v", x, s.Candidates)
				}
				return
			}
			if x == nil || len(x.Entries) != 1 || !x.Leaf {
				t.Fatalf("x in %+v, want alone in a leaf", x)
			}
			if e := s.candidate(s.entry("e0").Candidate); e == nil || e.ID == x.ID || len(e.Entries) < 2 {
				t.Fatalf("e0 in %+v, want batched without x", e)
			}
		})
	}
}

// The last entry of a group that a failed probe of its own made is
// convicted once the others passed, without a run of its own; with no
// such probe (the batch's failure may have been flaky) it is probed.
func TestProbeConvictsLastOfFailedProbe(t *testing.T) {
	t.Parallel()
	for _, shown := range []bool{true, false} {
		t.Run(strconv.FormatBool(shown), func(t *testing.T) {
			t.Parallel()
			s := New("base")
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			g := Group{ID: s.newID(), Depth: 3, Jobs: []string{"unit"}}
			if shown {
				g.SHA, g.Failed = "p0", []string{"unit"}
			}
			s.Groups = []Group{g}
			probe := Candidate{ID: s.newID(), Entries: []string{"a"}, ParentSHA: "base", SHA: "p1", State: Testing, Probe: g.ID}
			s.Candidates = []Candidate{probe}
			s.Entries = []Entry{
				{ID: "a", Head: "a", Since: now, Group: g.ID, Candidate: probe.ID},
				{ID: "b", Head: "b", Since: now, Group: g.ID},
			}
			out := s.Apply(Config{}, now, Tested{Candidate: probe.ID, Passed: true})
			if err := s.check(); err != nil {
				t.Fatal(err)
			}
			if a := s.entry("a"); a == nil || !a.Vetted || a.Group != 0 {
				t.Errorf("a after its probe passed: %+v", a)
			}
			i := slices.IndexFunc(out, func(a Action) bool { _, ok := a.(Rework); return ok })
			if !shown {
				if i >= 0 {
					t.Fatalf("b convicted without a probe of its own: %+v", out)
				}
				if b := s.entry("b"); b == nil || b.Candidate == 0 || s.candidate(b.Candidate).Probe != g.ID {
					t.Errorf("b not probed: %+v", b)
				}
				return
			}
			if i < 0 {
				t.Fatalf("b not convicted: %+v", out)
			}
			want := Rework{Entry: "b", Reason: ReworkChecksFailed, Jobs: []string{"unit"}, SHA: "p0"}
			if diff := cmp.Diff(want, out[i].(Rework)); diff != "" {
				t.Errorf("rework of b (-want +got):\n%s", diff)
			}
			if s.entry("b") != nil || len(s.Groups) != 0 {
				t.Errorf("b or its group still in the queue: %+v, %+v", s.Entries, s.Groups)
			}
		})
	}
}

// A hotfix goes ahead of the normal entries that entered less than
// HotfixLead before it, and behind those that waited longer: aging, so
// that a stream of hotfixes starves nobody.
func TestHotfixLane(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		hotfix time.Duration // when the hotfix enters, after a and b
		want   []string      // the order the entries are tested in
	}{
		{"ahead of both", 30 * time.Minute, []string{"h", "a", "b"}},
		{"behind the older", 75 * time.Minute, []string{"a", "h", "b"}},
		{"behind both", 3 * time.Hour, []string{"a", "b", "h"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// One entry per candidate, one candidate at a time: the
			// queue lands the entries in its order.
			cfg := Config{Depth: 1, MaxBatch: 1, HotfixLead: time.Hour}
			s := New("base")
			s.Apply(cfg, t0, Pause{})
			s.Apply(cfg, t0, Add{Entry: Entry{ID: "a", Head: "a"}})
			s.Apply(cfg, t0.Add(20*time.Minute), Add{Entry: Entry{ID: "b", Head: "b"}})
			now := t0.Add(c.hotfix)
			s.Apply(cfg, now, Add{Entry: Entry{ID: "h", Head: "h", Priority: Hotfix}})
			// A driver whose builds and runs all pass.
			var order []string
			todo := s.Apply(cfg, now, Resume{})
			for step := 0; len(todo) > 0; step++ {
				if step > 100 {
					t.Fatalf("still busy after %d actions: landed %v", step, order)
				}
				var ev Event
				switch a := todo[0].(type) {
				case Build:
					ev = Built{Candidate: a.Candidate, SHA: "sha" + strconv.Itoa(a.Candidate)}
				case Test:
					ev = Tested{Candidate: a.Candidate, Passed: true}
				case Land:
					ev = Landed{Candidate: a.Candidate}
				case Done:
					order = append(order, a.Entry)
				}
				todo = todo[1:]
				if ev != nil {
					todo = append(todo, s.Apply(cfg, now, ev)...)
				}
				if err := s.check(); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(c.want, order); diff != "" {
				t.Errorf("landing order (-want +got):\n%s", diff)
			}
		})
	}
}

// A loaded queue's batches are as large as pass together with the chance
// aimed at, given the failure rate seen, and the rate follows what the
// queue judges: landings lower it, convictions raise it.
func TestBatchFollowsFailRate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rate float64
		want int // (1-rate)^want ≥ 0.3 > (1-rate)^(want+1), at most MaxBatch
	}{
		{0.01, 16},
		{0.05, 16},
		{0.1, 11},
		{0.2, 5},
		{0.5, 1},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(fmt.Sprint(c.rate), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Depth: 2, MaxBatch: 16}
			s := New("base")
			s.FailRate = c.rate
			s.Apply(cfg, t0, Pause{})
			for i := range 40 { // loaded: more wait than one and a half batches
				s.Apply(cfg, t0.Add(time.Duration(i)*time.Second), Add{Entry: Entry{ID: fmt.Sprintf("e%02d", i), Head: "h"}})
			}
			out := s.Apply(cfg, t0, Resume{})
			i := slices.IndexFunc(out, func(a Action) bool { _, ok := a.(Build); return ok })
			if i < 0 {
				t.Fatalf("nothing built: %+v", out)
			}
			if got := len(out[i].(Build).Heads); got != c.want {
				t.Errorf("first batch of %d entries at failure rate %v, want %d", got, c.rate, c.want)
			}
		})
	}
	t.Run("learns", func(t *testing.T) {
		t.Parallel()
		s := New("base")
		r0 := s.FailRate
		s.observe(10, 0)
		if s.FailRate >= r0 {
			t.Errorf("failure rate %v after ten landed, was %v", s.FailRate, r0)
		}
		r1 := s.FailRate
		s.observe(1, 1)
		if s.FailRate <= r1 {
			t.Errorf("failure rate %v after a conviction, was %v", s.FailRate, r1)
		}
	})
}

// A probe of one entry that fails on other jobs than those that failed
// its batch most likely met a flaky job: it is tried once more, and the
// entry is sent back only if that fails too. One that fails on the
// batch's jobs is sent back at once.
func TestLoneProbeRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		failures [][]string // the probes' failed jobs, in turn; nil passes
		retried  bool
		convict  bool
	}{
		{"the batch's job", [][]string{{"unit"}}, false, true},
		{"another job, then passes", [][]string{{"lint"}, nil}, true, false},
		{"another job twice", [][]string{{"lint"}, {"lint"}}, true, true},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := New("base")
			g := Group{ID: s.newID(), Depth: 1, Jobs: []string{"unit"}}
			s.Groups = []Group{g}
			s.Entries = []Entry{{ID: "a", Head: "a", Since: t0, Group: g.ID}}
			cfg := Config{Depth: 4}
			out := s.Apply(cfg, t0, Resume{})
			var reworked, retried bool
			for _, failed := range c.failures {
				i := slices.IndexFunc(out, func(a Action) bool { b, ok := a.(Build); return ok && b.Probe })
				if i < 0 {
					t.Fatalf("no probe built: %+v", out)
				}
				b := out[i].(Build)
				s.Apply(cfg, t0, Built{Candidate: b.Candidate, SHA: "p" + strconv.Itoa(b.Candidate)})
				out = s.Apply(cfg, t0, Tested{Candidate: b.Candidate, Passed: failed == nil, FailedJobs: failed})
				if err := s.check(); err != nil {
					t.Fatal(err)
				}
				if e := s.entry("a"); e != nil && e.Retried {
					retried = true
				}
				reworked = slices.ContainsFunc(out, func(a Action) bool { r, ok := a.(Rework); return ok && r.Entry == "a" })
			}
			if retried != c.retried || reworked != c.convict {
				t.Errorf("retried %v, sent back %v; want %v, %v", retried, reworked, c.retried, c.convict)
			}
		})
	}
}

// Config.Alternatives bounds a round's alternatives: none when negative,
// the default when 0, at most Depth less one (the batch's own run).
func TestAlternativesBound(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		alternatives, want int
	}{{-1, 0}, {0, 5}, {2, 2}, {20, 7}} {
		t.Run(fmt.Sprint(c.alternatives), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Depth: 8, Alternatives: c.alternatives}
			s := New("base")
			s.Apply(cfg, t0, Pause{})
			for i := range 10 {
				s.Apply(cfg, t0, Add{Entry: Entry{ID: fmt.Sprintf("e%d", i), Head: "h"}})
			}
			s.Apply(cfg, t0, Resume{})
			if err := s.check(); err != nil {
				t.Fatal(err)
			}
			alts := 0
			for _, x := range s.Candidates {
				if x.Alt != 0 {
					alts++
				}
			}
			if alts != c.want {
				t.Errorf("%d alternatives with Alternatives %d, want %d", alts, c.alternatives, c.want)
			}
		})
	}
}

// When a round's batch fails, the queue waits for every alternative: the
// one that passed leaving out least lands, and the part it left out is
// suspected when it was the only one to pass, but not when another
// alternative, holding that part, passed too (the batch's run was most
// likely flaky).
func TestRoundAlternativesClearLeftOut(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		passing   []int // the alternatives that pass, by place
		suspected bool  // the landed alternative's left-out part
	}{
		{"one passes", []int{2}, true},
		{"two pass", []int{0, 3}, false},
		{"all pass", []int{0, 1, 2, 3, 4}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Depth: 8}
			s := New("base")
			s.Apply(cfg, t0, Pause{})
			for i := range 10 {
				s.Apply(cfg, t0, Add{Entry: Entry{ID: fmt.Sprintf("e%d", i), Head: fmt.Sprintf("h%d", i)}})
			}
			out := s.Apply(cfg, t0, Resume{})
			var batch int
			var alts []int
			for _, a := range out {
				b, ok := a.(Build)
				if !ok {
					continue
				}
				s.Apply(cfg, t0, Built{Candidate: b.Candidate, SHA: fmt.Sprintf("c%d", b.Candidate)})
				if s.candidate(b.Candidate).Alt == 0 {
					batch = b.Candidate
				} else {
					alts = append(alts, b.Candidate)
				}
			}
			if batch == 0 || len(alts) != 5 {
				t.Fatalf("round of batch %d with %d alternatives, want a batch and 5", batch, len(alts))
			}
			s.Apply(cfg, t0, Tested{Candidate: batch, FailedJobs: []string{"unit"}})
			var landed *Land
			for i, id := range alts {
				if landed != nil {
					t.Fatalf("alternative %d landed before alternative %d answered", landed.Candidate, id)
				}
				pass := slices.Contains(c.passing, i)
				var failed []string
				if !pass {
					failed = []string{"unit"}
				}
				for _, a := range s.Apply(cfg, t0, Tested{Candidate: id, Passed: pass, FailedJobs: failed}) {
					if l, ok := a.(Land); ok {
						landed = &l
					}
				}
				if err := s.check(); err != nil {
					t.Fatal(err)
				}
			}
			if want := alts[c.passing[0]]; landed == nil || landed.Candidate != want {
				t.Fatalf("landed %+v, want alternative %d", landed, want)
			}
			left := 0
			for _, e := range s.Entries {
				if slices.Contains(landed.Entries, e.ID) {
					continue
				}
				left++
				if got := e.Group != 0; got != c.suspected {
					t.Errorf("%s suspected: %v, want %v", e.ID, got, c.suspected)
				}
				if !c.suspected && !e.Vetted {
					t.Errorf("%s, cleared, is not vetted", e.ID)
				}
			}
			if left == 0 {
				t.Error("the landed alternative left nothing out")
			}
		})
	}
}

// Two changes that pass alone but fail together (each breaks what the
// other relies on) do not hold the queue for ever: one of them lands and
// the other goes back, and the rest land, whether they come at once (the
// queue loaded) or one by one (quiet).
func TestFailOnlyTogether(t *testing.T) {
	t.Parallel()
	for seed := range uint64(80) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			m := newModel(t, seed, Config{Depth: 1 + int(seed%8), MaxBatch: 2 + 3*int(seed%5)})
			m.flake = 0
			n := 40
			a, b := 3+m.rng.IntN(10), 15+m.rng.IntN(20)
			m.together["e"+strconv.Itoa(a)], m.together["e"+strconv.Itoa(b)] = "e"+strconv.Itoa(b), "e"+strconv.Itoa(a)
			added, runs := 0, 0
			for step := 0; added < n || len(m.pending) > 0; step++ {
				if added < n && (seed%2 == 0 || m.rng.IntN(4) == 0) {
					m.apply(Add{Entry: Entry{ID: "e" + strconv.Itoa(added), Head: "h" + strconv.Itoa(added)}})
					added++
					continue
				}
				if len(m.pending) == 0 {
					continue
				}
				if _, ok := m.answer().(Tested); ok {
					runs++
				}
				if runs > 20*n {
					t.Fatalf("%d CI runs for %d changes: the queue loops (e%d and e%d fail together; queue %+v)", runs, n, a, b, m.q.Entries)
				}
			}
			back := 0
			for i := range n {
				id := "e" + strconv.Itoa(i)
				switch out := m.out[id]; {
				case out == "rework" && m.together[id] != "":
					back++
				case out != "done":
					t.Errorf("%s: %q, want done", id, out)
				}
			}
			if back != 1 {
				t.Errorf("%d of e%d and e%d sent back, want 1", back, a, b)
			}
		})
	}
}
