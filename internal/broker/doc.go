// Package broker fans the events committed to the Store out to their
// readers in the process: the event streams, the task watches and the
// webhook dispatcher. Each event is encoded once, as its server-sent event
// frame, into the ring of a [fanout.Hub] that every reader shares.
package broker
