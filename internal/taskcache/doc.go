// Package taskcache keeps encodings of tasks (the answers of
// GET /tasks/{id}, and those of the Service's EncodedTask), each with the
// revision of the task it was read at (see
// [lifecycletype.TaskRevisioner]), in a bounded number of bytes.
//
// A reader asks the [Cache] for the task's revision, one column, and is
// answered from the cache when the revision is the one kept; otherwise it
// reads and encodes the whole task, and puts the encoding in. An encoding
// must depend on nothing but the task's row and the configuration of
// whoever encodes it (its available actions included), so that it holds
// while the revision does, or else name what else it depends on in a
// condition, which the reader checks before it serves a kept encoding
// (the Service's: whether the task's assignee is at its cap of tasks in
// progress, when that decides whether start is offered).
//
// The revision must be read before the task: the task read is then at that
// revision or later, so a kept encoding is never older than its revision
// says, and a task that changes after it is read again.
package taskcache
