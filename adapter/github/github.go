package github

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/webhookintake"
)

// DefaultAPIURL is the REST API of github.com.
const DefaultAPIURL = "https://api.github.com/"

// maxIdleConnsPerHost is the number of idle connections to GitHub the
// default HTTPClient keeps: above the concurrency of the ship runner (16)
// and of the reconciler.
const maxIdleConnsPerHost = 32

// Config configures an Adapter. Owner, Repo and one way to authenticate
// (Client, Token or App) are required.
type Config struct {
	// Owner and Repo name the repository, as in github.com/OWNER/REPO.
	// Required.
	Owner string
	Repo  string

	// Token is a personal access token or an installation token, sent as
	// "Authorization: Bearer". It is never logged.
	Token string
	// App authenticates as a GitHub App installation instead of with a
	// Token.
	App *AppAuth
	// Client is a go-github client to use as it is configured (its base
	// URL and authentication); Token, App, APIURL and HTTPClient are then
	// ignored. The Adapter reads the client's http.Client and adds its own
	// handling of rate limits and server errors to it.
	Client *gh.Client
	// HTTPClient is the http.Client under Token or App authentication.
	// Defaults to a client with a 30-second timeout that keeps up to 32
	// idle connections to GitHub open for reuse.
	HTTPClient *http.Client
	// APIURL is the REST API's base URL, used as given: requests go to
	// APIURL + "repos/...". Defaults to DefaultAPIURL. For GitHub
	// Enterprise Server give "https://HOST/api/v3/". Plain http is
	// accepted only for loopback hosts.
	APIURL string
	// GraphQLURL is the GraphQL API's endpoint, through which pull
	// requests are read in batches. Defaults to the one of APIURL:
	// https://api.github.com/graphql for DefaultAPIURL,
	// https://HOST/api/graphql for an Enterprise Server's
	// https://HOST/api/v3/, and APIURL + "graphql" for any other (or of the
	// base URL of Client, when it is set).
	GraphQLURL string

	// SweepShare is the share of each of GitHub's rate limits (the REST
	// API's and GraphQL's) that the reconciler's readings
	// (lifecycle.ReadSweep) may use; the rest is kept for writes, merges
	// and the readings callers wait for. Once what is left of a limit
	// falls to the rest, a sweep fails with a *lifecycle.TemporaryError
	// that is RateLimited until the limit resets. Defaults to 0.8; must
	// be more than 0 and at most 1.
	SweepShare float64

	// MergeMethod is the merge method preferred: "merge", "squash" or
	// "rebase", used whenever GitHub allows it. Whatever it is, Merge
	// merges with a method the repository's settings (allow_merge_commit,
	// allow_squash_merge, allow_rebase_merge) and the base branch's rules
	// (rulesets' allowed_merge_methods, a required linear history) allow:
	// the preferred one, else the first allowed of merge, squash and
	// rebase. Defaults to "", no preference: the repository decides.
	MergeMethod string
	// BaseBranch is the branch pull requests merge into when a request
	// names none. Defaults to the repository's default branch, read once.
	BaseBranch string
	// BranchPrefix starts the head branch of a task when a request names
	// none, followed by the task's identifier in lower case
	// ("lifecycle/eng-42"), the artifact adapter's convention. Defaults to
	// "lifecycle/".
	BranchPrefix string

	// DefaultRequiredApprovals is the number of approvals a pull request
	// needs when neither branch protection nor rulesets say, and GitHub's
	// own reviewDecision cannot be read either (it is read through
	// GraphQL, which any reader may ask, when the protection cannot be
	// read). Defaults to 1.
	DefaultRequiredApprovals int
	// ProtectionTTL is how long the branch protection and rulesets of a
	// base branch, and the repository's merge settings, are kept before
	// being read again. Defaults to 1 minute.
	ProtectionTTL time.Duration
	// StaleSuiteAfter is how long a check suite that has not completed
	// and has no check run (a CI App that has not started, or never will:
	// some leave their suites queued for good) keeps CI pending, from its
	// creation, when the checks the base requires are not all known.
	// After it the suite is reported in lifecycle.CIReport.Stale and no
	// longer waited on. Defaults to 10 minutes.
	StaleSuiteAfter time.Duration

	// DeployPollInterval is how often Deploy reads the statuses of a
	// deployment while it waits for a terminal one; a deployment_status
	// webhook wakes it sooner. Defaults to 15 seconds.
	DeployPollInterval time.Duration

	// MergeQueuePollInterval is how often a Merge into a base whose
	// rulesets require GitHub's merge queue reads that base's queue while
	// it follows its pull request's entry: one GraphQL query (one
	// rate-limit point) reads the whole queue, with the checks of its
	// merge groups, and every Merge following an entry of that queue
	// shares it. Defaults to 30 seconds.
	MergeQueuePollInterval time.Duration

	// WebhookSecret is the secret of the repository's webhook. Required
	// by WebhookHandler, which refuses every delivery without it.
	WebhookSecret string
	// WebhookApplyTimeout bounds the application of one delivery, so that
	// GitHub, which gives up after 10 seconds, gets an answer. Defaults to
	// 8 seconds.
	WebhookApplyTimeout time.Duration
	// WebhookReadTimeout bounds the reading of a delivery's body, from
	// when its headers have arrived: a sender slower than that is answered
	// 408 and its connection closed. It is set as the connection's read
	// deadline through http.ResponseController, which needs the
	// ResponseWriter of net/http or a wrapper of it with an Unwrap method.
	// Defaults to 10 seconds, the time GitHub gives a whole delivery.
	WebhookReadTimeout time.Duration
	// WebhookBodyBudget bounds the memory held by the bodies of
	// deliveries not yet verified, across every delivery to the Adapter's
	// webhook handlers: a delivery whose body would need more than is left
	// is answered 503 with Retry-After, and its connection closed; one
	// larger than the whole budget, 413. The memory is taken in 32 KiB
	// pieces as bytes arrive; it is apart from the Service's own
	// Config.MaxDecodingBytes. Defaults to 16 MiB: the payloads of the
	// events the Adapter uses are far smaller, and GitHub's largest (pushes,
	// up to 25 MB) are of events it does not use, whose bodies are
	// verified as they stream without being held.
	WebhookBodyBudget int64

	// Clock tells the time of rate-limit resets (how long a request
	// whose share of the rate limit is spent must wait), of the policy's
	// ProtectionTTL, of StaleSuiteAfter, and waits between deployment
	// polls. Defaults to the system clock.
	Clock lifecycle.Clock
	// Logger receives the Adapter's logs. Tokens and secrets are never
	// logged. Defaults to slog.Default().
	Logger *slog.Logger

	// MeterProvider makes the Adapter's OpenTelemetry instruments
	// (instrumentation scope
	// "github.com/tasklifecycle/lifecycle/adapter/github"):
	// http.client.request.duration and lifecycle.host.requests of every
	// call to GitHub, the lifecycle.host.rate_limit.remaining and
	// lifecycle.host.rate_limit.reset gauges of GitHub's rate limits, and
	// lifecycle.host.webhooks of the deliveries WebhookHandler takes (see
	// the package documentation). Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes a client span per call to GitHub, "{METHOD}
	// {operation}", a child of the span of the call's context; the W3C
	// traceparent of the span goes to GitHub with the request. Defaults to
	// otel.GetTracerProvider(): until the global TracerProvider is set,
	// and with a noop one, no span is made, and a call costs nothing more.
	TracerProvider trace.TracerProvider
}

