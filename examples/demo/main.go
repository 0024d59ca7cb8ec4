// Command demo runs the task lifecycle service locally, with no credentials:
// a SQLite database in a data directory, local git repositories standing in
// for a code host (submissions are commits, ships are merge commits,
// deployments are checked-out directories), a few seeded tasks and an admin
// key with every scope.
//
//	go run ./examples/demo
//	go run ./examples/demo -addr 127.0.0.1:9090 -data /tmp/lifecycle -admin-key-file ~/.lifecycle-admin.key
//	eval "$(go run ./examples/demo -background)"
//
// With -background it starts the server as a process of its own, waits
// until it serves, prints the shell commands that set KEY and BASE (so
// that eval sets them) and exits; the server keeps running, logging to
// demo.log in the data directory, until killed (kill $(cat
// lifecycle-demo-data/demo.pid)). The admin key goes to those commands on
// the terminal and to the key file, never to demo.log.
//
// Secrets are never taken from the command line, where ps shows them to
// every user of the machine: each comes from a file named by a flag, or
// from an environment variable, or (the admin key and the key that seals
// webhook secrets) from the data directory, generated on the first run:
//
//	admin API key               -admin-key-file                  LIFECYCLE_ADMIN_KEY           admin.key
//	key sealing webhook secrets -webhook-secret-key-file         LIFECYCLE_WEBHOOK_SECRET_KEY  webhook-secret.key
//	keys it replaces            -webhook-previous-secret-keys-file LIFECYCLE_WEBHOOK_PREVIOUS_SECRET_KEYS
//	-webhook-url's secret       -webhook-secret-file             WEBHOOK_SECRET
//	GitHub token                -github-token-file               GITHUB_TOKEN
//	GitHub webhook secret       -github-webhook-secret-file      GITHUB_WEBHOOK_SECRET
//	GitLab token                -gitlab-token-file               GITLAB_TOKEN
//	GitLab webhook token        -gitlab-webhook-token-file       GITLAB_WEBHOOK_TOKEN
//
// A file flag wins over the variable. A -postgres DSN holding a password
// is refused: give it in LIFECYCLE_POSTGRES_DSN, or the password in
// PGPASSWORD or ~/.pgpass. The data directory is kept readable by its
// owner only (0700), and so are its files (0600): the database, admin.key,
// webhook-secret.key, instance.id, demo.pid and demo.log; the demo
// tightens those an older run left wider.
//
// To watch signed webhook deliveries arrive, run the example receiver
// (WEBHOOK_SECRET=... go run ./examples/webhookreceiver) and pass its URL, secret
// and certificate; the demo then subscribes it to every event type:
//
//	WEBHOOK_SECRET=demo-secret-0123456789 go run ./examples/demo \
//		-webhook-url https://127.0.0.1:8443/hooks -webhook-ca /tmp/receiver-cert.pem
//
// A receiver on loopback is a private target, refused by default as a
// defence against server-side request forgery: the -webhook-url
// subscription, and it alone, is allowed to reach a private address
// (lifecycle.CreateSubscriptionParams.AllowPrivateTarget). Subscriptions
// created over the API are still refused one, unless
// -allow-private-webhooks lets every subscription through.
//
// To run the tasks of one project on a GitHub repository instead of a local
// one (pull requests, CI, review decision, merges and deployments at
// GitHub, webhooks at POST /hooks/github beside the API):
//
//	GITHUB_TOKEN=ghp_... GITHUB_WEBHOOK_SECRET=... go run ./examples/demo \
//		-github-repo acme/web -github-project github
//
// To work on a real GitLab project as well, name it; tasks whose
// context.project is -gitlab-project (default "gitlab") then open merge
// requests there, take their CI and approvals from it and deploy through
// its Deployments API, and GitLab's webhook is taken at POST /hooks/gitlab:
//
//	GITLAB_TOKEN=glpat-... GITLAB_WEBHOOK_TOKEN=... go run ./examples/demo \
//		-gitlab-project-path GROUP/NAME [-gitlab-url https://gitlab.example.com]
//
// With -merge-queue, ships of the local repositories' tasks go through
// the lifecycle's own merge queue (docs/merge-queue.md) instead of
// merging at once: each change waits in the queue of its repository and
// base, candidates are built on lifecycle-queue/main/<n> branches and
// tested, and main moves to exactly a candidate that passed. The check
// runs in process and passes after -queue-check-duration (0: at once),
// or is a command of your own run in a checkout of each candidate
// (-queue-command, with LIFECYCLE_CANDIDATE_SHA set). -queue-tested-log
// names a file where the in-process check appends, and syncs, every
// candidate it passed before the queue learns it passed; GET
// /merge-queues shows the queues:
//
//	go run ./examples/demo -merge-queue -queue-check-duration 2s -queue-tested-log /tmp/tested.log
//	go run ./examples/demo -merge-queue -queue-command 'make test'
//
// Webhook secrets are sealed in the database with a 32-byte key (64 hex
// digits or standard base64), by default one generated on the first run
// and kept in the data directory (webhook-secret.key). To rotate it, start
// with the new key and the old one among the previous keys: the demo
// reseals every secret with the new key at start, after which the old key
// can go. Keeping the key beside the database protects the secrets from a
// copy of the database alone; give -webhook-secret-key-file a path
// elsewhere to protect them from a copy of the directory.
//
// Metrics and traces are OpenTelemetry's (docs/operations.md lists them).
// GET /metrics serves the Service's metrics (and the Go runtime's) in
// Prometheus's text format, without a key as Prometheus scrapes, on a
// listener of its own apart from the API: -metrics-addr, by default
// 127.0.0.1:9464 (loopback only, whatever -addr is; "" serves none). The
// API's port answers /metrics as any unknown route. No metric names a
// webhook subscription or a receiver unless -metric-identifiers asks for
// them. GET /healthz and GET /readyz, on the API's port, are the
// Service's probes. Spans are exported over OTLP when the standard
// variables name an endpoint, and not made at all otherwise:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run ./examples/demo   # http/protobuf, to /v1/traces
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc go run ./examples/demo
//
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// win over the general ones; OTEL_SERVICE_NAME names the service
// (default lifecycle-demo); the exporter's other variables (headers,
// certificates, timeouts, the sampler, the batch) apply as the SDK reads
// them. Spans are sent in batches, and the last ones at shutdown.
//
// It prints the base URL and the admin key, then serves until SIGINT or
// SIGTERM, when it shuts down cleanly.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/adapter/github"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/mcp"
	"github.com/tasklifecycle/lifecycle/store/postgres"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the flags' usage was printed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// options are the demo's flags, with the secrets they name read.
