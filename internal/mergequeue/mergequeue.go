package mergequeue

import (
	"slices"
	"time"
)

// Priority orders entries: hotfixes go first, with aging.
type Priority int

// The priorities.
const (
	Normal Priority = iota
	Hotfix
)

// Config tunes a queue. The zero Config is the defaults.
type Config struct {
	// Depth bounds the candidates built or under test at once: the CI
	// runs the queue may hold. Defaults to 4.
	Depth int
	// Speculation bounds the candidates of the landing chain built or
	// under test at once, each on the one before, while the queue is
	// loaded; the rest of Depth goes to leaves and probes. Defaults to 1:
	// the chain holds vetted entries, whose batches seldom fail, and the
	// leaves on its tip are speculation enough. (While few entries wait
	// the queue works in rounds, which do not build on each other.)
	Speculation int
	// MaxBatch bounds the entries of one candidate. Defaults to 16.
	MaxBatch int
	// HotfixLead is how far ahead of normal entries a hotfix goes: it is
	// placed as if it had entered the queue that much earlier. Defaults
	// to 1 hour.
	HotfixLead time.Duration
	// Alternatives bounds the alternatives of a round: candidates beside
	// its batch, each without one part, one of which lands the rest when
	// the batch fails. They spend CI runs that are otherwise idle while
	// the queue is quiet, to shorten the time in queue. 0: Depth less
	// three, or half of it; fewer than two (negative, say): none, so that
	// a round is one CI run and a failed batch is bisected by probes.
	Alternatives int
	// TargetPass is the chance that a batch passes which the batch size
	// aims at, given the failure rate seen. Defaults to 0.3: a batch that
	// fails costs its probes, which run beside the chain, more than its
	// landing is worth waiting for.
	TargetPass float64
}

// withDefaults fills in the zero fields of c.
func (c Config) withDefaults() Config {
	if c.Depth <= 0 {
		c.Depth = 4
	}
	if c.Speculation <= 0 {
		c.Speculation = 1
	}
	c.Speculation = min(c.Speculation, c.Depth)
	if c.MaxBatch <= 0 {
		c.MaxBatch = 16
	}
	if c.HotfixLead <= 0 {
		c.HotfixLead = time.Hour
	}
	if c.TargetPass <= 0 || c.TargetPass >= 1 {
		c.TargetPass = 0.3
	}
	return c
}

// Entry is a change waiting in the queue or under test.
type Entry struct {
	// ID names the entry (a task's ID).
	ID string `json:"id"`
	// Head is the commit of the change.
	Head string `json:"head"`
	// Priority orders it.
	Priority Priority `json:"priority,omitempty"`
	// Since is when it entered the queue.
	Since time.Time `json:"since"`
	// Candidate is the candidate it is in, or 0 while it waits.
	Candidate int `json:"candidate,omitempty"`
	// Group is the failed batch it is suspected with, or 0: it is then
	// tested by probes, not in the landing chain, until cleared or
	// convicted.
	Group int `json:"group,omitempty"`
	// After, when not 0, is a candidate ahead of which the entry did not
	// merge: it waits until that candidate has left the queue, and is
	// then tried alone.
	After int `json:"after,omitempty"`
	// Retried says a probe of the entry alone failed on other jobs than
	// its group's, and was tried again.
	Retried bool `json:"retried,omitempty"`
	// Vetted says a probe passed with the entry: it is unlikely to fail,
	// and a batch takes more such entries.
	Vetted bool `json:"vetted,omitempty"`
	// Reworked says the entry was sent back for failing checks and came
	// back: until a candidate passes with it, it is a part of its own in
	// a round's alternatives, or tested alone (as a leaf, or in the chain)
	// while the queue is loaded, so that a fix that still fails holds back
	// no batch of others.
	Reworked bool `json:"reworked,omitempty"`
	// Rebatched says a candidate of the landing chain that failed held
	// the entry, and vetted entries only: they were batched again rather
	// than suspected, the run most likely flaky. Should that happen
	// again, they are suspected.
	Rebatched bool `json:"rebatched,omitempty"`
}

// CandidateState is where a candidate is.
type CandidateState string

// The candidate states.
const (
	// Pending: waiting for its parent's commit, to be built on it.
	Pending CandidateState = "pending"
	// Building: its commit is being made.
	Building CandidateState = "building"
	// Testing: CI runs on its commit.
	Testing CandidateState = "testing"
	// Passed: CI passed; it lands when every candidate before it has.
	Passed CandidateState = "passed"
	// Failed: CI failed while a candidate before it was still under
	// test; it is judged once they have landed.
	Failed CandidateState = "failed"
	// Landing: the base branch is being moved to its commit.
	Landing CandidateState = "landing"
)

// Candidate is a batch of entries merged onto its parent and tested: in
// the landing chain, or as a probe of a failed batch.
type Candidate struct {
	// ID names it within its queue.
	ID int `json:"id"`
	// Parent is the candidate it is built on, or 0 for the base branch.
	Parent int `json:"parent,omitempty"`
	// Entries are the IDs of its own entries, in order (its parent's are
	// in its parent).
	Entries []string `json:"entries"`
	// ParentSHA is the commit it is built on, once known.
	ParentSHA string `json:"parentSha,omitempty"`
	// SHA is its commit, once built.
	SHA string `json:"sha,omitempty"`
	// State says where it is.
	State CandidateState `json:"state"`
	// FailedJobs are the jobs of its failed run.
	FailedJobs []string `json:"failedJobs,omitempty"`
	// Probe, when not 0, is the failed batch (Group) whose entries it
	// tests. A probe is built on the base and never lands: it tells
	// which entries fail.
	Probe int `json:"probe,omitempty"`
	// Leaf says the candidate holds new entries and is built on the tip
	// of the landing chain, and nothing is built on it: should it pass
	// while still on the tip, it joins the chain, tested already; else
	// its entries are vetted, or suspected when it failed.
	Leaf bool `json:"leaf,omitempty"`
	// Alt, when not 0, is the round's batch this candidate stands in
	// for: that batch without one of its parts, built on the base beside
	// it and tested at once. Should the batch fail and this pass, it
	// lands instead, and the part it left out is suspected.
	Alt int `json:"alt,omitempty"`
}

