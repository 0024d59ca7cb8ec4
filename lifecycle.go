package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/backoff"
	"github.com/tasklifecycle/lifecycle/internal/broker"
	"github.com/tasklifecycle/lifecycle/internal/dueloop"
	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/keyauth"
	"github.com/tasklifecycle/lifecycle/internal/netguard"
	"github.com/tasklifecycle/lifecycle/internal/queuerun"
	"github.com/tasklifecycle/lifecycle/internal/reconcile"
	"github.com/tasklifecycle/lifecycle/internal/secretbox"
	"github.com/tasklifecycle/lifecycle/internal/shiprun"
	"github.com/tasklifecycle/lifecycle/internal/taskcache"
	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/internal/webhookdispatch"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Service. Store and BaseURL are required; every other
// field has a documented default.
type Config struct {
	// Store keeps every task, event and key. Required. The Service does not
	// close it; the host does, after [Service.Close].
	Store Store

	// BaseURL is the public URL at which the host serves [Service.Handler],
	// such as "https://tasks.example.com/api". The absolute links of events
	// are built from it. Required.
	BaseURL string

	// Router assigns new tasks. Defaults to a [RulesRouter] with no rules,
	// which sends every task to its project's triage queue.
	Router Router

	// Agents is the directory of known agents. When not empty, a manual
	// assignment must name one of them; their names fill Task.assignee.
	// When empty, any agent ID is accepted and used as its own name.
	Agents []Agent

	// Adapters say which provider adapter is live for the tasks of which
	// project. A task with no live adapter cannot be submitted in
	// adapter_managed mode (404).
	Adapters []AdapterBinding

	// ArtifactAdapter records submissions made in artifact mode, typically
	// an adapter/artifact Adapter. When nil, artifact submissions get 404.
	ArtifactAdapter ProviderAdapter

	// CIProvider reports the CI of tasks whose adapter binding names no CI
	// provider and whose adapter is not one. When nil, only checks reported
	// through POST /tasks/{id}/checks count for those tasks.
	CIProvider CIProvider

	// ReviewRouter decides the review policy and reviewers of each
	// submission. Defaults to ReviewRules{}: policy github_rules, and the
	// pull request's requested reviewers as participants.
	ReviewRouter ReviewRouter

	// Deployer deploys what merge_and_deploy ships. When nil, such ships
	// are refused at acceptance (409 deployer_not_configured).
	Deployer Deployer

	// MergeQueue turns on the lifecycle's own merge queue; it is off by
	// default.
	MergeQueue MergeQueueConfig

	// ShipConcurrency is how many ship operations run at once. Defaults to 16.
	ShipConcurrency int

	// ShipPollInterval is how often the ship runner looks for work it was
	// not told about (queued by another process, or left by a dead
	// runner). Defaults to 1 second.
	ShipPollInterval time.Duration

	// ShipLease is how long a runner holds a ship operation without
	// renewing it; the runner renews it every third of it while it works,
	// however long a merge or deploy takes, and an operation whose runner
	// died is resumed by another once its lease ends. Defaults to 30
	// seconds; at least 3 seconds.
	ShipLease time.Duration

	// ShipRetryBudget is how long the ship runner keeps retrying a merge,
	// a read of the pull request or a deploy that fails temporarily (an
	// error matching ErrTemporary: HTTP 5xx, rate limits, GitHub's "Base
	// branch was modified"). Defaults to 10 minutes.
	ShipRetryBudget time.Duration

	// ShipRetryBackoff is the first wait between two tries of a temporary
	// failure; each later wait doubles, up to a minute, unless the host
	// said how long to wait. Defaults to 1 second.
	ShipRetryBackoff time.Duration

	// ProviderTimeout bounds each call to an adapter or CI provider, and
	// the whole reading of one task's host facts; a [BatchReader]'s call
	// gets it for each hundred pull requests it reads. Defaults to 30
	// seconds.
	ProviderTimeout time.Duration

	// DeployTimeout bounds each call to the Deployer, which may wait for a
	// deployment to finish. Defaults to 30 minutes.
	DeployTimeout time.Duration

	// CIFailureExcerptBytes bounds the details kept of one failed CI
	// check (see [CIFailure]): its title, summary, annotations and log
	// excerpt together, cut on a UTF-8 boundary and marked truncated.
	// Defaults to 8 KiB.
	CIFailureExcerptBytes int

	// CIFailureTaskBytes bounds the details kept of all the failed CI
	// checks of a task's head commit together: a check failing once it is
	// spent keeps its log link and is marked truncated. Defaults to 32
	// KiB.
	CIFailureTaskBytes int

	// ReconcileInterval is the longest time a change made at the code host
	// without a webhook (or whose webhook was lost) stays unnoticed: the
	// reconciler reads the host again for every task in review at each
	// multiple of it (a sweep), those of one adapter together, in batches
	// when the adapter is a [BatchReader]. A sweep still running when the
	// next is due delays it rather than overlapping it. Defaults to 60
	// seconds; at least 1 second; negative disables reconciliation.
	ReconcileInterval time.Duration

	// StallAfter turns on the stall watchdog: a task that stays in one of
	// its statuses (in_progress and in_review are the only ones it may
	// name) without activity for longer than that status's duration is
	// marked stalled (Task.Stalled, served as stalled), and task.stalled
	// is emitted, once per stall. Activity clears the mark and restarts
	// the clock: a status move, a submission, a reported check, a review,
	// a blocker, a host fact or learned check that changed the task, a
	// step of its change in the merge queue. The Service looks for
	// stalled tasks at each tenth of the shortest duration (at least every
	// second, at most every minute), with one indexed query of the Store,
	// which must be a [StallMarker]. Each duration is at least 1 second.
	// Off (nil) by default.
	StallAfter map[Status]time.Duration

	// ReconcileConcurrency is how many tasks the reconciler reads at once
	// through adapters that read one task at a time. Defaults to 16.
	ReconcileConcurrency int

	// ReconcilePollInterval is how often the reconciler looks for tasks
	// due between sweeps (made due by a webhook another process took, or
	// left by a process that died). Defaults to 1 second.
	ReconcilePollInterval time.Duration

	// InstanceID names this Service as the holder of the leases it takes
	// (ship operations, webhook subscriptions, idempotency reservations),
	// so that a process restarted with the same ID resumes its earlier
	// life's work at once instead of when the leases end. Give each
	// process its own stable ID (a pod or host name, or one kept in a data
	// directory, as the demo does); [Service.Start] refuses an ID that a
	// live process holds (see [ErrInstanceInUse]) when the Store keeps
	// instance leases ([InstanceLeaser]). Defaults to a random ID, new for
	// each Service.
	InstanceID string

	// IdempotencyRetention is how long a response is kept for replay under
	// its Idempotency-Key. Defaults to 24 hours.
	IdempotencyRetention time.Duration

	// Authenticator authenticates requests. Defaults to bearer API keys
	// stored, hashed, in Store.
	Authenticator Authenticator

	// KeyCacheTTL is how long the default Authenticator trusts what it
	// knows of a key before looking again; a key revoked through another
	// process keeps working at most this long. The Service knows every key
	// of its Store (read whole once, then again every KeyCacheTTL/2 while
	// it runs, and at once for the keys created or revoked through it), so
	// a valid key costs no Store read. Revoking through this Service takes
	// effect at once. Defaults to 5 seconds; negative disables the cache:
	// each request reads its key from the Store, and the known keys only
	// spare valid keys the limiter of failed authentications.
	KeyCacheTTL time.Duration

	// AuthFailureLimit is how many failed authentications one client may
	// have unforgiven at once: API requests with a malformed, unknown or
	// revoked bearer key, and the failures counted through
	// [Service.BeginAuthentication] (the operator console's unknown or
	// expired session cookies); requests that carry no credentials are
	// not counted. The limiter only decides whether a key the Service does
	// not know may cost a Store read: a valid key it knows (every key of
	// the Store, see KeyCacheTTL) is served whatever its address's
	// failures, and a key revoked is refused with 401. Past the limit, the
	// client's requests with unknown keys are answered 429 rate_limited
	// with Retry-After, before any Store read, until it has earned another
	// try: one each AuthFailureInterval. The clients of one network (IPv4
	// /24, IPv6 /48) may fail four times as often together, and earn tries
	// back four times as fast; the Service as a whole reads at most
	// AuthUnknownKeyReads unknown keys a second. A failure is charged when
	// the attempt fails; attempts under way count until they end. It
	// limits the Service's own API keys, not a host's Authenticator.
	// Defaults to 20; negative disables the limiter.
	AuthFailureLimit int

	// AuthFailureInterval is how often a client earns back one failed
	// authentication, up to AuthFailureLimit: past its limit, a client
	// may try once per interval. Defaults to 3 seconds.
	AuthFailureInterval time.Duration

	// AuthFailureClients bounds the clients, and the networks, whose
	// failures are remembered at once (about 150 bytes each); when a table
	// is full, those whose failures are all forgiven are dropped first,
	// then others at random. Defaults to 10,000.
	AuthFailureClients int

	// AuthUnknownKeyReads is the process-wide budget of Store reads for
	// keys the Service does not know: at most this many a second (and as
	// many at once), whatever the clients' addresses, so that guessing
	// from many addresses or networks costs no more reads. Past it, an
	// unknown key is answered 429 rate_limited with Retry-After; valid
	// keys are not affected (a key created through another process a
	// moment ago is found by reading the Store's keys whole, at most once
	// a second). Defaults to 50.
	AuthUnknownKeyReads int

	// ClientAddress returns the address of the client that sent r, by
	// which failed authentications are counted: an IP address, with or
	// without a port (an IPv6 address counts by its /64 network, and its
	// /48 with its neighbours), or any other string that names one client.
	// Defaults to r.RemoteAddr, the address of the connection. Behind a
	// reverse proxy or load balancer that is the proxy's address, shared
	// by every client: one client guessing keys then makes every client's
	// unknown keys wait (valid keys are still served), so set it to return
	// the client address your proxy reports (the X-Forwarded-For entry it
	// appends, say, or the address of the PROXY protocol), trusting only
	// what your own proxy sets. X-Forwarded-For is never read by default,
	// as any client can send one.
	ClientAddress func(r *http.Request) string

	// Clock tells the time. Defaults to the system clock.
	Clock Clock

	// Logger receives the Service's logs; it never receives secrets or API
	// keys. Defaults to slog.Default().
	Logger *slog.Logger

	// MeterProvider provides the meter of the Service's metrics: HTTP
	// request durations, ship operations, webhook deliveries, event
	// streams, the outbox, sweeps, idempotency and authentication (the
	// list, with units and attributes, is in docs/operations.md).
	// Defaults to otel.GetMeterProvider(), the global one, which measures
	// nothing until the host sets one: a Service whose host sets up no
	// OpenTelemetry SDK pays a check per measure.
	MeterProvider metric.MeterProvider

	// TracerProvider provides the tracer of the Service's spans: one per
	// API request (its parent the request's W3C traceparent), per Store
	// transaction, per ship step and per webhook delivery (which sends
	// its traceparent on). An event's traceId is its request's trace.
	// Defaults to otel.GetTracerProvider(), the global one: no span is
	// started until the host sets one, nor with a no-op provider.
	TracerProvider trace.TracerProvider

	// MetricIdentifiers adds to the metrics the attributes that name the
	// API's callers' webhook subscriptions and receivers:
	// lifecycle.subscription.id on lifecycle.webhook.backlog and
	// lifecycle.webhook.lag, which then have a series per subscription
	// this instance delivers (2 per subscription) instead of one for all
	// of them (the sum of the backlogs, the greatest lag); and
	// server.address, the receiver's host name, on the deliveries'
	// http.client.request.duration, which then has its series (21 per
	// status or error seen: 19 buckets, a sum and a count) once per
	// receiver host instead of once for all receivers.
	//
	// Off by default: metrics are often served without a key, as
	// Prometheus scrapes, and these values tell whoever reads them which
	// subscriptions exist and where they deliver. Spans keep them either
	// way: they go only to the TracerProvider's exporter. See
	// docs/operations.md.
	MetricIdentifiers bool

	// EventRetention is how long events are kept for replay. Defaults to
	// 72 hours, the window of the contract.
	EventRetention time.Duration

	// PruneInterval is how often expired events and records are deleted.
	// Defaults to 10 minutes.
	PruneInterval time.Duration

	// MaxStreamsPerKey is how many event streams one principal (one API
	// key) may hold open at once; the next gets 429 rate_limited with
	// Retry-After. Defaults to 5.
	MaxStreamsPerKey int

	// StreamLagLimit is how many of the newest events the stream broker
	// keeps in memory, encoded once for every stream, and so how far a
	// live stream may fall behind before it is cut off; its client then
	// resumes from its cursor. Defaults to 4096.
	StreamLagLimit int

	// StreamWriteTimeout bounds how long a write to an event stream may
	// block before its consumer is cut off as too slow: between half of it
	// and all of it, as the deadline is renewed once half spent. It
	// replaces the http.Server's WriteTimeout for streams. Defaults to 15
	// seconds.
	StreamWriteTimeout time.Duration

	// StreamBatchWindow is the least time between two deliveries of new
	// events to the streams while events arrive faster than that: under
	// load, each delivery then carries the events of several commits and
	// each stream writes them in one system call, which is what keeps
	// latency low when thousands of streams are open. An event that
	// arrives when none has for a window goes out at once. It is wall-clock
	// time, not the Service's Clock. Defaults to 10 ms; negative disables.
	StreamBatchWindow time.Duration

	// TakeOverStreams lets an event stream over HTTP/1.x take its
	// connection over from net/http (http.Hijacker) once its response head
	// is decided, which cuts an idle stream's memory from about 28 KiB to
	// about 9 and writes each wake-up in one system call. Middleware that
	// wraps the body (byte counting, compression, access logs) then does
	// not see the frames, though the headers it set are sent, and
	// http.Server.Shutdown does not end such streams (Service.Close does).
	// Off by default, so that a host's middleware sees every request as it
	// does any other; a server that holds thousands of streams turns it
	// on (the demo does). Streams over HTTP/2 always stay in the handler.
	TakeOverStreams bool

	// EventPollInterval is how often the stream broker also reads the
	// Store for events committed by other processes that share it;
	// commits made through this Service reach streams and webhooks at
	// once. Defaults to 1 second; negative disables polling.
	EventPollInterval time.Duration

	// AllowPrivateWebhookTargets lets webhook subscriptions deliver to
	// hosts that resolve to loopback, private, link-local or unspecified
	// addresses. By default such targets are refused when a subscription
	// is created and again when a delivery dials, as a defence against
	// server-side request forgery. Tests and local demos set it.
	AllowPrivateWebhookTargets bool

	// WebhookResolver resolves the hosts of webhook URLs, at creation and
	// at every dial. Defaults to net.DefaultResolver.
	WebhookResolver Resolver

	// WebhookTLSConfig configures the TLS of deliveries, such as the root
	// CAs of receivers with private certificates. Defaults to the system's.
	WebhookTLSConfig *tls.Config

	// WebhookSecretKey, when set, is the 32-byte AES-256 key that seals
	// subscription secrets in the Store (AES-GCM). Without it, secrets are
	// stored as they are. A Service without the key cannot sign for
	// subscriptions whose secrets were sealed with it.
	WebhookSecretKey []byte

	// WebhookRetrySchedule is how long each retry of a failed delivery
	// waits after the attempt before it; its length plus one is the most
	// attempts, at most 8. Defaults to [DefaultWebhookRetrySchedule].
	WebhookRetrySchedule []time.Duration

	// WebhookRetryJitter makes each retry's delay up to this fraction
	// shorter, at random, so that the retries of many deliveries that
	// failed together do not all come at once; only shorter, so that the
	// last attempt stays inside the stream's replay window. Defaults to
	// 0.1; negative disables.
	WebhookRetryJitter float64

	// WebhookTimeout bounds each delivery attempt: a receiver that has not
	// answered by then has failed. Defaults to 10 seconds.
	WebhookTimeout time.Duration

	// WebhookConcurrency is the most delivery attempts in flight at once.
	// Defaults to 256.
	WebhookConcurrency int

	// WebhookConcurrencyPerSubscription is the most attempts in flight at
	// once for one subscription, so that a receiver that hangs holds no
	// more. Defaults to 16.
	WebhookConcurrencyPerSubscription int

	// WebhookLease is how long a Service holds the subscriptions it
	// delivers for, renewed every WebhookPollInterval; when it dies,
	// another Service sharing the Store takes them over once the lease
	// ends. Defaults to 30 seconds.
	WebhookLease time.Duration

	// WebhookPollInterval is how often the Service renews its leases and
	// looks for subscriptions made or deleted by other processes. Defaults
	// to 1 second.
	WebhookPollInterval time.Duration

	// WebhookClaimBatch is the most subscriptions without a live lease that
	// the Service takes up at each poll (WebhookPollInterval), so that a
	// process that starts, or outlives the others, leaves some to the
	// processes sharing the Store. Those it holds are renewed whatever
	// their number. Defaults to 64.
	WebhookClaimBatch int

	// WebhookPreviousSecretKeys are the keys WebhookSecretKey replaced,
	// during a rotation: secrets sealed with them still open, and new
	// secrets are sealed with WebhookSecretKey. See
	// [Service.ResealWebhookSecrets] to finish a rotation.
	WebhookPreviousSecretKeys [][]byte

	// MaxDecodingBytes bounds the bytes of request bodies being read and
	// decoded at once, so that concurrent large bodies cannot grow memory
	// without bound; a request that cannot get its share within 2 seconds
	// gets 429 rate_limited with Retry-After. Each body counts its
	// Content-Length, or 1 MiB when it has none. Defaults to 8 MiB; at
	// least 1 MiB; negative disables the bound.
	MaxDecodingBytes int64

	// TaskCacheBytes bounds the answers of GET /tasks/{id} kept in memory
	// when the Store implements [TaskRevisioner] (the SQLite, PostgreSQL
	// and memory stores do): a task read again while its revision is the
	// same is answered from them, reading one column of the Store instead
	// of the whole task. The bound counts the answers' bytes and about 128
	// bytes per task; tasks are evicted at random beyond it. Defaults to
	// 16 MiB; negative keeps none.
	TaskCacheBytes int64

	// MaxInProgressPerAgent caps the tasks an agent works at once: start
	// of a task whose assignee has that many tasks in progress already is
	// refused 409 max_in_progress_per_agent, and availableActions does not
	// offer it meanwhile. Tasks without an assignee (in triage) are not
	// capped. It needs a Store that implements [InProgressCounter] (the
	// SQLite, PostgreSQL and memory stores do). 0, the default, caps
	// nothing; negative is an error.
	MaxInProgressPerAgent int

	// MaxReworkRounds caps the rework rounds of a task (a start from
	// in_review back to in_progress; see Task.ReworkRounds): a task in
	// review that needs rework again once it used that many is blocked
	// for a person instead (blocker reason max_rework_rounds, event
	// task.awaiting_user), and a start beyond the cap is refused 409
	// max_rework_rounds. Resolving that blocker returns the task to review
	// and grants it MaxReworkRounds more rounds. 0, the default, caps
	// nothing; negative is an error.
	MaxReworkRounds int

	// RequestTimeout bounds the work of each API request but the event
	// stream: a request whose Store (or code host) has not answered by
	// then gets 503 store_unavailable with Retry-After, never a hang.
	// Defaults to ProviderTimeout plus 15 seconds (45 s), so that a submit
	// has the whole of its code host's time.
	RequestTimeout time.Duration

	// BodyReadTimeout bounds how long reading one request body may take,
	// by the wall clock; a body still arriving then gets 408
	// request_timeout and its connection is closed. The deadline is set on
	// the connection through http.ResponseController, replacing the
	// http.Server's ReadTimeout while the body is read. Defaults to 30
	// seconds; negative disables it.
	BodyReadTimeout time.Duration
}

