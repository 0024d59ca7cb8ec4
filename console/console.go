// Package console is the operator console of a [lifecycle.Service]: one
// page, with its script and style embedded in the binary, that shows the
// tasks on a board by status, updated live from the event stream, with
// stalled and waiting tasks highlighted, a task's timeline with the
// actions an operator may take on it (cancel, resolve a blocker, start a
// rework, retry a failed ship: the API's own commands, within the
// session's scopes), the merge queues (their entries, candidates and checks,
// updated live, with pause and resume), and the webhook subscriptions
// with their deliveries and controls (replay, retry, enable). It is built on the Service's exported
// API only, and served only where the host mounts it, under any prefix:
//
//	con, err := console.New(svc, store, console.Config{})
//	if err != nil { ... }
//	defer con.Close()
//	mux.Handle("/console/", http.StripPrefix("/console", con))
//
// An operator signs in by typing an API key of the Service once; the
// console exchanges it for a session cookie (HttpOnly, SameSite=Strict;
// over TLS __Host-lifecycle_console, Secure, on Path=/; over plain http
// scoped to the console's path) that lasts [Config.SessionTTL], acts with
// that key's scopes, and ends when the key is revoked. The key is never
// kept by the page, put in a URL or logged. Every change made through the
// console needs the session's CSRF token, and requests from other sites
// are refused. The console needs the Service's own API keys: with a
// host's [lifecycle.Config.Authenticator], sign-in is refused.
//
// Sessions are kept in the Service's Store, which must implement
// [lifecycle.ConsoleSessionStore] (store/sqlite, store/postgres and
// store/memory do).
//
// Under the console's mount point, api/ serves the whole API of
// [lifecycle.Service.Handler] for the signed-in session; docs/console.md in
// the repository describes the rest.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Config configures a Console. The zero Config is valid.
type Config struct {
	// SessionTTL is how long a sign-in lasts; revoking its API key ends
	// it at once. Defaults to 8 hours; at least a minute.
	SessionTTL time.Duration

	// SecureCookie gives the session cookie its TLS form
	// (__Host-lifecycle_console, Secure, Path=/) even on requests that came
	// without TLS, for a server behind a proxy that terminates TLS. The
	// cookie always has that form on TLS requests.
	SecureCookie bool

	// SessionCheckInterval is how often the console reads, for each
	// session with an event stream open through it, whether the session
	// was signed out through another process sharing the Store; such a
	// stream ends within this interval. Defaults to 2.5 seconds (half the
	// default [lifecycle.Config.KeyCacheTTL], within which a key revoked
	// elsewhere ends its streams).
	SessionCheckInterval time.Duration

	// PruneInterval is how often the console deletes the expired sessions
	// from the Store. Defaults to 10 minutes.
	PruneInterval time.Duration
}

// withDefaults fills in the defaults of c and checks it.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.SessionTTL == 0:
		c.SessionTTL = 8 * time.Hour
	case c.SessionTTL < time.Minute:
		return c, fmt.Errorf("console: Config.SessionTTL %s is too short to use the console; give at least a minute", c.SessionTTL)
	}
	if c.SessionCheckInterval == 0 {
		c.SessionCheckInterval = 2500 * time.Millisecond
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = 10 * time.Minute
	}
	if c.SessionCheckInterval < 0 || c.PruneInterval < 0 {
		return c, errors.New("console: Config.SessionCheckInterval and PruneInterval must not be negative; leave them zero for the defaults")
	}
	return c, nil
}

// The names of the session cookie: over TLS (or with Config.SecureCookie)
// the __Host- prefix, which makes a browser accept the cookie only when it
// is Secure, on Path=/ and without a Domain, so that no other site of the
// domain (a subdomain, or the same host over plain http) can set it; over
// plain http the plain name, scoped to the console's path.
const (
	sessionCookie       = "lifecycle_console"
	secureSessionCookie = "__Host-lifecycle_console"
)

// csrfHeader carries a session's CSRF token.
const csrfHeader = "X-CSRF-Token"