// InChain reports whether c is a candidate of the landing chain (not a
// leaf, a probe or a round's alternative).
func (c *Candidate) InChain() bool { return c.Probe == 0 && !c.Leaf && c.Alt == 0 }

// Group is a failed batch whose entries are under suspicion.
type Group struct {
	// ID names it.
	ID int `json:"id"`
	// Depth is how many failed batches led to it: 1 for a batch of the
	// landing chain, one more for each probe that failed again.
	Depth int `json:"depth"`
	// Cleared and Convicted count its entries found not to fail, and to
	// fail; Handed those handed on to a smaller group.
	Cleared   int `json:"cleared,omitempty"`
	Convicted int `json:"convicted,omitempty"`
	Handed    int `json:"handed,omitempty"`
	// Jobs are the jobs that failed the batch.
	Jobs []string `json:"jobs,omitempty"`
	// Screen says no batch of it failed yet: it is a group of new
	// entries that a probe tests, all together, before they join the
	// landing chain (a leaf that was built beside a candidate that
	// landed).
	Screen bool `json:"screen,omitempty"`
	// SHA and Failed, when set, are the commit and the failed jobs of a
	// probe of just its entries that failed as its batch did, after a
	// probe of more of them had failed too: two failures alike make a
	// flaky run unlikely. Should all of them but one pass, that one is
	// convicted without a run of its own. An entry that leaves the group
	// otherwise than by passing a probe (convicted, handed on, removed,
	// or conflicting) forgets them: it may have been the culprit.
	SHA    string   `json:"sha,omitempty"`
	Failed []string `json:"failed,omitempty"`
}

// Stats count what a queue did, for its metrics.
type Stats struct {
	// Runs counts the CI runs asked for.
	Runs int `json:"runs"`
	// Landed counts the entries landed, Batches the candidates.
	Landed  int `json:"landed"`
	Batches int `json:"batches"`
	// Failures counts the candidates of the landing chain that failed;
	// Probes the probes run, ProbeFailures those that failed.
	Failures      int `json:"failures"`
	Probes        int `json:"probes"`
	ProbeFailures int `json:"probeFailures"`
	// Promoted counts leaves that joined the landing chain.
	Promoted int `json:"promoted"`
	// Dropped counts candidates dropped before their result counted.
	Dropped int `json:"dropped"`
	// Retries counts probes of one entry tried again after a failure of
	// other jobs than its batch's.
	Retries int `json:"retries"`
	// FlakyBatches counts failed batches whose every entry was cleared.
	FlakyBatches int `json:"flakyBatches"`
	// Convicted and Conflicts count the entries sent back for rework
	// for failing checks and for conflicts.
	Convicted int `json:"convicted"`
	Conflicts int `json:"conflicts"`
	// MaxBisection is the deepest group seen.
	MaxBisection int `json:"maxBisection"`
}

// State is a queue: what a driver keeps between calls of Apply.
type State struct {
	// Base is the base branch's commit as the queue last knew it.
	Base string `json:"base"`
	// Paused stops building and landing; candidates under test go on.
	Paused bool `json:"paused,omitempty"`
	// Entries are the entries in the queue, in the order they came.
	Entries []Entry `json:"entries"`
	// Candidates are the candidates: the landing chain, each after its
	// parent, and the probes.
	Candidates []Candidate `json:"candidates"`
	// Groups are the failed batches under suspicion, oldest first.
	Groups []Group `json:"groups,omitempty"`
	// NextID is the next candidate or group ID.
	NextID int `json:"nextId"`
	// FailRate is the share of entries found to fail, an average over the
	// last ones judged.
	FailRate float64 `json:"failRate"`
	// Stats count what the queue did.
	Stats Stats `json:"stats"`
	// Convicted are the IDs of the last entries sent back for failing
	// checks, oldest first: one that comes back is tested alone.
	Convicted []string `json:"convicted,omitempty"`
}

// maxConvicted bounds State.Convicted.
const maxConvicted = 256

// failRateWeight is the weight of one judged entry in FailRate.
const failRateWeight = 0.05

// initialFailRate is FailRate before anything was judged.
const initialFailRate = 0.05

// New returns an empty queue over a base branch at base.
func New(base string) *State {
	return &State{Base: base, NextID: 1, FailRate: initialFailRate}
}

// Event is what a driver tells Apply: one of the types below.
type Event interface{ event() }

// Add adds an entry (Candidate, Group and After are ignored). An entry
// already in the queue with the same ID is replaced, as if removed first.
type Add struct{ Entry Entry }

// Remove takes an entry out of the queue (its task was cancelled, or its
// head moved). An entry whose candidate is landing cannot be removed.
type Remove struct{ ID string }

// Built says a candidate's commit was made.
type Built struct {
	Candidate int
	SHA       string
}

// Conflict says an entry of a candidate did not merge onto what came
// before it. Base says it does not merge onto the base branch alone
// either (a driver can tell from the host's own mergeability of the pull
// request): it then goes back for rework wherever it stood.
type Conflict struct {
	Candidate int
	Entry     string
	Base      bool
}

// Tested is the result of a CI run of a candidate.
type Tested struct {
	Candidate int
	Passed    bool
	// FailedJobs name the jobs that failed.
	FailedJobs []string
}

// Landed says the base branch moved to a candidate's commit.
type Landed struct{ Candidate int }

// BaseMoved says the base branch is at SHA, moved by something else than
// the queue (or a landing was refused because it had).
type BaseMoved struct{ SHA string }

// Pause stops building and landing; Resume starts them again.
type Pause struct{}

// Resume ends a Pause.
type Resume struct{}

func (Add) event()       {}
func (Remove) event()    {}
func (Built) event()     {}
func (Conflict) event()  {}
func (Tested) event()    {}
func (Landed) event()    {}
func (BaseMoved) event() {}
func (Pause) event()     {}
func (Resume) event()    {}

// Action is what Apply asks the driver to do: one of the types below.
type Action interface{ action() }

// Head is an entry's change to merge into a candidate.
type Head struct {
	Entry string
	SHA   string
}

// Build asks for a candidate's commit: Parent with Heads merged onto it,
// in order. The driver answers Built, or Conflict naming the first head
// that does not merge.
type Build struct {
	Candidate int
	Parent    string
	Heads     []Head
	// Probe says the candidate is a probe, which never lands.
	Probe bool
}

