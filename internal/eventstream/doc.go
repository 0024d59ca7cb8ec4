// Package eventstream is the machinery of the event stream (GET
// /task-events/stream) and of the watches of single tasks: the stream's
// parameters and filter, where a stream starts from its cursor, the
// sse.Feed that reads the broker's ring and replays from the Store, the
// per-key limit of open streams, the keys of open streams that revocation
// ends, and the one reader of the broker that serves every task watch.
//
// It is built from what it uses (the broker, a narrow reader of the
// Store, the clock, the telemetry and the configured limits), never from
// the Service; the root package keeps the HTTP handler and the public
// API (Service.WatchTask, TaskWatch) as thin wiring around it.
package eventstream
