// Package reconcile is the reconciler's loop: it reads the code host again
// for every task in review on a schedule, so that a lost webhook delays a
// fact but never loses it.
//
// At each beat of the reconcile interval (a sweep), and at once when
// woken, a [Reconciler] claims the tasks due through the Store, reads each
// adapter binding's share of them in one call, and hands each reading back
// to the domain to apply. What a reading is, and how it is applied, are
// the domain's ([Tasks]); the claims, the batching, the schedule of the
// next reading and the sweep's measures are the loop's.
package reconcile