// Test asks for a CI run of a candidate's commit. The driver answers
// Tested.
type Test struct {
	Candidate int
	SHA       string
}

// Cancel says a candidate was dropped: its CI run, if any, is no longer
// needed.
type Cancel struct {
	Candidate int
	SHA       string
}

// Land asks the driver to move the base branch from From to To, the
// candidate's tested commit, and only if it is still at From. It answers
// Landed, or BaseMoved when the base was no longer at From.
type Land struct {
	Candidate int
	From, To  string
	Entries   []string
}

// The reasons of Rework.
const (
	ReworkConflict     = "merge_conflict"
	ReworkChecksFailed = "checks_failed"
)

// Rework says an entry left the queue and goes back to its agent: it
// conflicts with the base (ReworkConflict), or failed CI twice, in a
// batch and then alone, or in a probe whose other entries then passed
// (ReworkChecksFailed, with the failed jobs and the commit where their
// logs are: that probe's).
type Rework struct {
	Entry  string
	Reason string
	Jobs   []string
	SHA    string
}

// Done says an entry landed, in commit SHA.
type Done struct {
	Entry string
	SHA   string
}

func (Build) action()  {}
func (Test) action()   {}
func (Cancel) action() {}
func (Land) action()   {}
func (Rework) action() {}
func (Done) action()   {}

// Apply applies ev to the queue and returns what the driver must do, in
// order. now is the driver's clock, used to order entries only.
func (s *State) Apply(cfg Config, now time.Time, ev Event) []Action {
	cfg = cfg.withDefaults()
	var out []Action
	switch ev := ev.(type) {
	case Add:
		if s.entry(ev.Entry.ID) != nil {
			out = s.remove(ev.Entry.ID, out)
		}
		e := ev.Entry
		e.Candidate, e.Group, e.After = 0, 0, 0
		e.Reworked, e.Rebatched = false, false
		if i := slices.Index(s.Convicted, e.ID); i >= 0 {
			// It failed its checks here and comes back: a fix fails
			// again far more often than a new change does.
			e.Reworked = true
			s.Convicted = slices.Delete(s.Convicted, i, i+1)
		}
		if e.Since.IsZero() {
			e.Since = now
		}
		s.Entries = append(s.Entries, e)
	case Remove:
		out = s.remove(ev.ID, out)
	case Built:
		if c := s.candidate(ev.Candidate); c != nil && c.State == Building {
			c.SHA, c.State = ev.SHA, Testing
			s.Stats.Runs++
			out = append(out, Test{Candidate: c.ID, SHA: c.SHA})
		}
	case Conflict:
		out = s.conflict(cfg, ev, out)
	case Tested:
		out = s.tested(cfg, ev, out)
	case Landed:
		out = s.landed(ev, out)
	case BaseMoved:
		if ev.SHA != s.Base {
			s.Base = ev.SHA
			out = s.dropChain(out)
		}
	case Pause:
		s.Paused = true
	case Resume:
		s.Paused = false
	}
	return s.plan(cfg, out)
}

// entry returns the entry id, or nil.
func (s *State) entry(id string) *Entry {
	for i := range s.Entries {
		if s.Entries[i].ID == id {
			return &s.Entries[i]
		}
	}
	return nil
}

// candidate returns candidate id, or nil.
func (s *State) candidate(id int) *Candidate {
	if id == 0 {
		return nil
	}
	for i := range s.Candidates {
		if s.Candidates[i].ID == id {
			return &s.Candidates[i]
		}
	}
	return nil
}

// group returns group id, or nil.
func (s *State) group(id int) *Group {
	for i := range s.Groups {
		if s.Groups[i].ID == id {
			return &s.Groups[i]
		}
	}
	return nil
}

// newID returns a fresh candidate or group ID.
func (s *State) newID() int {
	id := s.NextID
	s.NextID++
	return id
}

// deleteEntry takes entry id out of the queue's entries.
func (s *State) deleteEntry(id string) {
	s.Entries = slices.DeleteFunc(s.Entries, func(e Entry) bool { return e.ID == id })
}

// deleteCandidate takes candidate id out of the queue's candidates.
func (s *State) deleteCandidate(id int) {
	s.Candidates = slices.DeleteFunc(s.Candidates, func(c Candidate) bool { return c.ID == id })
}

// remove takes entry id out of the queue, rebuilding its candidate
// without it; a candidate whose run has ended (passed, or failed) is
// dropped instead, its other entries waiting again, so that no run is
// started beyond Depth.
func (s *State) remove(id string, out []Action) []Action {
	e := s.entry(id)
	if e == nil {
		return out
	}
	if c := s.candidate(e.Candidate); c != nil {
		switch c.State {
		case Landing:
			return out // too late: it lands with its candidate
		case Passed, Failed:
			cid := c.ID // c moves as dropDescendants compacts the candidates
			out = s.dropDescendants(cid, out)
			cand := *s.candidate(cid)
			s.deleteCandidate(cand.ID)
			out = s.release(cand, out)
		default:
			out, _ = s.rebuildWithout(c.ID, id, out)
		}
	}
	s.settle(s.entry(id), left)
	s.deleteEntry(id)
	return out
}

// How an entry leaves its group.
type verdict int

const (
	cleared   verdict = iota // found not to fail, or landed
	convicted                // found to fail
	handed                   // handed on to a smaller group
	left                     // removed, or tried again after a conflict: counted as cleared
)

// settle takes e out of its group with verdict v. A group left with no
// entry is over: flaky when none of its entries was convicted or handed
// on.
func (s *State) settle(e *Entry, v verdict) {
	if e == nil || e.Group == 0 {
		return
	}
	g := s.group(e.Group)
	e.Group = 0
	if g == nil {
		return
	}
	switch v {
	case cleared, left:
		g.Cleared++
	case convicted:
		g.Convicted++
	case handed:
		g.Handed++
	}
	if v != cleared {
		// The failed probe of the group's entries is no longer theirs
		// alone to explain: one that left may have been its culprit.
		g.SHA, g.Failed = "", nil
	}
	for _, x := range s.Entries {
		if x.Group == g.ID {
			return
		}
	}
	if g.Convicted == 0 && g.Handed == 0 && !g.Screen {
		s.Stats.FlakyBatches++
	}
	s.Groups = slices.DeleteFunc(s.Groups, func(x Group) bool { return x.ID == g.ID })
}

