package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
)

// Config configures a Handler. Every field has a documented default.
type Config struct {
	// Name and Version name the server to clients (serverInfo of the
	// initialize answer). Default "lifecycle" and "dev".
	Name, Version string

	// Instructions tell a client's model what the server is for, in the
	// initialize answer. Defaults to a paragraph on the lifecycle's loop.
	Instructions string

	// CallTimeout bounds each tool call, resource read and prompt but
	// wait_for_task_change (which waits up to the time its caller gives,
	// at most 60 seconds): a call whose Store has not answered by then is
	// a store_unavailable error. Defaults to 45 seconds, the API's
	// default request timeout.
	CallTimeout time.Duration

	// SessionTimeout closes a session that sent no request for this long;
	// its client starts a new one (initialize) on its next request.
	// Defaults to 30 minutes; negative never closes idle sessions once
	// used (see UnusedSessionTimeout).
	SessionTimeout time.Duration

	// MaxSubscriptionsPerSession is how many resources one session may
	// subscribe to at once. Defaults to 100.
	MaxSubscriptionsPerSession int

	// MaxWaitsPerKey is how many wait_for_task_change calls one principal
	// (one API key) may have waiting at once; the next is a rate_limited
	// error. Defaults to 16.
	MaxWaitsPerKey int

	// WriteTimeout bounds each write to a session's notification stream
	// (its GET): a client that stops reading is cut off then, so that it
	// holds up no other session's notifications longer. Defaults to 10
	// seconds.
	WriteTimeout time.Duration

	// MaxSessionsPerKey is how many sessions one principal (one API key)
	// may hold at once; an initialize past it is answered 429
	// rate_limited with Retry-After, in the API's error shape. Defaults to
	// 16.
	MaxSessionsPerKey int

	// MaxSessions is how many sessions the Handler holds at once, of every
	// principal; an initialize past it is answered 429 rate_limited.
	// Defaults to 10,000.
	MaxSessions int

	// UnusedSessionTimeout closes a session that made no request after
	// its handshake (initialize, notifications/initialized) for this long,
	// so that sessions opened and forgotten do not hold their places for
	// SessionTimeout. Any other request (a call, a ping, its GET stream)
	// makes it used. Defaults to 1 minute; never longer than a positive
	// SessionTimeout.
	UnusedSessionTimeout time.Duration

	// AllowedOrigins are the origins ("https://app.example.com") besides
	// the server's own from which a browser page may call the Handler. A
	// request that a browser marks cross-site (Sec-Fetch-Site), or whose
	// Origin names another host than its Host, is refused with 403
	// csrf_failed, as the MCP transport requires against DNS rebinding;
	// clients that send no Origin (agents, CLIs) are not browsers and
	// pass. Defaults to none.
	AllowedOrigins []string

	// Logger receives the handler's logs and the SDK's warnings. Defaults
	// to the Service's logger.
	Logger *slog.Logger
}

// withDefaults fills in the defaults of c.
func (c Config) withDefaults(svc *lifecycle.Service) (Config, error) {
	if c.CallTimeout < 0 || c.MaxSubscriptionsPerSession < 0 || c.MaxWaitsPerKey < 0 || c.WriteTimeout < 0 ||
		c.MaxSessionsPerKey < 0 || c.MaxSessions < 0 || c.UnusedSessionTimeout < 0 {
		return c, errors.New("mcp: Config.CallTimeout, MaxSubscriptionsPerSession, MaxWaitsPerKey, WriteTimeout, MaxSessionsPerKey, MaxSessions and UnusedSessionTimeout must not be negative; leave them zero for the defaults")
	}
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.CallTimeout, 45*time.Second)
	set(&c.SessionTimeout, 30*time.Minute)
	set(&c.WriteTimeout, 10*time.Second)
	set(&c.UnusedSessionTimeout, time.Minute)
	if c.MaxSessionsPerKey == 0 {
		c.MaxSessionsPerKey = 16
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = 10000
	}
	if c.MaxSubscriptionsPerSession == 0 {
		c.MaxSubscriptionsPerSession = 100
	}
	if c.MaxWaitsPerKey == 0 {
		c.MaxWaitsPerKey = 16
	}
	if c.Name == "" {
		c.Name = "lifecycle"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Instructions == "" {
		c.Instructions = defaultInstructions
	}
	if c.Logger == nil {
		c.Logger = svc.Logger()
	}
	return c, nil
}

// defaultInstructions is Config.Instructions' default.
const defaultInstructions = "This server runs the lifecycle of coding tasks: read a task (get_task), start it, " +
	"do the work, submit it (submit_work), then watch review and CI (wait_for_task_change, get_review_feedback, " +
	"get_ci_status), rework when changes are requested, and ship when ship is among the task's availableActions " +
	"(get_merge_queue_status says where a shipped change is in a merge queue). " +
	"Every answer about a task lists availableActions, the only next steps the server accepts. The prompt " +
	"work_on_task walks through the whole loop."