// withDefaults returns a copy of c with every unset optional field filled
// in. It checks nothing: see validate.
func (c Config) withDefaults() Config {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Router == nil {
		rules, _ := NewRulesRouter(RulesRouterConfig{}) // no rules: nothing to refuse
		c.Router = rules
	}
	if c.ReviewRouter == nil {
		c.ReviewRouter = ReviewRules{}
	}
	orDefault(&c.ProviderTimeout, 30*time.Second)
	orDefault(&c.ShipConcurrency, 16)
	orDefault(&c.ShipPollInterval, time.Second)
	orDefault(&c.ShipLease, 30*time.Second)
	orDefault(&c.ShipRetryBudget, 10*time.Minute)
	orDefault(&c.ShipRetryBackoff, time.Second)
	orDefault(&c.DeployTimeout, 30*time.Minute)
	orDefault(&c.CIFailureExcerptBytes, 8<<10)
	orDefault(&c.CIFailureTaskBytes, 32<<10)
	orDefault(&c.ReconcileInterval, time.Minute)
	c.StallAfter = maps.Clone(c.StallAfter)
	orDefault(&c.ReconcileConcurrency, 16)
	orDefault(&c.ReconcilePollInterval, time.Second)
	orDefault(&c.InstanceID, id.New("svc_"))
	orDefault(&c.RequestTimeout, c.ProviderTimeout+15*time.Second)
	orDefault(&c.IdempotencyRetention, 24*time.Hour)
	orDefault(&c.TaskCacheBytes, 16<<20)
	orDefault(&c.KeyCacheTTL, 5*time.Second)
	orDefault(&c.EventRetention, 72*time.Hour)
	orDefault(&c.PruneInterval, 10*time.Minute)
	orDefault(&c.MaxStreamsPerKey, 5)
	orDefault(&c.StreamLagLimit, 4096)
	orDefault(&c.StreamWriteTimeout, 15*time.Second)
	orDefault(&c.EventPollInterval, time.Second)
	orDefault(&c.StreamBatchWindow, 10*time.Millisecond)
	if c.WebhookResolver == nil {
		c.WebhookResolver = net.DefaultResolver
	}
	if c.WebhookRetrySchedule == nil {
		c.WebhookRetrySchedule = DefaultWebhookRetrySchedule()
	}
	c.WebhookRetrySchedule = slices.Clone(c.WebhookRetrySchedule)
	orDefault(&c.WebhookRetryJitter, 0.1)
	orDefault(&c.WebhookTimeout, 10*time.Second)
	orDefault(&c.WebhookConcurrency, 256)
	orDefault(&c.WebhookConcurrencyPerSubscription, 16)
	orDefault(&c.WebhookLease, 30*time.Second)
	orDefault(&c.WebhookPollInterval, time.Second)
	orDefault(&c.WebhookClaimBatch, 64)
	c.requestDefaults()
	c.authLimitDefaults()
	return c
}