// rebuildWithout takes entry id out of candidate cid: the candidate is
// built again without it, as a new candidate whose ID it returns (0 when
// it was its only entry, and is dropped), and the candidates built on it
// are dropped.
func (s *State) rebuildWithout(cid int, id string, out []Action) ([]Action, int) {
	out = s.dropDescendants(cid, out)
	c := s.candidate(cid)
	if e := s.entry(id); e != nil {
		e.Candidate = 0
	}
	if c.State == Building || c.State == Testing {
		out = append(out, Cancel{Candidate: c.ID, SHA: c.SHA})
		s.Stats.Dropped++
	}
	entries := slices.DeleteFunc(slices.Clone(c.Entries), func(x string) bool { return x == id })
	if len(entries) == 0 {
		s.deleteCandidate(cid)
		return out, 0
	}
	// A new candidate, so that a late answer about the old one is not
	// taken for one about it.
	nc := Candidate{ID: s.newID(), Parent: c.Parent, Entries: entries, State: Pending, Probe: c.Probe, Leaf: c.Leaf}
	for _, e := range nc.Entries {
		s.entry(e).Candidate = nc.ID
	}
	*c = nc
	return out, nc.ID
}

// dropDescendants drops the candidates built on candidate id, directly or
// not: their entries wait again.
func (s *State) dropDescendants(id int, out []Action) []Action {
	gone := map[int]bool{id: true}
	keep := s.Candidates[:0]
	for _, c := range s.Candidates {
		if c.Parent == 0 || !gone[c.Parent] {
			keep = append(keep, c)
			continue
		}
		gone[c.ID] = true
		out = s.release(c, out)
	}
	s.Candidates = keep
	return out
}

// dropChain drops every candidate of the landing chain: their entries
// wait again. Probes go on: what they tell does not depend on the base.
func (s *State) dropChain(out []Action) []Action {
	keep := s.Candidates[:0]
	for _, c := range s.Candidates {
		if c.Probe != 0 {
			keep = append(keep, c)
			continue
		}
		out = s.release(c, out)
	}
	s.Candidates = keep
	return out
}

// release frees the entries of a dropped candidate, and cancels its run.
func (s *State) release(c Candidate, out []Action) []Action {
	for _, id := range c.Entries {
		if e := s.entry(id); e != nil && e.Candidate == c.ID {
			e.Candidate = 0
		}
	}
	if c.State == Building || c.State == Testing {
		out = append(out, Cancel{Candidate: c.ID, SHA: c.SHA})
	}
	s.Stats.Dropped++
	return out
}

// conflict handles an entry that did not merge into its candidate.
func (s *State) conflict(cfg Config, ev Conflict, out []Action) []Action {
	c := s.candidate(ev.Candidate)
	if c == nil || c.State != Building || !slices.Contains(c.Entries, ev.Entry) {
		return out
	}
	if c.Alt != 0 {
		// Its batch holds the entry too, and its own build tells.
		out = s.release(*c, out)
		s.deleteCandidate(c.ID)
		return out
	}
	onBase := ev.Base || (c.Parent == 0 && c.Entries[0] == ev.Entry)
	parent := c.Parent
	round := s.hasAlts(c.ID)
	old := c.ID
	out, rebuilt := s.rebuildWithout(c.ID, ev.Entry, out)
	if round {
		out = s.dropAlts(old, out)
		if b := s.candidate(rebuilt); b != nil {
			s.addAlts(cfg, b)
		}
	}
	e := s.entry(ev.Entry)
	if onBase {
		// It conflicts with the base itself.
		s.Stats.Conflicts++
		s.settle(e, convicted)
		s.deleteEntry(ev.Entry)
		return append(out, Rework{Entry: ev.Entry, Reason: ReworkConflict})
	}
	// It may conflict only with entries ahead of it that may yet fail:
	// tried again, alone, once they have left the queue (landed, and it
	// then conflicts with the base, or failed).
	s.settle(e, left)
	e.After = parent
	if rebuilt != 0 {
		e.After = rebuilt // its own batch's entries before it
	}
	return out
}

// tested handles a CI result.
func (s *State) tested(cfg Config, ev Tested, out []Action) []Action {
	c := s.candidate(ev.Candidate)
	if c == nil || c.State != Testing {
		return out
	}
	if c.Leaf {
		return s.leafTested(c.ID, ev, out)
	}
	if c.Probe != 0 {
		return s.probed(c.ID, ev, out)
	}
	if c.Alt != 0 {
		c.State = Passed
		if !ev.Passed {
			c.State, c.FailedJobs = Failed, slices.Clone(ev.FailedJobs)
		}
		return out
	}
	if ev.Passed {
		c.State = Passed
		return out
	}
	c.State, c.FailedJobs = Failed, slices.Clone(ev.FailedJobs)
	s.Stats.Failures++
	out = s.dropDescendants(c.ID, out)
	if s.hasAlts(c.ID) {
		return out // settled with its alternatives' results
	}
	if c.Parent == 0 || s.quiet(cfg) {
		// Probes are built on the base: what they find does not depend
		// on the candidates ahead. When the queue is loaded, a failure
		// behind another that fails is left to it (it most likely holds
		// the same culprit), saving the probes' runs.
		out = s.judge(c.ID, out)
	}
	return out
}

// quiet reports whether fewer entries wait for the landing chain than
// one and a half batches may hold: the queue is not loaded, works in
// rounds, and what counts is how soon each entry lands rather than how
// few runs it takes. (At MaxBatch, at 30 arrivals an hour on 8 runs, the
// queue tipped into its loaded mode, which tests new entries twice.)
func (s *State) quiet(cfg Config) bool {
	n := 0
	for _, e := range s.Entries {
		if e.Candidate == 0 && e.Group == 0 {
			n++
		}
	}
	return n < cfg.MaxBatch*3/2
}

