package github

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
)

// fakeGitHub is a stateful fake of the parts of GitHub's REST API the
// Adapter uses, served under /api/v3/ as GitHub Enterprise Server serves
// it. Its answers are go-github's structs encoded: their JSON tags are
// GitHub's field names. Errors use GitHub's shapes ({"message", "errors",
// "documentation_url"}).
type fakeGitHub struct {
	srv   *httptest.Server
	owner string
	repo  string
	token string // the bearer token every request must carry

	// autoBranch makes a pull request's missing head branch exist, with a
	// new commit, as if the agent had pushed it (the conformance suite
	// opens pull requests on branches nobody pushed).
	autoBranch bool

	mu            sync.Mutex
	now           time.Time
	defaultBranch string
	branches      map[string]string // name → head SHA
	commits       map[string]bool   // every commit the repository has
	pulls         map[int]*fakePull
	nextNumber    int
	nextID        int64
	runs          map[string][]*gh.CheckRun
	statuses      map[string][]*gh.RepoStatus
	reviews       map[int][]*gh.PullRequestReview
	protection    map[string]*gh.Protection
	protectionErr int // 403 or 404 when no protection is stored for a branch; default 404
	rules         map[string][]*gh.RepositoryRule
	deployments   []*gh.Deployment
	depStatuses   map[int64][]*gh.DeploymentStatus
	merges        int
	script        map[string][]scripted

	calls     sync.Map // route → *atomic.Int64
	callTotal atomic.Int64
}

type fakePull struct {
	number     int
	head, base string
	headSHA    string
	title      string
	body       string
	draft      bool
	closed     bool
	merged     bool
	mergeSHA   string
	reviewers  []string
	createdAt  time.Time
}

// scripted is an answer given instead of the real one, once.
type scripted struct {
	status  int
	header  http.Header
	body    string
	dropped bool // do the real work, then drop the connection without an answer
}

func newFakeGitHub(t testing.TB) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{
		owner: "acme", repo: "widgets", token: "ghp_fakeTokenNeverLogged0123456789",
		now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), defaultBranch: "main",
		branches: map[string]string{}, commits: map[string]bool{}, pulls: map[int]*fakePull{}, nextNumber: 1, nextID: 1000,
		runs: map[string][]*gh.CheckRun{}, statuses: map[string][]*gh.RepoStatus{}, reviews: map[int][]*gh.PullRequestReview{},
		protection: map[string]*gh.Protection{}, protectionErr: http.StatusNotFound, rules: map[string][]*gh.RepositoryRule{},
		depStatuses: map[int64][]*gh.DeploymentStatus{}, script: map[string][]scripted{},
	}
	f.branches["main"] = f.commit()
	mux := http.NewServeMux()
	f.routes(mux)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// apiURL is the Enterprise-style base URL of the fake.
func (f *fakeGitHub) apiURL() string { return f.srv.URL + "/api/v3/" }

func newSHA() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commit makes a new commit of the repository and returns its SHA.
func (f *fakeGitHub) commit() string {
	sha := newSHA()
	f.commits[sha] = true
	return sha
}

func (f *fakeGitHub) id() int64 { f.nextID++; return f.nextID }

// tick returns the fake's time, a second later each call.
func (f *fakeGitHub) tick() time.Time { f.now = f.now.Add(time.Second); return f.now }

// calls returns how many requests a route got ("" for all).
func (f *fakeGitHub) count(route string) int64 {
	if route == "" {
		return f.callTotal.Load()
	}
	if v, ok := f.calls.Load(route); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// fail scripts the next answers of a route.
func (f *fakeGitHub) fail(route string, answers ...scripted) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[route] = append(f.script[route], answers...)
}

func ghError(status int, message string, errs ...map[string]string) scripted {
	body := map[string]any{"message": message, "documentation_url": "https://docs.github.com/rest"}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	b, _ := json.Marshal(body)
	return scripted{status: status, body: string(b)}
}