type options struct {
	addr                 string
	metricsAddr          string
	metricIdentifiers    bool
	data                 string
	adminKey             string
	adminKeySource       string // where adminKey comes from, in words
	adminKeyFromData     bool   // adminKey is the data directory's, or one to keep there
	allowPrivateWebhooks bool
	webhookURL           string
	webhookSecret        string
	webhookCA            string
	reconcileInterval    time.Duration
	gitlabProjectPath    string
	gitlabProject        string
	gitlabURL            string
	gitlabToken          string
	gitlabWebhookToken   string

	githubRepo          string
	githubProject       string
	githubAPIURL        string
	githubToken         string
	githubWebhookSecret string
	postgres            string
	instanceID          string
	background          bool
	webhookSecretKey    string
	previousSecretKeys  string
	queue               queueOptions
}

// secretSource is where one secret comes from: the file a flag names, or
// else an environment variable.
type secretSource struct {
	flag, env string
	file      string  // set by the flag
	dst       *string // the secret read
	what      string
	fallback  string // what is used without the file and the variable
}

// removedFlag is a flag that took a secret on the command line, where ps
// shows it: setting it makes parseFlags fail with what to use instead,
// without repeating the value.
type removedFlag struct {
	name, use string
	set       bool
}

func (f *removedFlag) String() string { return "" }

func (f *removedFlag) Set(string) error {
	f.set = true
	return nil
}