// Validate reports the first reason [New] would refuse c for, with c's
// unset fields taken at their defaults: a host can check its
// configuration before it builds anything else.
func (c Config) Validate() error { return c.withDefaults().validate() }

// validate checks a Config whose defaults are filled in.
func (c Config) validate() error {
	if c.Store == nil {
		return errors.New("lifecycle: Config.Store is required: pass a store such as sqlite.New(sqlite.Config{Path: ...})")
	}
	base, err := url.Parse(c.BaseURL)
	if c.BaseURL == "" || err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("lifecycle: Config.BaseURL %q must be the absolute http(s) URL where the handler is served, such as https://tasks.example.com/api", c.BaseURL)
	}
	if c.ShipConcurrency < 0 {
		return fmt.Errorf("lifecycle: Config.ShipConcurrency %d is negative", c.ShipConcurrency)
	}
	if c.ShipLease < 3*time.Second {
		return fmt.Errorf("lifecycle: Config.ShipLease %s is shorter than 3s: it is renewed every third of itself, and a renewal must fit", c.ShipLease)
	}
	if c.ReconcileInterval > 0 && c.ReconcileInterval < time.Second {
		return fmt.Errorf("lifecycle: Config.ReconcileInterval %s is shorter than a second; give at least 1s, or a negative one to disable reconciliation", c.ReconcileInterval)
	}
	if err := c.validateStallAfter(); err != nil {
		return err
	}
	if c.ShipRetryBudget < 0 || c.ShipRetryBackoff < 0 || c.DeployTimeout < 0 || c.ReconcileConcurrency < 0 || c.ReconcilePollInterval < 0 || c.ProviderTimeout < 0 {
		return errors.New("lifecycle: Config.ProviderTimeout, ShipRetryBudget, ShipRetryBackoff, DeployTimeout, ReconcileConcurrency and ReconcilePollInterval must not be negative; leave them zero for the defaults")
	}
	if c.RequestTimeout < 0 {
		return errors.New("lifecycle: Config.RequestTimeout must not be negative; leave it zero for the default")
	}
	if c.MaxInProgressPerAgent < 0 || c.MaxReworkRounds < 0 {
		return errors.New("lifecycle: Config.MaxInProgressPerAgent and MaxReworkRounds must not be negative; leave them zero for no cap")
	}
	if _, ok := c.Store.(InProgressCounter); c.MaxInProgressPerAgent > 0 && !ok {
		return errors.New("lifecycle: Config.MaxInProgressPerAgent needs a Store that counts an agent's tasks in progress (lifecycle.InProgressCounter); the SQLite, PostgreSQL and memory stores do")
	}
	if c.CIFailureExcerptBytes < 0 || c.CIFailureTaskBytes < 0 {
		return errors.New("lifecycle: Config.CIFailureExcerptBytes and CIFailureTaskBytes must not be negative; leave them zero for the defaults")
	}
	seen := map[string]bool{}
	for i, b := range c.Adapters {
		if b.Adapter == nil {
			return fmt.Errorf("lifecycle: Config.Adapters[%d] (project %q) has no Adapter", i, b.Project)
		}
		if seen[b.Project] {
			return fmt.Errorf("lifecycle: Config.Adapters binds project %q twice", b.Project)
		}
		seen[b.Project] = true
	}
	if c.EventRetention < 0 || c.PruneInterval < 0 || c.MaxStreamsPerKey < 0 || c.StreamLagLimit < 0 || c.StreamWriteTimeout < 0 {
		return errors.New("lifecycle: Config.EventRetention, PruneInterval, MaxStreamsPerKey, StreamLagLimit and StreamWriteTimeout must not be negative; leave them zero for the defaults")
	}
	if len(c.WebhookRetrySchedule) > webhookdispatch.MaxAttempts-1 {
		return fmt.Errorf("lifecycle: Config.WebhookRetrySchedule has %d delays; at most %d, for at most %d attempts", len(c.WebhookRetrySchedule), webhookdispatch.MaxAttempts-1, webhookdispatch.MaxAttempts)
	}
	for i, d := range c.WebhookRetrySchedule {
		if d <= 0 {
			return fmt.Errorf("lifecycle: Config.WebhookRetrySchedule[%d] is %s; delays must be positive", i, d)
		}
	}
	if c.WebhookRetryJitter > 1 {
		return fmt.Errorf("lifecycle: Config.WebhookRetryJitter %g is more than 1", c.WebhookRetryJitter)
	}
	if c.WebhookLease > 0 && c.WebhookLease <= 2*c.WebhookPollInterval {
		return fmt.Errorf("lifecycle: Config.WebhookLease %s must be more than twice WebhookPollInterval %s, at which it is renewed", c.WebhookLease, c.WebhookPollInterval)
	}
	if c.WebhookClaimBatch < 0 {
		return errors.New("lifecycle: Config.WebhookClaimBatch must not be negative; leave it zero for the default")
	}
	if c.WebhookTimeout < 0 || c.WebhookConcurrency < 0 || c.WebhookConcurrencyPerSubscription < 0 || c.WebhookLease < 0 || c.WebhookPollInterval < 0 {
		return errors.New("lifecycle: Config.WebhookTimeout, WebhookConcurrency, WebhookConcurrencyPerSubscription, WebhookLease and WebhookPollInterval must not be negative; leave them zero for the defaults")
	}
	if err := c.validateRequests(); err != nil {
		return err
	}
	if err := c.validateAuthLimits(); err != nil {
		return err
	}
	for i, a := range c.Agents {
		if a.ID == "" {
			return fmt.Errorf("lifecycle: Config.Agents[%d] has no ID", i)
		}
	}
	return nil
}

