package lifecycle

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/consoleui"
)

// Console returns the operator console: one page, with its script and
// style embedded in the binary, that shows the tasks on a board by
// status, updated live from the event stream, a task's timeline, and the
// webhook subscriptions with their deliveries and controls (replay, retry,
// enable). It is served only where the host mounts it, under any prefix:
//
//	mux.Handle("/console/", http.StripPrefix("/console", svc.Console()))
//
// An operator signs in by typing an API key of the Service once; the
// console exchanges it for a session cookie (HttpOnly, SameSite=Strict;
// over TLS __Host-lifecycle_console, Secure, on Path=/; over plain http
// scoped to the console's path) that lasts [Config.ConsoleSessionTTL] and
// acts with that key's scopes, and ends when the key is revoked. The key
// is never kept by the page, put in a URL or logged. Every change made
// through the console needs the session's CSRF token, and requests from
// other sites are refused. The console needs the Service's own API keys:
// with a host's [Config.Authenticator], sign-in is refused.
//
// Under the console's mount point, api/ serves the whole API of
// [Service.Handler] for the signed-in session; docs/console.md in the
// repository describes the rest.
func (s *Service) Console() http.Handler {
	s.console.once.Do(s.console.build)
	return s.console.handler
}

// The names of the console's session cookie: over TLS (or with
// Config.ConsoleSecureCookie) the __Host- prefix, which makes a browser
// accept the cookie only when it is Secure, on Path=/ and without a
// Domain, so that no other site of the domain (a subdomain, or the same
// host over plain http) can set it; over plain http the plain name, scoped
// to the console's path.
const (
	consoleCookie       = "lifecycle_console"
	consoleSecureCookie = "__Host-lifecycle_console"
)

// consoleCSRFHeader carries a console session's CSRF token.
const consoleCSRFHeader = "X-CSRF-Token"

// consoleHeaders are set on every response of the console: a strict
// Content-Security-Policy (no inline script or style, nothing from
// elsewhere), no sniffing, no framing, no referrer, nothing cached.
var consoleHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
	{"Cache-Control", "no-store"},
}

// console serves Service.Console. Its handlers are built at the first
// call of Console: a Service that does not serve the console pays nothing
// for it.
type console struct {
	s       *Service
	once    sync.Once
	handler http.Handler
	api     http.Handler // the API, authenticated by console sessions

	mu sync.Mutex
	// streaming holds the sessions that opened event streams in this
	// process, by session hash, until they expire: signing out (here, or
	// in another process, found by checkSessions) closes ended, which ends
	// their streams, and keeps the entry, so that a stream opened while
	// the sign-out ran ends at once too.
	streaming map[string]*streamingSession
}

// streamingSession is a session that opened event streams.
type streamingSession struct {
	ended     chan struct{}
	signedOut bool // ended is closed
	expiresAt time.Time
}

func newConsole(s *Service) *console {
	return &console{s: s, streaming: make(map[string]*streamingSession)}
}

// build builds the console's handlers.
func (c *console) build() {
	s := c.s
	c.api = http.StripPrefix("/api", s.routes(c))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.serveAsset("index.html"))
	assets, _ := fs.ReadDir(consoleui.Files, ".")
	for _, a := range assets {
		if a.Name() != "index.html" {
			mux.HandleFunc("GET /"+a.Name(), c.serveAsset(a.Name()))
		}
	}
	mux.HandleFunc("POST /session", c.handle(c.handleSignIn))
	mux.HandleFunc("GET /session", c.handle(c.handleSession))
	mux.HandleFunc("DELETE /session", c.handle(c.handleSignOut))
	mux.HandleFunc("GET /board", c.handle(c.handleBoard))
	mux.HandleFunc("GET /timeline/{id}", c.handle(c.handleTimeline))
	mux.HandleFunc("/api/", c.serveAPI)
	mux.HandleFunc("/", c.handle(func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("no such console page: %s %s: %w", r.Method, r.URL.Path, ErrNotFound)
	}))
	c.handler = s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, kv := range consoleHeaders {
			h.Set(kv[0], kv[1])
		}
		mux.ServeHTTP(w, r)
	}))
}

