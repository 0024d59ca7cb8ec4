// Package queuerun drives the lifecycle's own merge queues: one per
// repository and base branch, kept in the Store (a
// lifecycletype.MergeQueueStore), decided by package mergequeue and carried
// out at the code host through a lifecycletype.QueueHost and the
// repository's CI provider.
//
// A ship enters its change with [Runner.Enter] and follows it with the
// same call: the ship runner calls it in place of the adapter's Merge (see
// [Adapter]), and until the change has landed or been sent back it answers
// a lifecycletype.TemporaryError whose Reason is merge_queue, which the
// ship runner follows however long the queue takes.
//
// The driver is level-triggered. Each step of a queue reads its state and
// does what the state asks of the host: builds the candidates that are
// building, reads the CI of those under test, moves the base to the one
// that is landing. Each answer is applied to the state in a transaction of
// its own, which also records the entries that landed or go back for
// rework and appends their events. A process that dies between a host
// call and its transaction leaves the state as it was, and the next step,
// in this process or another, asks the host again: a build makes a commit
// with the same tree, a landing finds the base already at the candidate.
// One process at a time drives a queue, under a lease kept in its record.
package queuerun