// parseFlags parses the demo's command-line arguments (without the
// program's name), and reads the secrets from the files they name or
// from the environment (getenv).
func parseFlags(args []string, getenv func(string) string) (options, error) {
	// A flag set of its own, under the package's name, so that run can be
	// called from tests with arguments of their own.
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o options
	secrets := []*secretSource{
		{flag: "admin-key-file", env: "LIFECYCLE_ADMIN_KEY", dst: &o.adminKey, what: "admin API key to install (lsk_ and 32+ letters or digits)", fallback: "admin.key in the data directory, generated on the first run"},
		{flag: "webhook-secret-file", env: "WEBHOOK_SECRET", dst: &o.webhookSecret, what: "secret of the -webhook-url subscription, 16 to 128 characters"},
		{flag: "github-token-file", env: "GITHUB_TOKEN", dst: &o.githubToken, what: "token for -github-repo (never logged)"},
		{flag: "github-webhook-secret-file", env: "GITHUB_WEBHOOK_SECRET", dst: &o.githubWebhookSecret, what: "secret of the repository's webhook to POST /hooks/github"},
		{flag: "gitlab-token-file", env: "GITLAB_TOKEN", dst: &o.gitlabToken, what: "GitLab access token with the api scope"},
		{flag: "gitlab-webhook-token-file", env: "GITLAB_WEBHOOK_TOKEN", dst: &o.gitlabWebhookToken, what: "secret token of the project's webhook, served at POST /hooks/gitlab"},
		{flag: "webhook-secret-key-file", env: "LIFECYCLE_WEBHOOK_SECRET_KEY", dst: &o.webhookSecretKey, what: "32-byte key that seals webhook secrets at rest, as 64 hex digits or base64", fallback: "webhook-secret.key in the data directory, generated on the first run"},
		{flag: "webhook-previous-secret-keys-file", env: "LIFECYCLE_WEBHOOK_PREVIOUS_SECRET_KEYS", dst: &o.previousSecretKeys, what: "keys that the webhook secret key replaces, separated by commas or lines: secrets sealed with them are resealed at start"},
	}
	for _, sec := range secrets {
		usage := "file holding the " + sec.what + "; else $" + sec.env
		if sec.fallback != "" {
			usage += "; else " + sec.fallback
		}
		fs.StringVar(&sec.file, sec.flag, "", usage)
	}
	removed := []*removedFlag{
		{name: "admin-key", use: "-admin-key-file or LIFECYCLE_ADMIN_KEY"},
		{name: "webhook-secret", use: "-webhook-secret-file or WEBHOOK_SECRET"},
		{name: "github-token", use: "-github-token-file or GITHUB_TOKEN"},
		{name: "github-webhook-secret", use: "-github-webhook-secret-file or GITHUB_WEBHOOK_SECRET"},
		{name: "gitlab-token", use: "-gitlab-token-file or GITLAB_TOKEN"},
		{name: "gitlab-webhook-token", use: "-gitlab-webhook-token-file or GITLAB_WEBHOOK_TOKEN"},
		{name: "webhook-secret-key", use: "-webhook-secret-key-file or LIFECYCLE_WEBHOOK_SECRET_KEY"},
		{name: "webhook-previous-secret-keys", use: "-webhook-previous-secret-keys-file or LIFECYCLE_WEBHOOK_PREVIOUS_SECRET_KEYS"},
	}
	for _, r := range removed {
		fs.Var(r, r.name, "removed: use "+r.use)
	}
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr, "address to serve GET /metrics on, without a key, for Prometheus: a listener of its own, apart from the API; \"\" serves no metrics")
	fs.BoolVar(&o.metricIdentifiers, "metric-identifiers", false, "name webhook subscriptions and their receivers' hosts in the metrics (lifecycle.Config.MetricIdentifiers): a series per subscription and per receiver, for whoever can read -metrics-addr")
	fs.StringVar(&o.data, "data", "lifecycle-demo-data", "data directory (SQLite database, admin key), kept readable by its owner only")
	fs.BoolVar(&o.allowPrivateWebhooks, "allow-private-webhooks", false, "let every webhook subscription target loopback and private addresses (-webhook-url's may without it)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "subscribe this https URL to every event type at start; it alone may be a loopback or private address, such as a local receiver")
	fs.StringVar(&o.webhookCA, "webhook-ca", "", "PEM file of certificates to trust for webhook receivers, beside the system's")
	fs.DurationVar(&o.reconcileInterval, "reconcile-interval", 10*time.Second, "the longest time a change made at the code host without a webhook (a commit pushed to a task's branch, CI, a review) stays unnoticed: every task in review is read again at each multiple of it, in batches (at least 1s)")
	fs.StringVar(&o.gitlabProjectPath, "gitlab-project-path", "", "GROUP/NAME of a GitLab project: tasks of -gitlab-project open merge requests there, with its CI, approvals and deployments")
	fs.StringVar(&o.gitlabProject, "gitlab-project", "gitlab", "the context.project of the tasks that -gitlab-project-path serves")
	fs.StringVar(&o.gitlabURL, "gitlab-url", "https://gitlab.com", "the GitLab instance (its API is under /api/v4/); plain http only for loopback")
	fs.StringVar(&o.githubRepo, "github-repo", "", "OWNER/NAME of a GitHub repository: tasks of -github-project get their pull requests, CI, review decision and deployments there")
	fs.StringVar(&o.githubProject, "github-project", "github", "the context.project of the tasks that run on -github-repo")
	fs.StringVar(&o.githubAPIURL, "github-api-url", github.DefaultAPIURL, "GitHub's REST API, used as given; for GitHub Enterprise Server https://HOST/api/v3/ (plain http only to loopback)")
	fs.StringVar(&o.postgres, "postgres", "", "keep tasks in this PostgreSQL database (a DSN such as postgres://postgres@127.0.0.1:5432/postgres, without a password: give that in PGPASSWORD or ~/.pgpass) instead of the SQLite file; demos started with the same DSN are replicas of one Service; else $LIFECYCLE_POSTGRES_DSN, which may hold a password")
	fs.StringVar(&o.instanceID, "instance-id", "", "this process's instance ID; replicas sharing a data directory need one each; else $LIFECYCLE_INSTANCE_ID, else one kept in the data directory")
	fs.BoolVar(&o.background, "background", false, "start the server in the background, wait until it serves, and print the shell commands that export KEY and BASE")
	fs.BoolVar(&o.queue.enabled, "merge-queue", false, "ship the local repositories' tasks through the lifecycle's merge queue (lifecycle.Config.MergeQueue): candidates are built on lifecycle-queue/<base>/<n> branches, tested, and main moves to a tested candidate; GET /merge-queues shows the queues")
	fs.DurationVar(&o.queue.poll, "merge-queue-poll", time.Second, "with -merge-queue: how often a queue reads its candidates' checks and its base (lifecycle.MergeQueueConfig.PollInterval)")
	fs.DurationVar(&o.queue.checkDuration, "queue-check-duration", 0, "with -merge-queue: how long the in-process check of a candidate takes before it passes (0: at once)")
	fs.StringVar(&o.queue.command, "queue-command", "", "with -merge-queue: test each candidate with this command instead, split at spaces (no quoting), run in a checkout of the candidate with LIFECYCLE_CANDIDATE_SHA set; exit status 0 passes it")
	fs.StringVar(&o.queue.testedLog, "queue-tested-log", "", "with -merge-queue: append each candidate the in-process check passed to this file (\"REPO BASE SHA\" lines), synced to disk before the check passes")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.queue.validate(set); err != nil {
		return o, err
	}
	for _, r := range removed {
		if r.set {
			return o, fmt.Errorf("-%s is gone: a secret on the command line is visible to every user of the machine (ps); use %s", r.name, r.use)
		}
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%d unexpected arguments: the demo takes flags only (-h lists them)", fs.NArg())
	}
	if hasPassword(o.postgres) {
		return o, errors.New("-postgres holds a password, which ps shows to every user of the machine: give the DSN in LIFECYCLE_POSTGRES_DSN instead, or the password in PGPASSWORD or ~/.pgpass")
	}
	// Read after parsing, so that -h never prints them.
	if o.postgres == "" {
		o.postgres = getenv("LIFECYCLE_POSTGRES_DSN")
	}
	if o.instanceID == "" {
		o.instanceID = getenv("LIFECYCLE_INSTANCE_ID")
	}
	for _, sec := range secrets {
		if sec.file == "" {
			*sec.dst = getenv(sec.env)
			continue
		}
		b, err := os.ReadFile(sec.file)
		if err != nil {
			return o, fmt.Errorf("-%s: %w", sec.flag, err)
		}
		if *sec.dst = strings.TrimSpace(string(b)); *sec.dst == "" {
			return o, fmt.Errorf("-%s: %s is empty", sec.flag, sec.file)
		}
	}
	o.adminKeyFromData = o.adminKey == ""
	switch {
	case o.adminKeyFromData:
		o.adminKeySource = "the file " + filepath.Join(o.data, "admin.key")
	case secrets[0].file != "":
		o.adminKeySource = "the file " + secrets[0].file
	default:
		o.adminKeySource = "$LIFECYCLE_ADMIN_KEY"
	}
	return o, nil
}