// serveAsset serves an embedded file of the page.
func (c *console) serveAsset(name string) http.HandlerFunc {
	body, err := fs.ReadFile(consoleui.Files, name)
	if err != nil {
		panic("lifecycle: console asset " + name + " missing from the binary: " + err.Error())
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

// consoleSession is a request's valid session.
type consoleSession struct {
	ConsoleSession
	token string // the cookie's value
}

// consoleSessionKey keys, in a request's context, the sessionLookup that
// serveAPI made, so that the API's Authenticate does not read it again.
type consoleSessionKey struct{}

// sessionLookup is what session found for a request.
type sessionLookup struct {
	cs  *consoleSession
	err error
}

// session returns the request's session: its cookie's, if the Store has
// it and it has not expired; else an error matching ErrUnauthorized, or a
// *RateLimitError for a client whose cookies or keys failed too often (its
// cookie is then not looked up). An unknown or expired cookie counts as a
// failure of its client.
func (c *console) session(r *http.Request) (*consoleSession, error) {
	if found, ok := r.Context().Value(consoleSessionKey{}).(sessionLookup); ok {
		return found.cs, found.err
	}
	name := consoleCookie
	if c.secure(r) {
		name = consoleSecureCookie // the plain one is not taken: any site of the domain could have set it
	}
	cookie, err := r.Cookie(name)
	if err != nil || cookie.Value == "" {
		return nil, fmt.Errorf("not signed in to the console; sign in with an API key: %w", ErrUnauthorized)
	}
	try, err := c.limiter().admit(r)
	if err != nil {
		return nil, err
	}
	defer try.end()
	hash := sha256.Sum256([]byte(cookie.Value))
	stored, err := c.s.store.ConsoleSession(r.Context(), hash[:])
	if errors.Is(err, ErrNotFound) {
		try.fail()
		return nil, fmt.Errorf("the console session ended; sign in again: %w", ErrUnauthorized)
	}
	if err != nil {
		return nil, fmt.Errorf("read console session: %w", err)
	}
	if !c.s.clock.Now().Before(stored.ExpiresAt.Time) {
		try.fail()
		return nil, fmt.Errorf("the console session expired; sign in again: %w", ErrUnauthorized)
	}
	return &consoleSession{ConsoleSession: stored, token: cookie.Value}, nil
}

// limiter returns the limiter of failed authentications, nil when the
// Service has a host's Authenticator (the console then signs no one in).
func (c *console) limiter() *authLimiter {
	if c.s.keys == nil {
		return nil
	}
	return c.s.keys.limit
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
func (c *console) checkSite(r *http.Request, cs *consoleSession) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Errorf("the console accepts requests from its own pages only, not from a %s page: %w", site, ErrCSRF)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("the console accepts changes from its own origin only, not from %q: %w", origin, ErrCSRF)
		}
	}
	if cs == nil {
		return nil // signing in: no token yet
	}
	got := r.Header.Get(consoleCSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(cs.token))) != 1 {
		return fmt.Errorf("a change made through the console needs the session's CSRF token in the %s header: %w", consoleCSRFHeader, ErrCSRF)
	}
	return nil
}

// Authenticate implements Authenticator for the console's API: the
// request's session, from its own site, with its CSRF token on a change,
// acts as the API key it was opened with.
func (c *console) Authenticate(r *http.Request) (Principal, error) {
	_, p, err := c.signedIn(r)
	return p, err
}

// errConsoleNeedsKeys refuses console sign-in on a Service with a host's
// Authenticator.
var errConsoleNeedsKeys = fmt.Errorf("the console signs in with the service's own API keys, and this service authenticates with its host's: %w", ErrUnauthorized)

// principal checks the request's site and returns the principal of cs's
// API key, or an error matching ErrUnauthorized when the key was revoked.
func (c *console) principal(r *http.Request, cs *consoleSession) (Principal, error) {
	if err := c.checkSite(r, cs); err != nil {
		return Principal{}, err
	}
	if c.s.keys == nil {
		return Principal{}, errConsoleNeedsKeys
	}
	key, err := c.s.keys.lookup(r.Context(), [sha256.Size]byte(cs.KeyHash))
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return Principal{}, fmt.Errorf("the API key of this console session was revoked; sign in with another: %w", ErrUnauthorized)
		}
		return Principal{}, err
	}
	return Principal{ID: key.ID, Actor: key.Actor, Scopes: key.Scopes}, nil
}

