// Package githubtest is a stateful fake of the parts of GitHub's REST and
// GraphQL APIs that package github uses, on an httptest server served both
// under /api/v3/ (GraphQL at /api/graphql), as GitHub Enterprise Server
// serves it ([Server.APIURL]), and at its root (GraphQL at /graphql), as
// api.github.com does ([Server.RootAPIURL]), for tests of the adapter and
// of programs built on it (the demo's test runs the whole lifecycle
// against it).
//
// The fake holds one repository, [Owner]/[Repo], whose default branch is
// "main". Its REST answers are go-github's structs encoded (their JSON
// tags are GitHub's member names) and its errors GitHub's shape
// ({"message", "errors", "documentation_url"}). Every REST GET answers
// with an ETag, and with 304 Not Modified, not charged, to a request
// whose If-None-Match names it. Its GraphQL API executes queries against
// the same state, validated against a part of GitHub's public schema
// (schema.graphql), and charges each the points GitHub's documentation
// computes ([Server.SetGraphQLRateLimit], [Server.Usage]). Every request
// must carry [Token] (or [Options.Token]) as "Bearer" or "token", or an
// installation token the fake issued to its GitHub App ([Options.App]);
// others are answered 401 "Bad credentials".
//
// It applies GitHub's rules: reviewDecision from the base's protection and
// rulesets (required approvals of people with write access, stale
// approvals dismissed on push, code owners, approval of the last push);
// mergeability unknown after the base moves until a read starts GitHub's
// computation ([Options.MergesRefusedWhileComputing]), conflicting,
// behind, or blocked (required checks, reviews, unresolved conversations,
// a merge queue); the merge methods the repository's settings and the
// base's rulesets allow ([Server.SetMergeMethods]); the merge refusals of
// drafts and mergeability, and with [Options.EnforceBranchProtection]
// those of branch protection and rulesets.
//
// It models git (see gitdata.go): commits have parents and trees of files,
// merges are three-way by file, and it serves the git refs and commits
// endpoints and POST /repos/{owner}/{repo}/merges; a ref update that makes
// a pull request's head reachable from its base merges the pull request,
// as a push does at GitHub. [Server.PushFiles] makes a head changing the
// files a test names.
//
// Tests change the repository as people, CI and deploy systems would
// ([Server.Push], [Server.CheckRun], [Server.CheckSuite], [Server.Review],
// [Server.DeploymentStatus], ...), set who may write
// ([Server.SetAuthorAssociation]), make GitHub misbehave with
// [Server.Inject], count the calls made with [Server.Calls] and
// [Server.Usage], and build signed webhook deliveries with
// [Server.Delivery].
package githubtest

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/vektah/gqlparser/v2/ast"
)

// The fake's repository and credentials.
const (
	// Owner is the owner of the fake's repository.
	Owner = "acme"
	// Repo is the name of the fake's repository.
	Repo = "widgets"
	// Token is the token the fake accepts unless Options.Token names
	// another.
	Token = "ghp_fakeTokenNeverLogged0123456789"
)

// Routes of the fake, as given to [Server.Inject] and [Server.Calls]: the
// method and the path under /api/v3/repos/{owner}/{repo}, in ServeMux
// pattern syntax. RouteAccessTokens is under /api/v3/ itself.
const (
	RouteRepo             = "GET "
	RouteListPulls        = "GET /pulls"
	RouteCreatePull       = "POST /pulls"
	RouteGetPull          = "GET /pulls/{number}"
	RouteEditPull         = "PATCH /pulls/{number}"
	RouteRequestReviewers = "POST /pulls/{number}/requested_reviewers"
	RouteMerge            = "PUT /pulls/{number}/merge"
	RouteListReviews      = "GET /pulls/{number}/reviews"
	RouteCheckRuns        = "GET /commits/{ref}/check-runs"
	// RouteCheckRunAnnotations lists a check run's annotations.
	RouteCheckRunAnnotations = "GET /check-runs/{id}/annotations"
	RouteCombinedStatus      = "GET /commits/{ref}/status"
	RouteProtection          = "GET /branches/{branch}/protection"
	RouteRules               = "GET /rules/branches/{branch}"
	RouteCreateDeployment    = "POST /deployments"
	RouteListDeployments     = "GET /deployments"
	RouteDeploymentStatuses  = "GET /deployments/{id}/statuses"
	RouteAccessTokens        = "POST /app/installations/{id}/access_tokens"
	RouteCheckSuites         = "GET /commits/{ref}/check-suites"
	// RouteGraphQL is the GraphQL endpoint, POST /graphql at the root
	// (api.github.com's) or /api/graphql (GitHub Enterprise Server's).
	RouteGraphQL = "POST /graphql"
)

// Options shape the fake.
type Options struct {
	// Token is the personal access token the fake accepts. Defaults to
	// [Token].
	Token string
	// AutoBranch makes a pull request's missing head branch exist, with a
	// new commit, as if it had been pushed; otherwise opening a pull
	// request from a branch nobody pushed is GitHub's 422 on head.
	AutoBranch bool
	// App, when set, is a GitHub App installed on the repository: the
	// fake serves POST /api/v3/app/installations/{id}/access_tokens to it.
	App *App
	// EnforceBranchProtection makes a merge refused, as GitHub refuses
	// it, when the base's protection or rulesets are not met: required
	// checks not passed, a review required, a code owner's review
	// missing, a branch behind its base when it must be up to date.
	// Otherwise only mergeability and drafts are enforced at merge (tests
	// of other things merge without approvals).
	EnforceBranchProtection bool
	// MergeabilityAtOnce makes GitHub's mergeability known at once after
	// a base moves, as if GitHub had computed it before anyone asked;
	// otherwise it is unknown until a read of the pull request starts the
	// computation (see [Server.ForgetMergeability]).
	MergeabilityAtOnce bool
	// MergesRefusedWhileComputing is how many merges of each open pull
	// request GitHub refuses with 405 "Pull Request is not mergeable"
	// after its base moves, while it works its mergeability out anew; the
	// work finishes right after each refusal, so a read just after it
	// finds the pull request mergeable. GitHub works mergeability out in
	// the background for seconds after a merge into the base, and a merge
	// arriving meanwhile does not wait for it. 0: merges are refused only
	// while reads say the mergeability is unknown.
	MergesRefusedWhileComputing int
	// OmitFields are GraphQL fields, as "Type.field", that the fake's
	// schema lacks, as an older GitHub Enterprise Server's does
	// ("PullRequestReview.fullDatabaseId",
	// "StatusCheckRollupContextConnection.checkRunCountsByState", ...): a
	// query asking for one is refused whole, as GitHub refuses it, with
	// an error of code undefinedField naming the type and the field.
	OmitFields []string
	// MergeInfoPreview puts PullRequest.mergeStateStatus behind GitHub's
	// merge info schema preview, as GitHub Enterprise Server does: only a
	// request whose Accept header names [MergeInfoPreview] may ask for it.
	MergeInfoPreview bool
}

// App is a GitHub App the fake knows.
type App struct {
	// ID is the App's ID, the JWT's issuer ("iss").
	ID int64
	// InstallationID is the ID of its installation on the repository.
	InstallationID int64
	// PublicKey verifies the RS256 signature of the App's JWTs.
	PublicKey *rsa.PublicKey
	// TokenTTL is how long an installation token lasts. Defaults to one
	// hour, GitHub's.
	TokenTTL time.Duration
}