func (f *fakeGitHub) routes(mux *http.ServeMux) {
	h := func(route string, fn func(w http.ResponseWriter, r *http.Request)) {
		method, path, _ := strings.Cut(route, " ")
		pattern := method + " /api/v3/repos/{owner}/{repo}" + path
		if path == "" {
			pattern = method + " /api/v3/repos/{owner}/{repo}"
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			f.callTotal.Add(1)
			v, _ := f.calls.LoadOrStore(route, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			if auth := r.Header.Get("Authorization"); auth != "Bearer "+f.token && auth != "token "+f.token {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
				return
			}
			if r.PathValue("owner") != f.owner || r.PathValue("repo") != f.repo {
				writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
				return
			}
			f.mu.Lock()
			var s *scripted
			if q := f.script[route]; len(q) > 0 {
				s, f.script[route] = &q[0], q[1:]
			}
			f.mu.Unlock()
			switch {
			case s != nil && s.dropped:
				fn(httptest.NewRecorder(), r)
				hj, ok := w.(http.Hijacker)
				if !ok {
					panic("no hijacker")
				}
				conn, _, _ := hj.Hijack()
				conn.Close()
				return
			case s != nil:
				for k, vs := range s.header {
					w.Header()[k] = vs
				}
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(s.status)
				w.Write([]byte(s.body))
				return
			}
			fn(w, r)
		})
	}
	h("GET ", f.getRepo)
	h("GET /pulls", f.listPulls)
	h("POST /pulls", f.createPull)
	h("GET /pulls/{number}", f.getPull)
	h("PATCH /pulls/{number}", f.editPull)
	h("POST /pulls/{number}/requested_reviewers", f.requestReviewers)
	h("PUT /pulls/{number}/merge", f.mergePull)
	h("GET /pulls/{number}/reviews", f.listReviews)
	h("GET /commits/{ref}/check-runs", f.listCheckRuns)
	h("GET /commits/{ref}/status", f.combinedStatus)
	h("GET /branches/{branch}/protection", f.getProtection)
	h("GET /rules/branches/{branch}", f.getRules)
	h("POST /deployments", f.createDeployment)
	h("GET /deployments", f.listDeployments)
	h("GET /deployments/{id}/statuses", f.listDeploymentStatuses)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeScripted(w http.ResponseWriter, s scripted) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(s.status)
	w.Write([]byte(s.body))
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

func (f *fakeGitHub) user(login string) *gh.User {
	return &gh.User{Login: gh.String(login), ID: gh.Int64(int64(len(login)) * 7919), Type: gh.String("User")}
}

func (f *fakeGitHub) repoJSON() *gh.Repository {
	return &gh.Repository{
		ID: gh.Int64(42), Name: gh.String(f.repo), FullName: gh.String(f.owner + "/" + f.repo), Owner: f.user(f.owner),
		DefaultBranch: gh.String(f.defaultBranch), Private: gh.Bool(true),
		HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s", f.owner, f.repo)),
	}
}

func (f *fakeGitHub) pullJSON(p *fakePull) *gh.PullRequest {
	state := "open"
	if p.closed || p.merged {
		state = "closed"
	}
	out := &gh.PullRequest{
		ID: gh.Int64(int64(p.number) * 100003), Number: gh.Int(p.number), State: gh.String(state), Title: gh.String(p.title), Body: gh.String(p.body),
		Draft: gh.Bool(p.draft), Merged: gh.Bool(p.merged), User: f.user("lifecycle-bot"),
		HTMLURL:   gh.String(fmt.Sprintf("https://github.example/%s/%s/pull/%d", f.owner, f.repo, p.number)),
		URL:       gh.String(fmt.Sprintf("%s/repos/%s/%s/pulls/%d", strings.TrimSuffix(f.apiURL(), "/"), f.owner, f.repo, p.number)),
		CreatedAt: &gh.Timestamp{Time: p.createdAt},
		Head:      &gh.PullRequestBranch{Ref: gh.String(p.head), SHA: gh.String(p.headSHA), Label: gh.String(f.owner + ":" + p.head), Repo: f.repoJSON(), User: f.user(f.owner)},
		Base:      &gh.PullRequestBranch{Ref: gh.String(p.base), SHA: gh.String(f.branches[p.base]), Label: gh.String(f.owner + ":" + p.base), Repo: f.repoJSON(), User: f.user(f.owner)},
	}
	if p.merged {
		out.MergedAt = &gh.Timestamp{Time: f.now}
		out.MergeCommitSHA = gh.String(p.mergeSHA)
	}
	for _, r := range p.reviewers {
		out.RequestedReviewers = append(out.RequestedReviewers, f.user(r))
	}
	return out
}

func (f *fakeGitHub) getRepo(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, http.StatusOK, f.repoJSON())
}