// hasPassword reports whether a PostgreSQL DSN, a URL or key=value pairs,
// holds a password.
func hasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return dsnPassword.MatchString(dsn)
}

// dsnPassword finds the password of a key=value DSN.
var dsnPassword = regexp.MustCompile(`(^|\s)password\s*=`)

// run runs the demo with command-line arguments args until ctx ends,
// printing what it serves to stdout and its log to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, os.Getenv)
	if err != nil {
		return err
	}
	if opts.adminKey != "" && !apiKeyForm.MatchString(opts.adminKey) {
		return fmt.Errorf("the admin key of %s is not an API key: use lsk_ followed by at least 32 letters or digits", opts.adminKeySource)
	}
	background := os.Getenv(childEnv) != ""
	if opts.background && !background {
		return runBackground(opts, args, stdout, stderr)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	// Listen first: a second demo on the same address fails here, before
	// it touches the data directory.
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (%w): is another demo already running? Stop it, or pass -addr 127.0.0.1:8081", opts.addr, err)
	}
	defer ln.Close()
	base := "http://" + publicAddr(ln.Addr().(*net.TCPAddr))
	// The metrics' listener, apart from the API's: they are served without
	// a key, and Prometheus alone need reach them.
	var metricsLn net.Listener
	if opts.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", opts.metricsAddr); err != nil {
			return fmt.Errorf("cannot listen on %s for metrics (%w): is another demo already running? Pass -metrics-addr 127.0.0.1:9465, or -metrics-addr '' to serve none", opts.metricsAddr, err)
		}
		defer metricsLn.Close()
	}

	// Before the adapters and the Service, which take the providers when
	// they are made.
	tel, err := setupTelemetry(ctx, os.Getenv, log)
	if err != nil {
		return err
	}
	defer func() {
		// Runs after the Service has closed: its last spans are flushed.
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(flushCtx); err != nil {
			log.Warn("telemetry: shutdown", "err", err)
		}
	}()

	tightened, err := privateDataDir(opts.data)
	if err != nil {
		return err
	}
	if len(tightened) > 0 {
		log.Warn("data directory made readable by its owner only", "dir", opts.data, "tightened", tightened)
	}
	var store lifecycle.Store
	if opts.postgres != "" {
		store, err = postgres.New(ctx, postgres.Config{DSN: opts.postgres})
	} else {
		dbPath := filepath.Join(opts.data, "lifecycle.db")
		// Created here, so that it is the owner's only: SQLite would make
		// it 0644, and its -wal and -shm files take its mode.
		if err := createPrivate(dbPath); err != nil {
			return err
		}
		store, err = sqlite.New(sqlite.Config{Path: dbPath})
	}
	if err != nil {
		return err
	}
	defer store.Close()

	router, err := lifecycle.NewRulesRouter(lifecycle.RulesRouterConfig{Rules: []lifecycle.RoutingRule{
		{Name: "web-frontend", Project: "web", Labels: []string{"frontend"}, Agent: lifecycle.Agent{ID: "agent-web", Name: "Web Agent"}},
		{Name: "api", Project: "api", Agent: lifecycle.Agent{ID: "agent-api", Name: "API Agent"}},
	}})
	if err != nil {
		return err
	}
	// Local git repositories stand in for a code host: the artifact
	// adapter is live for every project and takes artifact-mode
	// submissions; its deployer checks merged trees out per environment.
	repos, deploys := filepath.Join(opts.data, "repos"), filepath.Join(opts.data, "deploy")
	queueCheck, queueCommand, closeTestedLog, err := opts.queue.candidateCheck()
	if err != nil {
		return err
	}
	defer closeTestedLog() // after the adapter has closed: deferred first
	adapter, err := artifact.New(artifact.Config{Dir: repos, Logger: log, QueueCheck: queueCheck, QueueCommand: queueCommand})
	if err != nil {
		return err
	}
	defer adapter.Close() // lets a running packer finish, stops candidate checks
	deployer, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: adapter, Dir: deploys})
	if err != nil {
		return err
	}
	bindings := []lifecycle.AdapterBinding{{Adapter: adapter}}
	deployers := projectDeployers{fallback: deployer, byProject: map[string]lifecycle.Deployer{}}
	reviews := lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}, Projects: map[string]lifecycle.ReviewPlan{}}
	var gh *github.Adapter
	if opts.githubRepo != "" {
		owner, name, ok := strings.Cut(opts.githubRepo, "/")
		if !ok {
			return fmt.Errorf("-github-repo %q is not OWNER/NAME", opts.githubRepo)
		}
		gh, err = github.New(github.Config{Owner: owner, Repo: name, Token: opts.githubToken, APIURL: opts.githubAPIURL,
			WebhookSecret: opts.githubWebhookSecret, Logger: log, MeterProvider: tel.meters, TracerProvider: tel.tracerProvider()})
		if err != nil {
			return err
		}
		bindings = append([]lifecycle.AdapterBinding{{Project: opts.githubProject, Adapter: gh}}, bindings...)
		deployers.byProject[opts.githubProject] = gh
		// GitHub's branch protection decides reviews of its tasks.
		reviews.Projects[opts.githubProject] = lifecycle.ReviewPlan{Policy: lifecycle.PolicyGitHubRules}
	}
	var gl *gitlab.Adapter
	if opts.gitlabProjectPath != "" {
		if gl, err = gitlab.New(gitlab.Config{
			BaseURL: opts.gitlabURL, Token: opts.gitlabToken, Project: opts.gitlabProjectPath,
			WebhookToken: opts.gitlabWebhookToken, Logger: log, MeterProvider: tel.meters, TracerProvider: tel.tracerProvider(),
		}); err != nil {
			return fmt.Errorf("-gitlab-project-path: %w", err)
		}
		defer gl.Close() // removes the merge queue's temporary mirror, if it made one
		gd, err := gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: gl})
		if err != nil {
			return err
		}
		bindings = append([]lifecycle.AdapterBinding{{Project: opts.gitlabProject, Adapter: gl}}, bindings...)
		deployers.byProject[opts.gitlabProject] = gd
		// GitLab's approval rules decide reviews of its tasks.
		reviews.Projects[opts.gitlabProject] = lifecycle.ReviewPlan{Policy: lifecycle.PolicyGitHubRules}
	}
	var webhookTLS *tls.Config
	if opts.webhookCA != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(opts.webhookCA)
		if err != nil {
			return fmt.Errorf("-webhook-ca: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-webhook-ca: %s holds no PEM certificate", opts.webhookCA)
		}
		webhookTLS = &tls.Config{RootCAs: pool}
	}
	instance := opts.instanceID
	if instance == "" {
		if instance, err = instanceID(opts.data); err != nil {
			return err
		}
	}
	// The local repositories answer at once; a code host more slowly. A
	// sweep of every task in review costs a code host a request or two
	// (GitHub's GraphQL API reads 200 quiet pull requests in one; GitLab
	// lists what changed since the last sweep), and the adapters keep the
	// sweeps within 80 % of the host's rate limit.
	providerTimeout := 5 * time.Second
	if gh != nil || gl != nil {
		providerTimeout = 20 * time.Second
	}
	sealKey, previousKeys, err := webhookSecretKeys(opts)
	if err != nil {
		return err
	}
	svc, err := lifecycle.New(lifecycle.Config{
		// One identity per data directory: restarted after a crash, the
		// demo resumes the ship operations and requests it was working at
		// once; a second demo on the same directory is refused.
		InstanceID:      instance,
		Store:           store,
		BaseURL:         base,
		Router:          router,
		Adapters:        bindings,
		ArtifactAdapter: adapter,
		Deployer:        deployers,
		// An approval is needed before shipping; with no reviewers
		// requested, anyone with reviews:write may give it. The tasks of
		// GitHub and GitLab projects follow their host's rules.
		ReviewRouter: reviews,
		// The demo holds a fleet's streams: each takes its connection
		// over, at a third of the memory.
		TakeOverStreams:   true,
		ProviderTimeout:   providerTimeout,
		ReconcileInterval: opts.reconcileInterval,
		// A task in progress or in review with no activity for half an
		// hour is marked stalled, and task.stalled is emitted.
		StallAfter: map[lifecycle.Status]time.Duration{
			lifecycle.StatusInProgress: 30 * time.Minute,
			lifecycle.StatusInReview:   30 * time.Minute,
		},
		AllowPrivateWebhookTargets: opts.allowPrivateWebhooks, // -webhook-url's subscription has its own allowance
		WebhookTLSConfig:           webhookTLS,
		WebhookSecretKey:           sealKey,
		WebhookPreviousSecretKeys:  previousKeys,
		Logger:                     log,
		MeterProvider:              tel.meters,
		TracerProvider:             tel.tracerProvider(),
		MetricIdentifiers:          opts.metricIdentifiers,
		MergeQueue:                 opts.queue.config(),
	})
	if err != nil {
		return err
	}
	// Secrets kept in the clear by an older run, or sealed with a previous
	// key, are sealed with the current key.
	if n, err := svc.ResealWebhookSecrets(ctx); err != nil {
		return err
	} else if n > 0 {
		log.Info("webhook secrets sealed with the current key", "count", n)
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	// On an early return, stop the Service before the store closes.
	defer svc.Close(context.Background())

	adminKey, err := installAdminKey(ctx, svc, opts)
	if err != nil {
		return err
	}
	if err := subscribe(ctx, svc, opts, stdout); err != nil {
		return err
	}
	if err := seed(ctx, svc); err != nil {
		return err
	}

	con, err := console.New(svc, store, console.Config{})
	if err != nil {
		return err
	}
	defer con.Close()
	mux := http.NewServeMux()
	// The Service's own GET /healthz and GET /readyz are under "/"; GET
	// /metrics is not: it has a listener of its own (-metrics-addr).
	mux.Handle("/", svc.Handler())
	mux.Handle("/console/", http.StripPrefix("/console", con))
	agents, err := mcp.NewHandler(svc, mcp.Config{}) // MCP for coding agents (docs/mcp.md)
	if err != nil {
		return err
	}
	mux.Handle("/mcp", agents)
	if gh != nil {
		mux.Handle("POST /hooks/github", gh.WebhookHandler(svc.QueuedEvents()))
	}
	if gl != nil {
		mux.Handle("POST /hooks/gitlab", gl.WebhookHandler(svc.QueuedEvents()))
	}
	srv := newHTTPServer(mux)
	serveErr := make(chan error, 2) // the API's server and the metrics'
	// JSONErrorListener: net/http's own answers to malformed requests come
	// in the API's JSON error shape too.
	go func() { serveErr <- srv.Serve(lifecycle.JSONErrorListener(ln)) }()
	var metricsSrv *http.Server
	metricsURL := "off (-metrics-addr)"
	if metricsLn != nil {
		metricsSrv = newMetricsServer(tel.metrics)
		go func() { serveErr <- metricsSrv.Serve(metricsLn) }()
		metricsURL = "http://" + publicAddr(metricsLn.Addr().(*net.TCPAddr)) + "/metrics"
		if !metricsLn.Addr().(*net.TCPAddr).IP.IsLoopback() {
			log.Warn("metrics: served without a key beyond loopback: let only Prometheus reach them", "addr", metricsLn.Addr().String())
		}
	}

	abs, _ := filepath.Abs(opts.data)
	fmt.Fprintf(stdout, "lifecycle demo listening on %s\n", base)
	fmt.Fprintf(stdout, "data directory: %s\n", abs)
	fmt.Fprintf(stdout, "git repos:      %s\n", filepath.Join(abs, "repos"))
	fmt.Fprintf(stdout, "deployments:    %s\n", filepath.Join(abs, "deploy"))
	if gh != nil {
		fmt.Fprintf(stdout, "github:         %s for project %q; webhook at %s/hooks/github\n", opts.githubRepo, opts.githubProject, base)
	}
	if gl != nil {
		fmt.Fprintf(stdout, "gitlab:         %s on %s for tasks of project %q; webhook at %s/hooks/gitlab\n", opts.gitlabProjectPath, opts.gitlabURL, opts.gitlabProject, base)
	}
	fmt.Fprintf(stdout, "console:        %s/console/ (sign in with the admin key)\n", base)
	fmt.Fprintf(stdout, "mcp:            %s/mcp (Streamable HTTP, the same keys; docs/mcp.md)\n", base)
	fmt.Fprintf(stdout, "metrics:        %s (Prometheus, no key: keep it from clients)\n", metricsURL)
	if opts.queue.enabled {
		fmt.Fprintf(stdout, "merge queue:    on for the local repositories (%s); %s/merge-queues\n", opts.queue.describe(), base)
	}
	if background {
		// stdout is demo.log: the key goes to the terminal of the process
		// that started this one, through the ready pipe, and nowhere else.
		fmt.Fprintf(stdout, "admin key:      %s (not logged)\n\n", opts.adminKeySource)
	} else {
		fmt.Fprintf(stdout, "admin key:      %s\n\n", adminKey)
		fmt.Fprintf(stdout, "in another shell:\n  export KEY=%s BASE=%s\n  curl -s -H \"Authorization: Bearer $KEY\" \"$BASE/tasks\"\n\n", adminKey, base)
	}
	if err := notifyReady(base, adminKey); err != nil {
		return err
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Event streams never go idle, so Shutdown would wait for them until
	// its deadline: close the Service beside it, which ends them.
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(shutdownCtx) }()
	errs := []error{srv.Shutdown(shutdownCtx)}
	if metricsSrv != nil {
		errs = append(errs, metricsSrv.Shutdown(shutdownCtx))
	}
	return errors.Join(append(errs, <-closed)...)
}