// Fault is an answer the fake gives instead of doing a call, once; with
// Drop, it does the call and then drops the connection without an answer
// (an answer lost on the way back).
type Fault struct {
	// Status is the answer's HTTP status.
	Status int
	// Header holds headers of the answer (Retry-After, X-RateLimit-*).
	Header http.Header
	// Body is the answer's body, GitHub's JSON error.
	Body string
	// Drop does the call, then closes the connection without answering.
	Drop bool
}

// Error returns a Fault answering status with GitHub's error shape: the
// message, the documentation URL, and errs as its "errors" items
// ({"resource", "field", "code", "message"}).
func Error(status int, message string, errs ...map[string]string) Fault {
	body := map[string]any{"message": message, "documentation_url": "https://docs.github.com/rest"}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	b, _ := json.Marshal(body)
	return Fault{Status: status, Body: string(b)}
}

// PullRequest is what the fake holds of a pull request.
type PullRequest struct {
	// Number is its number in the repository.
	Number int
	// Head and Base are its branches.
	Head, Base string
	// HeadSHA is its head commit.
	HeadSHA string
	// Title and Body are as last set.
	Title, Body string
	// Draft is its draft setting.
	Draft bool
	// Closed and Merged tell its state; neither is an open pull request.
	Closed, Merged bool
	// MergeCommitSHA is its merge commit; empty unless merged.
	MergeCommitSHA string
	// MergeMethod is the merge_method it was merged with through the API
	// (merge, squash or rebase); empty unless so merged.
	MergeMethod string
	// Reviewers are the logins whose review was requested.
	Reviewers []string
	// Labels are its labels' names.
	Labels []string
}

type pull struct {
	PullRequest
	createdAt time.Time
	updatedAt time.Time
	// mergeKnown says GitHub has computed the pull request's
	// mergeability since its base last moved; conflicting is the answer.
	mergeKnown, conflicting bool
	// baseAt is the commit of the base its head is based on.
	baseAt string
	// pusher is the login that pushed the head last, or "".
	pusher string
	// busyMerges is how many merges GitHub still refuses while it works
	// out the mergeability after the base moved
	// (Options.MergesRefusedWhileComputing).
	busyMerges int
	// unresolved is the number of unresolved review conversations.
	unresolved int
}

// touch records that p changed now: its updated_at (REST) and updatedAt
// (GraphQL) move.
//
// GitHub documents no list of what moves a pull request's updated_at;
// its documented webhook payloads show it (the pull_request and
// pull_request_review examples of
// https://docs.github.com/en/webhooks/webhook-events-and-payloads, as
// octokit/webhooks keeps them), and the fake follows them:
//
//   - moved by what people do to the pull request itself: opening it,
//     a push to its head (synchronize), an edit of its title, body or
//     base (edited), marking it a draft or ready for review
//     (converted_to_draft, ready_for_review: updated_at moves to the
//     event's time), closing, reopening and merging it (closed carries
//     updated_at equal to closed_at), labels (labeled, unlabeled),
//     review requests, and a review submitted (the submitted example's
//     updated_at equals the review's submitted_at);
//   - not moved by what happens to its commits or its base: check runs,
//     check suites and commit statuses (events of the commit, whose
//     payloads carry no pull request's updated_at), and a push to the
//     base branch, after which GitHub works mergeability out anew
//     (unknown, then perhaps conflicting or behind) without touching the
//     pull requests into it ([Server.SetConflicting]);
//   - not moved by a review's dismissal: the dismissed example's
//     updated_at is the review's submission time, not the dismissal's.
//
// An adapter that compares updatedAt must so read CI, mergeability and
// dismissals some other way.
func (s *Server) touch(p *pull) { p.updatedAt = s.tick() }

// suite is a check suite of a commit.
type suite struct {
	id                 int64
	sha                string
	appID              int64
	appSlug, appName   string
	status, conclusion string
	createdAt          time.Time
	updatedAt          time.Time
}

// Usage counts what clients used of the fake's API.
type Usage struct {
	// Core is the REST requests charged against the REST rate limit: all
	// but those answered 304 Not Modified.
	Core int64
	// NotModified is the REST requests answered 304 Not Modified, which
	// GitHub does not charge.
	NotModified int64
	// GraphQL is the GraphQL queries answered.
	GraphQL int64
	// Points is the GraphQL rate-limit points they cost, as GitHub
	// computes them.
	Points int64
}

// Server is the fake GitHub. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the server; the API is under URL/api/v3/
	// ([Server.APIURL]).
	URL string

	srv  *httptest.Server
	opts Options

	mu            sync.Mutex
	now           time.Time
	defaultBranch string
	branches      map[string]string // name → head SHA
	commits       map[string]bool   // every commit the repository has
	objects       map[string]*gitCommit
	conflictMemo  map[[2]string]bool // base and head commits → whether they conflict
	pulls         map[int]*pull
	nextNumber    int
	nextID        int64
	runs          map[string][]*gh.CheckRun
	annotations   map[int64][]*gh.CheckRunAnnotation // by check run ID
	statuses      map[string][]*gh.RepoStatus
	reviews       map[int][]*gh.PullRequestReview
	protection    map[string]*gh.Protection
	protectionErr int
	rules         map[string][]json.RawMessage
	rateLimit     int       // requests allowed per window; 0: unlimited
	rateUsed      int       // requests made in the window
	rateReset     time.Time // when the window ends
	gqlLimit      int       // GraphQL points allowed per window; 0: unlimited
	gqlUsed       int
	gqlReset      time.Time
	associations  map[string]string // login in lower case → author association
	codeOwners    []string
	suites        map[string][]*suite // by head SHA
	schema        *ast.Schema
	noPreview     *ast.Schema // without the merge info preview's fields; nil unless Options.MergeInfoPreview
	gqlTimeout    int         // queries of more pull requests time out; 0: none
	gqlTimeouts   int
	deployments   []*gh.Deployment
	depStatuses   map[int64][]*gh.DeploymentStatus
	merges        int
	faults        map[string][]Fault
	installTokens map[string]time.Time // installation token → expiry
	lastAuth      string

	// mergeMethods are the repository's settings allow_merge_commit,
	// allow_squash_merge and allow_rebase_merge, by merge_method.
	mergeMethods map[string]bool
	// hideMergeSettings leaves them out of GET /repos/{owner}/{repo}.
	hideMergeSettings bool
	// mq is the merge queues of the branches whose rulesets require one
	// (mergequeue.go).
	mq          mergeQueues
	parsed      sync.Map // parsed GraphQL documents, see parse
	parsedN     atomic.Int64
	calls       sync.Map // route → *atomic.Int64
	callTotal   atomic.Int64
	conns       atomic.Int64
	coreCharged atomic.Int64
	notModified atomic.Int64
	gqlQueries  atomic.Int64
	gqlPoints   atomic.Int64
}

// TB is what NewServer needs of a test: testing.TB has it, and so can a
// program that runs the server outside a test (internal/cmd/dashshot).
type TB interface {
	Helper()
	Cleanup(func())
}

