// Package mcp serves the task lifecycle of a [lifecycle.Service] to coding
// agents over the Model Context Protocol (MCP), on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) and its Streamable HTTP
// transport, with the same contract, API keys and scopes as the HTTP API.
//
// [NewHandler] returns an http.Handler that a host mounts beside the API:
//
//	h, err := mcp.NewHandler(svc, mcp.Config{})
//	...
//	mux.Handle("/", svc.Handler())
//	mux.Handle("/mcp", h)
//
// Every request authenticates as the API's do (Authorization: Bearer with
// an API key of the Service, or the host's [lifecycle.Config.Authenticator]),
// and a session belongs to the principal that opened it.
//
// # The API's limits
//
// The Handler keeps the API's promises. A principal holds at most
// [Config.MaxSessionsPerKey] sessions (16) and the Handler
// [Config.MaxSessions] (10,000): an initialize past them is answered 429
// rate_limited with Retry-After; a session not used after its handshake
// closes after [Config.UnusedSessionTimeout] (1 minute). Each session's
// notification stream (its GET) counts among the principal's event
// streams ([lifecycle.Config.MaxStreamsPerKey]). Bodies are read by
// [lifecycle.Service.ReadBody] before the SDK or the fast path sees them:
// the API's size, its shared budget of bodies being read and its read
// deadline (408). Revoking a key ends its notification streams, waits and
// sessions, within [lifecycle.Config.KeyCacheTTL] in every process
// sharing the Store (see [lifecycle.Service.HoldCredential]). The Origin
// of every request is checked, on every method and path, with net/http's
// CrossOriginProtection and [Config.AllowedOrigins] (403 csrf_failed),
// as the transport requires against DNS rebinding; a principal without an
// ID is refused (401); and every HTTP error, the transport's own
// included, is in the API's error shape.
//
// # Tools
//
// list_tasks, get_task, get_ci_status, get_review_feedback,
// get_ship_operation and get_merge_queue_status read (scope tasks:read);
// start_task, submit_work,
// record_blocker and resolve_blocker change a task (tasks:write); ship
// merges and deploys (ship:write); wait_for_task_change waits up to 60
// seconds for a task's next event and answers it (events:read, as the
// event stream). Each tool has an input and an output JSON schema, a
// description written for a model, and annotations. A call whose key lacks
// the tool's scope is a tool error (isError) that names the scope; every
// error is the API's error body, {"error": {"code", "message", "details"}},
// whose details.availableActions lists the task's next steps on a conflict.
//
// get_task is compact by default (meta.truncatedFields names what it
// leaves out, as GET /tasks/{id}?tokenBudget=compact does).
//
// get_merge_queue_status tells an agent where its shipped change is when
// the ship goes through the lifecycle's merge queue
// ([lifecycle.Config.MergeQueue]): the queue (base, paused and why), the
// change's entry (position, state, candidate) and the candidate's CI
// checks; once the change left the queue, the task's last ship operation
// instead, landed or sent back (error.code merge_conflict or
// checks_failed), with the task's reworkReason and the failed checks.
//
// Mutating tools take an optional idempotencyKey. Without one, the key is
// derived from the caller's principal, the tool and its canonical
// arguments, so a client that retries a call it lost (a dropped
// connection) gets the first answer and the change is made once; the
// answer is recorded in the transaction of the change, in the Service's
// idempotency records, as the API's Idempotency-Key is. A recorded answer
// is a retry's only while it is still the task's present (the task as the
// change left it, the submission not yet reworked, the ship not failed):
// the same call made again once the task has moved on acts again, under
// the next key of a chain derived from the earlier answer.
//
// # Resources
//
// Each task is lifecycle://tasks/{id}, with lifecycle://tasks/{id}/review-feedback,
// lifecycle://tasks/{id}/ci-status and lifecycle://tasks/{id}/merge-queue
// (get_merge_queue_status's answer) beside it, listed as resource
// templates (reading needs tasks:read). resources/subscribe (events:read)
// sends notifications/resources/updated for each subscribed URI of a task
// when the outbox commits an event of it: subscriptions are fed by
// [lifecycle.Service.WatchTask], from the broker that feeds the event
// stream, so nothing polls the Store. Notifications go on the session's
// GET stream; the last few of each session are kept for a stream that
// connects late.
//
// # Prompts
//
// work_on_task (argument taskId) gives a client the agent's whole loop in
// one step: read, start, submit, watch review and CI, rework or ship.
//
// docs/mcp.md in the repository shows how to connect Claude Code, Codex
// and other clients, and examples/mcpagent is a scripted agent that works
// a task from todo to done against the demo.
package mcp
