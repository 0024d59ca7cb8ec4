// Package mergequeue decides what a merge queue does next. It is the
// queue's logic and nothing else: a [State] that a driver keeps (in a
// Store, or in the memory of a simulation), and [State.Apply], which takes
// one [Event] (an entry added, a candidate built, a CI result, a landing)
// and returns the [Action]s the driver must carry out (build a candidate,
// test it, land it, send an entry back for rework). It does no I/O, reads
// no clock and starts no goroutine, so the same code runs under the
// Service and under internal/cmd/queuesim's virtual clock, and a State
// saved after each Apply is all a restarted driver needs.
//
// # Leaves, the chain and landing
//
// Entries wait in queue order: hotfixes first, with aging, so that an
// entry that has waited [Config.HotfixLead] longer than a hotfix goes
// before it. A candidate is a batch of entries merged onto its parent (the
// base branch, or another candidate) and tested by CI. When fewer entries
// wait than a batch may hold, new entries go straight into the landing
// chain, in small batches, up to half the CI runs, so that most land after
// one run. When more wait, new entries are tested first as leaves:
// candidates built on the tip of the landing chain, several at once, on
// which nothing is built. A leaf that passes
// while still on the tip joins the chain as it is, tested already; one
// the chain has moved on from vets its entries, which join the chain in
// large batches (they seldom fail); one that fails has its entries
// suspected together. The chain's candidates are each built on the one
// before; the first lands when it passes, by moving the base branch to its
// tested commit, so the landed tree is the tested tree.
//
// # Failures
//
// A failed batch's entries are suspected together (but for those a probe
// passed already, when it holds others) and tested by probes,
// candidates built on the base that never land: with CI runs to spare, the
// batch is split into as many parts as there are runs, all tested at once;
// with one, its first half (a failure then clears the other half, which
// the chain would catch again). A part that passes vets its entries; one
// that fails is suspected again, smaller; an entry alone that fails again
// on the jobs that failed its batch is its culprit and goes back to its
// agent for rework (an entry alone that fails on other jobs, most likely
// a flaky one, is tried once more). Batch sizes follow the failure rate
// seen, an average over the last entries judged; a vetted entry counts
// for a tenth of it. When fewer entries wait than a batch may hold, the
// queue is not loaded: batches aim to pass more often, the chain may
// speculate deeper, a failure behind another is judged at once, and the
// probes of a failed batch take every run the chain does not need.
//
// # Conflicts
//
// An entry that does not merge onto a candidate's parent is taken out of
// the candidate. If it does not merge onto the base either (the host says
// so, or it stood first on the base), it goes back for rework; otherwise
// it may conflict only with entries ahead of it that may yet fail, and it
// is tried again, alone, once they have left the queue.
package mergequeue