// NewServer starts a fake GitHub, closed when t's test ends.
func NewServer(t TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = Token
	}
	if opts.App != nil && opts.App.TokenTTL == 0 {
		opts.App.TokenTTL = time.Hour
	}
	s := &Server{
		opts: opts, now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), defaultBranch: "main",
		branches: map[string]string{}, commits: map[string]bool{}, objects: map[string]*gitCommit{}, conflictMemo: map[[2]string]bool{}, pulls: map[int]*pull{}, nextNumber: 1, nextID: 1000,
		runs: map[string][]*gh.CheckRun{}, annotations: map[int64][]*gh.CheckRunAnnotation{}, statuses: map[string][]*gh.RepoStatus{}, reviews: map[int][]*gh.PullRequestReview{},
		protection: map[string]*gh.Protection{}, protectionErr: http.StatusNotFound, rules: map[string][]json.RawMessage{},
		depStatuses: map[int64][]*gh.DeploymentStatus{}, faults: map[string][]Fault{}, installTokens: map[string]time.Time{},
		associations: map[string]string{}, suites: map[string][]*suite{}, schema: gqlSchema(opts.OmitFields...),
		mergeMethods: map[string]bool{"merge": true, "squash": true, "rebase": true},
	}
	if opts.MergeInfoPreview {
		s.noPreview = gqlSchema(append(slices.Clone(opts.OmitFields), "PullRequest.mergeStateStatus")...)
	}
	s.branches["main"] = s.commitOn(nil, map[string]string{"README.md": "# " + Repo + "\n"}, "Initial commit")
	mux := http.NewServeMux()
	s.routes(mux)
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// APIURL is the Enterprise-style base URL of the fake's REST API,
// URL/api/v3/, to give as the adapter's Config.APIURL.
func (s *Server) APIURL() string { return s.URL + "/api/v3/" }

// RootAPIURL is the base URL of the same API served at the root, as
// api.github.com serves it: URL/.
func (s *Server) RootAPIURL() string { return s.URL + "/" }

// SetRateLimit makes the fake limit requests as GitHub's primary rate
// limit does: limit requests until reset. Every answer then carries
// X-RateLimit-Limit, -Remaining, -Used, -Reset and -Resource; the request
// that uses the last one is answered as usual, with X-RateLimit-Remaining
// 0, and later ones until reset get 403 "API rate limit exceeded".
func (s *Server) SetRateLimit(limit int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit, s.rateUsed, s.rateReset = limit, 0, reset
}

// SetGraphQLRateLimit makes the fake limit GraphQL as GitHub's primary
// rate limit does: limit points until reset, each query charged what
// GitHub's formula makes of it. Every GraphQL answer then carries
// X-RateLimit-Limit, -Remaining, -Used, -Reset and -Resource (graphql),
// and rateLimit reports them; a query costing more than what is left is
// answered, as GitHub answers it, 200 with an error of type RATE_LIMIT
// and nothing charged. Without it the fake limits nothing and reports no
// limit (no headers; rateLimit is null).
func (s *Server) SetGraphQLRateLimit(limit int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gqlLimit, s.gqlUsed, s.gqlReset = limit, 0, reset
}

// Usage returns what clients used of the API so far.
func (s *Server) Usage() Usage {
	return Usage{Core: s.coreCharged.Load(), NotModified: s.notModified.Load(), GraphQL: s.gqlQueries.Load(), Points: s.gqlPoints.Load()}
}

// admit reports whether a REST request may go on under the rate limit,
// answering 403 "API rate limit exceeded" when it may not. It does not
// charge the request.
func (s *Server) admit(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rateLimit == 0 {
		return true
	}
	if !time.Now().Before(s.rateReset) {
		s.rateUsed, s.rateReset = 0, time.Now().Add(time.Hour)
	}
	if s.rateUsed < s.rateLimit {
		return true
	}
	s.rateHeaders(w.Header())
	writeJSON(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded for user ID 1.",
		"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"})
	return false
}

// charge counts a REST request against the rate limit and sets the
// answer's rate headers.
func (s *Server) charge(h http.Header) {
	s.coreCharged.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rateLimit == 0 {
		return
	}
	s.rateUsed++
	s.rateHeaders(h)
}