// judge settles a failed candidate of the landing chain once every one
// before it has landed: its entries are suspected, together, and probes
// find which fail. A batch of vetted entries only, each of which a run
// passed, most likely failed for a flaky run: its entries wait again, to
// be batched again, and are suspected should that fail too (probing them
// would take several runs, and another for the chain after).
func (s *State) judge(id int, out []Action) []Action {
	c := *s.candidate(id)
	s.deleteCandidate(id)
	if c.InChain() && len(c.Entries) > 1 && !slices.ContainsFunc(c.Entries, func(e string) bool {
		x := s.entry(e)
		return !x.Vetted || x.Rebatched
	}) {
		for _, e := range c.Entries {
			x := s.entry(e)
			x.Candidate, x.Rebatched = 0, true
		}
		return out
	}
	g := Group{ID: s.newID(), Depth: 1, Jobs: c.FailedJobs}
	s.Stats.MaxBisection = max(s.Stats.MaxBisection, 1)
	s.Groups = append(s.Groups, g)
	// Entries a probe passed on the base are not suspected again when
	// the batch holds others that were not: the failure is most likely
	// theirs. A batch of vetted entries only is suspected whole.
	fresh := slices.ContainsFunc(c.Entries, func(e string) bool { return !s.entry(e).Vetted })
	for _, e := range c.Entries {
		x := s.entry(e)
		x.Candidate = 0
		if !fresh || !x.Vetted {
			x.Group, x.Vetted = g.ID, false
		}
	}
	return out
}

// leafTested handles the result of a leaf: one that passed on the tip of
// the chain joins it, tested already; one that passed on a tip the chain
// has moved on from vets its entries; one that failed is suspected as a
// failed batch.
func (s *State) leafTested(id int, ev Tested, out []Action) []Action {
	c := s.candidate(id)
	if !ev.Passed {
		c.State, c.FailedJobs = Failed, slices.Clone(ev.FailedJobs)
		return s.judge(id, out)
	}
	tip := 0
	if t := s.tip(); t != nil {
		tip = t.ID
	}
	if c.Parent == tip {
		c.Leaf, c.State = false, Passed
		s.Stats.Promoted++
		return out
	}
	for _, e := range c.Entries {
		x := s.entry(e)
		x.Candidate, x.Vetted, x.Reworked = 0, true, false
	}
	s.deleteCandidate(id)
	return out
}

// probed handles the result of a probe: its entries are cleared when it
// passed (and the last of a group whose failure a probe of its own showed
// is convicted); when it failed, an entry alone is convicted, and more
// are suspected again, as a smaller group, while the rest of their group
// is cleared.
func (s *State) probed(id int, ev Tested, out []Action) []Action {
	p := *s.candidate(id)
	s.deleteCandidate(id)
	if ev.Passed {
		for _, e := range p.Entries {
			x := s.entry(e)
			x.Candidate, x.Vetted, x.Reworked = 0, true, false
			s.settle(x, cleared)
		}
		if g := s.group(p.Probe); g != nil && g.SHA != "" {
			var left []*Entry
			for i := range s.Entries {
				if x := &s.Entries[i]; x.Group == g.ID {
					left = append(left, x)
				}
			}
			if len(left) == 1 && left[0].Candidate == 0 {
				// The others of a probe that failed passed: the one
				// left failed it, and needs no run of its own.
				return s.convict(left[0], g.Failed, g.SHA, out)
			}
		}
		return out
	}
	s.Stats.ProbeFailures++
	outer := s.group(p.Probe)
	if outer != nil && outer.Screen {
		// New entries that failed together: a failed batch now, whose
		// culprit the next probes find (one alone is tried again).
		outer.Screen, outer.Depth, outer.Jobs = false, 1, slices.Clone(ev.FailedJobs)
		for _, e := range p.Entries {
			s.entry(e).Candidate = 0
		}
		return out
	}
	if len(p.Entries) == 1 {
		x := s.entry(p.Entries[0])
		x.Candidate = 0
		if outer != nil && !x.Retried && !slices.ContainsFunc(ev.FailedJobs, func(j string) bool { return slices.Contains(outer.Jobs, j) }) {
			// Other jobs than those that failed its batch: most likely
			// a flaky one. Tried once more before it is sent back.
			x.Retried = true
			s.Stats.Retries++
			return out
		}
		return s.convict(x, ev.FailedJobs, p.SHA, out)
	}
	g := Group{ID: s.newID(), Depth: 2, Jobs: slices.Clone(ev.FailedJobs)}
	if outer != nil {
		g.Depth = outer.Depth + 1
		g.Jobs = outer.Jobs // the batch's failure is what is looked for
		if outer.Depth > 1 && slices.ContainsFunc(ev.FailedJobs, func(j string) bool { return slices.Contains(outer.Jobs, j) }) {
			g.SHA, g.Failed = p.SHA, slices.Clone(ev.FailedJobs)
		}
	}
	s.Stats.MaxBisection = max(s.Stats.MaxBisection, g.Depth)
	s.Groups = append(s.Groups, g)
	for _, e := range p.Entries {
		x := s.entry(e)
		x.Candidate = 0
		s.settle(x, handed)
		x.Group = g.ID
	}
	// The culprit is most likely among them: the rest of the outer group
	// goes back to the landing chain, which would find another.
	for i := range s.Entries {
		if x := &s.Entries[i]; x.Group == p.Probe && x.Candidate == 0 {
			s.settle(x, cleared)
		}
	}
	return out
}

// convict sends entry x back for rework: it failed jobs, whose logs are
// in commit sha.
func (s *State) convict(x *Entry, jobs []string, sha string, out []Action) []Action {
	id := x.ID
	s.settle(x, convicted)
	s.deleteEntry(id)
	s.Stats.Convicted++
	s.observe(1, 1)
	s.Convicted = append(s.Convicted, id)
	if len(s.Convicted) > maxConvicted {
		s.Convicted = slices.Delete(s.Convicted, 0, len(s.Convicted)-maxConvicted)
	}
	return append(out, Rework{Entry: id, Reason: ReworkChecksFailed, Jobs: slices.Clone(jobs), SHA: sha})
}

// observe records judged entries in FailRate: n entries, failed of which
// failed.
func (s *State) observe(n, failed int) {
	for i := range n {
		x := 0.0
		if i < failed {
			x = 1
		}
		s.FailRate += failRateWeight * (x - s.FailRate)
	}
}