// defaultMetricsAddr is where the demo serves its metrics by default:
// loopback, on the port OpenTelemetry's Prometheus exporters use.
const defaultMetricsAddr = "127.0.0.1:9464"

// newMetricsServer returns the http.Server of the metrics' listener: GET
// /metrics, and 404 for anything else.
func newMetricsServer(metrics http.Handler) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := newHTTPServer(mux)
	// A scrape is one short request; nothing here streams.
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 30*time.Second
	return srv
}

// apiKeyForm is the form of an API key.
var apiKeyForm = regexp.MustCompile(`^lsk_[A-Za-z0-9]{32,}$`)

// newHTTPServer returns the demo's http.Server for h, with the settings
// the README recommends.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second, // a client that sends no request is let go
		IdleTimeout:       30 * time.Second, // and so is an idle keep-alive connection
		MaxHeaderBytes:    64 << 10,
		// No ReadTimeout or WriteTimeout: the Service bounds each body
		// (Config.BodyReadTimeout) and each event stream write
		// (Config.StreamWriteTimeout) itself, and a stream lasts for hours.
	}
}

// publicAddr turns a listening address into one a client can dial.
func publicAddr(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(a.Port))
	}
	return a.String()
}

// privateDataDir creates the data directory readable by its owner only,
// or makes an existing one so, with the files in it, which an older run
// may have left readable by others; it returns the names it tightened.
func privateDataDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	var tightened []string
	private := func(path string, info os.FileInfo) error {
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(path, perm&0o700); err != nil {
				return fmt.Errorf("make %s readable by its owner only: %w", path, err)
			}
			tightened = append(tightened, filepath.Base(path))
		}
		return nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if err := private(dir, info); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		if err := private(filepath.Join(dir, e.Name()), info); err != nil {
			return nil, err
		}
	}
	return tightened, nil
}