// AppAuth authenticates as an installation of a GitHub App, with
// github.com/bradleyfalzon/ghinstallation/v2: a JWT signed with the App's
// private key is exchanged for an installation token, renewed before it
// expires.
type AppAuth struct {
	// AppID is the App's ID.
	AppID int64
	// InstallationID is the ID of its installation on the repository's
	// owner.
	InstallationID int64
	// PrivateKey is the App's private key, PEM-encoded.
	PrivateKey []byte
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// withDefaults returns cfg with the documented defaults filled in.
func (cfg Config) withDefaults() Config {
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.BranchPrefix == "" {
		cfg.BranchPrefix = "lifecycle/"
	}
	if cfg.DefaultRequiredApprovals == 0 {
		cfg.DefaultRequiredApprovals = 1
	}
	if cfg.SweepShare == 0 {
		cfg.SweepShare = 0.8
	}
	if cfg.ProtectionTTL == 0 {
		cfg.ProtectionTTL = time.Minute
	}
	if cfg.StaleSuiteAfter == 0 {
		cfg.StaleSuiteAfter = 10 * time.Minute
	}
	if cfg.DeployPollInterval == 0 {
		cfg.DeployPollInterval = 15 * time.Second
	}
	if cfg.MergeQueuePollInterval == 0 {
		cfg.MergeQueuePollInterval = 30 * time.Second
	}
	if cfg.WebhookApplyTimeout == 0 {
		cfg.WebhookApplyTimeout = 8 * time.Second
	}
	if cfg.WebhookReadTimeout == 0 {
		cfg.WebhookReadTimeout = 10 * time.Second
	}
	if cfg.WebhookBodyBudget == 0 {
		cfg.WebhookBodyBudget = 16 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		// net/http keeps 2 idle connections per host by default: the ship
		// runner's 16 concurrent merges would open a connection (a TLS
		// handshake at GitHub) for most calls.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	}
	return cfg
}

// validate checks cfg, defaults filled in.
func (cfg Config) validate() error {
	switch {
	case cfg.Owner == "" || cfg.Repo == "" || strings.Contains(cfg.Owner, "/") || strings.Contains(cfg.Repo, "/"):
		return fmt.Errorf("github: Config.Owner %q and Config.Repo %q must name a repository, as in github.com/OWNER/REPO", cfg.Owner, cfg.Repo)
	case cfg.Client == nil && cfg.Token == "" && cfg.App == nil:
		return errors.New("github: no credentials; set Config.Token (a token with the repo scope), Config.App or Config.Client")
	case cfg.MergeMethod != "" && !slices.Contains(methodOrder[:], cfg.MergeMethod):
		return fmt.Errorf("github: Config.MergeMethod %q is not merge, squash or rebase; leave it empty to let the repository decide", cfg.MergeMethod)
	case cfg.MergeQueuePollInterval < 0:
		return errors.New("github: Config.MergeQueuePollInterval is negative; leave it zero for its default of 30 seconds")
	case cfg.StaleSuiteAfter < 0:
		return errors.New("github: Config.StaleSuiteAfter is negative; leave it zero for its default of 10 minutes")
	case cfg.DefaultRequiredApprovals < 0:
		return errors.New("github: Config.DefaultRequiredApprovals is negative")
	case cfg.WebhookReadTimeout < 0 || cfg.WebhookBodyBudget < 0:
		return errors.New("github: Config.WebhookReadTimeout and Config.WebhookBodyBudget must not be negative; leave them zero for their defaults")
	case !(cfg.SweepShare > 0 && cfg.SweepShare <= 1):
		return fmt.Errorf("github: Config.SweepShare %v is not a share of the rate limit; give one above 0 and at most 1, such as 0.8", cfg.SweepShare)
	case cfg.App != nil && (cfg.App.AppID == 0 || cfg.App.InstallationID == 0 || len(cfg.App.PrivateKey) == 0):
		return errors.New("github: Config.App needs AppID, InstallationID and PrivateKey")
	}
	if cfg.Client == nil {
		u, err := url.Parse(cfg.APIURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("github: Config.APIURL %q is not an http(s) URL; use %s or https://HOST/api/v3/", cfg.APIURL, DefaultAPIURL)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			return fmt.Errorf("github: Config.APIURL %q uses plain http to a host that is not loopback; use https", cfg.APIURL)
		}
	}
	if cfg.GraphQLURL != "" {
		u, err := url.Parse(cfg.GraphQLURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("github: Config.GraphQLURL %q is not an http(s) URL; use https://api.github.com/graphql or https://HOST/api/graphql", cfg.GraphQLURL)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			return fmt.Errorf("github: Config.GraphQLURL %q uses plain http to a host that is not loopback; use https", cfg.GraphQLURL)
		}
	}
	return nil
}

// graphqlEndpoint returns the GraphQL endpoint of the REST API at apiURL.
func graphqlEndpoint(apiURL string) string {
	base := apiBase(apiURL)
	if base == DefaultAPIURL {
		return "https://api.github.com/graphql"
	}
	if host, ok := strings.CutSuffix(base, "/api/v3/"); ok {
		return host + "/api/graphql" // GitHub Enterprise Server's
	}
	return base + "graphql"
}

// Adapter runs pull requests, CI, reviews, deployments and webhooks of one
// GitHub repository. It implements [lifecycle.ProviderAdapter],
// [lifecycle.CIProvider], [lifecycle.ReviewDecider],
// [lifecycle.BatchReader], [lifecycle.WebhookIntake], [lifecycle.Deployer],
// [lifecycle.DeploymentObserver] and [lifecycle.QueueHost]. It is safe for
// concurrent use.
type Adapter struct {
	cfg     Config
	client  *gh.Client
	graphql *githubv4.Client
	budget  *hostbudget.Budget
	log     *slog.Logger
	// tel holds the Adapter's OpenTelemetry instruments.
	tel *hostcall.Telemetry
	// hookBodies reads webhook bodies within WebhookBodyBudget.
	hookBodies *webhookintake.Reader
	// gaps are the GraphQL fields the server's schema lacks.
	gaps schemaGaps
	// probeSize and fullSize are how much a query reads: connections
	// for a probe, pull requests for a full reading.
	probeSize, fullSize batchSizer

	mu          sync.Mutex
	baseBranch  string                 // the repository's default branch, once read
	policies    map[string]policyEntry // by base branch
	settings    *mergeSettings         // the repository's merge settings, once read
	bases       map[int]string         // base branch of pull requests read
	branchLocks map[string]*sync.Mutex // serialises EnsurePullRequest per head
	waiters     map[string]map[chan struct{}]struct{}
	early       map[string]struct{} // deployments observed before their wait

	// mq follows the entries of GitHub's merge queues (mergequeue.go).
	mq mergeQueues

	// notes are the failures webhooks told of (cifailure.go).
	notes failureNotes
}

var (
	_ lifecycle.ProviderAdapter    = (*Adapter)(nil)
	_ lifecycle.CIProvider         = (*Adapter)(nil)
	_ lifecycle.ReviewDecider      = (*Adapter)(nil)
	_ lifecycle.WebhookIntake      = (*Adapter)(nil)
	_ lifecycle.Deployer           = (*Adapter)(nil)
	_ lifecycle.DeploymentObserver = (*Adapter)(nil)
	_ lifecycle.BatchReader        = (*Adapter)(nil)
	_ lifecycle.CIFailureReader    = (*Adapter)(nil)
)

// New returns an Adapter for the repository cfg names.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	budget := hostbudget.New(cfg.SweepShare, cfg.Clock.Now)
	restBase, graphqlURL, err := endpoints(cfg)
	if err != nil {
		return nil, err
	}
	tel := hostcall.New(hostcall.Config{
		Host: Source, Scope: scope, MeterProvider: cfg.MeterProvider, TracerProvider: cfg.TracerProvider,
		Routes: routes(restBase, graphqlURL),
	})
	tel.ObserveRateLimits(budget, nil)
	client, err := newClient(cfg, budget, tel, restBase, graphqlURL)
	if err != nil {
		return nil, err
	}
	gqlHTTP := client.Client()
	gqlHTTP.Transport = &graphqlTransport{base: gqlHTTP.Transport, clock: cfg.Clock}
	a := &Adapter{
		cfg:         cfg,
		client:      client,
		graphql:     githubv4.NewEnterpriseClient(graphqlURL, gqlHTTP),
		budget:      budget,
		tel:         tel,
		log:         cfg.Logger.With("adapter", "github", "repo", cfg.Owner+"/"+cfg.Repo),
		baseBranch:  cfg.BaseBranch,
		policies:    make(map[string]policyEntry),
		bases:       make(map[int]string),
		branchLocks: make(map[string]*sync.Mutex),
		waiters:     make(map[string]map[chan struct{}]struct{}),
		early:       make(map[string]struct{}),
		gaps: schemaGaps{optional: optionalFields(reflect.TypeFor[probePR](), reflect.TypeFor[fullPR](), reflect.TypeFor[contextsQuery]()),
			missing: map[string]bool{}},
		probeSize: batchSizer{max: probeBatch},
		fullSize:  batchSizer{max: fullBatch},
	}
	a.hookBodies = webhookintake.New(webhookintake.Config{
		Budget: cfg.WebhookBodyBudget, Max: MaxWebhookBody, Timeout: cfg.WebhookReadTimeout, Logger: a.log,
	})
	return a, nil
}

// endpoints returns the REST API's base URL and the GraphQL endpoint of
// cfg: Client's base URL or APIURL, and GraphQLURL or the endpoint of the
// REST API's.
func endpoints(cfg Config) (*url.URL, string, error) {
	var restBase *url.URL
	if cfg.Client != nil {
		restBase = cfg.Client.BaseURL
	} else {
		u, err := url.Parse(apiBase(cfg.APIURL))
		if err != nil {
			return nil, "", fmt.Errorf("github: Config.APIURL: %w", err)
		}
		restBase = u
	}
	graphqlURL := cfg.GraphQLURL
	if graphqlURL == "" {
		graphqlURL = graphqlEndpoint(restBase.String())
	}
	return restBase, graphqlURL, nil
}

// newClient builds the go-github client of cfg, with the Adapter's
// transport (rate-limit budget, conditional requests, rate limits and
// server errors) under its authentication, over the transport of tel,
// which instruments every request sent: REST, GraphQL (through a copy of
// the client's http.Client) and an App's token exchanges.
func newClient(cfg Config, budget *hostbudget.Budget, tel *hostcall.Telemetry, restBase *url.URL, graphqlURL string) (*gh.Client, error) {
	transport := func(base http.RoundTripper) *hostTransport {
		t := &hostTransport{base: tel.Transport(base), clock: cfg.Clock, budget: budget, cache: newETagCache()}
		if u, err := url.Parse(graphqlURL); err == nil {
			t.graphqlPath = u.Path
		}
		return t
	}
	if cfg.Client != nil {
		hc := cfg.Client.Client()
		hc.Transport = transport(hc.Transport)
		c := gh.NewClient(hc)
		c.BaseURL, c.UploadURL, c.UserAgent = cfg.Client.BaseURL, cfg.Client.UploadURL, cfg.Client.UserAgent
		return c, nil
	}
	hc := *cfg.HTTPClient
	var base http.RoundTripper = transport(hc.Transport)
	if cfg.App != nil {
		tr, err := newAppTransport(base, cfg)
		if err != nil {
			return nil, err
		}
		base = tr
	}
	hc.Transport = base
	c := gh.NewClient(&hc)
	if cfg.Token != "" && cfg.App == nil {
		c = c.WithAuthToken(cfg.Token)
	}
	if base := apiBase(cfg.APIURL); base != DefaultAPIURL {
		// As given: go-github's WithEnterpriseURLs would add "api/v3/" to a
		// URL without it, and miss an API served elsewhere.
		c.BaseURL = restBase
		if up, ok := strings.CutSuffix(base, "/api/v3/"); ok {
			c.UploadURL, _ = url.Parse(up + "/api/uploads/") // GitHub Enterprise Server's
		} else {
			c.UploadURL = restBase
		}
	}
	c.UserAgent = "tasklifecycle-lifecycle"
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	return strings.HasPrefix(host, "127.") || host == "::1"
}

// RateLimit is what GitHub last said of one of its rate limits.
type RateLimit struct {
	// Limit is the requests (REST) or points (GraphQL) the hour allows.
	Limit int
	// Remaining is what is left of it.
	Remaining int
	// Reset is when the window starts again with Limit.
	Reset time.Time
}

// RateLimit returns what GitHub last said of its rate limit named
// resource ("core" for the REST API, "graphql" for GraphQL), with
// Remaining back at Limit once the window has reset, and false when no
// answer has said anything of it yet (GitHub Enterprise Server with rate
// limiting off says nothing).
func (a *Adapter) RateLimit(resource string) (RateLimit, bool) {
	st, ok := a.budget.State(resource)
	return RateLimit{Limit: st.Limit, Remaining: st.Remaining, Reset: st.Reset}, ok
}

// Name returns "github", the name served as a submission's ciProvider.
func (a *Adapter) Name() string { return "github" }

// CountsSelfReported returns false: checks an agent reports do not count,
// GitHub's do.
func (a *Adapter) CountsSelfReported() bool { return false }

// ref names a pull request of the Adapter's repository.
func (a *Adapter) ref(n int) lifecycle.PullRequestRef {
	return lifecycle.PullRequestRef{Owner: a.cfg.Owner, Repo: a.cfg.Repo, Number: n}
}

// checkRef refuses pull requests of another repository.
func (a *Adapter) checkRef(ref lifecycle.PullRequestRef) error {
	if !strings.EqualFold(ref.Owner, a.cfg.Owner) || !strings.EqualFold(ref.Repo, a.cfg.Repo) {
		return fmt.Errorf("github: pull request %s is not of repository %s/%s: %w", ref, a.cfg.Owner, a.cfg.Repo, lifecycle.ErrNotFound)
	}
	return nil
}