// handle runs h, a console route that returns its error instead of
// writing it, within Config.RequestTimeout as an API route runs, and
// writes the error.
func (c *console) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.s.serve(w, r, c.s.cfg.RequestTimeout, func(r *http.Request) error { return h(w, r) })
	}
}

// signedIn returns the request's session and its principal, holding scopes.
func (c *console) signedIn(r *http.Request, scopes ...Scope) (*consoleSession, Principal, error) {
	cs, err := c.session(r)
	if err != nil {
		return nil, Principal{}, err
	}
	p, err := c.principal(r, cs)
	if err != nil {
		return nil, Principal{}, err
	}
	for _, sc := range scopes {
		if !p.Has(sc) {
			return nil, Principal{}, fmt.Errorf("this needs an API key with scope %s: %w", sc, ErrInsufficientScope)
		}
	}
	return cs, p, nil
}

// serveAPI serves the API for the request's session. An event stream it
// opens ends with the session: at its expiry, by the Service's clock, or
// at once when it signs out through this Service. (A revocation of its key
// ends it too, as it ends every stream of the key.)
func (c *console) serveAPI(w http.ResponseWriter, r *http.Request) {
	cs, err := c.session(r)
	ctx := context.WithValue(r.Context(), consoleSessionKey{}, sessionLookup{cs, err})
	if err != nil {
		c.api.ServeHTTP(w, r.WithContext(ctx)) // refused by Authenticate, with the API's errors
		return
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/api/task-events/stream" {
		ctx = context.WithValue(ctx, streamSessionKey{}, streamSession{
			ended: c.streamingEnded(cs), expires: c.s.clock.After(cs.ExpiresAt.Sub(c.s.clock.Now())),
		})
	}
	c.api.ServeHTTP(w, r.WithContext(ctx))
}

// streamingEnded returns the channel closed when cs signs out, and forgets
// the sessions that have expired since (their streams end by themselves).
func (c *console) streamingEnded(cs *consoleSession) <-chan struct{} {
	now := c.s.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for hash, ss := range c.streaming {
		if !now.Before(ss.expiresAt) {
			delete(c.streaming, hash)
		}
	}
	return c.streamingLocked(cs.Hash, cs.ExpiresAt.Time).ended
}

// streamingLocked returns the entry of the session with hash, made if
// there is none; c.mu is held.
func (c *console) streamingLocked(hash []byte, expiresAt time.Time) *streamingSession {
	ss := c.streaming[string(hash)]
	if ss == nil {
		ss = &streamingSession{ended: make(chan struct{}), expiresAt: expiresAt}
		c.streaming[string(hash)] = ss
	}
	return ss
}

// signedOut ends the event streams of the session with hash, and those it
// opens later.
func (c *console) signedOut(hash []byte, expiresAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ss := c.streamingLocked(hash, expiresAt); !ss.signedOut {
		ss.signedOut = true
		close(ss.ended)
	}
}

// checkSessions ends the event streams of the sessions that signed out
// through another process sharing the Store: it reads each session with
// streams in this process (one query each). The Service runs it with its
// check of revoked keys.
func (c *console) checkSessions(ctx context.Context) {
	c.mu.Lock()
	var live []string
	for hash, ss := range c.streaming {
		if !ss.signedOut {
			live = append(live, hash)
		}
	}
	c.mu.Unlock()
	for _, hash := range live {
		_, err := c.s.store.ConsoleSession(ctx, []byte(hash))
		if errors.Is(err, ErrNotFound) {
			c.signedOut([]byte(hash), c.s.clock.Now()) // the entry keeps its expiry
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				c.s.log.WarnContext(ctx, "console: check the sessions of open event streams", "err", err)
			}
			return
		}
	}
}

// sessionInfo is what the page learns of its session.
type sessionInfo struct {
	// KeyID is the API key the session acts with.
	KeyID string `json:"keyId"`
	// Actor is that key's actor.
	Actor Actor `json:"actor"`
	// Scopes are that key's scopes.
	Scopes []Scope `json:"scopes"`
	// CSRFToken goes in the X-CSRF-Token header of every change.
	CSRFToken string `json:"csrfToken"`
	// ExpiresAt is when the session ends.
	ExpiresAt Timestamp `json:"expiresAt"`
}