// sessionEndedNote is the last comment of an event stream whose session
// signed out or expired (see lifecycle.Principal.EndNote).
const sessionEndedNote = "session ended: the console session of this stream ended; sign in again"

// headers are set on every response of the console: a strict
// Content-Security-Policy (no inline script or style, nothing from
// elsewhere), no sniffing, no framing, no referrer, nothing cached.
var headers = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
	{"Cache-Control", "no-store"},
}

// Console is the operator console, an http.Handler. Make it with New and
// end it with Close.
type Console struct {
	svc      *lifecycle.Service
	sessions lifecycle.ConsoleSessionStore
	cfg      Config
	clock    lifecycle.Clock
	handler  http.Handler
	api      http.Handler // the API, authenticated by sessions

	mu sync.Mutex
	// streaming holds the sessions that opened event streams through this
	// Console, by session hash, until they expire: signing out (here, or
	// in another process, found by checkSessions) closes ended, which ends
	// their streams, and keeps the entry, so that a stream opened while
	// the sign-out ran ends at once too.
	streaming map[string]*streamingSession

	stop context.CancelFunc
	done chan struct{} // closed when the background loop has returned
}

// streamingSession is a session that opened event streams.
type streamingSession struct {
	ended     chan struct{}
	signedOut bool // ended is closed
	expiresAt time.Time
}

// New returns the console of svc, whose Store is store (the one in svc's
// Config): it keeps its sessions there, and needs the Store to implement
// [lifecycle.ConsoleSessionStore]. It starts the console's background
// work, which Close stops: deleting expired sessions every
// Config.PruneInterval, and ending the event streams of sessions signed
// out through other processes (see Config.SessionCheckInterval).
func New(svc *lifecycle.Service, store lifecycle.Store, cfg Config) (*Console, error) {
	if svc == nil || store == nil {
		return nil, errors.New("console: New needs the Service and its Store")
	}
	sessions, ok := store.(lifecycle.ConsoleSessionStore)
	if !ok {
		return nil, fmt.Errorf("console: the Store (%T) keeps no console sessions: it does not implement lifecycle.ConsoleSessionStore; "+
			"use a Store that does, such as store/sqlite or store/postgres", store)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Console{svc: svc, sessions: sessions, cfg: cfg, clock: svc.Clock(),
		streaming: make(map[string]*streamingSession), done: make(chan struct{})}
	c.build()
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.run(ctx)
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Close stops the console's background work and waits for it. The
// console still serves requests afterwards; sessions then expire in the
// Store without being deleted, and sign-outs through other processes end
// streams opened here only when the sessions expire.
func (c *Console) Close() {
	c.stop()
	<-c.done
}

// build builds the console's handlers.
func (c *Console) build() {
	c.api = http.StripPrefix("/api", c.svc.HandlerWith(authenticator{c}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", serveAsset("index.html"))
	assets, _ := fs.ReadDir(pageFiles, ".")
	for _, a := range assets {
		if a.Name() != "index.html" {
			mux.HandleFunc("GET /"+a.Name(), serveAsset(a.Name()))
		}
	}
	mux.Handle("POST /session", c.svc.ServeFunc(c.handleSignIn))
	mux.Handle("GET /session", c.svc.ServeFunc(c.handleSession))
	mux.Handle("DELETE /session", c.svc.ServeFunc(c.handleSignOut))
	mux.Handle("GET /board", c.svc.ServeFunc(c.handleBoard))
	mux.Handle("GET /timeline/{id}", c.svc.ServeFunc(c.handleTimeline))
	mux.Handle("GET /queues", c.svc.ServeFunc(c.handleQueues))
	mux.Handle("POST /queues/{id}/pause", c.svc.ServeFunc(c.handlePauseQueue))
	mux.Handle("POST /queues/{id}/resume", c.svc.ServeFunc(c.handleResumeQueue))
	mux.HandleFunc("/api/", c.serveAPI)
	mux.Handle("/", c.svc.ServeFunc(func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("no such console page: %s %s: %w", r.Method, r.URL.Path, lifecycle.ErrNotFound)
	}))
	c.handler = c.svc.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, kv := range headers {
			h.Set(kv[0], kv[1])
		}
		mux.ServeHTTP(w, r)
	}))
}