// landed handles a candidate whose commit is now the base.
func (s *State) landed(ev Landed, out []Action) []Action {
	c := s.candidate(ev.Candidate)
	if c == nil || c.State != Landing {
		return out
	}
	cand := *c
	s.Base = cand.SHA
	s.Stats.Batches++
	s.Stats.Landed += len(cand.Entries)
	s.observe(len(cand.Entries), 0)
	for _, id := range cand.Entries {
		s.settle(s.entry(id), cleared)
		out = append(out, Done{Entry: id, SHA: cand.SHA})
	}
	s.Entries = slices.DeleteFunc(s.Entries, func(e Entry) bool { return slices.Contains(cand.Entries, e.ID) })
	s.deleteCandidate(cand.ID)
	// What was built on it is now built on the base; what was built on
	// the old base beside it is not.
	keep := s.Candidates[:0]
	var judged, released []int
	for _, x := range s.Candidates {
		switch {
		case x.Probe != 0:
		case x.Parent == cand.ID:
			x.Parent = 0
			if x.State == Failed {
				judged = append(judged, x.ID)
			}
		case x.Parent == 0 && x.Leaf && (x.State == Building || x.State == Testing):
			// Built beside what landed: no longer on the tip, but what its
			// run tells of its entries still holds.
			g := Group{ID: s.newID(), Screen: true}
			s.Groups = append(s.Groups, g)
			x.Leaf, x.Probe = false, g.ID
			for _, id := range x.Entries {
				s.entry(id).Group = g.ID
			}
		case x.Parent == 0:
			out = s.release(x, out)
			released = append(released, x.ID)
			continue
		}
		keep = append(keep, x)
	}
	s.Candidates = keep
	for _, id := range released {
		out = s.dropDescendants(id, out)
	}
	for _, id := range judged {
		out = s.judge(id, out)
	}
	return out
}

// inFlight counts the candidates built or under test: of the landing
// chain, and probes.
func (s *State) inFlight() (chain, probes int) {
	for _, c := range s.Candidates {
		switch c.State {
		case Pending, Building, Testing:
			if !c.InChain() {
				probes++
			} else {
				chain++
			}
		}
	}
	return chain, probes
}

// tip returns the candidate of the landing chain new ones are built on:
// the last one not failed, or nil for the base.
func (s *State) tip() *Candidate {
	for i := len(s.Candidates) - 1; i >= 0; i-- {
		if c := &s.Candidates[i]; c.InChain() && c.State != Failed {
			return c
		}
	}
	return nil
}

// waiting returns the entries that wait and may be tested now, in queue
// order: by when they entered, hotfixes HotfixLead earlier.
func (s *State) waiting(cfg Config) []*Entry {
	var w []*Entry
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Candidate == 0 && (e.After == 0 || s.candidate(e.After) == nil) {
			w = append(w, e)
		}
	}
	key := func(e *Entry) time.Time {
		if e.Priority == Hotfix {
			return e.Since.Add(-cfg.HotfixLead)
		}
		return e.Since
	}
	slices.SortStableFunc(w, func(a, b *Entry) int { return key(a).Compare(key(b)) })
	return w
}

// vettedRisk is the chance that an entry a probe passed fails, as a
// share of the failure rate seen.
const vettedRisk = 0.1

// nextBatch returns the entries of the next candidate of the landing
// chain while the queue is loaded: the first that wait, vetted, as many as
// pass together with the chance aimed at, given the failure rate seen (an
// entry a probe passed counts for less); an entry that did not merge
// before goes alone. New entries are tested as leaves first.
func (s *State) nextBatch(cfg Config, waiting []*Entry) []*Entry {
	pass := 1.0
	eligible := func(e *Entry) bool {
		return e.Group == 0 && e.Candidate == 0 && (e.Vetted || e.After != 0)
	}
	target := cfg.TargetPass
	var batch []*Entry
	for _, e := range waiting {
		if !eligible(e) {
			continue
		}
		if e.After != 0 {
			if len(batch) == 0 {
				return []*Entry{e}
			}
			continue
		}
		risk := min(s.FailRate, 1)
		if e.Vetted {
			risk *= vettedRisk
		}
		if len(batch) > 0 && pass*(1-risk) < target {
			break
		}
		pass *= 1 - risk
		batch = append(batch, e)
		if len(batch) == cfg.MaxBatch {
			break
		}
	}
	return batch
}

// nextProbes returns the probes of the oldest group that has none under
// test: all its entries together when it is a screen; else, with free CI
// runs to spare, its entries split into as many parts as there are free
// runs, each tested at once (a culprit is found in fewer rounds); with
// one, its first half only (a failure then clears the other half, a pass
// leaves it to the next probe).
func (s *State) nextProbes(waiting []*Entry, free int) (int, [][]*Entry) {
	for _, g := range s.Groups {
		busy := false
		for _, c := range s.Candidates {
			if c.Probe == g.ID {
				busy = true
				break
			}
		}
		if busy {
			continue
		}
		var members []*Entry
		for _, e := range waiting {
			if e.Group == g.ID && e.Candidate == 0 {
				members = append(members, e)
			}
		}
		switch n := len(members); {
		case n == 0:
		case g.Screen:
			return g.ID, [][]*Entry{members}
		case free < 2 || n == 1:
			return g.ID, [][]*Entry{members[:(n+1)/2]}
		default:
			m := min(n, free)
			parts := make([][]*Entry, 0, m)
			for k := range m {
				parts = append(parts, members[k*n/m:(k+1)*n/m])
			}
			return g.ID, parts
		}
	}
	return 0, nil
}

// leaf starts a leaf of the next new entries on the tip of the chain, as
// many as pass together with the chance aimed at, and reports whether it
// did.
func (s *State) leaf(cfg Config, waiting []*Entry) bool {
	target := cfg.TargetPass
	pass := 1.0
	var batch []*Entry
	for _, e := range waiting {
		if e.Group != 0 || e.Candidate != 0 || e.Vetted || e.After != 0 {
			continue
		}
		if e.Reworked {
			if len(batch) == 0 {
				batch = append(batch, e)
				break
			}
			continue
		}
		if len(batch) > 0 && pass*(1-s.FailRate) < target {
			break
		}
		pass *= 1 - s.FailRate
		batch = append(batch, e)
		if len(batch) == cfg.MaxBatch {
			break
		}
	}
	if len(batch) == 0 {
		return false
	}
	s.add(Candidate{State: Pending, Leaf: true}, s.tip(), batch)
	return true
}