// rateHeaders sets the core rate headers. Callers hold s.mu.
func (s *Server) rateHeaders(h http.Header) {
	if s.rateLimit == 0 {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.rateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(s.rateLimit-s.rateUsed, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(s.rateUsed))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.rateReset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// NewSHA returns a random commit SHA.
func NewSHA() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commit makes a new commit of the repository and returns its SHA.
func (s *Server) commit() string {
	sha := NewSHA()
	s.commits[sha] = true
	return sha
}

func (s *Server) id() int64 { s.nextID++; return s.nextID }

// Now returns the fake's time: what happens next at the fake happens a
// second or more later (GitHub's created_at, updated_at, ...).
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// tick returns the fake's time, a second later each call.
func (s *Server) tick() time.Time { s.now = s.now.Add(time.Second); return s.now }

// Calls returns how many requests a route got; "" counts every route.
func (s *Server) Calls(route string) int64 {
	if route == "" {
		return s.callTotal.Load()
	}
	if v, ok := s.calls.Load(route); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// Connections returns how many TCP connections clients opened to the
// fake.
func (s *Server) Connections() int64 { return s.conns.Load() }

// Inject makes the next calls of route answer with faults, one each, in
// order.
func (s *Server) Inject(route string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[route] = append(s.faults[route], faults...)
}

// Authorization returns the Authorization header of the last request
// answered, other than an installation token's exchange.
func (s *Server) Authorization() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAuth
}

// authorized reports whether an Authorization header carries the fake's
// token or a live installation token.
func (s *Server) authorized(auth string) bool {
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "Bearer ")
	}
	if !ok {
		return false
	}
	if tok == s.opts.Token {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.installTokens[tok]
	return ok && time.Now().Before(exp)
}

func (s *Server) count(route string) {
	s.callTotal.Add(1)
	v, _ := s.calls.LoadOrStore(route, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// take returns the next fault of route, or nil.
func (s *Server) take(route string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.faults[route]; len(q) > 0 {
		f := q[0]
		s.faults[route] = q[1:]
		return &f
	}
	return nil
}

// dropNext reports whether the next fault of route drops the connection.
func (s *Server) dropNext(route string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[route]
	return len(q) > 0 && q[0].Drop
}

// conditional answers a GET as GitHub does: with an ETag, and 304 Not
// Modified, uncharged, to a request whose If-None-Match names it. The
// ETag is a digest of the body and of the Authorization the request
// carried: GitHub's ETags are per token (its answers say "Vary: Accept,
// Authorization, Cookie, X-GitHub-OTP"), so one token's ETag does not
// stand for another's answer.
func (s *Server) conditional(w http.ResponseWriter, r *http.Request, route string, fn http.HandlerFunc) {
	rec := httptest.NewRecorder()
	s.answer(rec, r, route, fn)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		h := sha256.New()
		h.Write(body)
		h.Write([]byte(r.Header.Get("Authorization")))
		etag := `W/"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
		rec.Header().Set("ETag", etag)
		rec.Header().Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
		if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == etag || strings.TrimPrefix(inm, "W/") == strings.TrimPrefix(etag, "W/")) {
			s.notModified.Add(1)
			s.mu.Lock()
			s.rateHeaders(w.Header())
			s.mu.Unlock()
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	s.charge(w.Header())
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// answer gives a fault, or does the call.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, route string, fn http.HandlerFunc) {
	switch f := s.take(route); {
	case f != nil && f.Drop:
		fn(httptest.NewRecorder(), r)
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("githubtest: the server cannot drop a connection")
		}
		conn, _, _ := hj.Hijack()
		conn.Close()
	case f != nil:
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		writeFault(w, *f)
	default:
		fn(w, r)
	}
}

func (s *Server) routes(mux *http.ServeMux) {
	h := func(route string, fn http.HandlerFunc) {
		method, path, _ := strings.Cut(route, " ")
		serve := func(w http.ResponseWriter, r *http.Request) {
			s.count(route)
			auth := r.Header.Get("Authorization")
			s.mu.Lock()
			s.lastAuth = auth
			s.mu.Unlock()
			if !s.authorized(auth) {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
				return
			}
			if r.PathValue("owner") != Owner || r.PathValue("repo") != Repo {
				writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
				return
			}
			if !s.admit(w) {
				return
			}
			if r.Method == http.MethodGet && !s.dropNext(route) {
				s.conditional(w, r, route, fn)
				return
			}
			s.charge(w.Header())
			s.answer(w, r, route, fn)
		}
		for _, prefix := range []string{"/api/v3", ""} {
			mux.HandleFunc(method+" "+prefix+"/repos/{owner}/{repo}"+path, serve)
		}
	}
	h(RouteRepo, s.getRepo)
	h(RouteListPulls, s.listPulls)
	h(RouteCreatePull, s.createPull)
	h(RouteGetPull, s.getPull)
	h(RouteEditPull, s.editPull)
	h(RouteRequestReviewers, s.requestReviewers)
	h(RouteMerge, s.mergePull)
	h(RouteListReviews, s.listReviews)
	h(RouteCheckRuns, s.listCheckRuns)
	h(RouteCheckRunAnnotations, s.listAnnotations)
	h(RouteCombinedStatus, s.combinedStatus)
	h(RouteProtection, s.getProtection)
	h(RouteRules, s.getRules)
	h(RouteCreateDeployment, s.createDeployment)
	h(RouteListDeployments, s.listDeployments)
	h(RouteDeploymentStatuses, s.listDeploymentStatuses)
	h(RouteCheckSuites, s.listCheckSuites)
	s.gitRoutes(h)
	for _, path := range []string{"/graphql", "/api/graphql"} {
		mux.HandleFunc("POST "+path, s.serveGraphQL)
	}
	for _, prefix := range []string{"/api/v3", ""} {
		mux.HandleFunc("POST "+prefix+"/app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
			s.count(RouteAccessTokens)
			s.answer(w, r, RouteAccessTokens, s.accessToken)
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeFault(w http.ResponseWriter, f Fault) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(f.Status)
	w.Write([]byte(f.Body))
}

// page cuts n items into the page r asks for and sets the Link header.
func page(w http.ResponseWriter, r *http.Request, n int) (int, int) {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	p = max(p, 1)
	last := max((n+per-1)/per, 1)
	link := func(pg int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(pg))
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if p < last {
		links = append(links, link(p+1, "next"), link(last, "last"))
	}
	if p > 1 {
		links = append(links, link(1, "first"), link(p-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	start := min((p-1)*per, n)
	return start, min(start+per, n)
}

func user(login string) *gh.User {
	return &gh.User{Login: gh.String(login), ID: gh.Int64(int64(len(login)) * 7919), Type: gh.String("User")}
}

func (s *Server) repoJSON() *gh.Repository {
	return &gh.Repository{
		ID: gh.Int64(42), Name: gh.String(Repo), FullName: gh.String(Owner + "/" + Repo), Owner: user(Owner),
		DefaultBranch: gh.String(s.defaultBranch), Private: gh.Bool(true),
		HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s", Owner, Repo)),
	}
}

func (s *Server) pullJSON(p *pull) *gh.PullRequest {
	state := "open"
	if p.Closed || p.Merged {
		state = "closed"
	}
	out := &gh.PullRequest{
		ID: gh.Int64(int64(p.Number) * 100003), NodeID: gh.String(fmt.Sprintf("PR_kwDOAAAAKs%d", p.Number)), Number: gh.Int(p.Number), State: gh.String(state), Title: gh.String(p.Title), Body: gh.String(p.Body),
		Draft: gh.Bool(p.Draft), Merged: gh.Bool(p.Merged), User: user("lifecycle-bot"),
		HTMLURL:   gh.String(fmt.Sprintf("https://github.example/%s/%s/pull/%d", Owner, Repo, p.Number)),
		URL:       gh.String(fmt.Sprintf("%srepos/%s/%s/pulls/%d", s.APIURL(), Owner, Repo, p.Number)),
		CreatedAt: &gh.Timestamp{Time: p.createdAt},
		UpdatedAt: &gh.Timestamp{Time: p.updatedAt},
		Head:      &gh.PullRequestBranch{Ref: gh.String(p.Head), SHA: gh.String(p.HeadSHA), Label: gh.String(Owner + ":" + p.Head), Repo: s.repoJSON(), User: user(Owner)},
		Base:      &gh.PullRequestBranch{Ref: gh.String(p.Base), SHA: gh.String(s.branches[p.Base]), Label: gh.String(Owner + ":" + p.Base), Repo: s.repoJSON(), User: user(Owner)},
	}
	if p.Merged {
		out.MergedAt = &gh.Timestamp{Time: s.now}
		out.MergeCommitSHA = gh.String(p.MergeCommitSHA)
	}
	mergeable, mergeableState := s.restMergeable(p)
	out.Mergeable, out.MergeableState = mergeable, gh.String(mergeableState)
	for _, r := range p.Reviewers {
		out.RequestedReviewers = append(out.RequestedReviewers, user(r))
	}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, &gh.Label{Name: gh.String(l), Color: gh.String("ededed")})
	}
	return out
}

// getRepo answers GET /repos/{owner}/{repo}. GitHub includes the merge
// settings (allow_merge_commit, allow_squash_merge, allow_rebase_merge)
// only for credentials that may push to the repository
// ([Server.HideMergeSettings]).
func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoJSON()
	if !s.hideMergeSettings {
		repo.AllowMergeCommit = gh.Bool(s.mergeMethods["merge"])
		repo.AllowSquashMerge = gh.Bool(s.mergeMethods["squash"])
		repo.AllowRebaseMerge = gh.Bool(s.mergeMethods["rebase"])
	}
	writeJSON(w, http.StatusOK, repo)
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	nums := make([]int, 0, len(s.pulls))
	for n := range s.pulls {
		nums = append(nums, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	var out []*gh.PullRequest
	for _, n := range nums {
		p := s.pulls[n]
		open := !p.Closed && !p.Merged
		if (state == "open" && !open) || (state == "closed" && open) {
			continue
		}
		// GitHub filters on head only in the form user:ref.
		if h := q.Get("head"); h != "" {
			owner, ref, ok := strings.Cut(h, ":")
			if ok && (owner != Owner || ref != p.Head) {
				continue
			}
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		out = append(out, s.pullJSON(p))
		s.computed(p)
	}
	from, to := page(w, r, len(out))
	writeJSON(w, http.StatusOK, append([]*gh.PullRequest{}, out[from:to]...))
}

func (s *Server) createPull(w http.ResponseWriter, r *http.Request) {
	var req gh.NewPullRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	head := req.GetHead()
	if _, ref, ok := strings.Cut(head, ":"); ok {
		head = ref
	}
	if _, ok := s.branches[req.GetBase()]; !ok {
		writeFault(w, Error(422, "Validation Failed", map[string]string{"resource": "PullRequest", "field": "base", "code": "invalid"}))
		return
	}
	if _, ok := s.branches[head]; !ok {
		if !s.opts.AutoBranch {
			writeFault(w, Error(422, "Validation Failed", map[string]string{"resource": "PullRequest", "field": "head", "code": "invalid"}))
			return
		}
		s.branches[head] = s.pushCommit(head, req.GetBase())
	}
	for _, p := range s.pulls {
		if p.Head == head && p.Base == req.GetBase() && !p.Closed && !p.Merged {
			writeFault(w, Error(422, "Validation Failed", map[string]string{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + Owner + ":" + head + "."}))
			return
		}
	}
	p := &pull{PullRequest: PullRequest{Number: s.nextNumber, Head: head, Base: req.GetBase(), HeadSHA: s.branches[head], Title: req.GetTitle(), Body: req.GetBody(), Draft: req.GetDraft()},
		createdAt: s.tick(), baseAt: s.branches[req.GetBase()]}
	p.updatedAt = p.createdAt
	s.nextNumber++
	s.pulls[p.Number] = p
	// GitHub answers mergeable null and starts computing it.
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
	s.computed(p)
}

func (s *Server) pull(w http.ResponseWriter, r *http.Request) *pull {
	n, _ := strconv.Atoi(r.PathValue("number"))
	p, ok := s.pulls[n]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"})
	}
	return p
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pull(w, r); p != nil {
		writeJSON(w, http.StatusOK, s.pullJSON(p))
		s.computed(p)
	}
}

func (s *Server) editPull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(w, r)
	if p == nil {
		return
	}
	if req.Title != nil {
		p.Title = *req.Title
	}
	if req.Body != nil {
		p.Body = *req.Body
	}
	s.touch(p)
	writeJSON(w, http.StatusOK, s.pullJSON(p))
}

func (s *Server) requestReviewers(w http.ResponseWriter, r *http.Request) {
	var req gh.ReviewersRequest
	json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(w, r)
	if p == nil {
		return
	}
	for _, login := range req.Reviewers {
		if !containsFold(p.Reviewers, login) {
			p.Reviewers = append(p.Reviewers, login)
		}
	}
	s.touch(p)
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func (s *Server) mergePull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CommitTitle string `json:"commit_title"`
		MergeMethod string `json:"merge_method"`
		SHA         string `json:"sha"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(w, r)
	if p == nil {
		return
	}
	if p.Merged || p.Closed {
		writeFault(w, Error(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
		return
	}
	if req.SHA != "" && req.SHA != p.HeadSHA {
		writeFault(w, Error(http.StatusConflict, "Head branch was modified. Review and try the merge again."))
		return
	}
	if f := s.methodRefusal(p, req.MergeMethod); f != nil {
		writeFault(w, *f)
		return
	}
	if p.busyMerges > 0 {
		p.busyMerges--
		p.mergeKnown = true // the work finishes right after
		writeFault(w, Error(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
		return
	}
	if f := s.refusal(p); f != nil {
		writeFault(w, *f)
		return
	}
	s.mergeLocked(p)
	p.MergeMethod = req.MergeMethod
	if p.MergeMethod == "" {
		p.MergeMethod = "merge"
	}
	writeJSON(w, http.StatusOK, &gh.PullRequestMergeResult{SHA: gh.String(p.MergeCommitSHA), Merged: gh.Bool(true), Message: gh.String("Pull Request successfully merged")})
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(w, r)
	if p == nil {
		return
	}
	all := s.reviews[p.Number]
	from, to := page(w, r, len(all))
	writeJSON(w, http.StatusOK, append([]*gh.PullRequestReview{}, all[from:to]...))
}

func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.runs[r.PathValue("ref")]
	if name := r.URL.Query().Get("check_name"); name != "" {
		all = slices.DeleteFunc(slices.Clone(all), func(c *gh.CheckRun) bool { return c.GetName() != name })
	}
	if r.URL.Query().Get("filter") != "all" { // "latest" is GitHub's default
		latest := map[string]*gh.CheckRun{}
		for _, c := range all {
			if old, ok := latest[c.GetName()]; !ok || old.GetID() < c.GetID() {
				latest[c.GetName()] = c
			}
		}
		all = all[:0:0]
		for _, c := range latest {
			all = append(all, c)
		}
		sort.Slice(all, func(i, j int) bool { return all[i].GetID() > all[j].GetID() })
	}
	from, to := page(w, r, len(all))
	writeJSON(w, http.StatusOK, &gh.ListCheckRunsResults{Total: gh.Int(len(all)), CheckRuns: append([]*gh.CheckRun{}, all[from:to]...)})
}

// listAnnotations answers GET /check-runs/{id}/annotations: the
// annotations a run's output carries, a page at a time (at most 50, as
// GitHub pages them); 404 for an unknown run.
func (s *Server) listAnnotations(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if !s.runExists(id) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/checks/runs#list-check-run-annotations"})
		return
	}
	all := s.annotations[id]
	from, to := page(w, r, len(all))
	writeJSON(w, http.StatusOK, append([]*gh.CheckRunAnnotation{}, all[from:to]...))
}

// runExists reports whether a check run has the ID id.
func (s *Server) runExists(id int64) bool {
	for _, runs := range s.runs {
		for _, c := range runs {
			if c.GetID() == id {
				return true
			}
		}
	}
	return false
}

// CheckRunOutput sets the output of the latest check run named name on
// sha, as its App does when it completes it: title, summary and text, and
// the annotations (their count becomes the output's annotations_count,
// and GET /check-runs/{id}/annotations lists them). It reports whether
// there was such a run.
func (s *Server) CheckRunOutput(sha, name, title, summary, text string, annotations ...*gh.CheckRunAnnotation) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.latestRun(sha, name)
	if c == nil {
		return false
	}
	c.Output = &gh.CheckRunOutput{Title: gh.String(title), Summary: gh.String(summary), Text: gh.String(text), AnnotationsCount: gh.Int(len(annotations)),
		AnnotationsURL: gh.String(fmt.Sprintf("%srepos/%s/%s/check-runs/%d/annotations", s.APIURL(), Owner, Repo, c.GetID()))}
	s.annotations[c.GetID()] = slices.Clone(annotations)
	return true
}

// latestRun returns the latest check run named name on sha, or nil.
func (s *Server) latestRun(sha, name string) *gh.CheckRun {
	var latest *gh.CheckRun
	for _, c := range s.runs[sha] {
		if c.GetName() == name && (latest == nil || c.GetID() > latest.GetID()) {
			latest = c
		}
	}
	return latest
}

func (s *Server) combinedStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := r.PathValue("ref")
	latest := map[string]*gh.RepoStatus{}
	for _, st := range s.statuses[sha] {
		latest[st.GetContext()] = st
	}
	var list []*gh.RepoStatus
	state := "success"
	for _, st := range latest {
		list = append(list, st)
		switch st.GetState() {
		case "failure", "error":
			state = "failure"
		case "pending":
			if state == "success" {
				state = "pending"
			}
		}
	}
	if len(list) == 0 {
		state = "pending" // GitHub's answer for a commit without statuses
	}
	sort.Slice(list, func(i, j int) bool { return list[i].GetID() < list[j].GetID() })
	from, to := page(w, r, len(list))
	writeJSON(w, http.StatusOK, &gh.CombinedStatus{State: gh.String(state), SHA: gh.String(sha), TotalCount: gh.Int(len(list)),
		Statuses: append([]*gh.RepoStatus{}, list[from:to]...), RepositoryURL: gh.String(s.APIURL() + "repos/" + Owner + "/" + Repo)})
}

func (s *Server) getProtection(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.protection[r.PathValue("branch")]
	switch {
	case s.protectionErr == http.StatusForbidden:
		writeFault(w, Error(http.StatusForbidden, "Resource not accessible by integration"))
	case ok:
		writeJSON(w, http.StatusOK, p)
	default:
		writeFault(w, Error(http.StatusNotFound, "Branch not protected"))
	}
}

func (s *Server) getRules(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.rules[r.PathValue("branch")]
	from, to := page(w, r, len(all))
	writeJSON(w, http.StatusOK, append([]json.RawMessage{}, all[from:to]...))
}

func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ref              string          `json:"ref"`
		Task             string          `json:"task"`
		AutoMerge        *bool           `json:"auto_merge"`
		RequiredContexts *[]string       `json:"required_contexts"`
		Payload          json.RawMessage `json:"payload"`
		Environment      string          `json:"environment"`
		Description      string          `json:"description"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	if req.AutoMerge == nil || *req.AutoMerge || req.RequiredContexts == nil || len(*req.RequiredContexts) != 0 {
		// The adapter must not let GitHub merge the base in or wait for contexts.
		writeFault(w, Error(http.StatusConflict, "Conflict: failed commit status checks"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.commits[req.Ref] {
		if _, ok := s.branches[req.Ref]; !ok {
			writeFault(w, Error(http.StatusUnprocessableEntity, "No ref found for: "+req.Ref))
			return
		}
	}
	id := s.id()
	d := &gh.Deployment{
		ID: gh.Int64(id), SHA: gh.String(req.Ref), Ref: gh.String(req.Ref), Task: gh.String(req.Task), Payload: req.Payload,
		Environment: gh.String(req.Environment), Description: gh.String(req.Description), Creator: user("lifecycle-bot"),
		CreatedAt: &gh.Timestamp{Time: s.tick()}, UpdatedAt: &gh.Timestamp{Time: s.now},
		URL:         gh.String(fmt.Sprintf("%srepos/%s/%s/deployments/%d", s.APIURL(), Owner, Repo, id)),
		StatusesURL: gh.String(fmt.Sprintf("%srepos/%s/%s/deployments/%d/statuses", s.APIURL(), Owner, Repo, id)),
	}
	s.deployments = append(s.deployments, d)
	writeJSON(w, http.StatusCreated, d)
}

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	var out []*gh.Deployment
	for i := len(s.deployments) - 1; i >= 0; i-- { // newest first
		d := s.deployments[i]
		if (q.Get("sha") == "" || q.Get("sha") == d.GetSHA()) && (q.Get("environment") == "" || q.Get("environment") == d.GetEnvironment()) {
			out = append(out, d)
		}
	}
	from, to := page(w, r, len(out))
	writeJSON(w, http.StatusOK, append([]*gh.Deployment{}, out[from:to]...))
}

func (s *Server) listDeploymentStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	all := s.depStatuses[id]
	out := make([]*gh.DeploymentStatus, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		out = append(out, all[i])
	}
	from, to := page(w, r, len(out))
	writeJSON(w, http.StatusOK, out[from:to])
}

// accessToken exchanges the App's JWT for an installation token, as
// GitHub's "Create an installation access token for an app" does.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	app := s.opts.App
	if app == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"})
		return
	}
	if err := verifyJWT(r.Header.Get("Authorization"), app, time.Now()); err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded (" + err.Error() + ")", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	if r.PathValue("id") != strconv.FormatInt(app.InstallationID, 10) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"})
		return
	}
	tok := "ghs_" + NewSHA()[:36]
	exp := time.Now().Add(app.TokenTTL).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.installTokens[tok] = exp
	s.mu.Unlock()
	// GitHub's documented response: the token, its expiry, its
	// permissions and which repositories it reaches.
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":      tok,
		"expires_at": exp.Format(time.RFC3339),
		"permissions": map[string]string{
			"contents": "write", "pull_requests": "write", "checks": "read", "statuses": "read", "deployments": "write", "metadata": "read",
		},
		"repository_selection": "selected",
	})
}

// verifyJWT checks an App's JWT as GitHub does: RS256, signed by the
// App's key, issued by its ID, issued in the past and expiring within ten
// minutes.
func verifyJWT(auth string, app *App, now time.Time) error {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer JWT")
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss string `json:"iss"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(raw, v) != nil {
			return fmt.Errorf("undecodable part %d", i)
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("undecodable signature")
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q, want RS256", header.Alg)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if app.PublicKey == nil || rsa.VerifyPKCS1v15(app.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return fmt.Errorf("signature does not match the App's key")
	}
	if claims.Iss != strconv.FormatInt(app.ID, 10) {
		return fmt.Errorf("iss %q, want the App's ID %d", claims.Iss, app.ID)
	}
	if iat, exp := time.Unix(claims.Iat, 0), time.Unix(claims.Exp, 0); iat.After(now.Add(time.Minute)) || !exp.After(now) || exp.Sub(iat) > 10*time.Minute {
		return fmt.Errorf("'Expiration time' claim ('exp') is too far in the future or in the past")
	}
	return nil
}

// InstallationTokens returns how many installation tokens the fake issued.
func (s *Server) InstallationTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.installTokens)
}

