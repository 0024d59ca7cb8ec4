// Package taskjson encodes a task ([lifecycletype.Task]) as the HTTP API
// serves it: the envelope of GET /tasks/{id} (whole, or compact for a
// small token budget) and a page of GET /tasks.
//
// A [Writer] writes these bytes by hand, without reflection, for the hot
// read paths: exactly the bytes encoding/json writes for the values
// [ReflectEnvelope] and [ReflectList] return (by an Encoder without HTML
// escaping, one value a line), which are the reference and the fallback.
// The Writer gives up, and the caller falls back to encoding/json, when
// encoding/json would fail (an invalid routingReason, a routing confidence
// that is not a number).
//
// The package knows nothing of the Service: a task comes in with its
// available actions already computed.
package taskjson