// signInBody is the body of POST session.
type signInBody struct {
	Key string `json:"key"`
}

// Limits of a sign-in's body, which is read before anyone is signed in: it
// is small, is read outside Config.MaxDecodingBytes (so that stalled
// sign-ins cannot hold the budget every writer shares) and must arrive
// within signInReadTimeout, or Config.BodyReadTimeout when that is shorter.
const (
	maxSignInBytes    = 4 << 10
	signInReadTimeout = 10 * time.Second
)

// signInLimits returns how a sign-in's body is read.
func (c *console) signInLimits() bodyLimits {
	timeout := signInReadTimeout
	if t := c.s.cfg.BodyReadTimeout; t > 0 && t < timeout {
		timeout = t
	}
	return bodyLimits{max: maxSignInBytes, timeout: timeout}
}

// handleSignIn exchanges an API key for a session: POST session with
// {"key": "lsk_..."}. It answers 200 with the session and its cookie. A
// client whose sign-ins (or keys, or cookies) failed too often is refused
// with 429 before its body is read; a malformed, unknown or revoked key
// counts as a failure.
func (c *console) handleSignIn(w http.ResponseWriter, r *http.Request) error {
	if err := c.checkSite(r, nil); err != nil {
		return err
	}
	try, err := c.limiter().admit(r)
	if err != nil {
		return err
	}
	defer try.end()
	var body signInBody
	raw, _, err := readBodyWith(w, r, c.signInLimits())
	if err != nil {
		return err
	}
	if err := decodeRaw(r.Context(), raw, &body, false, nil); err != nil {
		return err
	}
	if c.s.keys == nil {
		return errConsoleNeedsKeys
	}
	key := strings.TrimSpace(body.Key)
	if !validAPIKey(key) {
		try.fail()
		return fmt.Errorf("that is not an API key of this service (lsk_ followed by at least 32 letters or digits): %w", ErrUnauthorized)
	}
	hash := sha256.Sum256([]byte(key))
	k, err := c.s.keys.lookup(r.Context(), hash)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			try.fail()
		}
		return err
	}
	random := make([]byte, 32)
	rand.Read(random)
	token := base64.RawURLEncoding.EncodeToString(random)
	tokenHash := sha256.Sum256([]byte(token))
	now := c.s.clock.Now()
	cs := ConsoleSession{Hash: tokenHash[:], KeyID: k.ID, KeyHash: hash[:], CreatedAt: NewTimestamp(now), ExpiresAt: NewTimestamp(now.Add(c.s.cfg.ConsoleSessionTTL))}
	if err := c.s.store.Update(r.Context(), func(tx Tx) error { return tx.CreateConsoleSession(r.Context(), cs) }); err != nil {
		return fmt.Errorf("open console session: %w", err)
	}
	http.SetCookie(w, c.cookie(r, token, int(c.s.cfg.ConsoleSessionTTL/time.Second)))
	c.s.log.InfoContext(r.Context(), "console: signed in", "key", k.ID, "actor", k.Actor.ID, "expires", cs.ExpiresAt.String())
	writeJSON(w, http.StatusOK, struct {
		Data sessionInfo `json:"data"`
	}{sessionInfo{KeyID: k.ID, Actor: k.Actor, Scopes: nonNil(k.Scopes), CSRFToken: csrfToken(token), ExpiresAt: cs.ExpiresAt}})
	return nil
}

// handleSession answers GET session: the signed-in session, or 401.
func (c *console) handleSession(w http.ResponseWriter, r *http.Request) error {
	cs, p, err := c.signedIn(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Data sessionInfo `json:"data"`
	}{sessionInfo{KeyID: p.ID, Actor: p.Actor, Scopes: nonNil(p.Scopes), CSRFToken: csrfToken(cs.token), ExpiresAt: cs.ExpiresAt}})
	return nil
}