// Handler serves the lifecycle of a [lifecycle.Service] as Model Context
// Protocol tools, resources and a prompt, over MCP's Streamable HTTP
// transport (see the package documentation). It is an http.Handler: mount
// it where clients reach it, such as at /mcp beside the API. Its methods
// are safe for concurrent use.
type Handler struct {
	svc     *lifecycle.Service
	cfg     Config
	log     *slog.Logger
	tools   []registeredTool // built once, added to each server
	servers []*sdk.Server    // every session is on one of them
	next    atomic.Uint64    // the server of the next session
	http    http.Handler     // the SDK's transport behind its token check
	subs    *subscriptions
	live    *liveSessions // the initialized sessions, for the fast path
	noFast  bool          // every request to the SDK (tests compare the paths)
	waits   *waitLimit
	served  http.Handler // the whole of ServeHTTP, in the Service's Guard
	toolSet map[string]*tool
	origins *http.CrossOriginProtection
}

// maxBody bounds a request body, as the API does (1 MiB), where the SDK's
// own bound is 4 MiB.
const maxBody = 1 << 20

// NewHandler returns the Handler that serves svc over MCP, configured by
// cfg. It authenticates every request as svc's API does (bearer API keys,
// or [lifecycle.Config.Authenticator]), and each tool needs the scope of
// the endpoint it stands for.
func NewHandler(svc *lifecycle.Service, cfg Config) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("mcp: NewHandler needs a Service")
	}
	cfg, err := cfg.withDefaults(svc)
	if err != nil {
		return nil, err
	}
	origins, err := newOriginCheck(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	h := &Handler{svc: svc, cfg: cfg, log: cfg.Logger, waits: newWaitLimit(cfg.MaxWaitsPerKey), origins: origins}
	h.subs = newSubscriptions(h)
	h.live = newLiveSessions(&cfg)
	// Sessions are spread over a few servers alike, so that a change of a
	// task that many sessions subscribed to reaches them from several
	// goroutines at once: the SDK notifies the sessions of one server one
	// after another.
	if err := h.addTools(); err != nil {
		return nil, err
	}
	h.servers = make([]*sdk.Server, notifyShards())
	for i := range h.servers {
		server := sdk.NewServer(&sdk.Implementation{Name: cfg.Name, Title: "Task lifecycle", Version: cfg.Version}, &sdk.ServerOptions{
			Instructions:       cfg.Instructions,
			Logger:             slog.New(minLevel{cfg.Logger.Handler(), slog.LevelError}),
			SubscribeHandler:   h.subs.subscribeOn(i),
			UnsubscribeHandler: h.subs.unsubscribe,
			// What a read answers depends on who reads it.
			SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) { c.CacheScope = "private" },
		})
		for _, t := range h.tools {
			server.AddTool(t.tool, t.handler)
		}
		h.addResources(server)
		h.addPrompts(server)
		server.AddReceivingMiddleware(h.live.middleware)
		h.servers[i] = server
	}
	streamable := sdk.NewStreamableHTTPHandler(h.serverFor, &sdk.StreamableHTTPOptions{
		// Idle sessions are closed by h.live, which counts the requests of
		// the fast path too.
		EventStore:          newNotificationStore(notificationsKept),
		Logger:              slog.New(minLevel{cfg.Logger.Handler(), slog.LevelError}),
		MaxRequestBodyBytes: maxBody,
	})
	// The SDK's token check puts the principal where the tools find it
	// (RequestExtra.TokenInfo) and ties each session to the principal that
	// opened it: another key cannot use it.
	h.http = sdkauth.RequireBearerToken(h.verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	h.served = svc.Guard(http.HandlerFunc(h.serve))
	return h, nil
}

// serverFor returns the server of a new session, in turn: the SDK asks
// for one with every request, and uses it only to open a session.
func (h *Handler) serverFor(r *http.Request) *sdk.Server {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return h.servers[0]
	}
	return h.servers[h.next.Add(1)%uint64(len(h.servers))]
}

// ServeHTTP serves one request of the Streamable HTTP transport: POST
// for the client's messages, GET for the stream of the server's
// notifications, DELETE to end a session.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.served.ServeHTTP(w, r) }

// principalKey is the context key of the request's principal, from serve
// to verify.
type principalKey struct{}

// principalExtra is the key of the principal in the TokenInfo's Extra.
const principalExtra = "lifecycle.principal"