// orDefault sets *v to d when it is the zero value: the default of a
// Config field left unset.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Service runs the lifecycle of tasks: it serves the HTTP API through
// [Service.Handler], and runs background work between [Service.Start] and
// [Service.Close]. A Service is safe for concurrent use; several Services
// may live in one process.
type Service struct {
	cfg      Config
	store    Store
	caps     storeCaps // the Store's optional interfaces
	clock    Clock
	log      *slog.Logger
	auth     Authenticator
	keys     *keyauth.Keys // the Service's own API keys, the default Authenticator; or nil
	agents   map[string]Agent
	handler  http.Handler
	broker   *broker.Broker              // feeds the event streams and the webhooks
	targets  *netguard.Guard             // checks webhook URLs
	secrets  *secretbox.Box              // seals webhook secrets
	webhooks *webhookdispatch.Dispatcher // delivers webhooks
	tel      *telemetry.Telemetry        // metrics and traces
	tasks    *taskcache.Cache            // answers of GET /tasks/{id}; nil: none kept

	streamKeys *eventstream.Keys    // the keys of open streams, to end them on revocation
	streams    *eventstream.Streams // opens and serves the event streams
	watches    *eventstream.Watches // the watches of single tasks (watch.go)

	owner     string           // Config.InstanceID: the holder of this Service's leases
	life      string           // this life of the instance, new at each New
	inflight  inflightKeys     // idempotency keys this life holds
	taskLocks keyedLocks       // serialises provider work per task
	lease     leaseClock       // until when this life holds its instance lease
	ships     *shiprun.Runner  // works ship operations
	queue     *queuerun.Runner // drives the merge queues; nil when Config.MergeQueue is off

	reconcile *reconcile.Reconciler[observation] // reads hosts for tasks in review
	ciFetch   *dueloop.Beat                      // fetches the details of failed CI checks (cifailure.go)

	bodies httpapi.Limits // what request bodies are read and decoded within

	mu      sync.Mutex
	started bool
	closed  bool
	bg      context.Context // the background work's, from Start; stop cancels it
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// New checks cfg, fills in its defaults and returns a Service. Call
// [Service.Start] to run background work.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:    cfg,
		store:  cfg.Store,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		auth:   cfg.Authenticator,
		agents: make(map[string]Agent, len(cfg.Agents)),
		owner:  cfg.InstanceID,
		life:   id.New("lif_"), // this life of the instance
		caps:   capabilities(cfg.Store),
	}
	if s.tel, err = telemetry.New(cfg.MeterProvider, cfg.TracerProvider, cfg.Clock); err != nil {
		return nil, fmt.Errorf("lifecycle: instruments: %w", err)
	}
	if q := s.caps.queue; q != nil {
		if err := s.tel.ObserveShipQueue(shipQueueCount(q)); err != nil {
			return nil, fmt.Errorf("lifecycle: instruments: %w", err)
		}
	}
	s.caps.logMissing(s.log, s.owner)
	if len(cfg.StallAfter) > 0 && s.caps.stalls == nil {
		return nil, errors.New("lifecycle: Config.StallAfter is set, but the Store cannot mark stalled tasks (lifecycle.StallMarker); use a store of this module, or leave StallAfter nil")
	}
	s.reconcile = reconcile.New(reconcile.Config[observation]{
		Tasks: reconcileTasks{s}, UpdateRelaxed: s.updateRelaxed, Clock: cfg.Clock, Log: cfg.Logger, Tel: s.tel,
		ReconcileInterval:     cfg.ReconcileInterval,
		ReconcilePollInterval: cfg.ReconcilePollInterval,
	})
	s.ciFetch = newCIFetch(cfg.Clock)
	s.ships = shiprun.New(shiprun.Config{
		Owner: s.owner, Tasks: shipTasks{s}, Update: s.update, UpdateRelaxed: s.updateRelaxed,
		Clock: cfg.Clock, Log: cfg.Logger, Tel: s.tel, Deployer: cfg.Deployer, Go: s.goBackground,
		ShipConcurrency:  cfg.ShipConcurrency,
		ShipPollInterval: cfg.ShipPollInterval,
		ShipLease:        cfg.ShipLease,
		ShipRetryBudget:  cfg.ShipRetryBudget,
		ShipRetryBackoff: cfg.ShipRetryBackoff,
		ProviderTimeout:  cfg.ProviderTimeout,
		DeployTimeout:    cfg.DeployTimeout,
	})
	if s.queue, err = s.newQueue(); err != nil {
		return nil, err
	}
	for _, a := range cfg.Agents {
		s.agents[a.ID] = a
	}
	s.broker = broker.New(broker.Config{
		Store: cfg.Store, Clock: cfg.Clock, Log: cfg.Logger,
		StreamLagLimit:    cfg.StreamLagLimit,
		MaxStreamsPerKey:  cfg.MaxStreamsPerKey,
		EventPollInterval: cfg.EventPollInterval,
		StreamBatchWindow: cfg.StreamBatchWindow,
	})
	s.streamKeys = new(eventstream.Keys)
	s.watches = eventstream.NewWatches(s.broker, cfg.Store, cfg.Clock, cfg.Logger)
	s.streams = eventstream.New(eventstream.Config{
		Broker: s.broker, Store: cfg.Store, Keys: s.streamKeys, Clock: cfg.Clock, Log: cfg.Logger, Tel: s.tel,
		Unwrap:             unwrapConn,
		EventRetention:     cfg.EventRetention,
		MaxStreamsPerKey:   cfg.MaxStreamsPerKey,
		StreamWriteTimeout: cfg.StreamWriteTimeout,
		TakeOverStreams:    cfg.TakeOverStreams,
	})
	if s.secrets, err = secretbox.New(cfg.WebhookSecretKey, cfg.WebhookPreviousSecretKeys, "Config.WebhookSecretKey", "Config.WebhookPreviousSecretKeys"); err != nil {
		return nil, fmt.Errorf("lifecycle: %w", err)
	}
	s.targets = webhookdispatch.NewTargetGuard(cfg.AllowPrivateWebhookTargets, cfg.WebhookResolver, cfg.Logger)
	s.webhooks = webhookdispatch.New(webhookdispatch.Config{
		Owner: s.owner, Store: cfg.Store, Update: s.updateRelaxed, Clock: cfg.Clock, Log: cfg.Logger,
		Broker: s.broker, Secrets: s.secrets, Targets: s.targets, Tel: s.tel,
		TLSConfig:                  cfg.WebhookTLSConfig,
		Concurrency:                cfg.WebhookConcurrency,
		ConcurrencyPerSubscription: cfg.WebhookConcurrencyPerSubscription,
		Timeout:                    cfg.WebhookTimeout,
		PollInterval:               cfg.WebhookPollInterval,
		Lease:                      cfg.WebhookLease,
		ClaimBatch:                 cfg.WebhookClaimBatch,
		RetrySchedule:              cfg.WebhookRetrySchedule,
		RetryJitter:                cfg.WebhookRetryJitter,
		MetricIdentifiers:          cfg.MetricIdentifiers,
	})
	if s.auth == nil {
		s.keys = keyauth.New(cfg.Store, cfg.Clock, cfg.KeyCacheTTL, newAuthLimiter(&cfg))
		s.auth = ownKeys{s.keys}
	}
	s.bodies = bodyLimits(&cfg)
	s.tasks = taskcache.New(s.caps.revisions, cfg.TaskCacheBytes)
	s.handler = s.routes(s.auth)
	return s, nil
}