// createPrivate creates an empty file readable by its owner only, unless
// it exists.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// instanceID returns the instance ID kept in the data directory, making
// and keeping one on first use.
func instanceID(dir string) (string, error) {
	file := filepath.Join(dir, "instance.id")
	if b, err := os.ReadFile(file); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	host, _ := os.Hostname()
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", err
	}
	id := fmt.Sprintf("demo-%s-%x", host, suffix)
	if err := os.WriteFile(file, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep instance ID: %w", err)
	}
	return id, nil
}

// installAdminKey installs the key given by flag or environment, or the one
// kept in the data directory, or a new one it keeps there.
func installAdminKey(ctx context.Context, svc *lifecycle.Service, opts options) (string, error) {
	keyFile := filepath.Join(opts.data, "admin.key")
	key := opts.adminKey
	if opts.adminKeyFromData {
		if b, err := os.ReadFile(keyFile); err == nil {
			key = strings.TrimSpace(string(b))
		}
	}
	params := lifecycle.CreateAPIKeyParams{
		Name:      "demo admin",
		Scopes:    lifecycle.Scopes(),
		Actor:     lifecycle.Actor{ID: "demo-admin", Role: lifecycle.RoleUser},
		Plaintext: key,
	}
	_, plaintext, err := svc.CreateAPIKey(ctx, params)
	switch {
	case errors.Is(err, lifecycle.ErrConflict):
		return key, nil // installed by an earlier run
	case err != nil:
		return "", fmt.Errorf("install admin key: %w", err)
	}
	if opts.adminKeyFromData {
		if err := os.WriteFile(keyFile, []byte(plaintext+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("keep admin key: %w", err)
		}
	}
	return plaintext, nil
}

// webhookSecretKeys returns the key that seals webhook secrets, read from
// -webhook-secret-key-file or the environment, or kept in the data
// directory, or generated and kept there; and the previous keys of a
// rotation.
func webhookSecretKeys(opts options) (key []byte, previous [][]byte, err error) {
	split := func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }
	for _, s := range strings.FieldsFunc(opts.previousSecretKeys, split) {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, err := parseKey(s)
		if err != nil {
			return nil, nil, fmt.Errorf("the previous webhook secret keys: %w", err)
		}
		previous = append(previous, k)
	}
	if opts.webhookSecretKey != "" {
		key, err = parseKey(opts.webhookSecretKey)
		if err != nil {
			return nil, nil, fmt.Errorf("the webhook secret key: %w", err)
		}
		return key, previous, nil
	}
	keyFile := filepath.Join(opts.data, "webhook-secret.key")
	if b, err := os.ReadFile(keyFile); err == nil {
		if key, err = parseKey(strings.TrimSpace(string(b))); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keyFile, err)
		}
		return key, previous, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, nil, fmt.Errorf("keep the webhook secret key: %w", err)
	}
	return key, previous, nil
}