func (f *fakeGitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var out []*gh.PullRequest
	nums := make([]int, 0, len(f.pulls))
	for n := range f.pulls {
		nums = append(nums, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	for _, n := range nums {
		p := f.pulls[n]
		open := !p.closed && !p.merged
		if (state == "open" && !open) || (state == "closed" && open) {
			continue
		}
		// GitHub filters on head only in the form user:ref.
		if h := q.Get("head"); h != "" {
			owner, ref, ok := strings.Cut(h, ":")
			if ok && (owner != f.owner || ref != p.head) {
				continue
			}
		}
		if b := q.Get("base"); b != "" && b != p.base {
			continue
		}
		out = append(out, f.pullJSON(p))
	}
	s, e := page(w, r, len(out))
	writeJSON(w, http.StatusOK, append([]*gh.PullRequest{}, out[s:e]...))
}

func (f *fakeGitHub) createPull(w http.ResponseWriter, r *http.Request) {
	var req gh.NewPullRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	head := req.GetHead()
	if _, ref, ok := strings.Cut(head, ":"); ok {
		head = ref
	}
	if _, ok := f.branches[req.GetBase()]; !ok {
		writeScripted(w, ghError(422, "Validation Failed", map[string]string{"resource": "PullRequest", "field": "base", "code": "invalid"}))
		return
	}
	if _, ok := f.branches[head]; !ok {
		if !f.autoBranch {
			writeScripted(w, ghError(422, "Validation Failed", map[string]string{"resource": "PullRequest", "field": "head", "code": "invalid"}))
			return
		}
		f.branches[head] = f.commit()
	}
	for _, p := range f.pulls {
		if p.head == head && p.base == req.GetBase() && !p.closed && !p.merged {
			writeScripted(w, ghError(422, "Validation Failed", map[string]string{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + f.owner + ":" + head + "."}))
			return
		}
	}
	p := &fakePull{number: f.nextNumber, head: head, base: req.GetBase(), headSHA: f.branches[head], title: req.GetTitle(), body: req.GetBody(), draft: req.GetDraft(), createdAt: f.tick()}
	f.nextNumber++
	f.pulls[p.number] = p
	writeJSON(w, http.StatusCreated, f.pullJSON(p))
}

func (f *fakeGitHub) pull(w http.ResponseWriter, r *http.Request) *fakePull {
	n, _ := strconv.Atoi(r.PathValue("number"))
	p, ok := f.pulls[n]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"})
	}
	return p
}

func (f *fakeGitHub) getPull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.pull(w, r); p != nil {
		writeJSON(w, http.StatusOK, f.pullJSON(p))
	}
}

func (f *fakeGitHub) editPull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(w, r)
	if p == nil {
		return
	}
	if req.Title != nil {
		p.title = *req.Title
	}
	if req.Body != nil {
		p.body = *req.Body
	}
	writeJSON(w, http.StatusOK, f.pullJSON(p))
}