// plan lands what passed, starts probes and fills the landing chain, and
// builds what can be built.
func (s *State) plan(cfg Config, out []Action) []Action {
	out = s.settleAlts(out)
	if s.Paused {
		return out
	}
	for i := range s.Candidates {
		if c := &s.Candidates[i]; c.InChain() && c.Parent == 0 && c.State == Passed {
			c.State = Landing
			out = append(out, Land{Candidate: c.ID, From: s.Base, To: c.SHA, Entries: slices.Clone(c.Entries)})
			break
		}
		if c := &s.Candidates[i]; c.InChain() && c.Parent == 0 {
			break // the first of the chain lands first
		}
	}
	for {
		chain, probes := s.inFlight()
		free := cfg.Depth - chain - probes
		if free <= 0 {
			break
		}
		waiting := s.waiting(cfg)
		spec := cfg.Speculation
		quiet := s.quiet(cfg)
		var batch []*Entry
		if quiet || s.roundFailing() {
			// Rounds, below; or a round's batch failed and waits for its
			// alternatives: one of them is the chain's next candidate.
		} else if chain < spec && len(s.chainLen()) < 2*spec {
			batch = s.nextBatch(cfg, waiting)
		}
		if quiet {
			// Rounds: the whole waiting batch is tested on the base, and
			// beside it alternatives each without one part, on the runs
			// free; entries that come meanwhile wait for the next round.
			// Probes take what the round leaves.
			if len(s.chainLen()) == 0 {
				if b := s.roundBatch(cfg, waiting); len(b) > 0 {
					s.addAlts(cfg, s.add(Candidate{State: Pending}, nil, b))
					continue
				}
			}
			g, parts := s.nextProbes(waiting, free)
			if len(parts) > 0 {
				for _, part := range parts[:min(len(parts), free)] {
					s.Stats.Probes++
					s.add(Candidate{State: Pending, Probe: g}, nil, part)
				}
				continue
			}
			break
		}
		g, parts := s.nextProbes(waiting, free)
		// The chain's runs are kept for it while it has work, but a probe
		// of entries older than the chain's next batch goes first when
		// the runs are too few for both.
		if len(batch) > 0 && (len(parts) == 0 || probes > 0 || free > spec-chain || !older(parts[0][0], batch[0], cfg)) {
			s.add(Candidate{State: Pending}, s.tip(), batch)
			continue
		}
		if len(batch) > 0 {
			free = max(free-(spec-chain), 1)
		}
		if len(parts) > 0 {
			for _, part := range parts[:min(len(parts), free)] {
				s.Stats.Probes++
				s.add(Candidate{State: Pending, Probe: g}, nil, part)
			}
			continue
		}
		if !s.roundFailing() && s.leaf(cfg, waiting) {
			continue
		}
		break
	}
	for i := range s.Candidates {
		c := &s.Candidates[i]
		if c.State != Pending {
			continue
		}
		parent := s.Base
		if c.Parent != 0 {
			p := s.candidate(c.Parent)
			if p == nil || p.SHA == "" {
				continue
			}
			parent = p.SHA
		}
		c.ParentSHA, c.State = parent, Building
		heads := make([]Head, len(c.Entries))
		for j, id := range c.Entries {
			heads[j] = Head{Entry: id, SHA: s.entry(id).Head}
		}
		out = append(out, Build{Candidate: c.ID, Parent: parent, Heads: heads, Probe: c.Probe != 0})
	}
	return out
}

// older reports whether a waited longer than b, in queue order.
func older(a, b *Entry, cfg Config) bool {
	key := func(e *Entry) time.Time {
		if e.Priority == Hotfix {
			return e.Since.Add(-cfg.HotfixLead)
		}
		return e.Since
	}
	return key(a).Before(key(b))
}