// parseKey reads a 32-byte key written as 64 hex digits or in base64.
func parseKey(s string) ([]byte, error) {
	if k, err := hex.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	return nil, errors.New("a key is 32 bytes, written as 64 hex digits or in base64")
}

// subscribe subscribes -webhook-url to every event type, unless an earlier
// run did. The subscription, and it alone, may reach a private address
// such as a local receiver. One that an older demo made without that
// allowance, which every subscription then had, is replaced, and so is
// one without an event type this run sends (task.stalled, added with the
// stall watchdog; task.merge_queue, with -merge-queue).
func subscribe(ctx context.Context, svc *lifecycle.Service, opts options, stdout io.Writer) error {
	if opts.webhookURL == "" {
		return nil
	}
	types := []lifecycle.EventType{lifecycle.EventTaskUpdated, lifecycle.EventTaskReviewed, lifecycle.EventTaskShipped, lifecycle.EventTaskAwaitingUser, lifecycle.EventTaskStalled, lifecycle.EventTaskCIFailed}
	if opts.queue.enabled {
		types = append(types, lifecycle.EventTaskMergeQueue)
	}
	list, err := svc.ListSubscriptions(ctx, lifecycle.ListParams{Limit: 200})
	if err != nil {
		return err
	}
	for _, sub := range list.Subscriptions {
		if sub.URL != opts.webhookURL || sub.Status != lifecycle.SubscriptionActive {
			continue
		}
		hasTypes := !slices.ContainsFunc(types, func(t lifecycle.EventType) bool { return !slices.Contains(sub.EventTypes, t) })
		if hasTypes && (sub.AllowPrivateTarget || opts.allowPrivateWebhooks) {
			fmt.Fprintf(stdout, "webhooks:       %s (%s, subscribed by an earlier run)\n", sub.URL, sub.ID)
			return nil
		}
		if err := svc.DeleteSubscription(ctx, sub.ID); err != nil {
			return fmt.Errorf("replace the -webhook-url subscription of an earlier run: %w", err)
		}
	}
	sub, err := svc.CreateSubscription(ctx, lifecycle.CreateSubscriptionParams{
		URL:                opts.webhookURL,
		EventTypes:         types,
		Secret:             opts.webhookSecret,
		AllowPrivateTarget: true,
	})
	if err != nil {
		return fmt.Errorf("subscribe -webhook-url: %w", err)
	}
	fmt.Fprintf(stdout, "webhooks:       %s (%s)\n", sub.URL, sub.ID)
	return nil
}

