package gitlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/gittext"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostcall"
	"github.com/tasklifecycle/lifecycle/adapter/internal/webhookintake"
)

// Config configures an [Adapter].
type Config struct {
	// BaseURL is the GitLab instance: https://gitlab.com or a self-managed
	// one such as https://gitlab.example.com. The API is under /api/v4/.
	// Plain http is allowed only for loopback hosts (a local instance or a
	// test server). Defaults to https://gitlab.com.
	BaseURL string

	// Token is a personal, project or group access token with the api
	// scope. Required. It is sent to BaseURL only and never logged.
	Token string

	// Project is the project's path ("group/subgroup/name") or numeric ID.
	// Required.
	Project string

	// WebhookToken is the secret token of the project's webhook, which
	// GitLab sends as X-Gitlab-Token. Without it [Adapter.WebhookHandler]
	// refuses every delivery.
	WebhookToken string

	// WebhookReadTimeout bounds the reading of a delivery's body, from
	// when its headers have arrived: a sender slower than that is answered
	// 408 and its connection closed. It is set as the connection's read
	// deadline through http.ResponseController, which needs the
	// ResponseWriter of net/http or a wrapper of it with an Unwrap method.
	// Defaults to 10 seconds, GitLab's own timeout for a delivery.
	WebhookReadTimeout time.Duration
	// WebhookBodyBudget bounds the memory held by the bodies of
	// deliveries being read, across every delivery to the adapter's
	// webhook handlers: a delivery whose body would need more than is left
	// is answered 503 with Retry-After, and its connection closed; one
	// larger than the whole budget, 413. The memory is taken in 32 KiB
	// pieces as bytes arrive. Defaults to 16 MiB, far above the hooks the
	// adapter follows (merge requests, pipelines, jobs, deployments).
	WebhookBodyBudget int64

	// TargetBranch is the branch merge requests merge into when a
	// submission names none. Defaults to the project's default branch.
	TargetBranch string

	// BranchPrefix starts the source branch of a task that names none: the
	// branch is BranchPrefix followed by the task's identifier in lower
	// case. Defaults to "lifecycle/".
	BranchPrefix string

	// Merge are the options of every merge.
	Merge MergeOptions

	// MergeTrainPollInterval is how often a merge on a project with merge
	// trains reads its merge request's car while the train tests it (see
	// [Adapter.Merge]). Defaults to 10 seconds.
	MergeTrainPollInterval time.Duration

	// GitPath is the git program that builds the candidates of the
	// lifecycle's own merge queue (see [Adapter.BuildCandidate]); it must
	// be git 2.38 or later, for git merge-tree --write-tree. Defaults to
	// "git" on PATH. Only the queue runs it.
	GitPath string
	// MirrorDir is the directory of the adapter's bare mirror of the
	// project, where the queue's candidates are built. Adapters of
	// several processes may share one: each git operation holds a file
	// lock (flock(2) on Unix) on lifecycle-mirror.lock in it. Empty: a
	// temporary directory made on first use (os.MkdirTemp), used for the
	// Adapter's life and removed by [Adapter.Close]: give a directory to
	// keep one mirror across restarts.
	MirrorDir string
	// CommitterName and CommitterEmail are the author and committer of
	// the queue's merge commits. They default to "lifecycle" and
	// "lifecycle@localhost".
	CommitterName  string
	CommitterEmail string

	// Environments maps the lifecycle's environments (staging,
	// production) to GitLab environment names. An environment it does not
	// name keeps its own name.
	Environments map[lifecycle.Environment]string

	// SettingsTTL is how long the project's settings (default branch, path,
	// approval reset on push) are kept before being read again. Defaults to
	// one minute.
	SettingsTTL time.Duration

	// SweepShare is the share of GitLab's rate limit that the
	// reconciler's readings (lifecycle.ReadSweep) may use: once what is
	// left of the limit is down to the rest, they fail with a
	// *lifecycle.TemporaryError that is RateLimited until the limit's
	// window resets, and the rest is kept for merges, the readings right
	// before them, submissions and deployments. It must be more than 0
	// and at most 1. Defaults to 0.8.
	SweepShare float64

	// HTTPClient makes the requests. Defaults to client-go's pooled client.
	// The adapter sends through a copy of it whose transport reads
	// GitLab's rate limit off every answer.
	HTTPClient *http.Client

	// Clock tells the time: a rate limit's reset is turned into a wait with
	// it. Defaults to the system clock; pass the Service's Clock.
	Clock lifecycle.Clock

	// Logger receives warnings. Defaults to slog.Default().
	Logger *slog.Logger

	// MeterProvider makes the adapter's OpenTelemetry instruments
	// (instrumentation scope
	// "github.com/tasklifecycle/lifecycle/adapter/gitlab"):
	// http.client.request.duration and lifecycle.host.requests of every
	// call to GitLab, the lifecycle.host.rate_limit.remaining and
	// lifecycle.host.rate_limit.reset gauges of its rate limit, and
	// lifecycle.host.webhooks of the deliveries WebhookHandler takes (see
	// the package documentation). Defaults to otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes a client span per call to GitLab, "{METHOD}
	// {operation}", a child of the span of the call's context; the W3C
	// traceparent of the span goes to GitLab with the request. Defaults to
	// otel.GetTracerProvider(): until the global TracerProvider is set,
	// and with a noop one, no span is made, and a call costs nothing more.
	TracerProvider trace.TracerProvider
}