// serveAsset serves an embedded file of the page.
func serveAsset(name string) http.HandlerFunc {
	body, err := fs.ReadFile(pageFiles, name)
	if err != nil {
		panic("console: asset " + name + " missing from the binary: " + err.Error())
	}
	ctype := "application/octet-stream"
	switch path.Ext(name) {
	case ".html":
		ctype = "text/html; charset=utf-8"
	case ".js":
		ctype = "text/javascript; charset=utf-8"
	case ".css":
		ctype = "text/css; charset=utf-8"
	case ".svg":
		ctype = "image/svg+xml"
	case ".png":
		ctype = "image/png"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Write(body)
	}
}

// session is a request's valid session.
type session struct {
	lifecycle.ConsoleSession
	token string // the cookie's value
}

// lookupKey keys, in a request's context, the sessionLookup that serveAPI
// made, so that the API's Authenticate does not read it again.
type lookupKey struct{}

// sessionLookup is what session found for a request, and, for an event
// stream, the channel closed when the session signs out.
type sessionLookup struct {
	s     *session
	err   error
	ended <-chan struct{}
}

// session returns the request's session: its cookie's, if the Store has
// it and it has not expired; else an error matching ErrUnauthorized, or a
// *RateLimitError for a client whose cookies or keys failed too often (its
// cookie is then not looked up). An unknown or expired cookie counts as a
// failure of its client.
func (c *Console) session(r *http.Request) (*session, error) {
	if found, ok := r.Context().Value(lookupKey{}).(sessionLookup); ok {
		return found.s, found.err
	}
	name := sessionCookie
	if c.secure(r) {
		name = secureSessionCookie // the plain one is not taken: any site of the domain could have set it
	}
	cookie, err := r.Cookie(name)
	if err != nil || cookie.Value == "" {
		return nil, fmt.Errorf("not signed in to the console; sign in with an API key: %w", lifecycle.ErrUnauthorized)
	}
	try, err := c.svc.BeginAuthentication(r)
	if err != nil {
		return nil, err
	}
	defer try.End()
	hash := sha256.Sum256([]byte(cookie.Value))
	stored, err := c.sessions.ConsoleSession(r.Context(), hash[:])
	if errors.Is(err, lifecycle.ErrNotFound) {
		try.Fail()
		return nil, fmt.Errorf("the console session ended; sign in again: %w", lifecycle.ErrUnauthorized)
	}
	if err != nil {
		return nil, fmt.Errorf("read console session: %w", err)
	}
	if !c.clock.Now().Before(stored.ExpiresAt.Time) {
		try.Fail()
		return nil, fmt.Errorf("the console session expired; sign in again: %w", lifecycle.ErrUnauthorized)
	}
	return &session{ConsoleSession: stored, token: cookie.Value}, nil
}

// csrfToken returns the CSRF token of the session whose cookie holds
// token: an HMAC of the token, which a page of another site can neither
// read (the cookie is HttpOnly) nor compute.
func csrfToken(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("lifecycle console CSRF token"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkSite refuses a request that came from another site, and a change
// (any method but GET and HEAD) without the session's CSRF token. A
// browser sends no SameSite=Strict cookie across sites, so these are a
// second line of defence.
func checkSite(r *http.Request, s *session) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("the console accepts requests from its own pages only, not from a %s page: %w", site, lifecycle.ErrCSRF)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("the console accepts changes from its own origin only, not from %q: %w", origin, lifecycle.ErrCSRF)
		}
	}
	if s == nil {
		return nil // signing in: no token yet
	}
	got := r.Header.Get(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(s.token))) != 1 {
		return fmt.Errorf("a change made through the console needs the session's CSRF token in the %s header: %w", csrfHeader, lifecycle.ErrCSRF)
	}
	return nil
}