// serve checks r's Origin, authenticates it, reads its body as the API
// reads its own and holds it within the limits of sessions and streams,
// answering a refusal in the API's error shape, and hands it to the fast
// path or the SDK's transport.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if err := h.checkOrigin(r); err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := h.svc.Authenticate(r)
	if err == nil && p.ID == "" {
		// Sessions belong to their principal's ID: callers without one
		// would share them.
		err = fmt.Errorf("the credentials name no principal; the host's Authenticator must return a Principal with an ID: %w", lifecycle.ErrUnauthorized)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	var live *liveSession
	if id != "" {
		if s := h.live.get(id); s != nil && s.user == p.ID {
			live = s
		}
	}
	ctx := context.WithValue(r.Context(), principalKey{}, &p)
	switch r.Method {
	case http.MethodPost:
		raw, done, err := h.readBody(w, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		defer done()
		if live != nil {
			live.startPOST()
			defer live.endPOST(h.live)
			if !h.noFast && h.serveFast(w, r, raw, &p, live) {
				return
			}
		}
		if id == "" {
			// It may open a session (initialize): it needs a place.
			release, err := h.live.reserve(p.ID)
			if err != nil {
				h.writeError(w, r, err)
				return
			}
			defer release()
			hold := h.svc.HoldCredential(r, &p)
			defer func() {
				// The session it opened ends with the credential.
				if s := h.live.get(w.Header().Get("Mcp-Session-Id")); s != nil && s.user == p.ID {
					s.attach(hold)
				} else {
					hold.Release()
				}
			}()
		}
	case http.MethodGet:
		// The notification stream counts among the principal's event
		// streams, and ends with the Service and with its credential, as
		// the API's event streams do.
		hold, err := h.svc.HoldStream(r, &p)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		defer hold.Release()
		if live != nil {
			live.markUsed(h.live.timeout)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-hold.Ended():
				cancel()
			case <-ctx.Done():
			}
		}()
		w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: h.cfg.WriteTimeout}
	}
	r = r.WithContext(ctx)
	if _, ok := bearer(r); !ok {
		// A host's Authenticator took other credentials (a session
		// cookie): the SDK's check still wants a bearer token, whose value
		// verify ignores.
		r.Header = r.Header.Clone()
		r.Header.Set("Authorization", "Bearer authenticated")
	}
	shaped := &errorShaper{ResponseWriter: w}
	h.http.ServeHTTP(shaped, r)
	if shaped.status >= http.StatusInternalServerError {
		h.log.ErrorContext(r.Context(), "mcp: the transport failed a request", "method", r.Method, "status", shaped.status, "err", shaped.text.String())
	}
	shaped.finish()
}

// verify is the SDK's token check: the principal was authenticated by
// serve; it becomes the session's user.
func (h *Handler) verify(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	p, ok := ctx.Value(principalKey{}).(*lifecycle.Principal)
	if !ok {
		return nil, fmt.Errorf("request not authenticated by the lifecycle handler: %w", sdkauth.ErrInvalidToken)
	}
	scopes := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		scopes[i] = string(s)
	}
	return &sdkauth.TokenInfo{UserID: p.ID, Scopes: scopes, Extra: map[string]any{principalExtra: p}}, nil
}

// bearer returns the token of an "Authorization: Bearer ..." header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// principalOf returns the principal of a request of the SDK, or an error
// matching ErrUnauthorized when it has none (a server connected over
// another transport than the Handler).
func principalOf(extra *sdk.RequestExtra) (*lifecycle.Principal, error) {
	if extra != nil && extra.TokenInfo != nil {
		if p, ok := extra.TokenInfo.Extra[principalExtra].(*lifecycle.Principal); ok {
			return p, nil
		}
	}
	return nil, fmt.Errorf("the request carries no credentials of this service: %w", lifecycle.ErrUnauthorized)
}

// needScope returns the error of a principal that lacks scope, which the
// API answers 403 insufficient_scope.
func needScope(p *lifecycle.Principal, scope lifecycle.Scope, what string) error {
	if p.Has(scope) {
		return nil
	}
	return fmt.Errorf("%s needs an API key with scope %s: %w", what, scope, lifecycle.ErrInsufficientScope)
}

// writeError answers a request the transport never saw with the API's
// error body.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if status, _ := h.svc.APIError(err); status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lifecycle"`)
	}
	h.svc.WriteError(w, r, err)
}

// deadlineWriter renews the write deadline of a notification stream before
// a write, whenever half of it is spent, so that a client that stopped
// reading is cut off instead of blocking the notifications of others.
type deadlineWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if now := time.Now(); d.deadline.Sub(now) < d.timeout/2 {
		d.deadline = now.Add(d.timeout)
		_ = d.rc.SetWriteDeadline(d.deadline) // best effort: not every writer has one
	}
	return d.ResponseWriter.Write(b)
}

// Flush flushes the stream, as the SDK asks after each event.
func (d *deadlineWriter) Flush() { _ = d.rc.Flush() }

// Unwrap returns the writer underneath, for http.ResponseController.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// minLevel is a slog.Handler that drops records below a level: the SDK
// logs every notification it sends at Info.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.min}
}
func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{m.Handler.WithGroup(g), m.min} }

// notifyShards is how many servers alike the sessions are spread over:
// the SDK notifies the sessions of one server one after another, each
// write a system call, so a change that many sessions subscribed to
// reaches them from this many goroutines at once.
func notifyShards() int { return max(2, runtime.GOMAXPROCS(0)) }