// MergeOptions are the options of a merge.
type MergeOptions struct {
	// Squash squashes the merge request's commits into one.
	Squash bool
	// RemoveSourceBranch deletes the source branch once merged.
	RemoveSourceBranch bool
}

// Adapter is a [lifecycle.ProviderAdapter] on a GitLab project. It is also
// a [lifecycle.BatchReader] (see [Adapter.ReadPullRequests]), a
// [lifecycle.CIProvider] (the merge request's head pipeline), a
// [lifecycle.ReviewDecider] (merge request approvals), a
// [lifecycle.WebhookIntake] (see [Adapter.WebhookHandler]) and a
// [lifecycle.QueueHost] (see [Adapter.BuildCandidate]). It is safe for
// concurrent use.
type Adapter struct {
	cfg    Config
	client *gl.Client
	clock  lifecycle.Clock
	log    *slog.Logger
	budget *hostbudget.Budget
	// tel holds the adapter's OpenTelemetry instruments.
	tel *hostcall.Telemetry
	// hookBodies reads webhook bodies within WebhookBodyBudget.
	hookBodies *webhookintake.Reader

	mu       sync.Mutex
	settings *settings
	readAt   time.Time
	parents  map[string][]string // merge commits of merged-results pipelines: their parents
	// gqlPage is how many merge requests a GraphQL query of the sweep
	// reads: 100 (GitLab's page size) until GitLab finds such a query
	// over its complexity limit, then halved (see mergeRequestsGraphQL).
	gqlPage int
	// gqlOffUntil is when the sweep asks GraphQL again after GitLab
	// answered its query with errors (a schema without a field, GraphQL
	// turned off): zero while it answers.
	gqlOffUntil time.Time
	// trainPage and trainPages bound the reading of a merge train for a
	// car's position: trainPage and trainPages unless a test lowers them.
	trainPage, trainPages int
	// git runs the queue's git operations in the mirror (see
	// queuehost.go).
	git gitMirror
}

var (
	_ lifecycle.ProviderAdapter = (*Adapter)(nil)
	_ lifecycle.BatchReader     = (*Adapter)(nil)
	_ lifecycle.CIProvider      = (*Adapter)(nil)
	_ lifecycle.ReviewDecider   = (*Adapter)(nil)
	_ lifecycle.WebhookIntake   = (*Adapter)(nil)
	_ lifecycle.CIFailureReader = (*Adapter)(nil)
)

// settings are what the adapter keeps of the project.
type settings struct {
	id            int64
	owner, repo   string // path_with_namespace split at its last slash
	defaultBranch string
	resetOnPush   bool
	// mergeTrains says merges go through the project's merge trains:
	// merged results pipelines and merge trains are both enabled.
	mergeTrains bool
	// httpURL is the project's http_url_to_repo, the remote of the
	// queue's mirror.
	httpURL string
}