// authenticator authenticates the console's API requests: the request's
// session, from its own site, with its CSRF token on a change, acts as
// the API key it was opened with, until it expires.
type authenticator struct{ c *Console }

// Authenticate implements lifecycle.Authenticator.
func (a authenticator) Authenticate(r *http.Request) (lifecycle.Principal, error) {
	_, p, err := a.c.signedIn(r)
	if err != nil {
		return lifecycle.Principal{}, err
	}
	if found, ok := r.Context().Value(lookupKey{}).(sessionLookup); ok && found.ended != nil {
		p.Done = found.ended
	}
	return p, nil
}

// principal checks the request's site and returns the principal of s's
// API key, or an error matching ErrUnauthorized when the key was revoked.
// The principal ends with the session: at its expiry, by the Service's
// clock, or when it signs out (see serveAPI).
func (c *Console) principal(r *http.Request, s *session) (lifecycle.Principal, error) {
	if err := checkSite(r, s); err != nil {
		return lifecycle.Principal{}, err
	}
	p, err := c.svc.AuthenticateKeyHash(r.Context(), s.KeyHash)
	if err != nil {
		if errors.Is(err, lifecycle.ErrUnauthorized) {
			return lifecycle.Principal{}, fmt.Errorf("the API key of this console session was revoked; sign in with another: %w", lifecycle.ErrUnauthorized)
		}
		return lifecycle.Principal{}, err
	}
	p.Done, p.ExpiresAt, p.EndNote = nil, s.ExpiresAt.Time, sessionEndedNote
	return p, nil
}

// signedIn returns the request's session and its principal, holding scopes.
func (c *Console) signedIn(r *http.Request, scopes ...lifecycle.Scope) (*session, lifecycle.Principal, error) {
	s, err := c.session(r)
	if err != nil {
		return nil, lifecycle.Principal{}, err
	}
	p, err := c.principal(r, s)
	if err != nil {
		return nil, lifecycle.Principal{}, err
	}
	for _, sc := range scopes {
		if !p.Has(sc) {
			return nil, lifecycle.Principal{}, fmt.Errorf("this needs an API key with scope %s: %w", sc, lifecycle.ErrInsufficientScope)
		}
	}
	return s, p, nil
}

// serveAPI serves the API for the request's session. An event stream it
// opens ends with the session: at its expiry, by the Service's clock, or
// at once when it signs out through this Console (through another
// process, at the next check of Config.SessionCheckInterval). A
// revocation of its key ends it too, as it ends every stream of the key.
func (c *Console) serveAPI(w http.ResponseWriter, r *http.Request) {
	s, err := c.session(r)
	found := sessionLookup{s: s, err: err}
	if err == nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/api/task-events/stream" {
		found.ended = c.streamingEnded(s)
	}
	c.api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), lookupKey{}, found))) // a refusal is answered by Authenticate, with the API's errors
}

// streamingEnded returns the channel closed when s signs out, and forgets
// the sessions that have expired since (their streams end by themselves).
func (c *Console) streamingEnded(s *session) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetExpiredLocked()
	return c.streamingLocked(s.Hash, s.ExpiresAt.Time).ended
}

// forgetExpiredLocked forgets the streaming sessions that expired; c.mu
// is held.
func (c *Console) forgetExpiredLocked() {
	now := c.clock.Now()
	for hash, ss := range c.streaming {
		if !now.Before(ss.expiresAt) {
			delete(c.streaming, hash)
		}
	}
}

// streamingLocked returns the entry of the session with hash, made if
// there is none; c.mu is held.
func (c *Console) streamingLocked(hash []byte, expiresAt time.Time) *streamingSession {
	ss := c.streaming[string(hash)]
	if ss == nil {
		ss = &streamingSession{ended: make(chan struct{}), expiresAt: expiresAt}
		c.streaming[string(hash)] = ss
	}
	return ss
}

