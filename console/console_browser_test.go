//go:build unix

package console_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// hostileTitle is a task title that would run script if the page parsed
// it as HTML.
const hostileTitle = `<img src=x onerror=alert(1)>`

// consoleSite serves a Service's console at /console/ and its API at
// /api/ on a loopback address that stays the same across a restart of the
// Service, and records the requests the console gets.
type consoleSite struct {
	t     testing.TB
	svc   *lifecycle.Service
	store lifecycle.Store // svc's
	con   *console.Console
	addr  string // host:port
	srv   *http.Server

	mu   sync.Mutex
	reqs []*consoleRequest
	// before, when not nil, runs before the console serves each request.
	before func(r *http.Request)
	// rewrite, when not nil, rewrites the bodies of the console's
	// answers to GET board.
	rewrite func(body []byte) []byte
}

// consoleRequest is what the site saw of one request to the console.
type consoleRequest struct {
	method, path, query, lastEventID, fetchSite string
	idempotencyKey                              string
	csrf                                        bool // an X-CSRF-Token came with it
	cookie                                      bool // the session cookie came with it
	status                                      int  // 0 until answered
}

// serveConsole serves svc, whose Store is store, on a new loopback
// address.
func serveConsole(t testing.TB, svc *lifecycle.Service, store lifecycle.Store) *consoleSite {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &consoleSite{t: t, svc: svc, store: store, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(func() {
		s.srv.Close()
		s.con.Close()
	})
	return s
}

// serve serves the site's Service and its console on ln.
func (s *consoleSite) serve(ln net.Listener) {
	con, err := console.New(s.svc, s.store, console.Config{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.con = con
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", con))
	mux.Handle("/api/", http.StripPrefix("/api", s.svc.Handler()))
	s.srv = &http.Server{Handler: s.record(mux), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
}

// setBefore makes f run before the console serves each request.
func (s *consoleSite) setBefore(f func(r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// setRewrite makes f rewrite the bodies of the answers to GET board.
func (s *consoleSite) setRewrite(f func(body []byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rewrite = f
}

// url is the console's address.
func (s *consoleSite) url() string { return "http://" + s.addr + "/console/" }

// record records each request to the console and its status.
func (s *consoleSite) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/console/") {
			next.ServeHTTP(w, r)
			return
		}
		_, err := r.Cookie("lifecycle_console")
		req := &consoleRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, lastEventID: r.Header.Get("Last-Event-ID"),
			fetchSite: r.Header.Get("Sec-Fetch-Site"), idempotencyKey: r.Header.Get("Idempotency-Key"),
			csrf: r.Header.Get("X-CSRF-Token") != "", cookie: err == nil}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		before, rewrite := s.before, s.rewrite
		s.mu.Unlock()
		if before != nil {
			before(r)
		}
		if rewrite != nil && r.Method == http.MethodGet && r.URL.Path == "/console/board" {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code == http.StatusOK {
				body = rewrite(body)
			}
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.Header().Del("Content-Length")
			s.mu.Lock()
			req.status = rec.Code
			s.mu.Unlock()
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		next.ServeHTTP(&statusWriter{ResponseWriter: w, seen: func(status int) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if req.status == 0 {
				req.status = status
			}
		}}, r)
	})
}

// requests returns the requests to path recorded so far.
func (s *consoleSite) requests(path string) []consoleRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []consoleRequest
	for _, r := range s.reqs {
		if r.path == path {
			out = append(out, *r)
		}
	}
	return out
}

// restart closes the site's Service and server, as a stopping process
// would, then serves svc at the same address.
func (s *consoleSite) restart(svc *lifecycle.Service) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.svc.Close(ctx); err != nil {
		s.t.Fatalf("close the Service: %v", err)
	}
	if err := s.srv.Close(); err != nil {
		s.t.Fatalf("close the server: %v", err)
	}
	s.con.Close()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ln, err = net.Listen("tcp", s.addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.svc = svc
	s.serve(ln)
}

// statusWriter reports the status of a response, written by net/http or
// by a stream that took its connection over (200); it unwraps to the real
// writer, so that flushing and taking over go through.
type statusWriter struct {
	http.ResponseWriter
	seen func(status int)
}

func (w *statusWriter) WriteHeader(status int) {
	w.seen(status)
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.seen(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.seen(http.StatusOK)
	}
	return conn, rw, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// JavaScript expressions about the board.

// cardIn is true when the task's card is in the column of status.
func cardIn(taskID, status string) string {
	return fmt.Sprintf(`document.querySelector('.column[data-status=%q] .card[data-task-id=%q]') !== null`, status, taskID)
}

// cardCount is the number of cards on the board.
const cardCount = `document.querySelectorAll("#board .card").length`

// cardsPerTask maps each task ID on the board to its number of cards.
const cardsPerTask = `(() => {
  const m = {};
  for (const c of document.querySelectorAll("#board .card")) m[c.dataset.taskId] = (m[c.dataset.taskId] || 0) + 1;
  return m;
})()`

// signInByTyping signs in through the form, as a person would: the key
// typed into the password field, the button clicked.
func signInByTyping(p *cdpPage, key string) {
	p.t.Helper()
	p.waitFor(`!document.getElementById("sign-in").hidden`, testsupport.BrowserTimeout)
	p.typeInto("#key", key)
	p.click("#sign-in-button")
	p.waitFor(`!document.getElementById("board-view").hidden && document.getElementById("live").dataset.state === "live"`, testsupport.BrowserTimeout)
}

// unauthorizedAt accepts the failed loads of the console's own paths that
// answered 401 (the sign-in probe of a signed-out page, and the requests
// of a session that ended).
func unauthorizedAt(site *consoleSite) func(networkError) bool {
	return func(n networkError) bool {
		return strings.HasPrefix(n.URL, site.url()) && strings.Contains(n.Text, "status of 401")
	}
}

// checkNoDuplicates fails the test unless the board shows exactly one card
// for each of ids, and no other card.
func checkNoDuplicates(t *testing.T, p *cdpPage, ids []string) {
	t.Helper()
	counts := value[map[string]int](p, cardsPerTask)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("task %s has %d cards on the board, want 1", id, counts[id])
		}
	}
	if len(counts) != len(ids) {
		t.Errorf("the board shows %d tasks, want %d: %v", len(counts), len(ids), counts)
	}
}