// What people, CI and deploy systems do at GitHub.

// Push adds a commit to a branch (making it if need be), moving the head
// of its open pull requests, and returns its SHA. The new head is taken
// to contain their base branches as they are now (a rebase): they are up
// to date and without conflicts. Where the base's rules dismiss stale
// approvals, the approvals of the old head are dismissed, as GitHub
// dismisses them. Open pull requests into branch have their
// mergeability computed anew.
func (s *Server) Push(branch string) string { return s.PushBy(branch, "") }

// PushBy is Push by login, the pusher GitHub's "require approval of the
// most recent reviewable push" holds apart.
func (s *Server) PushBy(branch, login string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := s.pushCommit(branch, "")
	s.moveBranch(branch, sha)
	for _, p := range s.pulls {
		if p.Head != branch || p.Closed || p.Merged {
			continue
		}
		p.HeadSHA, p.baseAt, p.conflicting, p.pusher = sha, s.branches[p.Base], false, login
		if s.rulesOf(p.Base).dismissStale {
			for _, r := range s.reviews[p.Number] {
				if r.GetState() == "APPROVED" && r.GetCommitID() != sha {
					r.State = gh.String("DISMISSED")
				}
			}
		}
		s.touch(p)
		s.headMoved(p)
	}
	s.advanceQueues()
	return sha
}