// signedOut ends the event streams of the session with hash, and those it
// opens later.
func (c *Console) signedOut(hash []byte, expiresAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ss := c.streamingLocked(hash, expiresAt); !ss.signedOut {
		ss.signedOut = true
		close(ss.ended)
	}
}

// run is the console's background work, until ctx is done: it checks the
// sessions of open streams every Config.SessionCheckInterval, and deletes
// expired sessions every Config.PruneInterval, the first time at once.
func (c *Console) run(ctx context.Context) {
	defer close(c.done)
	check, prune := c.clock.After(c.cfg.SessionCheckInterval), c.clock.After(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-check:
			c.checkSessions(ctx)
			check = c.clock.After(c.cfg.SessionCheckInterval)
		case <-prune:
			c.prune(ctx)
			prune = c.clock.After(c.cfg.PruneInterval)
		}
	}
}

// checkSessions ends the event streams of the sessions that signed out
// through another process sharing the Store: it reads each session with
// streams through this Console (one query each), and forgets those that
// expired.
func (c *Console) checkSessions(ctx context.Context) {
	c.mu.Lock()
	c.forgetExpiredLocked()
	var live []string
	for hash, ss := range c.streaming {
		if !ss.signedOut {
			live = append(live, hash)
		}
	}
	c.mu.Unlock()
	for _, hash := range live {
		_, err := c.sessions.ConsoleSession(ctx, []byte(hash))
		if errors.Is(err, lifecycle.ErrNotFound) {
			c.signedOut([]byte(hash), c.clock.Now()) // the entry keeps its expiry
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				c.svc.Logger().WarnContext(ctx, "console: check the sessions of open event streams", "err", err)
			}
			return
		}
	}
}

// prune deletes the sessions that have expired.
func (c *Console) prune(ctx context.Context) {
	n, err := c.sessions.DeleteConsoleSessionsBefore(ctx, c.clock.Now())
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.svc.Logger().Error("console: prune expired sessions", "err", err)
		}
	case n > 0:
		c.svc.Logger().Info("console: pruned expired sessions", "count", n)
	}
}

// sessionInfo is what the page learns of its session.
type sessionInfo struct {
	// KeyID is the API key the session acts with.
	KeyID string `json:"keyId"`
	// Actor is that key's actor.
	Actor lifecycle.Actor `json:"actor"`
	// Scopes are that key's scopes.
	Scopes []lifecycle.Scope `json:"scopes"`
	// CSRFToken goes in the X-CSRF-Token header of every change.
	CSRFToken string `json:"csrfToken"`
	// ExpiresAt is when the session ends.
	ExpiresAt lifecycle.Timestamp `json:"expiresAt"`
}

// infoOf returns what the page learns of the session holding token, of
// principal p, until expiresAt.
func infoOf(p *lifecycle.Principal, token string, expiresAt lifecycle.Timestamp) any {
	return struct {
		Data sessionInfo `json:"data"`
	}{sessionInfo{KeyID: p.ID, Actor: p.Actor, Scopes: nonNil(p.Scopes), CSRFToken: csrfToken(token), ExpiresAt: expiresAt}}
}

// signInBody is the body of POST session.
type signInBody struct {
	Key string `json:"key"`
}

// Limits of a sign-in's body, which is read before anyone is signed in: it
// is small, is read outside the Service's Config.MaxDecodingBytes (so that
// stalled sign-ins cannot hold the budget every writer shares) and must
// arrive within signInReadTimeout, or the Service's Config.BodyReadTimeout
// when that is shorter (see lifecycle.Service.DecodeBody).
const (
	maxSignInBytes    = 4 << 10
	signInReadTimeout = 10 * time.Second
)