// Handler returns the HTTP handler that serves the whole API. Mount it
// under any prefix with http.StripPrefix; links in responses and events are
// built from [Config.BaseURL].
func (s *Service) Handler() http.Handler { return s.handler }

// Start starts the Service's background work: the ship runner, webhook
// deliveries, the reconciler, and pruning expired events and records. The
// work runs until [Service.Close].
//
// Start first takes the lease of [Config.InstanceID] in the Store, when
// the Store is an [InstanceLeaser] (otherwise the Service is the Store's
// only one, and there is no lease to take). When a process that crashed
// held it, Start waits until its lease ends (at most 3 seconds), then
// resumes that process's ship operations and idempotency reservations at
// once. When a live process holds it, Start fails with an error matching
// [ErrInstanceInUse].
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("lifecycle: start: %w", ErrClosed)
	}
	if s.started {
		return errors.New("lifecycle: Start called twice")
	}
	if err := s.claimInstance(ctx); err != nil {
		return err
	}
	s.started = true
	ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.bg = ctx
	s.goBackground(func() { s.renewInstance(ctx) })
	s.goBackground(func() { s.pruneLoop(ctx) })
	s.goBackground(func() { s.ships.Run(ctx) })
	s.goBackground(func() { s.webhooks.Run(ctx) })
	if s.queue != nil {
		s.goBackground(func() { s.queue.Run(ctx) })
	}
	s.goBackground(func() { s.listen(ctx) }) // when the Store is a Notifier
	if s.cfg.ReconcileInterval > 0 {
		s.goBackground(func() { s.reconcile.Run(ctx) })
	}
	if len(s.cfg.StallAfter) > 0 {
		s.goBackground(func() { s.stallLoop(ctx) })
	}
	s.goBackground(func() { s.watchRevocations(ctx) })
	if s.caps.ciFailures != nil {
		s.goBackground(func() { s.ciFetch.Run(ctx, s.fetchCIFailures) })
	}
	return nil
}