// MergeByHand merges pull request n as a person would in the web UI and
// returns the merge commit.
func (s *Server) MergeByHand(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	s.mergeLocked(p)
	return p.MergeCommitSHA
}

// mergeLocked merges p: its base moves to the merge commit. Callers hold
// s.mu.
func (s *Server) mergeLocked(p *pull) {
	s.merges++
	p.Merged, p.MergeCommitSHA = true, s.mergeCommit(s.branches[p.Base], p.HeadSHA, fmt.Sprintf("Merge pull request #%d from %s/%s", p.Number, Owner, p.Head))
	s.touch(p)
	s.moveBranch(p.Base, p.MergeCommitSHA)
}

// moveBranch points branch at sha. The open pull requests into it have
// their mergeability computed anew, unknown until read. Callers hold
// s.mu.
func (s *Server) moveBranch(branch, sha string) {
	s.branches[branch] = sha
	for _, p := range s.pulls {
		if p.Base == branch && !p.Closed && !p.Merged {
			p.busyMerges = s.opts.MergesRefusedWhileComputing
			if !s.opts.MergeabilityAtOnce {
				p.mergeKnown = false
			}
		}
	}
}

// ClosePullRequest closes pull request n without merging it.
func (s *Server) ClosePullRequest(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].Closed = true
	s.touch(s.pulls[n])
}

// Reopen reopens closed pull request n.
func (s *Server) Reopen(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].Closed = false
	s.touch(s.pulls[n])
}