// seed creates a few tasks on the first run.
func seed(ctx context.Context, svc *lifecycle.Service) error {
	existing, err := svc.ListTasks(ctx, lifecycle.ListTasksParams{Limit: 1})
	if err != nil {
		return err
	}
	if len(existing.Tasks) > 0 {
		return nil
	}
	project := func(p string) *string { return &p }
	actor := lifecycle.Actor{ID: "demo-seed", Role: lifecycle.RoleSystem}
	tasks := []lifecycle.CreateTaskParams{
		{
			Identifier: "WEB-1", Title: "Fix the login redirect", Priority: lifecycle.PriorityHigh,
			Description:        "After signing in, users land on a 404 instead of the page they came from.",
			AcceptanceCriteria: []string{"redirects to the page the user came from", "keeps the query string"},
			Links:              lifecycle.TaskLinks{Issue: "https://issues.example.com/WEB-1"},
			Context:            lifecycle.TaskContext{Project: project("web"), Goal: "Sign-in works end to end"},
			Labels:             []string{"frontend", "bug"},
		},
		{
			Identifier: "API-7", Title: "Paginate the orders endpoint",
			Description:        "GET /orders returns every order at once and times out for large accounts.",
			AcceptanceCriteria: []string{"cursor pagination", "limit between 1 and 200"},
			Links:              lifecycle.TaskLinks{Issue: "https://issues.example.com/API-7"},
			Context:            lifecycle.TaskContext{Project: project("api"), Goal: "Large accounts can list orders"},
		},
		{
			Identifier: "DOCS-3", Title: "Document the webhook signature", Priority: lifecycle.PriorityLow,
			Links:   lifecycle.TaskLinks{Issue: "https://issues.example.com/DOCS-3"},
			Context: lifecycle.TaskContext{Project: project("docs"), Goal: "Receivers verify deliveries"},
		},
	}
	for _, p := range tasks {
		p.Actor = actor
		// A replica starting at the same time may have seeded it.
		if _, err := svc.CreateTask(ctx, p); err != nil && !errors.Is(err, lifecycle.ErrConflict) {
			return fmt.Errorf("seed %s: %w", p.Identifier, err)
		}
	}
	return nil
}

// projectDeployers deploys the tasks of each project with its own
// Deployer (GitLab's for -gitlab-project), the rest with the fallback.
type projectDeployers struct {
	byProject map[string]lifecycle.Deployer
	fallback  lifecycle.Deployer
}

func (p projectDeployers) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	if req.Task.Context.Project != nil {
		if d, ok := p.byProject[*req.Task.Context.Project]; ok {
			return d.Deploy(ctx, req)
		}
	}
	return p.fallback.Deploy(ctx, req)
}

// ObserveDeployment passes deployment statuses on to the deployers that
// wait for them.
func (p projectDeployers) ObserveDeployment(ctx context.Context, st lifecycle.DeploymentStatus) {
	for _, d := range p.byProject {
		if o, ok := d.(lifecycle.DeploymentObserver); ok {
			o.ObserveDeployment(ctx, st)
		}
	}
}