// handleSignIn exchanges an API key for a session: POST session with
// {"key": "lsk_..."}. It answers 200 with the session and its cookie. The
// key is authenticated as a bearer key of the API is
// (lifecycle.Service.AuthenticateKeyFrom): a valid key signs in whatever
// its client did before; a client whose sign-ins (or keys, or cookies)
// failed too often is refused with 429 for an unknown key, which is not
// read; a malformed, unknown or revoked key counts as a failure.
func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) error {
	if err := checkSite(r, nil); err != nil {
		return err
	}
	var body signInBody
	if err := c.svc.DecodeBody(w, r, &body, maxSignInBytes, signInReadTimeout); err != nil {
		return err
	}
	key := strings.TrimSpace(body.Key)
	p, err := c.svc.AuthenticateKeyFrom(r, key)
	if err != nil {
		return err
	}
	random := make([]byte, 32)
	rand.Read(random)
	token := base64.RawURLEncoding.EncodeToString(random)
	tokenHash := sha256.Sum256([]byte(token))
	now := c.clock.Now()
	s := lifecycle.ConsoleSession{Hash: tokenHash[:], KeyID: p.ID, KeyHash: lifecycle.HashAPIKey(key),
		CreatedAt: lifecycle.NewTimestamp(now), ExpiresAt: lifecycle.NewTimestamp(now.Add(c.cfg.SessionTTL))}
	if err := c.sessions.CreateConsoleSession(r.Context(), s); err != nil {
		return fmt.Errorf("open console session: %w", err)
	}
	http.SetCookie(w, c.cookie(r, token, int(c.cfg.SessionTTL/time.Second)))
	c.svc.Logger().InfoContext(r.Context(), "console: signed in", "key", p.ID, "actor", p.Actor.ID, "expires", s.ExpiresAt.String())
	lifecycle.WriteJSON(w, http.StatusOK, infoOf(&p, token, s.ExpiresAt))
	return nil
}

// handleSession answers GET session: the signed-in session, or 401.
func (c *Console) handleSession(w http.ResponseWriter, r *http.Request) error {
	s, p, err := c.signedIn(r)
	if err != nil {
		return err
	}
	lifecycle.WriteJSON(w, http.StatusOK, infoOf(&p, s.token, s.ExpiresAt))
	return nil
}

// handleSignOut ends the session: DELETE session, with its CSRF token.
// Its event streams through this Console end at once; in other processes
// sharing the Store, its next request is refused.
func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) error {
	s, err := c.session(r)
	if err != nil {
		return err
	}
	if err := checkSite(r, s); err != nil {
		return err
	}
	if err := c.sessions.DeleteConsoleSession(r.Context(), s.Hash); err != nil && !errors.Is(err, lifecycle.ErrNotFound) {
		return fmt.Errorf("end console session: %w", err)
	}
	c.signedOut(s.Hash, s.ExpiresAt.Time)
	http.SetCookie(w, c.cookie(r, "", -1))
	c.svc.Logger().InfoContext(r.Context(), "console: signed out", "key", s.KeyID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// cookie returns the session cookie holding token for maxAge seconds (-1:
// cleared): HttpOnly and SameSite=Strict; on TLS requests or with
// Config.SecureCookie, __Host-lifecycle_console, Secure, on Path=/ (the
// __Host- prefix requires it; the API never reads cookies); over plain
// http, lifecycle_console on the console's path.
func (c *Console) cookie(r *http.Request, token string, maxAge int) *http.Cookie {
	ck := &http.Cookie{Name: sessionCookie, Value: token, Path: mountPath(r), MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if c.secure(r) {
		ck.Name, ck.Path, ck.Secure = secureSessionCookie, "/", true
	}
	return ck
}

// secure reports whether the browser reaches the console over TLS: the
// request came over TLS, or Config.SecureCookie says that a proxy in front
// terminates it.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || c.cfg.SecureCookie
}

// mountPath returns the path the console is mounted at, with a trailing
// slash, from the path the client asked for and the one the console got
// (after http.StripPrefix): the cookie's path.
func mountPath(r *http.Request) string {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if u, err := url.PathUnescape(orig); err == nil {
		orig = u
	}
	prefix, ok := strings.CutSuffix(orig, r.URL.Path)
	if !ok || !strings.HasPrefix(prefix, "/") {
		return "/"
	}
	return strings.TrimSuffix(prefix, "/") + "/"
}

// nonNil returns s, or an empty slice when s is nil, so it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