// httpsPRs is the memory code host with the https pull request URLs of a
// real host, so that the page links them.
type httpsPRs struct {
	*memory.Adapter
	owner, repo string
}

func (a httpsPRs) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	pr, err := a.Adapter.EnsurePullRequest(ctx, req)
	pr.URL = fmt.Sprintf("https://github.com/%s/%s/pull/%d", a.owner, a.repo, pr.Number)
	return pr, err
}

func (a httpsPRs) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	pr, err := a.Adapter.PullRequest(ctx, ref)
	pr.URL = fmt.Sprintf("https://github.com/%s/%s/pull/%d", a.owner, a.repo, pr.Number)
	return pr, err
}

// boardEnv is a started Service whose projects web and api have code
// hosts with https pull requests, and docs one with memory:// URLs, which
// the page must not link; reviews need an approval, and ship deploys.
type boardEnv struct {
	*env
	web *memory.Adapter
	ids map[string]string // task ID by identifier
}

func newBoardEnv(t *testing.T) *boardEnv {
	t.Helper()
	web := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	api := memory.New(memory.Config{Owner: "acme", Repo: "api"})
	docs := memory.New(memory.Config{Owner: "acme", Repo: "handbook"})
	e := newEnv(t, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{
			{Project: "web", Adapter: httpsPRs{web, "acme", "web"}},
			{Project: "api", Adapter: httpsPRs{api, "acme", "api"}},
			{Project: "docs", Adapter: docs},
		}
		c.Deployer = &fakeDeployer{}
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}
	})
	e.Start()
	return &boardEnv{env: e, web: web, ids: make(map[string]string)}
}

// as returns a new key, with every scope, of actor in role.
func (b *boardEnv) as(actor string, role lifecycle.Role) string {
	return b.KeyAs(lifecycle.Actor{ID: actor, Role: role}, apitest.AllScopes()...)
}

