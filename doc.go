// Package lifecycle runs the lifecycle of tasks worked by automated coding
// agents, and serves it as an HTTP API that a Go program mounts under its
// own router:
//
//	store, err := sqlite.New(sqlite.Config{Path: "lifecycle.db"})
//	...
//	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1:8085"})
//	...
//	if err := svc.Start(ctx); err != nil { ... }
//	defer svc.Close(ctx)
//	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "agent",
//		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite},
//		Actor:  lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}})
//	...
//	http.ListenAndServe("127.0.0.1:8085", svc.Handler()) // Authorization: Bearer <key>
//
// [ExampleNew] runs it; the README's "Embedding" section is a complete
// program with a code host (local git repositories), deployments, a
// webhook secret key and a clean stop.
//
// A task is created and routed to an agent (or a triage queue), started,
// submitted as a pull request, reviewed, checked by CI, and shipped: merged
// at the expected head commit and optionally deployed. Every response about
// a task lists its availableActions, the next steps that gate every change.
// Every change appends an event to a transactional outbox, from which the
// event stream and webhooks are fed.
//
// # Architecture
//
// This package holds the [Service], its commands and the rule table that
// moves a task, over the domain types ([Task], [Event], [APIKey]) and the
// interfaces a host plugs in ([Store], [Router], [Classifier],
// [Authenticator], [Clock]). The records and the contracts are defined in
// package lifecycletype and aliased here, so that the subsystems the
// Service starts live in packages of their own (under internal/), each
// built from what it uses. Implementations live in subpackages that
// import this one, never the other way round:
//
//   - lifecycletype: the records, the Store and adapter contracts, the
//     Clock and the sentinel and request errors, which this package
//     aliases;
//   - internal/: the subsystems the Service starts (internal/broker,
//     internal/eventstream, internal/webhookdispatch, internal/shiprun,
//     internal/reconcile, internal/keyauth), the API's plumbing
//     (internal/httpapi, internal/taskjson, internal/taskcache) and the
//     leaf packages under them; the README's layout lists each;
//   - store/sqlite: a [Store] on SQLite, the embedded default;
//   - store/postgres: a [Store] on PostgreSQL, shared by several replicas
//     (store/postgres/pgtest opens throwaway databases for tests);
//   - store/memory: a [Store] in memory, for tests and demos;
//   - store/storetest: the conformance suite every Store runs;
//   - adapter/github: a [ProviderAdapter], [CIProvider] and
//     [WebhookIntake] for GitHub (adapter/github/githubtest: a fake GitHub
//     for tests);
//   - adapter/gitlab: the same for GitLab (adapter/gitlab/gitlabtest: a
//     fake GitLab);
//   - adapter/artifact: a [ProviderAdapter], [CIProvider] and [Deployer] on
//     local git repositories, for demos and artifact-mode submissions;
//   - adapter/memory: an in-memory code host for tests;
//   - adapter/adaptertest: the conformance suite every adapter runs;
//   - client: a Go client of the HTTP API;
//   - console: the operator console, a web UI served beside the API;
//   - mcp: the lifecycle over the Model Context Protocol, for coding
//     agents;
//   - examples/demo: a runnable local server;
//   - examples/chi: the API under a go-chi/chi router;
//   - examples/customadapter: a ProviderAdapter of one's own;
//   - examples/mcpagent: a scripted agent that works a task over MCP;
//   - examples/replicas: several Services sharing one PostgreSQL store;
//   - examples/sseconsumer: a consumer of the event stream;
//   - examples/webhookreceiver: a receiver of the signed webhooks.
//
// The Service never holds global state: everything it needs comes through
// [Config], and two Services can live in one process.
//
// # Mounting
//
// [Service.Handler] serves the whole API with Go 1.22 ServeMux patterns. It
// works at the root of a server or under a prefix:
//
//	mux := http.NewServeMux()
//	mux.Handle("/lifecycle/", http.StripPrefix("/lifecycle", svc.Handler()))
//
// The prefix given to http.StripPrefix has no trailing slash; a request
// that reaches the handler with its prefix, or without a leading slash,
// gets a 404 that says how to mount it. Set [Config.BaseURL] to the public
// URL of the mount point ("https://example.com/lifecycle"): links in
// events are built from it. Call [Service.Start] to run background work
// (the ship runner, the reconciler, webhook deliveries, pruning; a
// Service that serves without it logs a warning) and [Service.Close] to stop it and end the
// event streams. A new Service has no API keys: install the first with
// [Service.CreateAPIKey].
//
// # API reference
//
// docs/api.md in the repository describes the HTTP API: every endpoint,
// member, status, limit, error code and event type. [OpenAPIDocument]
// returns the same API as OpenAPI 3.1, which the handler serves at
// GET /openapi.yaml without authentication. Package client calls it from
// Go over HTTP.
//
// # Facts from the code host
//
// The code host changes things on its own: commits pushed to a pull
// request's branch, reviews, CI results, merges and closes by hand. What
// the Service last learned of a task's pull request ([Facts]: its head
// commit, state, CI checks and the host's review decision) is stored with
// the task and changed in the transaction of the event it causes. Reads
// (tasks, lists, CI status, review feedback) and ship acceptance answer from
// stored facts and never call a host; [CIStatus.CheckedAt] says how fresh
// the CI facts are.
//
// One pure rule table (state.go) decides availableActions, how facts move
// a task (a pull request merged by hand makes it done; closed without
// merging sends it back to in_progress) and the ship preconditions, for
// reads, events, acceptance and the ship runner alike, so an event's
// availableActions are always those a read returns.
//
// Facts are learned two ways. A [ProviderEvent], which an adapter's
// [WebhookIntake] makes of its host's webhook, is applied by
// [Service.ApplyProviderEvent]: a hint, deduplicated by delivery ID, on
// which the Service re-reads the pull request, its CI and its reviews
// through the adapter. And since webhooks get lost, a reconciler reads the
// host again for every task in review at each beat of
// [Config.ReconcileInterval], each task claimed through the Store so that
// Services sharing one Store read it once. The due tasks of an adapter
// that is a [BatchReader] are read together, in a few host requests that
// say which pull requests did not change; those of other adapters one by
// one, [Config.ReconcileConcurrency] at a time.
//
// # Shipping
//
// POST /tasks/{id}/ship checks its preconditions against the stored facts
// and queues a [ShipOperation] in the transaction that answers it; a runner
// inside the Service claims operations under a lease that it renews while
// it works, [Config.ShipConcurrency] at a time. Right before it merges, it
// reads the pull request, its CI and its review decision from the host
// ([ReadMerge]), stores what changed, then checks the preconditions again
// and marks the task as merging, in one transaction: a check that turned
// red, changes requested, new commits, a conflict, a draft or a closed
// pull request, learned by webhook or not, fails the operation with a code
// that says why ([ShipError]), and nothing is merged. It then merges
// through the task's [ProviderAdapter] at the expected head commit,
// deploys through the [Deployer], and finishes the operation, the task and
// its task.shipped event together. Failures an adapter marks
// [ErrTemporary] are retried with backoff within [Config.ShipRetryBudget];
// a rate limit ([TemporaryError.RateLimited]) is waited out however long it
// lasts, the operation saying so in [ShipOperation.Wait]. An operation whose runner died
// is resumed when its lease ends (at once by a Service restarted with the
// same [Config.InstanceID]), and a merge that already happened, or whose
// answer was lost, is recognised by reading the pull request, never
// repeated. While an operation is queued or running, start and submit are
// refused.
//
// # Event stream
//
// GET /task-events/stream serves the outbox as server-sent events: the
// events after a cursor (Last-Event-ID), then live ones. One broker per
// Service reads the outbox through the [Store] interface after each commit
// made through the Service, and every [Config.EventPollInterval] for events
// committed by other processes sharing the Store; it keeps the newest
// [Config.StreamLagLimit] events, encoded once, for all streams. A stream
// replays from the Store until the broker holds what comes next, then
// follows it; a stream that falls further behind, or whose writes block,
// is cut off and its client resumes from its cursor. A stream flushes
// through [http.ResponseController]; with [Config.TakeOverStreams] one over
// HTTP/1.x takes its connection over from net/http once its head is
// decided, which costs a third of the memory. Streams end on client disconnect and on
// [Service.Close]. Browsers' EventSource cannot send an Authorization
// header: the host translates its own session into a bearer key in front
// of the handler, or serves the API with an [Authenticator] of its own
// ([Config.Authenticator], or [Service.HandlerWith] beside the keys'
// handler), as package console does with its session cookies. A
// [Principal] whose credential ends (its Done closed, its ExpiresAt
// passed) ends its event streams; revoking an API key ends the streams
// opened with it.
//
// # Webhook operations
//
// A subscription's events can be delivered again from a sequence
// ([Service.ReplaySubscription]), a delivery attempted now
// ([Service.RetryDelivery]) and a subscription its receiver disabled made
// active again ([Service.EnableSubscription]), through the Go API or the
// HTTP API. Each is one transaction that bumps the subscription's revision;
// the dispatcher holding the subscription, in whichever process, sees it at
// its next claim (at once where the Store is a [Notifier]).
//
// # Operator console
//
// Package console (github.com/tasklifecycle/lifecycle/console) is an
// optional operator console built on this package's exported API, served
// only where the host mounts it: a page embedded in the binary with a
// board of the tasks by status, updated live from the event stream, each
// task's timeline, and the webhook subscriptions with their deliveries and
// operations. An operator signs in with an API key once; the console keeps
// a session cookie (HttpOnly, SameSite=Strict) that acts with the key's
// scopes and ends when the key is revoked, and needs a CSRF token for
// every change. It keeps its sessions in a Store that implements
// [ConsoleSessionStore]. It uses, and any host may: [Service.HandlerWith],
// [Service.AuthenticateKeyFrom], [Service.AuthenticateKeyHash],
// [Service.BeginAuthentication], [Service.ServeFunc], [Service.Guard], [Service.DecodeBody] and the reads
// [Service.Submissions], [Service.ShipOperations], [Service.TaskEvents]
// and [Service.LastEventID].
//
// # Serving it safely
//
// No request can make the handler work more than its size allows: a body
// over 1 MiB is refused from its Content-Length, one pass over each body
// refuses arrays over their limit and deep nesting before decoding, field
// errors are capped at 100, the bodies decoded at once are bounded by
// [Config.MaxDecodingBytes], and a body must arrive within
// [Config.BodyReadTimeout]. Give the http.Server a ReadHeaderTimeout and an
// IdleTimeout but no WriteTimeout (event streams set their own deadlines),
// and serve on [JSONErrorListener] so that even net/http's own answers to
// malformed requests are JSON errors. Through the API a key manages only
// keys within its own scopes and actors, and revoking a key ends its open
// event streams. [Config.WebhookSecretKey] seals webhook secrets at rest;
// [Service.ResealWebhookSecrets] finishes a rotation of it.
//
// # Observability
//
// The Service measures and traces itself through the OpenTelemetry API:
// give it [Config.MeterProvider] and [Config.TracerProvider] (by default
// the global ones, which record nothing until the host sets them up). It
// records http.server.request.duration by route and its own lifecycle.*
// instruments (ship queue and outcomes, webhook delivery lag, open
// streams, the outbox, sweeps, idempotency, authentication failures), and
// a span per request, Store transaction, ship step and webhook delivery.
// A request's W3C traceparent is continued, and its trace is the traceId
// of the events it causes. GET /healthz and GET /readyz answer probes
// without a key; [Service.Health] answers the same in Go.
// docs/operations.md lists every instrument, the alerts worth having and a
// Grafana dashboard.
//
// # Writing a Store
//
// A Store keeps tasks, events and keys. Reads run outside transactions;
// every change runs inside [Store.Update], whose [Tx] lets the Service read,
// check and write atomically, so a state change, the event it causes and
// (for idempotent requests) the recorded response commit together or not at
// all. The event outbox must hand out sequences so that a reader that has
// seen sequence N never later finds a smaller one committed, and reads must
// see every commit that has returned: the event stream relies on both to
// hand over from replay to live without a gap. Run store/storetest from
// the implementation's tests. A Store that also implements
// [ConsoleSessionStore] keeps the sign-ins of package console; without it
// the Service serves the API and no console.
//
// [Store] and [Tx] are what every deployment needs, kept to 45 methods:
// several changes go through an updater ([Tx.UpdateIdempotencyRecord]) or
// one call with params ([Store.Prune], [Tx.PutChecks]), so that the Store
// owns atomicity while the rules stay in this package. What only some
// deployments need is an optional interface the Service finds by type
// assertion: [InstanceLeaser] (several Services on one Store, each with
// its own [Config.InstanceID]; without it a Service is the Store's only
// one, and [New] logs so), [Notifier] (commits announced at once instead
// of polled), [RelaxedUpdater], [FailureClassifier], [SecretResealer] and
// [CIFailureStore] (the details of failed CI checks: without it, failed
// checks are served without them).
//
// # Writing an Adapter
//
// A [ProviderAdapter] is three calls to a code host: open or reuse the pull
// request of a task's branch ([ProviderAdapter.EnsurePullRequest]), read a
// pull request's head and state ([ProviderAdapter.PullRequest]), and merge
// it only at an expected head ([ProviderAdapter.Merge]), recognising a merge
// that already happened. Errors follow the contract on the interface:
// [ErrNotFound], [ErrHeadMismatch], a [*ValidationError] for an unusable
// hint, [ErrTemporary] for a failure worth retrying, [*RefusedError] for a
// final refusal whose message people should read, anything else a host
// failure (502). Optional abilities are found by type assertion: an adapter
// that also implements [CIProvider] reports the CI of its tasks, one that
// implements [ReviewDecider] decides reviews under the github_rules policy,
// one that implements [CIFailureReader] says why a failed check failed
// (asked once per failed check, in the background), and one that
// implements [WebhookIntake] turns its host's webhooks into
// [ProviderEvent]s. [Config.Adapters] binds adapters to projects.
// examples/customadapter is a complete adapter in about 150 lines; run
// adapter/adaptertest from your adapter's tests.
//
// # Errors
//
// Errors match the sentinels of errors.go with errors.Is: [ErrNotFound],
// [ErrConflict], [ErrValidation] and so on; [*ValidationError] lists the
// invalid fields and [*ConflictError] says why a change is refused and which
// actions remain. The HTTP layer maps them to statuses and codes in one
// table; anything else is a 500 "internal" error whose details go only to
// the log.
package lifecycle