// PullRequest returns what the fake holds of pull request n, and whether
// it exists.
func (s *Server) PullRequest(n int) (PullRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pulls[n]
	if !ok {
		return PullRequest{}, false
	}
	out := p.PullRequest
	out.Reviewers = append([]string(nil), p.Reviewers...)
	out.Labels = append([]string(nil), p.Labels...)
	return out, true
}

// PullRequests returns how many pull requests the repository has, in any
// state.
func (s *Server) PullRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pulls)
}

// Merges returns how many pull requests were merged, by the API, by
// hand, or by a ref update that made their head reachable from their
// base.
func (s *Server) Merges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.merges
}

// SetProtection sets the branch protection of branch, as GET
// /repos/{owner}/{repo}/branches/{branch}/protection answers it.
func (s *Server) SetProtection(branch string, p *gh.Protection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protection[branch] = p
}

// SetProtectionError sets the answer to reading the protection of a
// branch: 404 "Branch not protected" for a branch that has none set (the
// default), or 403 "Resource not accessible by integration" for every
// branch, which is what credentials without admin rights get; GitHub
// applies the protection set ([Server.SetProtection]) all the same.
func (s *Server) SetProtectionError(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protectionErr = status
}

// SetRules sets the ruleset rules that apply to branch.
func (s *Server) SetRules(branch string, rules []*gh.RepositoryRule) {
	raw := make([]json.RawMessage, len(rules))
	for i, r := range rules {
		raw[i], _ = json.Marshal(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[branch] = raw
}

// SetRulesJSON sets the ruleset rules that apply to branch as GitHub's
// JSON: one object per rule, {"type", "parameters", "ruleset_source_type",
// "ruleset_source", "ruleset_id"}, of any type, those go-github v60 does
// not know (merge_queue, code_scanning, ...) included.
func (s *Server) SetRulesJSON(branch string, rules ...string) {
	raw := make([]json.RawMessage, len(rules))
	for i, r := range rules {
		raw[i] = json.RawMessage(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[branch] = raw
}

// CheckRun records a new check run of GitHub Actions named name on sha
// (a first run, or a re-run: a run of its own, with a new ID);
// conclusion "" means in progress, else success, failure, neutral,
// cancelled, skipped, timed_out, action_required, stale or
// startup_failure. Check runs do not move a pull request's updatedAt.
func (s *Server) CheckRun(sha, name, conclusion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	c := &gh.CheckRun{ID: gh.Int64(id), Name: gh.String(name), HeadSHA: gh.String(sha), Status: gh.String("in_progress"),
		StartedAt: &gh.Timestamp{Time: s.tick()}, HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s/runs/%d", Owner, Repo, id)),
		App: &gh.App{ID: gh.Int64(15368), Slug: gh.String("github-actions"), Name: gh.String("GitHub Actions")}}
	if conclusion != "" {
		c.Status, c.Conclusion, c.CompletedAt = gh.String("completed"), gh.String(conclusion), &gh.Timestamp{Time: s.tick()}
	}
	su := s.suiteOf(sha, 15368, "github-actions", "GitHub Actions")
	c.CheckSuite = &gh.CheckSuite{ID: gh.Int64(su.id)}
	s.runs[sha] = append(s.runs[sha], c)
	s.settle(su)
	s.advanceQueues()
}

// CompleteCheckRun completes the latest check run named name on sha with
// conclusion, in place (the same run, as GitHub Actions completes a job's
// run: its ID and URL stay), and reports whether there was one in
// progress.
func (s *Server) CompleteCheckRun(sha, name, conclusion string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var latest *gh.CheckRun
	for _, c := range s.runs[sha] {
		if c.GetName() == name && (latest == nil || latest.GetID() < c.GetID()) {
			latest = c
		}
	}
	if latest == nil || latest.GetStatus() == "completed" {
		return false
	}
	latest.Status, latest.Conclusion, latest.CompletedAt = gh.String("completed"), gh.String(conclusion), &gh.Timestamp{Time: s.tick()}
	for _, su := range s.suites[sha] {
		if su.id == latest.GetCheckSuite().GetID() {
			s.settle(su)
		}
	}
	s.advanceQueues()
	return true
}

// suiteOf returns the check suite of app on sha, making it queued.
// Callers hold s.mu.
func (s *Server) suiteOf(sha string, appID int64, slug, name string) *suite {
	for _, su := range s.suites[sha] {
		if su.appSlug == slug {
			return su
		}
	}
	t := s.tick()
	su := &suite{id: s.id(), sha: sha, appID: appID, appSlug: slug, appName: name, status: "queued", createdAt: t, updatedAt: t}
	s.suites[sha] = append(s.suites[sha], su)
	return su
}

// runsOf returns the latest check run of each name of suite su.
func (s *Server) runsOf(su *suite) []*gh.CheckRun {
	latest := map[string]*gh.CheckRun{}
	for _, c := range s.runs[su.sha] {
		if c.GetCheckSuite().GetID() == su.id {
			if old, ok := latest[c.GetName()]; !ok || old.GetID() < c.GetID() {
				latest[c.GetName()] = c
			}
		}
	}
	out := make([]*gh.CheckRun, 0, len(latest))
	for _, c := range latest {
		out = append(out, c)
	}
	return out
}

// settle sets a suite's status from its runs, as GitHub does: in progress
// while one runs, completed once all have, failing if one failed.
// Callers hold s.mu.
func (s *Server) settle(su *suite) {
	runs := s.runsOf(su)
	if len(runs) == 0 {
		return
	}
	su.status, su.conclusion, su.updatedAt = "completed", "success", s.tick()
	for _, c := range runs {
		switch runState(c) {
		case stateRunning:
			su.status, su.conclusion = "in_progress", ""
			return
		case stateFailed:
			su.conclusion = "failure"
		}
	}
}

// CheckSuite records a check suite of the GitHub App appSlug on sha, as
// GitHub creates one for each App that checks a push, with status queued,
// in_progress or completed (then with conclusion success, failure,
// neutral, cancelled, skipped, timed_out, action_required or
// startup_failure). A suite may have no check runs: an App's suite is
// queued until its first run starts. Check runs of the App added later
// (with CheckRun for github-actions) set its status. It returns the
// suite's ID.
func (s *Server) CheckSuite(sha, appSlug, status, conclusion string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := appSlug
	var appID int64 = 90210
	if appSlug == "github-actions" {
		name, appID = "GitHub Actions", 15368
	}
	su := s.suiteOf(sha, appID, appSlug, name)
	su.status, su.conclusion, su.updatedAt = status, conclusion, s.tick()
	return su.id
}

// Status records a commit status (pending, success, failure or error) of
// context on sha; the latest of a context is the one GitHub shows.
// Statuses do not move a pull request's updatedAt.
func (s *Server) Status(sha, context, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tick()
	s.statuses[sha] = append(s.statuses[sha], &gh.RepoStatus{ID: gh.Int64(s.id()), State: gh.String(state), Context: gh.String(context),
		TargetURL: gh.String("https://ci.example.com/" + context), CreatedAt: &gh.Timestamp{Time: t}, UpdatedAt: &gh.Timestamp{Time: t}, Creator: user("ci-bot")})
	s.advanceQueues()
}

// Review records login's review of pull request n at commit sha; state is
// APPROVED, CHANGES_REQUESTED or COMMENTED. It returns the review's ID.
func (s *Server) Review(n int, login, state, sha string) int64 {
	return s.ReviewWithBody(n, login, state, sha, state+" by "+login)
}

// ReviewWithBody is Review with the review's text.
func (s *Server) ReviewWithBody(n int, login, state, sha, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id()
	s.reviews[n] = append(s.reviews[n], &gh.PullRequestReview{ID: gh.Int64(id), User: user(login), Body: gh.String(body),
		State: gh.String(state), CommitID: gh.String(sha), SubmittedAt: &gh.Timestamp{Time: s.tick()}, AuthorAssociation: gh.String(s.association(login)),
		HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s/pull/%d#pullrequestreview-%d", Owner, Repo, n, id))})
	if p, ok := s.pulls[n]; ok {
		s.touch(p)
	}
	return id
}

// Dismiss dismisses review id of pull request n; GitHub lists it as
// DISMISSED afterwards. The pull request's updatedAt does not move (see
// touch).
func (s *Server) Dismiss(n int, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reviews[n] {
		if r.GetID() == id {
			r.State = gh.String("DISMISSED")
		}
	}
}

// DeploymentStatus posts a status (queued, in_progress, success, failure,
// error, inactive) to deployment id, as a deploy system does.
func (s *Server) DeploymentStatus(id int64, state, environmentURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tick()
	s.depStatuses[id] = append(s.depStatuses[id], &gh.DeploymentStatus{ID: gh.Int64(s.id()), State: gh.String(state), EnvironmentURL: gh.String(environmentURL),
		Description: gh.String("deploy " + state), CreatedAt: &gh.Timestamp{Time: t}, UpdatedAt: &gh.Timestamp{Time: t}, Creator: user("deploy-bot")})
}

// DeploymentOf returns the newest deployment of sha in environment, or
// nil.
func (s *Server) DeploymentOf(sha, environment string) *gh.Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.deployments) - 1; i >= 0; i-- {
		if d := s.deployments[i]; d.GetSHA() == sha && d.GetEnvironment() == environment {
			return d
		}
	}
	return nil
}

// LastDeployment returns the newest deployment, or nil.
func (s *Server) LastDeployment() *gh.Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.deployments) == 0 {
		return nil
	}
	return s.deployments[len(s.deployments)-1]
}

// Webhooks.

// Delivery returns a delivery of the repository's webhook as GitHub POSTs
// it to path: the event's name in X-GitHub-Event, deliveryID in
// X-GitHub-Delivery, and X-Hub-Signature-256 signed with secret. Its URL
// has no host; send it with httptest or copy its header and body.
func Delivery(path, event, deliveryID, secret string, payload []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", deliveryID)
	req.Header.Set("X-GitHub-Hook-ID", "292430182")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, payload))
	return req
}