// chainLen returns the candidates of the landing chain.
func (s *State) chainLen() []int {
	var ids []int
	for _, c := range s.Candidates {
		if c.InChain() {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// add adds candidate c with entries batch, built on parent (nil: the
// base), and returns it.
func (s *State) add(c Candidate, parent *Candidate, batch []*Entry) *Candidate {
	c.ID = s.newID()
	if parent != nil {
		c.Parent = parent.ID
	}
	for _, e := range batch {
		e.Candidate, e.After = c.ID, 0
		c.Entries = append(c.Entries, e.ID)
	}
	s.Candidates = append(s.Candidates, c)
	return &s.Candidates[len(s.Candidates)-1]
}

// roundBatch returns the entries of a round's batch: every entry that
// waits and is not suspected, up to a batch's size. An entry that did not
// merge onto what was ahead of it goes first, on the base itself, where a
// conflict means it conflicts with the base; a second such entry waits
// for a round of its own.
func (s *State) roundBatch(cfg Config, waiting []*Entry) []*Entry {
	var batch []*Entry
	first := false
	for _, e := range waiting {
		if e.Candidate != 0 || e.Group != 0 {
			continue
		}
		if e.After != 0 {
			if first {
				continue
			}
			first = true
			batch = append([]*Entry{e}, batch...)
		} else {
			batch = append(batch, e)
		}
		if len(batch) == cfg.MaxBatch {
			break
		}
	}
	return batch
}

// altRuns is how many alternatives a round may have, at most: by
// default Depth less three, or half of it, so that the probes of
// suspected entries keep runs beside the rounds.
func altRuns(cfg Config) int {
	if cfg.Alternatives != 0 {
		return min(max(cfg.Alternatives, 0), cfg.Depth-1)
	}
	return max(cfg.Depth-3, cfg.Depth/2)
}

// addAlts adds the alternatives of round batch b, built on the base
// beside it: b's entries are split into as many parts as there are CI
// runs free (at most altRuns), and each alternative leaves one part out.
// Should b fail for one part's sake, the alternative without it lands
// the rest.
func (s *State) addAlts(cfg Config, b *Candidate) {
	chain, probes := s.inFlight()
	n := len(b.Entries)
	m := min(n, cfg.Depth-chain-probes, altRuns(cfg))
	if n < 2 || m < 2 {
		return
	}
	// A change that failed its checks here before and came back is a
	// part of its own: a fix fails again far more often than a new
	// change does.
	var parts [][]string
	var rest []string
	for _, id := range b.Entries {
		if e := s.entry(id); e.Reworked && !e.Vetted && len(parts) < m-1 {
			parts = append(parts, []string{id})
		} else {
			rest = append(rest, id)
		}
	}
	if k := min(m-len(parts), len(rest)); k > 0 {
		for i := range k {
			parts = append(parts, rest[i*len(rest)/k:(i+1)*len(rest)/k])
		}
	}
	bid, entries := b.ID, slices.Clone(b.Entries)
	for _, part := range parts {
		alt := Candidate{ID: s.newID(), State: Pending, Alt: bid}
		alt.Entries = slices.DeleteFunc(slices.Clone(entries), func(id string) bool { return slices.Contains(part, id) })
		s.Candidates = append(s.Candidates, alt)
	}
}

// hasAlts reports whether candidate id has alternatives.
func (s *State) hasAlts(id int) bool {
	return slices.ContainsFunc(s.Candidates, func(c Candidate) bool { return c.Alt == id })
}

// dropAlts drops the alternatives of candidate id.
func (s *State) dropAlts(id int, out []Action) []Action {
	for _, a := range slices.Clone(s.Candidates) {
		if a.Alt == id {
			out = s.release(a, out)
			s.deleteCandidate(a.ID)
		}
	}
	return out
}

// settleAlts decides what the alternatives of a round tell: those of a
// batch that is gone, passed or landing are dropped; when the batch
// failed and every alternative has answered, the alternative that passed
// leaving out least takes its place, and the part it left out is
// suspected (unless another alternative passed too); when every one
// failed too, the failed jobs tell what to suspect.
func (s *State) settleAlts(out []Action) []Action {
	for _, a := range slices.Clone(s.Candidates) {
		if a.Alt == 0 {
			continue
		}
		if b := s.candidate(a.Alt); b == nil || b.State == Passed || b.State == Landing {
			out = s.release(a, out)
			s.deleteCandidate(a.ID)
		}
	}
	for _, b := range slices.Clone(s.Candidates) {
		if !b.InChain() || b.State != Failed || b.Parent != 0 {
			continue
		}
		var alts []Candidate
		for _, a := range s.Candidates {
			if a.Alt == b.ID {
				alts = append(alts, a)
			}
		}
		if len(alts) == 0 {
			continue
		}
		best, passed := -1, 0
		for i, a := range alts {
			if a.State != Passed {
				continue
			}
			passed++
			if best < 0 || len(a.Entries) > len(alts[best].Entries) {
				best = i
			}
		}
		if best >= 0 {
			// The others' results come within the runs' spread, and
			// tell whether the batch failed for a part or for nothing:
			// wait for them.
			if slices.ContainsFunc(alts, func(a Candidate) bool { return a.State != Failed && a.State != Passed }) {
				continue
			}
			out = s.promote(b.ID, alts[best].ID, passed > 1, out)
			continue
		}
		if slices.ContainsFunc(alts, func(a Candidate) bool { return a.State != Failed }) {
			continue // results to come
		}
		out = s.dropAlts(b.ID, out)
		out = s.byJobs(b.ID, alts, out)
	}
	return out
}

// byJobs judges failed round batch bid when none of its alternatives
// passed, most likely for two culprits in two parts: an alternative that
// did not fail on some of the jobs that failed the batch left out a
// culprit of those, and its part is suspected, for probes; the batch's
// other entries wait again, for the next round. When no alternative
// tells, the batch is judged as any failed batch.
func (s *State) byJobs(bid int, alts []Candidate, out []Action) []Action {
	b := *s.candidate(bid)
	var parts, jobs [][]string
	for _, a := range alts {
		missing := slices.DeleteFunc(slices.Clone(b.FailedJobs), func(j string) bool { return slices.Contains(a.FailedJobs, j) })
		if len(missing) == 0 {
			continue
		}
		parts, jobs = append(parts, leftOut(b, a)), append(jobs, missing)
	}
	if len(parts) == 0 {
		return s.judge(bid, out)
	}
	s.deleteCandidate(bid)
	for _, id := range b.Entries {
		s.entry(id).Candidate = 0
	}
	for i, part := range parts {
		s.suspect(part, jobs[i])
	}
	return out
}

// promote puts alternative aid in the place of failed round batch bid:
// it is the chain's first candidate now, and lands; the batch's other
// alternatives are dropped. The entries it left out are suspected, for
// probes, unless cleared: another alternative, which holds them, passed
// too, so that the batch most likely failed for nothing (a flaky run);
// they are then vetted, and wait for the next round.
func (s *State) promote(bid, aid int, cleared bool, out []Action) []Action {
	out = s.dropDescendants(bid, out)
	b, a := *s.candidate(bid), s.candidate(aid)
	a.Alt = 0
	for _, id := range a.Entries {
		s.entry(id).Candidate = aid
	}
	left := leftOut(b, *a)
	out = s.dropAlts(bid, out)
	s.deleteCandidate(bid)
	for _, id := range left {
		x := s.entry(id)
		x.Candidate = 0
		x.Vetted = x.Vetted || cleared
	}
	if !cleared {
		s.suspect(left, b.FailedJobs)
	}
	return out
}

// leftOut returns the entries of round batch b that its alternative a
// leaves out.
func leftOut(b, a Candidate) []string {
	return slices.DeleteFunc(slices.Clone(b.Entries), func(id string) bool { return slices.Contains(a.Entries, id) })
}

// suspect makes entries ids a group suspected of failing jobs, which
// probes test.
func (s *State) suspect(ids, jobs []string) {
	g := Group{ID: s.newID(), Depth: 1, Jobs: slices.Clone(jobs)}
	s.Stats.MaxBisection = max(s.Stats.MaxBisection, 1)
	s.Groups = append(s.Groups, g)
	for _, id := range ids {
		x := s.entry(id)
		x.Group, x.Vetted = g.ID, false
	}
}

// roundFailing reports whether a round's batch failed and waits for its
// alternatives' results.
func (s *State) roundFailing() bool {
	for _, c := range s.Candidates {
		if c.InChain() && c.State == Failed && s.hasAlts(c.ID) {
			return true
		}
	}
	return false
}