// seed fills the board with a team's week: tasks in every status, pull
// requests, CI, reviews, blockers, a refused and a good ship. The clock
// moves on between changes, as it would.
func (b *boardEnv) seed() {
	b.T.Helper()
	steps := []time.Duration{3 * time.Minute, 7 * time.Minute, 2 * time.Minute, 11 * time.Minute, 5 * time.Minute}
	n := 0
	keys := map[string]string{}
	key := func(actor string, role lifecycle.Role) string {
		if keys[actor] == "" {
			keys[actor] = b.as(actor, role)
		}
		return keys[actor]
	}
	do := func(actor string, role lifecycle.Role, method, path string, body any, idem string, want int) map[string]any {
		b.T.Helper()
		b.Clock.Advance(steps[n%len(steps)])
		n++
		var h http.Header
		if idem != "" {
			h = http.Header{"Idempotency-Key": {idem}}
		}
		return b.Call(apitest.Request{Method: method, Path: path, Key: key(actor, role), Body: body, Header: h}, want)
	}
	create := func(ident, title, priority, project, agent string) string {
		body := map[string]any{
			"identifier": ident, "title": title, "priority": priority,
			"description":        "Seeded for the console's screenshots.",
			"acceptanceCriteria": []string{"the change is covered by a test"},
			"links":              map[string]any{"issue": "https://issues.example.com/" + ident, "parentIssue": nil},
			"context":            map[string]any{"project": project, "goal": title},
		}
		if agent != "" {
			body["assigneeAgentId"] = agent
		}
		id := do("ops-alice", lifecycle.RoleUser, "POST", "/tasks", body, "", http.StatusCreated)["data"].(map[string]any)["id"].(string)
		b.ids[ident] = id
		return id
	}
	start := func(id, agent string) {
		do(agent, lifecycle.RoleAgent, "POST", "/tasks/"+id+"/start", nil, "", http.StatusOK)
	}
	submit := func(id, agent, summary string) string {
		body := map[string]any{
			"summary":     summary,
			"pullRequest": map[string]any{"reviewers": []string{"dana", "lee"}},
			"checks":      []map[string]any{{"name": "unit", "status": "passed"}},
		}
		data := do(agent, lifecycle.RoleAgent, "POST", "/tasks/"+id+"/submit", body, fmt.Sprintf("seed-submit-%d", n), http.StatusAccepted)["data"].(map[string]any)
		sha, _ := data["headSha"].(string)
		return sha
	}
	checks := func(id, sha string, statuses ...string) {
		var list []map[string]any
		for i, name := range []string{"build", "e2e", "lint"}[:len(statuses)] {
			list = append(list, map[string]any{"name": name, "status": statuses[i], "url": fmt.Sprintf("https://ci.example.com/runs/%d", 4100+n+i)})
		}
		do("ci-bot", lifecycle.RoleSystem, "POST", "/tasks/"+id+"/checks", map[string]any{"headSha": sha, "checks": list}, "", http.StatusOK)
	}
	review := func(id, reviewer, outcome, text string) {
		do(reviewer, lifecycle.RoleReviewer, "POST", "/tasks/"+id+"/reviews", map[string]any{"outcome": outcome, "body": text}, "", http.StatusCreated)
	}
	block := func(id, agent, reason, action string) {
		do(agent, lifecycle.RoleAgent, "POST", "/tasks/"+id+"/blocker", map[string]any{"reason": reason, "actionRequired": action,
			"resumeInstructions": "Resume the run where it stopped.", "sourceRunId": fmt.Sprintf("run_%d", 800+n)}, "", http.StatusOK)
	}
	ship := func(id, sha, mode, environment string) {
		data := do("ops-alice", lifecycle.RoleUser, "POST", "/tasks/"+id+"/ship", apitest.ShipBody(mode, environment, sha), fmt.Sprintf("seed-ship-%d", n), http.StatusAccepted)["data"].(map[string]any)
		b.waitShip(data["operationId"].(string))
	}

	// Shipped to production after the host refused the first merge: the
	// timeline of the screenshot.
	id := create("WEB-142", "Keep the query string on the login redirect", "high", "web", "web-agent-1")
	start(id, "web-agent-1")
	submit(id, "web-agent-1", "Kept the query string through the OAuth round trip and added a regression test.")
	review(id, "dana", "changes_requested", "Please cover an empty query string (\"/login?\") too.")
	start(id, "web-agent-1")
	sha := submit(id, "web-agent-1", "Covered the empty query string; /login? now redirects to /home.")
	checks(id, sha, "passed", "passed", "skipped")
	review(id, "dana", "approved", "Looks good. Thanks for the extra case.")
	b.web.FailNext(memory.OpMerge, &lifecycle.RefusedError{Message: "Pull Request is not mergeable: the base branch requires linear history"})
	ship(id, sha, "merge_and_deploy", "production")
	// The host's refusal holds ship back until the host tells of a change:
	// the rule was lifted, and GitHub says the pull request was edited.
	task, err := b.Svc.Task(b.T.Context(), id)
	if err != nil || task.PRNumber == nil {
		b.T.Fatalf("task %s: %+v, %v", id, task, err)
	}
	if err := b.Svc.ApplyProviderEvent(b.T.Context(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: "seed-rule-lifted", Kind: lifecycle.ProviderPullRequestEdited,
		PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: *task.PRNumber}}); err != nil {
		b.T.Fatal(err)
	}
	ship(id, sha, "merge_and_deploy", "production")

	id = create("WEB-140", "Fix the 404 on the password reset page", "critical", "web", "web-agent-2")
	start(id, "web-agent-2")
	sha = submit(id, "web-agent-2", "The reset route lost its trailing slash in the router upgrade; restored it.")
	checks(id, sha, "passed", "passed")
	review(id, "lee", "approved", "")
	ship(id, sha, "merge_only", "staging")

	id = create("API-75", "Document the pagination cursors", "low", "api", "api-agent-1")
	start(id, "api-agent-1")
	sha = submit(id, "api-agent-1", "Documented nextCursor and its lifetime in the API reference.")
	checks(id, sha, "passed")
	review(id, "lee", "approved", "Clear, thanks.")
	ship(id, sha, "merge_and_deploy", "staging")

	id = create("WEB-150", "Paginate the audit log export", "high", "web", "web-agent-2")
	start(id, "web-agent-2")
	sha = submit(id, "web-agent-2", "The export streams pages of 1,000 rows instead of loading the whole log.")
	checks(id, sha, "passed", "passed", "passed")
	review(id, "dana", "approved", "Ship it.")

	id = create("WEB-151", "Dark mode for the settings page", "low", "web", "web-agent-1")
	start(id, "web-agent-1")
	sha = submit(id, "web-agent-1", "Added the dark palette to the settings page and its toggles.")
	checks(id, sha, "passed", "failed")

	id = create("API-77", "Rate-limit the token endpoint", "critical", "api", "api-agent-1")
	start(id, "api-agent-1")
	sha = submit(id, "api-agent-1", "Added a fixed-window limit of 10 requests per minute per client.")
	checks(id, sha, "running")
	review(id, "dana", "changes_requested", "Use a sliding window: a fixed one lets 20 requests through at the boundary.")

	id = create("DOC-12", "Explain the ship preconditions in the handbook", "medium", "docs", "docs-agent")
	start(id, "docs-agent")
	submit(id, "docs-agent", "New handbook page on what ship checks, in order.")

	id = create("API-80", "Retry webhook deliveries with jitter", "medium", "api", "api-agent-1")
	start(id, "api-agent-1")
	id = create("WEB-153", "Upgrade the charting library to v5", "medium", "web", "web-agent-2")
	start(id, "web-agent-2")

	id = create("API-81", "Rotate the signing keys without downtime", "high", "api", "api-agent-1")
	start(id, "api-agent-1")
	block(id, "api-agent-1", "missing_credentials", "Add the KMS_KEY_ID secret to the api repository.")
	id = create("WEB-160", "Fix the flaky checkout end-to-end test", "medium", "web", "web-agent-1")
	start(id, "web-agent-1")
	block(id, "web-agent-1", "needs_decision", "Decide whether the test may retry a declined payment once.")

	id = create("WEB-139", "Move the avatars to the new CDN", "medium", "web", "web-agent-1")
	do("ops-alice", lifecycle.RoleUser, "POST", "/tasks/"+id+"/cancel", map[string]any{"reason": "The CDN contract was not renewed."}, "", http.StatusOK)

	create("WEB-161", "Add a CSV import for contacts", "medium", "web", "")
	create("WEB-162", "Localize the onboarding emails", "low", "web", "web-agent-2")
	create("API-83", "Remove the legacy v1 search endpoint", "medium", "api", "")
	create("API-84", "Cache the pricing table for five minutes", "high", "api", "api-agent-1")
}