// New returns an Adapter on cfg.Project. It makes no request: the project
// is read on first use.
func New(cfg Config) (*Adapter, error) {
	if cfg.Token == "" {
		return nil, errors.New("gitlab: Config.Token is required: give an access token with the api scope")
	}
	if strings.TrimSpace(cfg.Project) == "" {
		return nil, errors.New("gitlab: Config.Project is required: give the project's path (group/name) or numeric ID")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://gitlab.com"
	}
	api, err := apiURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.BranchPrefix == "" {
		cfg.BranchPrefix = "lifecycle/"
	}
	if cfg.SettingsTTL <= 0 {
		cfg.SettingsTTL = time.Minute
	}
	switch {
	case cfg.MergeTrainPollInterval < 0:
		return nil, errors.New("gitlab: Config.MergeTrainPollInterval must not be negative; leave it zero for 10 seconds")
	case cfg.MergeTrainPollInterval == 0:
		cfg.MergeTrainPollInterval = 10 * time.Second
	}
	switch {
	case cfg.SweepShare == 0:
		cfg.SweepShare = 0.8
	case !(cfg.SweepShare > 0 && cfg.SweepShare <= 1):
		return nil, fmt.Errorf("gitlab: Config.SweepShare %v must be more than 0 and at most 1: it is the share of GitLab's rate limit the reconciler's readings may use (0.8 keeps a fifth for merges and writes)", cfg.SweepShare)
	}
	if cfg.GitPath == "" {
		cfg.GitPath = "git"
	}
	if cfg.CommitterName == "" {
		cfg.CommitterName = "lifecycle"
	}
	if cfg.CommitterEmail == "" {
		cfg.CommitterEmail = "lifecycle@localhost"
	}
	if !gittext.Ident(cfg.CommitterName, cfg.CommitterEmail) {
		return nil, fmt.Errorf("gitlab: Config.CommitterName %q and CommitterEmail %q must be valid UTF-8 without control characters, '<' or '>'", cfg.CommitterName, cfg.CommitterEmail)
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.WebhookReadTimeout < 0 || cfg.WebhookBodyBudget < 0:
		return nil, errors.New("gitlab: Config.WebhookReadTimeout and Config.WebhookBodyBudget must not be negative; leave them zero for their defaults")
	case cfg.WebhookReadTimeout == 0:
		cfg.WebhookReadTimeout = 10 * time.Second
	}
	if cfg.WebhookBodyBudget == 0 {
		cfg.WebhookBodyBudget = 16 << 20
	}
	a := &Adapter{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, parents: map[string][]string{}, gqlPage: maxGraphQLPage,
		trainPage: trainPage, trainPages: trainPages}
	a.git.dir, a.git.sem = cfg.MirrorDir, make(chan struct{}, 1)
	a.hookBodies = webhookintake.New(webhookintake.Config{
		Budget: cfg.WebhookBodyBudget, Max: maxHookBody, Timeout: cfg.WebhookReadTimeout, Logger: cfg.Logger,
	})
	a.budget = hostbudget.New(cfg.SweepShare, cfg.Clock.Now)
	a.tel = hostcall.New(hostcall.Config{
		Host: "gitlab", Scope: scope, MeterProvider: cfg.MeterProvider, TracerProvider: cfg.TracerProvider,
		Routes: routes(api),
	})
	a.tel.ObserveRateLimits(a.budget, gaugedResource)
	// client-go's own retries are off for every request: it would retry
	// a 429 or a 5xx up to five times, on the wall clock and blind to
	// Retry-After, turning a rate limit into a context deadline and
	// stalling webhook handling. Each such answer is instead a
	// *lifecycle.TemporaryError with the wait GitLab asked for (see fail),
	// and the caller (the ship runner, the reconciler) owns retries. Its
	// own rate limiter, which would pace requests on the wall clock, is
	// the adapter's budget instead (see limiter).
	opts := []gl.ClientOptionFunc{gl.WithBaseURL(api), gl.WithoutRetries(), gl.WithCustomLeveledLogger(quietLogger{}),
		gl.WithHTTPClient(a.httpClient(cfg.HTTPClient)), gl.WithCustomLimiter(limiter{a})}
	client, err := gl.NewClient(cfg.Token, opts...)
	if err != nil {
		return nil, fmt.Errorf("gitlab: %w", err)
	}
	a.client = client
	return a, nil
}

// apiURL checks a base URL and returns its API root.
func apiURL(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("gitlab: Config.BaseURL %q is not a URL such as https://gitlab.example.com", base)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return "", fmt.Errorf("gitlab: Config.BaseURL %q: plain http is allowed only for loopback hosts; use https", base)
		}
	default:
		return "", fmt.Errorf("gitlab: Config.BaseURL %q: the scheme must be https", base)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("gitlab: Config.BaseURL %q must hold no credentials, query or fragment", base)
	}
	p := strings.TrimSuffix(u.Path, "/")
	p = strings.TrimSuffix(p, "/api/v4")
	u.Path = p + "/api/v4/"
	return u.String(), nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name implements [lifecycle.CIProvider]: "gitlab".
func (a *Adapter) Name() string { return "gitlab" }

// CountsSelfReported implements [lifecycle.CIProvider]: GitLab has its own
// pipelines, so the checks an agent reports do not count.
func (a *Adapter) CountsSelfReported() bool { return false }