// Sign returns the X-Hub-Signature-256 of payload under secret.
func Sign(secret string, payload []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(payload)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// PullRequestPayload returns the payload of a pull_request event with
// action (synchronize, closed, reopened, edited, ready_for_review,
// converted_to_draft, labeled, ...) on pull request n as the fake holds
// it; edited carries a change of base.
func (s *Server) PullRequestPayload(n int, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	ev := &gh.PullRequestEvent{Action: gh.String(action), Number: gh.Int(n), PullRequest: s.pullJSON(p), Repo: s.repoJSON(), Sender: user("octocat")}
	switch action {
	case "synchronize":
		ev.Before, ev.After = gh.String(NewSHA()), gh.String(p.HeadSHA)
	case "edited":
		ev.Changes = &gh.EditChange{Base: &gh.EditBase{Ref: &gh.EditRef{From: gh.String("develop")}, SHA: &gh.EditSHA{From: gh.String(NewSHA())}}}
	}
	return mustJSON(ev)
}

// ReviewPayload returns the payload of a pull_request_review event with
// action (submitted, dismissed) of login's review of pull request n, with
// state approved, changes_requested, commented or dismissed.
func (s *Server) ReviewPayload(n int, action, login, state string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	return mustJSON(&gh.PullRequestReviewEvent{Action: gh.String(action), PullRequest: s.pullJSON(p), Repo: s.repoJSON(), Sender: user(login),
		Review: &gh.PullRequestReview{ID: gh.Int64(s.id()), User: user(login), State: gh.String(state), CommitID: gh.String(p.HeadSHA), SubmittedAt: &gh.Timestamp{Time: s.now}}})
}

// CheckRunPayload returns the payload of a check_run event, completed
// with conclusion, of the check run name on sha: the latest run of that
// name the fake holds, with its ID, URL and output, or else a run of a new
// ID.
func (s *Server) CheckRunPayload(sha, name, conclusion string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := &gh.CheckRun{ID: gh.Int64(s.id()), Name: gh.String(name), HeadSHA: gh.String(sha), Status: gh.String("completed"), Conclusion: gh.String(conclusion)}
	if c := s.latestRun(sha, name); c != nil {
		run.ID, run.HTMLURL, run.Output = c.ID, c.HTMLURL, c.Output
	}
	return mustJSON(&gh.CheckRunEvent{Action: gh.String("completed"), Repo: s.repoJSON(), Sender: user("github-actions[bot]"), CheckRun: run})
}

// StatusPayload returns the payload of a status event: a commit status of
// context with state (pending, success, failure, error) posted on sha.
func (s *Server) StatusPayload(sha, context, state string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now.UTC().Format(time.RFC3339)
	return mustJSON(map[string]any{
		"id": s.id(), "sha": sha, "name": Owner + "/" + Repo, "target_url": "https://ci.example.com/" + context, "context": context,
		"description": nil, "state": state, "commit": map[string]any{"sha": sha}, "branches": []any{},
		"created_at": now, "updated_at": now, "repository": s.repoJSON(), "sender": user("ci-bot"),
	})
}

// CheckSuitePayload returns the payload of a check_suite event with
// action (completed, requested, rerequested) of the check suite of
// appSlug on sha.
func (s *Server) CheckSuitePayload(sha, appSlug, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := map[string]any{"id": s.id(), "head_sha": sha, "status": "queued", "conclusion": nil, "pull_requests": []any{},
		"app": map[string]any{"id": 90210, "slug": appSlug, "name": appSlug}}
	for _, su := range s.suites[sha] {
		if su.appSlug == appSlug {
			cs["id"], cs["status"], cs["latest_check_runs_count"] = su.id, su.status, len(s.runsOf(su))
			if su.status == "completed" {
				cs["conclusion"] = su.conclusion
			}
		}
	}
	return mustJSON(map[string]any{"action": action, "check_suite": cs, "repository": s.repoJSON(), "sender": user(appSlug + "[bot]")})
}

// DeploymentStatusPayload returns the payload of a deployment_status event
// for deployment d, with its newest status, or state and environmentURL
// when it has none.
func (s *Server) DeploymentStatusPayload(d *gh.Deployment, state, environmentURL string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &gh.DeploymentStatus{ID: gh.Int64(s.id()), State: gh.String(state), EnvironmentURL: gh.String(environmentURL)}
	if all := s.depStatuses[d.GetID()]; len(all) > 0 {
		st = all[len(all)-1]
	}
	// go-github's DeploymentStatusEvent lacks the payload's "action".
	var ev map[string]any
	json.Unmarshal(mustJSON(&gh.DeploymentStatusEvent{Repo: s.repoJSON(), Sender: user("deploy-bot"), Deployment: d, DeploymentStatus: st}), &ev)
	ev["action"] = "created"
	return mustJSON(ev)
}

// PingPayload returns the payload of the ping event GitHub sends when a
// webhook is added.
func (s *Server) PingPayload() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return mustJSON(&gh.PingEvent{Zen: gh.String("Design for failure."), HookID: gh.Int64(292430182), Repo: s.repoJSON(), Sender: user("octocat")})
}