// Close stops the background work, ends every open event stream and waits
// for them to finish, or until ctx is done. It does not close the Store;
// once Close has returned nil, the Service no longer uses it.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.tel.Close()
	s.broker.Hub().Close()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.broker.Hub().Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lifecycle: close: %w", ctx.Err())
	}
}

// goBackground runs f in a goroutine that Close waits for.
func (s *Service) goBackground(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// goStarted runs f in a goroutine that Close waits for, with the context
// of the background work, which Close cancels, when the Service is
// started and not closed; it reports whether it did.
func (s *Service) goStarted(f func(ctx context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return false
	}
	ctx := s.bg
	s.goBackground(func() { f(ctx) })
	return true
}

// pause waits d on the Service's clock and reports whether ctx is still
// alive.
func (s *Service) pause(ctx context.Context, d time.Duration) bool {
	return backoff.Pause(ctx, s.clock, d)
}

// pruneLoop deletes expired events every PruneInterval.
func (s *Service) pruneLoop(ctx context.Context) {
	for {
		s.prune(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.cfg.PruneInterval):
		}
	}
}

// prune deletes what has outlived its retention: idempotency records
// once they expire, events, provider delivery records and webhook
// delivery attempts after EventRetention.
func (s *Service) prune(ctx context.Context) {
	now := s.clock.Now()
	cutoff := now.Add(-s.cfg.EventRetention)
	n, err := s.store.Prune(ctx, PruneParams{Before: cutoff, ExpiredBefore: now})
	if err != nil && ctx.Err() == nil {
		s.log.Error("prune", "err", err) // what was deleted is counted below
	}
	for _, c := range []struct {
		msg   string
		count int64
	}{
		{"pruned idempotency records", n.IdempotencyRecords},
		{"pruned provider deliveries", n.ProviderDeliveries},
		{"pruned webhook deliveries", n.Deliveries},
	} {
		if c.count > 0 {
			s.log.Info(c.msg, "count", c.count)
		}
	}
	if n.Events > 0 {
		s.log.Info("pruned events", "count", n.Events, "before", NewTimestamp(cutoff).String())
	}
}

// now returns the current time as the API represents it.
func (s *Service) now() Timestamp { return NewTimestamp(s.clock.Now()) }

// link returns the absolute URL of an API path.
func (s *Service) link(path string) string { return s.cfg.BaseURL + path }