// handleSignOut ends the session: DELETE session, with its CSRF token.
// Its event streams in this process end at once; in other processes
// sharing the Store, its next request is refused.
func (c *console) handleSignOut(w http.ResponseWriter, r *http.Request) error {
	cs, err := c.session(r)
	if err != nil {
		return err
	}
	if err := c.checkSite(r, cs); err != nil {
		return err
	}
	err = c.s.store.Update(r.Context(), func(tx Tx) error { return tx.DeleteConsoleSession(r.Context(), cs.Hash) })
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("end console session: %w", err)
	}
	c.signedOut(cs.Hash, cs.ExpiresAt.Time)
	http.SetCookie(w, c.cookie(r, "", -1))
	c.s.log.InfoContext(r.Context(), "console: signed out", "key", cs.KeyID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// cookie returns the session cookie holding token for maxAge seconds (-1:
// cleared): HttpOnly and SameSite=Strict; on TLS requests or with
// Config.ConsoleSecureCookie, __Host-lifecycle_console, Secure, on Path=/
// (the __Host- prefix requires it; the API never reads cookies); over plain
// http, lifecycle_console on the console's path.
func (c *console) cookie(r *http.Request, token string, maxAge int) *http.Cookie {
	ck := &http.Cookie{Name: consoleCookie, Value: token, Path: consolePath(r), MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if c.secure(r) {
		ck.Name, ck.Path, ck.Secure = consoleSecureCookie, "/", true
	}
	return ck
}

// secure reports whether the browser reaches the console over TLS: the
// request came over TLS, or Config.ConsoleSecureCookie says that a proxy
// in front terminates it.
func (c *console) secure(r *http.Request) bool {
	return r.TLS != nil || c.s.cfg.ConsoleSecureCookie
}

// consolePath returns the path the console is mounted at, with a trailing
// slash, from the path the client asked for and the one the console got
// (after http.StripPrefix): the cookie's path.
func consolePath(r *http.Request) string {
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

// consoleCard is a task as the console's board shows it.
type consoleCard struct {
	ID               string         `json:"id"`
	Identifier       string         `json:"identifier"`
	Title            string         `json:"title"`
	Status           Status         `json:"status"`
	Priority         Priority       `json:"priority"`
	Project          *string        `json:"project"`
	Assignee         *Agent         `json:"assignee"`
	PRURL            *string        `json:"prUrl"`
	PRNumber         *int           `json:"prNumber"`
	HeadSHA          *string        `json:"headSha"`
	CI               CIOverall      `json:"ci"`
	Review           ReviewDecision `json:"review"`
	Shipping         bool           `json:"shipping"`
	Blocker          *string        `json:"blocker"`
	AvailableActions []Action       `json:"availableActions"`
	UpdatedAt        Timestamp      `json:"updatedAt"`
	Version          int64          `json:"version"`
}

// cardOf returns the card of t.
func (s *Service) cardOf(t *Task) consoleCard {
	st := s.stateOf(t)
	card := consoleCard{
		ID: t.ID, Identifier: t.Identifier, Title: t.Title, Status: t.Status, Priority: t.Priority,
		Project: t.Context.Project, Assignee: t.Assignee, PRURL: t.PRURL, PRNumber: t.PRNumber, HeadSHA: t.HeadSHA,
		CI: st.ci, Review: st.decision, Shipping: st.shipping, AvailableActions: st.actions(),
		UpdatedAt: t.UpdatedAt, Version: t.Version,
	}
	if t.Blocker != nil {
		card.Blocker = &t.Blocker.Reason
	}
	return card
}

// maxBoardIDs is the most tasks GET board?id= asks for at once.
const maxBoardIDs = 100

// handleBoard answers GET board: every task as a card, with cursor, the
// event the board is current through (null when there is none), from
// which the page opens the event stream; or, with id=... (up to 100), the
// cards of those tasks only.
func (c *console) handleBoard(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := c.signedIn(r, ScopeTasksRead); err != nil {
		return err
	}
	ctx := r.Context()
	cards := []consoleCard{}
	if ids := r.URL.Query()["id"]; len(ids) > 0 {
		if len(ids) > maxBoardIDs {
			return invalid("id", fmt.Sprintf("at most %d task IDs at once", maxBoardIDs))
		}
		for _, taskID := range ids {
			t, err := c.s.readTask(ctx, taskID)
			if errors.Is(err, ErrNotFound) {
				continue // the page drops what is gone
			}
			if err != nil {
				return err
			}
			cards = append(cards, c.s.cardOf(&t))
		}
		writeJSON(w, http.StatusOK, struct {
			Data []consoleCard `json:"data"`
		}{cards})
		return nil
	}
	// The cursor is read first: every change after it reaches the page
	// through the stream, whether or not the listing saw it.
	cursor, err := c.s.lastEventID(ctx)
	if err != nil {
		return err
	}
	for after := int64(0); ; {
		page, err := c.s.store.ListTasks(ctx, TaskFilter{After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("list tasks: %w", err)
		}
		for i := range page.Tasks {
			cards = append(cards, c.s.cardOf(&page.Tasks[i]))
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	writeJSON(w, http.StatusOK, struct {
		Data   []consoleCard `json:"data"`
		Cursor *string       `json:"cursor"`
	}{cards, cursor})
	return nil
}

// lastEventID returns the ID of the last committed event, or nil when it
// was pruned or there is none.
func (s *Service) lastEventID(ctx context.Context) (*string, error) {
	bounds, err := s.store.EventBounds(ctx)
	last := bounds.Last
	if err != nil || last == 0 {
		return nil, err
	}
	evs, err := s.store.Events(ctx, EventFilter{After: last - 1, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("read the last event: %w", err)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	return &evs[0].ID, nil
}

// timelineSubmission is a submission on a task's timeline, with what the
// agent said and the reviews it got.
type timelineSubmission struct {
	Submission
	Summary string   `json:"summary"`
	Notes   string   `json:"notes"`
	Actor   Actor    `json:"actor"`
	Reviews []Review `json:"reviews"`
}

// maxTimelineEvents bounds the events of one timeline.
const maxTimelineEvents = 10000

// handleTimeline answers GET timeline/{id}: the task, its card, its events
// still stored (in taskVersion order, as the stream sends them), its
// submissions with their reviews, the CI of its head and its ship
// operations.
func (c *console) handleTimeline(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := c.signedIn(r, ScopeTasksRead, ScopeEventsRead); err != nil {
		return err
	}
	ctx := r.Context()
	t, err := c.s.readTask(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	evs, err := c.s.store.Events(ctx, EventFilter{TaskID: t.ID, Limit: maxTimelineEvents})
	if err != nil {
		return fmt.Errorf("read the events of %s: %w", t.ID, err)
	}
	events := make([]json.RawMessage, len(evs))
	for i := range evs {
		events[i] = newRingEvent(&evs[i], c.s.log).body
	}
	subs, err := c.s.store.Submissions(ctx, t.ID)
	if err != nil {
		return fmt.Errorf("read the submissions of %s: %w", t.ID, err)
	}
	submissions := make([]timelineSubmission, len(subs))
	for i, sub := range subs {
		reviews, err := c.s.store.Reviews(ctx, sub.SubmissionID)
		if err != nil {
			return fmt.Errorf("read the reviews of %s: %w", sub.SubmissionID, err)
		}
		sub.AvailableActions = nil
		submissions[i] = timelineSubmission{Submission: sub, Summary: sub.Summary, Notes: sub.Notes, Actor: sub.Actor, Reviews: nonNil(reviews)}
	}
	ci, err := c.s.ciStatusOf(ctx, &t)
	if err != nil {
		return err
	}
	ops, err := c.s.store.ShipOperations(ctx, t.ID)
	if err != nil {
		return fmt.Errorf("read the ship operations of %s: %w", t.ID, err)
	}
	for i := range ops {
		ops[i].AvailableActions = nil
	}
	writeJSON(w, http.StatusOK, struct {
		Data consoleTimeline `json:"data"`
	}{consoleTimeline{Task: t, Card: c.s.cardOf(&t), Events: events, Submissions: submissions, CI: ci, ShipOperations: nonNil(ops)}})
	return nil
}

// consoleTimeline is the body of GET timeline/{id}.
type consoleTimeline struct {
	Task           Task                 `json:"task"`
	Card           consoleCard          `json:"card"`
	Events         []json.RawMessage    `json:"events"`
	Submissions    []timelineSubmission `json:"submissions"`
	CI             CIStatus             `json:"ci"`
	ShipOperations []ShipOperation      `json:"shipOperations"`
}