// project returns the project's settings, read again once SettingsTTL has
// passed.
func (a *Adapter) project(ctx context.Context) (*settings, error) {
	a.mu.Lock()
	s, at := a.settings, a.readAt
	a.mu.Unlock()
	now := a.clock.Now()
	if s != nil && now.Sub(at) < a.cfg.SettingsTTL {
		return s, nil
	}
	p, resp, err := a.client.Projects.GetProject(a.cfg.Project, nil, gl.WithContext(ctx))
	if err != nil {
		return nil, a.fail(ctx, "read project "+a.cfg.Project, resp, err)
	}
	// Merge trains need merged results pipelines (GitLab's "Merge trains"
	// page: "You must have merged results pipelines enabled").
	s = &settings{id: p.ID, defaultBranch: p.DefaultBranch, mergeTrains: p.MergeTrainsEnabled && p.MergePipelinesEnabled,
		httpURL: p.HTTPURLToRepo}
	s.owner, s.repo = splitPath(p.PathWithNamespace)
	// Approval settings are a Premium feature: without them nothing is
	// reset on push.
	appr, resp, err := a.client.Projects.GetApprovalConfiguration(p.ID, gl.WithContext(ctx))
	switch {
	case err == nil:
		s.resetOnPush = appr.ResetApprovalsOnPush
	case resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden):
	default:
		return nil, a.fail(ctx, "read approval settings of project "+a.cfg.Project, resp, err)
	}
	a.mu.Lock()
	a.settings, a.readAt = s, now
	a.mu.Unlock()
	return s, nil
}

// hookProject returns the project's settings for a webhook delivery: as
// read again once SettingsTTL has passed, or as last read when GitLab
// cannot be read now. It fails only when they were never read.
func (a *Adapter) hookProject(ctx context.Context) (*settings, error) {
	s, err := a.project(ctx)
	if err == nil {
		return s, nil
	}
	a.mu.Lock()
	last := a.settings
	a.mu.Unlock()
	if last == nil {
		return nil, err
	}
	a.log.WarnContext(ctx, "GitLab project settings not read again; the webhook uses those last read", "err", err)
	return last, nil
}

// splitPath splits "group/sub/name" into "group/sub" and "name".
func splitPath(p string) (owner, repo string) {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// checkRef makes sure ref names this adapter's project.
func (a *Adapter) checkRef(s *settings, ref lifecycle.PullRequestRef) error {
	if ref.Owner != s.owner || ref.Repo != s.repo {
		return fmt.Errorf("gitlab: merge request %s is not in project %s/%s: %w", ref, s.owner, s.repo, lifecycle.ErrNotFound)
	}
	return nil
}

// fail translates an error of client-go: 404 → ErrNotFound; a request
// the budget did not send, and 429 → a *lifecycle.TemporaryError that is
// RateLimited, with the wait GitLab asks for (a minute when it says
// nothing); 5xx and failures of the connection → a
// *lifecycle.TemporaryError; anything else wrapped with what was done.
func (a *Adapter) fail(ctx context.Context, what string, resp *gl.Response, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("gitlab: %s: %w", what, err)
	}
	if te := (*lifecycle.TemporaryError)(nil); errors.As(err, &te) && te.RateLimited {
		return &lifecycle.TemporaryError{Err: fmt.Errorf("gitlab: %s: %w", what, te.Err), RetryAfter: te.RetryAfter, RateLimited: true}
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	switch {
	case status == http.StatusNotFound || errors.Is(err, gl.ErrNotFound):
		return fmt.Errorf("gitlab: %s: %w", what, lifecycle.ErrNotFound)
	case status == http.StatusTooManyRequests:
		wait := a.retryAfter(resp.Header)
		if wait <= 0 {
			wait = defaultRateLimitWait
		}
		return &lifecycle.TemporaryError{Err: fmt.Errorf("gitlab: %s: rate limited: %w", what, err), RetryAfter: wait, RateLimited: true}
	case status >= 500 || status == 0:
		var ra time.Duration
		if resp != nil {
			ra = a.retryAfter(resp.Header)
		}
		return &lifecycle.TemporaryError{Err: fmt.Errorf("gitlab: %s: %w", what, err), RetryAfter: ra}
	}
	return fmt.Errorf("gitlab: %s: %w", what, err)
}

// retryAfter reads the wait a response asks for: Retry-After in seconds or
// as an HTTP date, else RateLimit-Reset, a Unix time; dates are measured
// on the adapter's Clock.
func (a *Adapter) retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(a.clock.Now()); d > 0 {
				return d
			}
		}
	}
	if v := h.Get("RateLimit-Reset"); v != "" {
		if reset, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			if d := time.Unix(reset, 0).Sub(a.clock.Now()); d > 0 {
				return d.Round(time.Second)
			}
		}
	}
	return 0
}

// quietLogger drops client-go's request logs, which carry request URLs;
// the adapter logs what matters itself.
type quietLogger struct{}

func (quietLogger) Error(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Warn(string, ...any)  {}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
