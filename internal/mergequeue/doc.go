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
// # Rounds, when the queue is quiet
//
// Entries wait in queue order: hotfixes first, with aging, so that an
// entry that has waited [Config.HotfixLead] longer than a hotfix goes
// before it. A candidate is a batch of entries merged onto its parent (the
// base branch, or another candidate) and tested by CI; one that lands
// moves the base branch to its tested commit, so the landed tree is the
// tested tree.
//
// While fewer entries wait than one and a half batches may hold, the
// queue works in rounds. A round tests every entry that waits,
// unsuspected (up to a batch), as one batch on the base, and beside it,
// on the CI runs free (all but three, or Config.Alternatives),
// alternatives: the batch split into as many parts as there are runs,
// each alternative the batch without one part. An entry sent back for failing checks that came back is a part of
// its own: a fix fails again far more often than a new change. The batch
// lands when it passes; when it fails, once every alternative has
// answered, the passing alternative that leaves out least lands instead,
// and the part it left out is suspected, unless another alternative
// (which holds it) passed too: the batch then most likely failed for a
// flaky run, and the part waits for the next round.
// When every alternative fails too (most likely two culprits in two
// parts), an alternative that did not fail on some of the batch's failed
// jobs left out a culprit of those, and its part is suspected; the others
// wait for the next round. Entries that come during a round wait for the
// next one, and the probes of suspected entries take the runs a round
// does not need.
//
// # Leaves and the chain, when it is loaded
//
// When more wait, new entries are tested first as leaves: candidates
// built on the tip of the landing chain, several at once, on which
// nothing is built. A leaf that passes while still on the tip joins the
// chain as it is, tested already; one the chain has moved on from vets
// its entries, which join the chain in large batches (they seldom fail);
// one that fails has its entries suspected together. An entry sent back
// for failing checks that came back is tested alone until a candidate
// passes with it. The chain's candidates are each built on the one
// before; the first lands when it passes.
//
// # Failures
//
// A failed batch's entries are suspected together (but for those a probe
// passed already, when it holds others; a batch of such entries only is
// batched again once, its failure most likely a flaky run) and tested by
// probes,
// candidates built on the base that never land: with CI runs to spare, the
// batch is split into as many parts as there are runs, all tested at once;
// with one, its first half (a failure then clears the other half, which
// the chain would catch again). A part that passes vets its entries; one
// that fails is suspected again, smaller; an entry alone that fails again
// on the jobs that failed its batch is its culprit and goes back to its
// agent for rework (an entry alone that fails on other jobs, most likely
// a flaky one, is tried once more). A part that failed as its batch did,
// after a larger part failed too, has its culprit sent back without a run
// of its own once all its other entries passed. Batch sizes follow the failure rate
// seen, an average over the last entries judged; a vetted entry counts
// for a tenth of it.
//
// # Conflicts
//
// An entry that does not merge onto a candidate's parent is taken out of
// the candidate. If it does not merge onto the base either (the host says
// so, or it stood first on the base), it goes back for rework; otherwise
// it may conflict only with entries ahead of it that may yet fail, and it
// is tried again once they have left the queue: alone while the queue is
// loaded, first in a round's batch (on the base itself) while it is
// quiet.
package mergequeue
