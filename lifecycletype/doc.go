// Package lifecycletype holds the vocabulary that package lifecycle and
// its subsystems share: the records a Store keeps (Task, Event,
// Submission, ShipOperation, APIKey, Subscription, Delivery and the
// rest), the Store contract itself, the contracts of the code-host
// adapters, the CI provider and the deployer, the Clock, the sentinel
// errors every layer matches with errors.Is, and the errors a request is
// refused with (ValidationError, collected by a Validator; ConflictError)
// with the API's error body (ErrorBody) they are answered with.
//
// Most programs never import it: package lifecycle declares an alias for
// every type here (lifecycle.Task is lifecycletype.Task) and re-exports
// the constants and errors, so code written against package lifecycle
// reads as before. It exists, as River's rivertype does, so that the
// subsystems the Service starts (the webhook dispatcher, the reconciler,
// the ship runner) can live in packages of their own that depend on these
// types and not on the Service.
//
// The package holds data and the few rules that belong to the data
// alone (a task's CI and review decision, its reason for rework); the
// rules that move a task, and every command, stay in package lifecycle.
package lifecycletype