// screenshotDirs are where screenshots go: the test's temporary directory
// and, when LIFECYCLE_CONSOLE_SCREENSHOTS names one, that directory too.
func screenshotDirs(t *testing.T) []string {
	dirs := []string{t.TempDir()}
	if d := os.Getenv("LIFECYCLE_CONSOLE_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	return dirs
}

// TestConsoleBrowser drives the console in headless Chromium: the page
// loads without an error, the operator signs in by typing a key, the
// board shows every seeded task in its column with its details, a card's
// timeline opens and follows its task, a submit moves a card to review
// within a second, a hostile title stays text, the filter narrows the
// board, and a 401 (here: a revoked key) returns to the sign-in form.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	b := newBoardEnv(t)
	b.seed()
	ops := b.as("ops-alice", lifecycle.RoleUser)
	site := serveConsole(t, b.Svc, b.Served)
	p := br.newPage(br.newContext())

	p.navigate(site.url())
	signInByTyping(p, ops)
	p.waitFor(cardCount+fmt.Sprintf(" === %d", len(b.ids)), testsupport.BrowserTimeout)
	// Loading the page shows no error but the sign-in probe's 401.
	p.checkProblems(unauthorizedAt(site))
	if got := p.networkErrors(); len(got) != 1 || !strings.HasSuffix(got[0].URL, "/console/session") {
		t.Errorf("failed loads %v, want only the sign-in probe's 401", got)
	}

	// The key was sent once and is kept nowhere the page can reach.
	if kept := value[bool](p, fmt.Sprintf(`document.getElementById("key").value !== "" || localStorage.length > 0 ||
		sessionStorage.length > 0 || document.cookie !== "" || location.href.includes(%q) ||
		document.documentElement.outerHTML.includes(%q)`, ops, ops)); kept {
		t.Error("the page kept the API key (in the field, storage, a cookie, the URL or the DOM)")
	}
	if who := value[string](p, `document.getElementById("who-actor").textContent`); who != "ops-alice (user)" {
		t.Errorf("signed in as %q, want ops-alice (user)", who)
	}

	// Each task once, in the column of its status, newest first, with its
	// count; a pull request linked only when it is http(s).
	byStatus := map[string][]map[string]any{}
	for _, id := range b.ids {
		task := b.Task(id)
		byStatus[task["status"].(string)] = append(byStatus[task["status"].(string)], task)
	}
	for _, status := range []string{"todo", "in_progress", "in_review", "blocked", "done", "cancelled"} {
		tasks := byStatus[status]
		sort.Slice(tasks, func(i, j int) bool {
			ti, tj := tasks[i]["updatedAt"].(string), tasks[j]["updatedAt"].(string)
			return ti > tj || ti == tj && tasks[i]["id"].(string) < tasks[j]["id"].(string)
		})
		var want []string
		for _, task := range tasks {
			want = append(want, task["id"].(string))
		}
		got := value[[]string](p, fmt.Sprintf(`[...document.querySelectorAll('.column[data-status=%q] .card')].map((c) => c.dataset.taskId)`, status))
		if !slices.Equal(got, want) {
			t.Errorf("column %s shows %v, want %v", status, got, want)
		}
		if count := value[string](p, fmt.Sprintf(`document.querySelector('.column[data-status=%q] .count').textContent`, status)); count != fmt.Sprint(len(want)) {
			t.Errorf("column %s counts %q, want %d", status, count, len(want))
		}
	}
	checkNoDuplicates(t, p, slices.Collect(maps.Values(b.ids)))
	type cardView struct {
		Ident, Title, Assignee, PR, Href, Rel, Target, SHA, Badges, Blocker string
	}
	card := func(ident string) cardView {
		return value[cardView](p, fmt.Sprintf(`(() => {
  const c = document.querySelector('.card[data-task-id=%q]');
  const text = (sel) => { const e = c.querySelector(sel); return e ? e.textContent : ""; };
  const a = c.querySelector("a.pr");
  return {Ident: text(".ident"), Title: text(".card-title"), Assignee: text(".assignee"), PR: a ? a.textContent : "",
    Href: a ? a.href : "", Rel: a ? a.rel : "", Target: a ? a.target : "", SHA: text(".sha"),
    Badges: [...c.querySelectorAll(".badge")].map((b) => b.textContent).join(", "), Blocker: text(".blocker")};
})()`, b.ids[ident]))
	}
	web150 := b.Task(b.ids["WEB-150"])
	if got, want := card("WEB-150"), (cardView{Ident: "WEB-150", Title: "Paginate the audit log export", Assignee: "web-agent-2",
		PR: fmt.Sprintf("PR #%v", web150["prNumber"]), Href: web150["prUrl"].(string), Rel: "noopener noreferrer", Target: "_blank",
		SHA: web150["headSha"].(string)[:7], Badges: "CI passed, approved"}); got != want {
		t.Errorf("card WEB-150 = %+v, want %+v", got, want)
	}
	if got := card("API-81"); got.Blocker != "Blocked: missing_credentials" || got.PR != "" {
		t.Errorf("card API-81 = %+v, want its blocker", got)
	}
	if got := card("API-77"); got.Badges != "CI running, changes requested" {
		t.Errorf("card API-77 badges %q", got.Badges)
	}
	if got := card("DOC-12"); got.PR != "" || got.SHA == "" || got.Badges != "review pending" {
		t.Errorf("card DOC-12 = %+v: its memory:// pull request must not be linked", got)
	}
	if got := card("WEB-161"); got.Assignee != "unassigned" {
		t.Errorf("card WEB-161 assignee %q, want unassigned", got.Assignee)
	}

	dirs := screenshotDirs(t)
	for _, d := range dirs {
		p.screenshot(filepath.Join(d, "console-board.png"))
	}

	// The timeline of a task: its events in order, its submissions with
	// their reviews, CI, and the ship operations, the refused one with
	// its error.
	shipped := b.ids["WEB-142"]
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .card-title`, shipped))
	events := b.EventsOf(shipped)
	p.waitFor(fmt.Sprintf(`!document.getElementById("timeline").hidden && document.querySelectorAll("#timeline .event").length === %d`, len(events)), testsupport.BrowserTimeout)
	var wantTypes []string
	for _, ev := range events {
		wantTypes = append(wantTypes, ev["type"].(string)+" "+ev["data"].(map[string]any)["summary"].(string))
	}
	if got := value[[]string](p, `[...document.querySelectorAll("#timeline .event")].map((e) => e.querySelector(".event-type").textContent + " " + e.querySelector(".event-summary").textContent)`); !slices.Equal(got, wantTypes) {
		t.Errorf("timeline events\n%q\nwant\n%q", got, wantTypes)
	}
	type timelineView struct {
		Title       string
		Submissions int
		Reviews     []string
		Checks      []string
		Ships       []string
	}
	tl := value[timelineView](p, `(() => {
  const q = (sel) => [...document.querySelectorAll("#timeline " + sel)];
  return {Title: document.getElementById("timeline-title").textContent, Submissions: q(".submission").length,
    Reviews: q(".review").map((r) => r.textContent), Checks: q(".ci tbody tr").map((r) => r.textContent),
    Ships: q(".ship").map((s) => s.textContent)};
})()`)
	if tl.Title != "WEB-142: Keep the query string on the login redirect" || tl.Submissions != 2 || len(tl.Reviews) != 2 ||
		!strings.Contains(tl.Reviews[0], "changes requested by dana (reviewer)") || !strings.Contains(tl.Reviews[0], `"/login?"`) ||
		!strings.Contains(tl.Reviews[1], "approved by dana (reviewer)") || !slices.Contains(tl.Checks, "buildpassedreported") || !slices.Contains(tl.Checks, "lintskippedreported") {
		t.Errorf("timeline %+v", tl)
	}
	if len(tl.Ships) != 2 || !strings.Contains(tl.Ships[0], "failed") || !strings.Contains(tl.Ships[0], "merge_failed") ||
		!strings.Contains(tl.Ships[0], "Pull Request is not mergeable") || !strings.Contains(tl.Ships[1], "succeeded") ||
		!strings.Contains(tl.Ships[1], "merge and deploy to production") {
		t.Errorf("timeline ship operations %q", tl.Ships)
	}
	for _, d := range dirs {
		p.screenshot(filepath.Join(d, "console-timeline.png"))
	}
	p.click("#timeline-close")
	p.waitFor(`document.getElementById("timeline").hidden`, testsupport.BrowserTimeout)

	// An open timeline follows its task.
	darkMode := b.ids["WEB-151"]
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .card-title`, darkMode))
	p.waitFor(`document.querySelectorAll("#timeline .event").length > 0`, testsupport.BrowserTimeout)
	b.Call(apitest.Request{Method: "POST", Path: "/tasks/" + darkMode + "/reviews", Key: b.as("lee", lifecycle.RoleReviewer),
		Body: map[string]any{"outcome": "commented", "body": "The toggle's contrast is too low in dark mode."}}, http.StatusCreated)
	p.waitFor(`[...document.querySelectorAll("#timeline .review")].some((r) => r.textContent.includes("contrast is too low"))`, 5*time.Second)
	p.click("#timeline-close")

	// A submit made through the API moves its card to review within a second.
	charting := b.ids["WEB-153"]
	began := time.Now()
	b.SubmitOK(charting, "console-submit-charting", apitest.SubmitBody())
	if !p.await(cardIn(charting, "in_review"), 5*time.Second) {
		t.Fatal("the submitted task's card did not move to in review")
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("the card moved to in review %s after the submit began, want at most 1s", took)
	} else {
		t.Logf("the card moved to in review %s after the submit began", took.Round(time.Millisecond))
	}
	if n := value[string](p, `document.querySelector('.column[data-status="in_review"] .count').textContent`); n != fmt.Sprint(len(byStatus["in_review"])+1) {
		t.Errorf("in review counts %s after the submit", n)
	}

	// A hostile title is text: no element is made from it, no dialog opens.
	hostile := apitest.TaskBody("EVIL-1")
	hostile["title"] = hostileTitle
	evil := b.CreateTask(hostile)["id"].(string)
	p.waitFor(cardIn(evil, "todo"), 5*time.Second)
	if got := value[string](p, fmt.Sprintf(`document.querySelector('.card[data-task-id=%q] .card-title').textContent`, evil)); got != hostileTitle {
		t.Errorf("the hostile card's title reads %q, want %q", got, hostileTitle)
	}
	time.Sleep(200 * time.Millisecond) // an image's onerror would have run by now
	if n := value[int](p, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("the document has %d img elements", n)
	}
	b.ids["EVIL-1"] = evil

	// The filter narrows the board by identifier, title or assignee.
	p.typeInto("#filter", "rate-limit")
	p.waitFor(cardCount+" === 1", 5*time.Second)
	if got := value[string](p, `document.querySelector("#board .card .ident").textContent + " " + document.querySelector('.column[data-status="in_review"] .count').textContent`); got != fmt.Sprintf("API-77 1 of %d", len(byStatus["in_review"])+1) {
		t.Errorf("filtered board shows %q", got)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const f = document.getElementById("filter"); f.value = "web-agent-2"; f.dispatchEvent(new Event("input")); })()`}, nil)
	agent2 := 0
	for _, id := range b.ids {
		if a, _ := b.Task(id)["assignee"].(map[string]any); a != nil && a["id"] == "web-agent-2" {
			agent2++
		}
	}
	p.waitFor(fmt.Sprintf(`[...document.querySelectorAll("#board .card .assignee")].every((a) => a.textContent === "web-agent-2") && %s === %d`, cardCount, agent2), 5*time.Second)
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); })()`}, nil)
	p.waitFor(cardCount+fmt.Sprintf(" === %d", len(b.ids)), 5*time.Second)
	checkNoDuplicates(t, p, slices.Collect(maps.Values(b.ids)))

	// A 401 anywhere returns to the sign-in form: the key is revoked, and
	// the next request of the page (opening a timeline) is refused.
	keys, err := b.Svc.APIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Actor.ID == "ops-alice" && k.RevokedAt == nil {
			if _, err := b.Svc.RevokeAPIKey(t.Context(), k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .card-title`, charting))
	p.waitFor(`!document.getElementById("sign-in").hidden && document.getElementById("board-view").hidden && `+cardCount+` === 0 &&
		document.getElementById("sign-in-error").textContent.includes("revoked")`, 10*time.Second)
	p.checkProblems(unauthorizedAt(site))
}

// TestConsoleBrowserSignOut: the sign-out button ends the session (the
// console refuses its cookie afterwards) and shows the form again; signing
// in again, without a reload, brings the live board back.
func TestConsoleBrowserSignOut(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t)
	e.CreateTask(apitest.TaskBody("OUT-1"))
	site := serveConsole(t, e.Svc, e.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 1", testsupport.BrowserTimeout)
	p.click("#sign-out")
	p.waitFor(`!document.getElementById("sign-in").hidden && `+cardCount+` === 0 && document.getElementById("live").dataset.state === "off"`, 5*time.Second)
	if got := value[int](p, `fetch("board").then((r) => r.status)`); got != http.StatusUnauthorized {
		t.Errorf("GET board after signing out = %d, want 401", got)
	}
	// A reload stays signed out; signing in again shows the board again,
	// live.
	p.navigate(site.url())
	p.waitFor(`!document.getElementById("sign-in").hidden`, testsupport.BrowserTimeout)
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 1", 5*time.Second)
	id := e.CreateTask(apitest.TaskBody("OUT-2"))["id"].(string)
	p.waitFor(cardIn(id, "todo")+" && "+cardCount+" === 2", 5*time.Second)
	p.click("#sign-out")
	p.waitFor(`!document.getElementById("sign-in").hidden`, 5*time.Second)
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 2", 5*time.Second)
	p.checkProblems(unauthorizedAt(site))
}

// TestConsoleBrowserResumesAfterRestart: the Service and its server stop
// and a new Service on the same store serves the same address. The page's
// EventSource comes back by itself with Last-Event-ID; the change made
// while it was away and one made after show, and no card is doubled.
func TestConsoleBrowserResumesAfterRestart(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t)
	first := e.Svc
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if e.Svc == first { // not restarted: the test failed before
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			first.Close(ctx)
		}
	})
	var ids []string
	for i := range 4 {
		ids = append(ids, e.CreateTask(apitest.TaskBody(fmt.Sprintf("RST-%d", i)))["id"].(string))
	}
	site := serveConsole(t, e.Svc, e.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 4", testsupport.BrowserTimeout)

	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + ids[0] + "/start", Key: e.Admin}, http.StatusOK)
	p.waitFor(cardIn(ids[0], "in_progress"), 5*time.Second)
	evs := e.Events()
	lastBefore := evs[len(evs)-1].ID
	streams := len(site.requests("/console/api/task-events/stream"))

	// The new Service, on the same store, is the env's from now on.
	svc, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	apitest.StartService(t, t.Context(), svc)
	site.restart(svc)
	e.Svc = svc
	api := http.NewServeMux()
	api.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	e.Host = api
	// Changed while the page is away: it reconnects after the stream's
	// retry delay (5 s).
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + ids[1] + "/start", Key: e.Admin}, http.StatusOK)
	ids = append(ids, e.CreateTask(apitest.TaskBody("RST-4"))["id"].(string))
	p.waitFor(cardIn(ids[1], "in_progress")+" && "+cardIn(ids[4], "todo"), 30*time.Second)

	after := site.requests("/console/api/task-events/stream")[streams:]
	if len(after) == 0 || after[0].lastEventID != lastBefore || after[0].status != http.StatusOK {
		t.Errorf("stream requests after the restart %+v, want the first with Last-Event-ID %s, answered 200", after, lastBefore)
	}
	p.waitFor(`document.getElementById("live").dataset.state === "live"`, 5*time.Second)

	// Changed after the page is back.
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + ids[2] + "/cancel", Key: e.Admin}, http.StatusOK)
	p.waitFor(cardIn(ids[2], "cancelled"), 5*time.Second)
	checkNoDuplicates(t, p, ids)
	if got := value[string](p, `[...document.querySelectorAll(".column .count")].map((c) => c.textContent).join(" ")`); got != "2 2 0 0 0 1" {
		t.Errorf("column counts %q, want 2 2 0 0 0 1", got)
	}
	// The only failed loads are the console's own, while it was down.
	p.checkProblems(func(n networkError) bool { return strings.HasPrefix(n.URL, site.url()) })
}

// otherSitePage is a page of another site that tries to read the board
// with the browser's cookies and shows what it got.
const otherSitePage = `<!doctype html>
<meta charset="utf-8">
<title>another site</title>
<pre id="result"></pre>
<script>
fetch(%q, {credentials: "include"})
  .then((r) => r.text().then((body) => "status " + r.status + ": " + body))
  .catch((e) => "fetch failed: " + e.name + ": " + e.message)
  .then((s) => { document.getElementById("result").textContent = s; });
</script>
`

// TestConsoleBrowserOtherSiteGetsNoBoard: a page of another site, in the
// browser where the operator is signed in, asks for the board with
// credentials. The SameSite=Strict cookie is not sent, so the console
// refuses the request, and the page reads nothing.
func TestConsoleBrowserOtherSiteGetsNoBoard(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t)
	secret := apitest.TaskBody("SITE-1")
	secret["title"] = "Rotate the production database password"
	e.CreateTask(secret)
	site := serveConsole(t, e.Svc, e.Served)
	profile := br.newContext()
	p := br.newPage(profile)
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 1", testsupport.BrowserTimeout)
	if got := value[int](p, `fetch("board").then((r) => r.status)`); got != http.StatusOK {
		t.Fatalf("the console's own page reads the board with %d, want 200", got)
	}

	// "localhost" and "127.0.0.1" are different sites.
	boardURL := site.url() + "board"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, otherSitePage, boardURL)
	}))
	t.Cleanup(other.Close)
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	evil := br.newPage(profile)
	evil.navigate("http://localhost:" + port + "/")
	evil.waitFor(`document.getElementById("result").textContent !== ""`, testsupport.BrowserTimeout)
	saw := value[string](evil, `document.getElementById("result").textContent`)
	if strings.Contains(saw, "status 200") || strings.Contains(saw, "Rotate the production") {
		t.Errorf("the other site's page read the board: %s", saw)
	}

	var got []consoleRequest
	for _, r := range site.requests("/console/board") {
		if r.fetchSite == "cross-site" {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Fatalf("the console got %d cross-site board requests (%+v), want 1", len(got), site.requests("/console/board"))
	}
	if got[0].cookie || got[0].status != http.StatusUnauthorized {
		t.Errorf("the cross-site board request came with the cookie: %v, answered %d; want no cookie, 401", got[0].cookie, got[0].status)
	}
	t.Logf("the other site's page saw %q; the console got its request without the session cookie and answered %d", saw, got[0].status)
	p.checkProblems(unauthorizedAt(site))
}

// TestConsoleBrowserWebhooks: the webhooks view lists a subscription with
// its deliveries; its controls replay from a sequence (the receiver gets
// the events again, the page shows the 202), show a refusal's message,
// retry a failed delivery and enable a disabled subscription.
func TestConsoleBrowserWebhooks(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	rc := apitest.NewReceiver(t)
	e := newHookEnv(t, rc, oneAtATime)
	sub := e.Subscribe(subBody(rc.URL("/hooks")))
	subID := sub["id"].(string)
	var sent []string
	for i := range 3 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("HOOK-%d", i)))
		sent = append(sent, envelopeOf(t, rc.Next()).ID)
	}
	e.WaitDeliveries(subID, 3)

	site := serveConsole(t, e.Svc, e.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.click("#nav-webhooks")
	subSel := fmt.Sprintf(`article[data-subscription-id=%q]`, subID)
	p.waitFor(fmt.Sprintf(`document.querySelectorAll('%s tbody tr').length === 3`, subSel), testsupport.BrowserTimeout)
	if got := value[string](p, fmt.Sprintf(`document.querySelector('%s').textContent`, subSel)); !strings.Contains(got, rc.URL("/hooks")) ||
		!strings.Contains(got, "active") || !strings.Contains(got, "task.updated, task.reviewed, task.shipped, task.awaiting_user, task.merge_queue") ||
		!strings.Contains(got, "succeeded") || strings.Contains(got, "Retry now") {
		t.Errorf("the subscription reads %q", got)
	}

	// Replay from sequence 0: every event again, in order.
	first := e.Events()[0].Sequence
	p.typeInto(fmt.Sprintf(`%s .seq-input`, subSel), fmt.Sprint(first-1))
	p.click(subSel + " button.replay")
	p.waitFor(fmt.Sprintf(`document.querySelector('%s .result').textContent.startsWith("202 Accepted")`, subSel), 5*time.Second)
	for i, want := range sent {
		d := rc.Next()
		if got := envelopeOf(t, d).ID; got != want {
			t.Errorf("replayed delivery %d carries %s, want %s", i, got, want)
		}
	}
	p.waitFor(fmt.Sprintf(`document.querySelectorAll('%s tbody tr').length === 6`, subSel), 10*time.Second)

	// A refusal shows the API's message.
	p.must("Runtime.evaluate", map[string]any{"expression": fmt.Sprintf(`document.querySelector('%s .seq-input').value = ""`, subSel)}, nil)
	p.typeInto(subSel+" .seq-input", "999999")
	p.click(subSel + " button.replay")
	p.waitFor(fmt.Sprintf(`document.querySelector('%s .result').textContent.startsWith("400 validation_error")`, subSel), 5*time.Second)
	rc.Quiet(100 * time.Millisecond)

	// A failed delivery, retried now.
	rc.SetRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	e.CreateTask(apitest.TaskBody("HOOK-3"))
	failed := envelopeOf(t, rc.Next()).ID
	rc.SetRespond(nil)
	p.click("#webhooks-refresh")
	retrySel := fmt.Sprintf(`%s tr[data-event-id=%q] button.retry`, subSel, failed)
	p.waitFor(fmt.Sprintf(`document.querySelector('%s') !== null`, retrySel), 10*time.Second)
	p.click(retrySel)
	if got := envelopeOf(t, rc.Next()).ID; got != failed {
		t.Errorf("the retry delivered %s, want %s", got, failed)
	}
	p.waitFor(fmt.Sprintf(`document.querySelector('%s .result').textContent.startsWith("202 Accepted: the next attempt")`, subSel), 5*time.Second)

	// A subscription its receiver disabled (410), enabled again.
	rc.SetRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	e.CreateTask(apitest.TaskBody("HOOK-4"))
	rc.Next()
	apitest.WaitFor(t, func() bool {
		return e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)["status"] == "disabled"
	})
	rc.SetRespond(nil)
	p.click("#webhooks-refresh")
	p.waitFor(fmt.Sprintf(`!document.querySelector('%s button.enable').hidden`, subSel), 10*time.Second)
	p.click(subSel + " button.enable")
	p.waitFor(fmt.Sprintf(`document.querySelector('%s .result').textContent.startsWith("Enabled") && document.querySelector('%s .sub-head').textContent.includes("active")`, subSel, subSel), 5*time.Second)
	if st := e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)["status"]; st != "active" {
		t.Errorf("the subscription is %v after Enable, want active", st)
	}
	p.checkProblems(func(n networkError) bool {
		return unauthorizedAt(site)(n) || strings.HasSuffix(n.URL, "/replay") && strings.Contains(n.Text, "status of 400")
	})
}