func (f *fakeGitHub) requestReviewers(w http.ResponseWriter, r *http.Request) {
	var req gh.ReviewersRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(w, r)
	if p == nil {
		return
	}
	for _, login := range req.Reviewers {
		if !containsFold(p.reviewers, login) {
			p.reviewers = append(p.reviewers, login)
		}
	}
	writeJSON(w, http.StatusCreated, f.pullJSON(p))
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func (f *fakeGitHub) mergePull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CommitTitle string `json:"commit_title"`
		MergeMethod string `json:"merge_method"`
		SHA         string `json:"sha"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(w, r)
	if p == nil {
		return
	}
	if p.merged || p.closed {
		writeScripted(w, ghError(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
		return
	}
	if req.SHA != "" && req.SHA != p.headSHA {
		writeScripted(w, ghError(http.StatusConflict, "Head branch was modified. Review and try the merge again."))
		return
	}
	f.merges++
	p.merged, p.mergeSHA = true, f.commit()
	f.branches[p.base] = p.mergeSHA
	f.tick()
	writeJSON(w, http.StatusOK, &gh.PullRequestMergeResult{SHA: gh.String(p.mergeSHA), Merged: gh.Bool(true), Message: gh.String("Pull Request successfully merged")})
}

func (f *fakeGitHub) listReviews(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(w, r)
	if p == nil {
		return
	}
	all := f.reviews[p.number]
	s, e := page(w, r, len(all))
	writeJSON(w, http.StatusOK, append([]*gh.PullRequestReview{}, all[s:e]...))
}

func (f *fakeGitHub) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := f.runs[r.PathValue("ref")]
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
	s, e := page(w, r, len(all))
	writeJSON(w, http.StatusOK, &gh.ListCheckRunsResults{Total: gh.Int(len(all)), CheckRuns: append([]*gh.CheckRun{}, all[s:e]...)})
}

func (f *fakeGitHub) combinedStatus(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sha := r.PathValue("ref")
	latest := map[string]*gh.RepoStatus{}
	for _, s := range f.statuses[sha] {
		latest[s.GetContext()] = s
	}
	var list []*gh.RepoStatus
	state := "success"
	for _, s := range latest {
		list = append(list, s)
		switch s.GetState() {
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
	s, e := page(w, r, len(list))
	writeJSON(w, http.StatusOK, &gh.CombinedStatus{State: gh.String(state), SHA: gh.String(sha), TotalCount: gh.Int(len(list)), Statuses: append([]*gh.RepoStatus{}, list[s:e]...), RepositoryURL: gh.String(f.apiURL() + "repos/" + f.owner + "/" + f.repo)})
}

func (f *fakeGitHub) getProtection(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.protection[r.PathValue("branch")]
	switch {
	case ok:
		writeJSON(w, http.StatusOK, p)
	case f.protectionErr == http.StatusForbidden:
		writeScripted(w, ghError(http.StatusForbidden, "Resource not accessible by integration"))
	default:
		writeScripted(w, ghError(http.StatusNotFound, "Branch not protected"))
	}
}

func (f *fakeGitHub) getRules(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, http.StatusOK, append([]*gh.RepositoryRule{}, f.rules[r.PathValue("branch")]...))
}

func (f *fakeGitHub) createDeployment(w http.ResponseWriter, r *http.Request) {
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
		// The Adapter must not let GitHub merge the base in or wait for contexts.
		writeScripted(w, ghError(http.StatusConflict, "Conflict: failed commit status checks"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.commits[req.Ref] {
		if _, ok := f.branches[req.Ref]; !ok {
			writeScripted(w, ghError(http.StatusUnprocessableEntity, "No ref found for: "+req.Ref))
			return
		}
	}
	id := f.id()
	d := &gh.Deployment{
		ID: gh.Int64(id), SHA: gh.String(req.Ref), Ref: gh.String(req.Ref), Task: gh.String(req.Task), Payload: req.Payload,
		Environment: gh.String(req.Environment), Description: gh.String(req.Description), Creator: f.user("lifecycle-bot"),
		CreatedAt: &gh.Timestamp{Time: f.tick()}, UpdatedAt: &gh.Timestamp{Time: f.now},
		URL:         gh.String(fmt.Sprintf("%srepos/%s/%s/deployments/%d", f.apiURL(), f.owner, f.repo, id)),
		StatusesURL: gh.String(fmt.Sprintf("%srepos/%s/%s/deployments/%d/statuses", f.apiURL(), f.owner, f.repo, id)),
	}
	f.deployments = append(f.deployments, d)
	writeJSON(w, http.StatusCreated, d)
}

func (f *fakeGitHub) listDeployments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	var out []*gh.Deployment
	for i := len(f.deployments) - 1; i >= 0; i-- { // newest first
		d := f.deployments[i]
		if (q.Get("sha") == "" || q.Get("sha") == d.GetSHA()) && (q.Get("environment") == "" || q.Get("environment") == d.GetEnvironment()) {
			out = append(out, d)
		}
	}
	s, e := page(w, r, len(out))
	writeJSON(w, http.StatusOK, append([]*gh.Deployment{}, out[s:e]...))
}

func (f *fakeGitHub) listDeploymentStatuses(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	all := f.depStatuses[id]
	out := make([]*gh.DeploymentStatus, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		out = append(out, all[i])
	}
	s, e := page(w, r, len(out))
	writeJSON(w, http.StatusOK, out[s:e])
}

// The fake's hooks: what people and CI do at GitHub.

// push adds a commit to a branch, moving the head of its open pull
// requests, and returns its SHA.
func (f *fakeGitHub) push(branch string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	sha := f.commit()
	f.branches[branch] = sha
	for _, p := range f.pulls {
		if p.head == branch && !p.closed && !p.merged {
			p.headSHA = sha
		}
	}
	return sha
}

// mergeByHand merges a pull request as a person would in the web UI.
func (f *fakeGitHub) mergeByHand(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pulls[n]
	f.merges++
	p.merged, p.mergeSHA = true, f.commit()
	f.branches[p.base] = p.mergeSHA
	return p.mergeSHA
}

// closeByHand closes a pull request without merging it.
func (f *fakeGitHub) closeByHand(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls[n].closed = true
}

// reopen reopens a closed pull request.
func (f *fakeGitHub) reopen(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls[n].closed = false
}

// deploymentOf returns the newest deployment of sha in env, or nil.
func (f *fakeGitHub) deploymentOf(sha, env string) *gh.Deployment {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.deployments) - 1; i >= 0; i-- {
		if d := f.deployments[i]; d.GetSHA() == sha && d.GetEnvironment() == env {
			return d
		}
	}
	return nil
}

// checkRun records a check run on sha; conclusion "" means not completed.
func (f *fakeGitHub) checkRun(sha, name, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.id()
	c := &gh.CheckRun{ID: gh.Int64(id), Name: gh.String(name), HeadSHA: gh.String(sha), Status: gh.String("in_progress"),
		StartedAt: &gh.Timestamp{Time: f.tick()}, HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s/runs/%d", f.owner, f.repo, id)),
		App: &gh.App{ID: gh.Int64(15368), Slug: gh.String("github-actions"), Name: gh.String("GitHub Actions")}}
	if conclusion != "" {
		c.Status, c.Conclusion, c.CompletedAt = gh.String("completed"), gh.String(conclusion), &gh.Timestamp{Time: f.tick()}
	}
	f.runs[sha] = append(f.runs[sha], c)
}

// status records a commit status on sha.
func (f *fakeGitHub) status(sha, context, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tick()
	f.statuses[sha] = append(f.statuses[sha], &gh.RepoStatus{ID: gh.Int64(f.id()), State: gh.String(state), Context: gh.String(context),
		TargetURL: gh.String("https://ci.example.com/" + context), CreatedAt: &gh.Timestamp{Time: t}, UpdatedAt: &gh.Timestamp{Time: t}, Creator: f.user("ci-bot")})
}

// review records a review of pull request n at commit sha; state is
// APPROVED, CHANGES_REQUESTED or COMMENTED. It returns its ID.
func (f *fakeGitHub) review(n int, login, state, sha string) int64 {
	return f.reviewWithBody(n, login, state, sha, state+" by "+login)
}

// reviewWithBody is review with the review's text.
func (f *fakeGitHub) reviewWithBody(n int, login, state, sha, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.id()
	f.reviews[n] = append(f.reviews[n], &gh.PullRequestReview{ID: gh.Int64(id), User: f.user(login), Body: gh.String(body),
		State: gh.String(state), CommitID: gh.String(sha), SubmittedAt: &gh.Timestamp{Time: f.tick()},
		HTMLURL: gh.String(fmt.Sprintf("https://github.example/%s/%s/pull/%d#pullrequestreview-%d", f.owner, f.repo, n, id))})
	return id
}

// dismiss dismisses a review, as GitHub shows it afterwards.
func (f *fakeGitHub) dismiss(n int, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reviews[n] {
		if r.GetID() == id {
			r.State = gh.String("DISMISSED")
		}
	}
}

// deploymentStatus posts a status to a deployment, as a deploy system does.
func (f *fakeGitHub) deploymentStatus(id int64, state, envURL string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tick()
	f.depStatuses[id] = append(f.depStatuses[id], &gh.DeploymentStatus{ID: gh.Int64(f.id()), State: gh.String(state), EnvironmentURL: gh.String(envURL),
		Description: gh.String("deploy " + state), CreatedAt: &gh.Timestamp{Time: t}, UpdatedAt: &gh.Timestamp{Time: t}, Creator: f.user("deploy-bot")})
}

// lastDeployment returns the newest deployment, or nil.
func (f *fakeGitHub) lastDeployment() *gh.Deployment {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.deployments) == 0 {
		return nil
	}
	return f.deployments[len(f.deployments)-1]
}

func (f *fakeGitHub) mergeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.merges
}

// adapter returns an Adapter on the fake, with cfg's other fields.
func (f *fakeGitHub) adapter(t testing.TB, cfg Config) *Adapter {
	t.Helper()
	cfg.Owner, cfg.Repo, cfg.APIURL = f.owner, f.repo, f.apiURL()
	if cfg.Token == "" && cfg.App == nil {
		cfg.Token = f.token
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
