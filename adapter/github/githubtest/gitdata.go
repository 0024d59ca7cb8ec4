package githubtest

import (
	"container/heap"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"
)

// The fake's git model.
//
// Every commit has parents and a tree: a set of files, path → content,
// whose SHA is a digest of the sorted paths and contents (two commits with
// the same files have the same tree SHA, as in git). The repository
// starts with a root commit holding README.md on main. A push (Push,
// PushBy, a head made by Options.AutoBranch) is a commit changing the
// file changes/<branch> to new content; a push to the head of an open
// pull request is taken as a rebase onto its base: its parent is the
// base's head, and its files are the base's with the branch's own changes
// (its files that differ from its merge base with the base) and the new
// one. PushFiles makes a commit changing the files a test names on top of
// any commit. A merge (of a pull request, or POST /merges) is a three-way
// merge by file against the merge base of the two commits (the common
// ancestor nearest to them; an empty tree when they have none): a path
// both sides changed, to different contents, conflicts. A pull request
// whose head conflicts so with its base reads as conflicting, as one
// SetConflicting marks does. A commit made by SetBase (a new base branch)
// is a root commit with no files.

// Routes of the fake's git database and merges API, as given to
// [Server.Inject] and [Server.Calls]. Only branches (refs/heads/...) are
// served.
const (
	RouteGetRef      = "GET /git/ref/{ref...}"
	RouteCreateRef   = "POST /git/refs"
	RouteUpdateRef   = "PATCH /git/refs/{ref...}"
	RouteDeleteRef   = "DELETE /git/refs/{ref...}"
	RouteGitCommit   = "GET /git/commits/{sha}"
	RouteMergeBranch = "POST /merges"
)

// gitCommit is a commit of the fake's git model.
type gitCommit struct {
	sha     string
	parents []string
	// gen is the commit's generation: 1 for a root commit, else one more
	// than its parents' highest.
	gen     int
	files   map[string]string // path → content
	tree    string
	message string
	at      time.Time
}

// gitRoutes registers the git database and merges routes with h, the
// registration of routes.
func (s *Server) gitRoutes(h func(route string, fn http.HandlerFunc)) {
	h(RouteGetRef, s.getRef)
	h(RouteCreateRef, s.createRef)
	h(RouteUpdateRef, s.updateRef)
	h(RouteDeleteRef, s.deleteRef)
	h(RouteGitCommit, s.getGitCommit)
	h(RouteMergeBranch, s.mergeBranch)
}

// treeSHA returns the SHA of a tree of files: a digest of its paths and
// contents, sorted by path.
func treeSHA(files map[string]string) string {
	h := sha1.New()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%s\x00", p, files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// commitOn makes a commit with parents and files and returns its SHA.
// Callers hold s.mu.
func (s *Server) commitOn(parents []string, files map[string]string, message string) string {
	sha := NewSHA()
	gen := 1
	for _, p := range parents {
		if c := s.object(p); c != nil {
			gen = max(gen, c.gen+1)
		}
	}
	s.commits[sha] = true
	s.objects[sha] = &gitCommit{sha: sha, parents: slices.Clone(parents), gen: gen, files: files, tree: treeSHA(files), message: message, at: s.tick()}
	return sha
}

// object returns the commit sha, or nil when the repository has none. A
// commit made without the git model (Server.commit) is a root commit with
// no files. Callers hold s.mu.
func (s *Server) object(sha string) *gitCommit {
	if c, ok := s.objects[sha]; ok {
		return c
	}
	if !s.commits[sha] {
		return nil
	}
	c := &gitCommit{sha: sha, gen: 1, files: map[string]string{}, tree: treeSHA(nil), message: "Commit " + sha[:7], at: s.now}
	s.objects[sha] = c
	return c
}

// filesOf returns the files of commit sha (none for an unknown commit).
// Callers hold s.mu.
func (s *Server) filesOf(sha string) map[string]string {
	if c := s.object(sha); c != nil {
		return c.files
	}
	return map[string]string{}
}

// walk visits the commits reachable from starts, each once, in
// descending generation (a commit after every commit that descends from
// it among those reachable), with the union of the marks of the starts it
// is reachable from, until visit returns false or a commit's generation
// is below floor. Callers hold s.mu.
func (s *Server) walk(starts map[string]int, floor int, visit func(c *gitCommit, marks int) bool) {
	marks := map[string]int{}
	h := &genHeap{}
	push := func(sha string, m int) {
		c := s.object(sha)
		if c == nil || c.gen < floor {
			return
		}
		if old, ok := marks[sha]; ok {
			marks[sha] = old | m
			return
		}
		marks[sha] = m
		heap.Push(h, c)
	}
	for sha, m := range starts {
		push(sha, m)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(*gitCommit)
		m := marks[c.sha]
		if !visit(c, m) {
			return
		}
		for _, p := range c.parents {
			push(p, m)
		}
	}
}

// genHeap orders commits by descending generation.
type genHeap []*gitCommit

func (h genHeap) Len() int           { return len(h) }
func (h genHeap) Less(i, j int) bool { return h[i].gen > h[j].gen }
func (h genHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *genHeap) Push(x any)        { *h = append(*h, x.(*gitCommit)) }
func (h *genHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// isAncestor reports whether commit a is b or one of its ancestors.
// Callers hold s.mu.
func (s *Server) isAncestor(a, b string) bool {
	ca := s.object(a)
	if ca == nil {
		return false
	}
	found := false
	s.walk(map[string]int{b: 1}, ca.gen, func(c *gitCommit, _ int) bool {
		found = c.sha == a
		return !found
	})
	return found
}

// mergeBase returns a best common ancestor of a and b, as git merge-base
// finds it (one no other common ancestor descends from): the common
// ancestor of the highest generation, or "" when they have none.
// Callers hold s.mu.
func (s *Server) mergeBase(a, b string) string {
	if a == b {
		return a
	}
	base := ""
	s.walk(map[string]int{a: 1, b: 2}, 0, func(c *gitCommit, marks int) bool {
		if marks == 3 {
			base = c.sha
			return false
		}
		return true
	})
	return base
}

// threeWay merges the files of theirs into ours against base, by path: a
// path one side left as in base takes the other side's content (absent
// is deleted); a path both changed to different contents conflicts. It
// returns the merged files and the conflicting paths, sorted.
func threeWay(base, ours, theirs map[string]string) (map[string]string, []string) {
	out := map[string]string{}
	var conflicts []string
	paths := map[string]bool{}
	for _, m := range []map[string]string{base, ours, theirs} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range paths {
		b, inB := base[p]
		o, inO := ours[p]
		t, inT := theirs[p]
		same := func(x string, inX bool, y string, inY bool) bool { return inX == inY && x == y }
		switch {
		case same(o, inO, t, inT):
			if inO {
				out[p] = o
			}
		case same(o, inO, b, inB):
			if inT {
				out[p] = t
			}
		case same(t, inT, b, inB):
			if inO {
				out[p] = o
			}
		default:
			conflicts = append(conflicts, p)
		}
	}
	sort.Strings(conflicts)
	return out, conflicts
}

// mergeFiles merges commit theirs into commit ours and returns the files
// and the conflicting paths. Callers hold s.mu.
func (s *Server) mergeFiles(ours, theirs string) (map[string]string, []string) {
	var base map[string]string
	if mb := s.mergeBase(ours, theirs); mb != "" {
		base = s.filesOf(mb)
	}
	return threeWay(base, s.filesOf(ours), s.filesOf(theirs))
}

// mergeCommit makes the merge commit of theirs into ours. A conflicting
// path takes the content of theirs, as a person resolving the conflict
// for the incoming side would (the API refuses conflicting merges before
// this). Callers hold s.mu.
func (s *Server) mergeCommit(ours, theirs, message string) string {
	files, conflicts := s.mergeFiles(ours, theirs)
	tf := s.filesOf(theirs)
	for _, p := range conflicts {
		if c, ok := tf[p]; ok {
			files[p] = c
		}
	}
	return s.commitOn([]string{ours, theirs}, files, message)
}

// treeConflict reports whether p's head conflicts with its base by their
// files, memoised by the two commits. Callers hold s.mu.
func (s *Server) treeConflict(p *pull) bool {
	key := [2]string{s.branches[p.Base], p.HeadSHA}
	if c, ok := s.conflictMemo[key]; ok {
		return c
	}
	_, conflicts := s.mergeFiles(key[0], key[1])
	s.conflictMemo[key] = len(conflicts) > 0
	return len(conflicts) > 0
}

// pushCommit makes the commit of a push to branch: the file
// changes/<branch> changed to new content, on top of the base of branch's
// first open pull request (a rebase, keeping the branch's own changes),
// else of onto (a branch or commit; "" for branch itself, or the default
// branch when branch does not exist yet). Callers hold s.mu.
func (s *Server) pushCommit(branch, onto string) string {
	var parent string
	var files map[string]string
	if base := s.openBaseOf(branch); base != "" && onto == "" {
		parent = s.branches[base]
		old := s.branches[branch]
		files = maps.Clone(s.filesOf(parent))
		var mbFiles map[string]string
		if mb := s.mergeBase(old, parent); mb != "" {
			mbFiles = s.filesOf(mb)
		}
		for p, c := range s.filesOf(old) { // the branch's own changes
			if m, ok := mbFiles[p]; !ok || m != c {
				files[p] = c
			}
		}
		for p := range mbFiles { // and its deletions
			if _, ok := s.filesOf(old)[p]; !ok {
				delete(files, p)
			}
		}
	} else {
		if onto == "" {
			onto = branch
		}
		var ok bool
		if parent, ok = s.resolve(onto); !ok {
			parent = s.branches[s.defaultBranch]
		}
		files = maps.Clone(s.filesOf(parent))
	}
	files["changes/"+branch] = NewSHA()
	return s.commitOn([]string{parent}, files, "Push to "+branch)
}

// openBaseOf returns the base of the open pull request of head branch
// with the lowest number, or "". Callers hold s.mu.
func (s *Server) openBaseOf(branch string) string {
	n := 0
	for _, p := range s.pulls {
		if p.Head == branch && !p.Closed && !p.Merged && (n == 0 || p.Number < n) {
			n = p.Number
		}
	}
	if n == 0 {
		return ""
	}
	return s.pulls[n].Base
}

// resolve returns the commit rev names: a branch, or a commit's SHA.
// Callers hold s.mu.
func (s *Server) resolve(rev string) (string, bool) {
	if sha, ok := s.branches[rev]; ok {
		return sha, true
	}
	if s.object(rev) != nil {
		return rev, true
	}
	return "", false
}

// PushFiles makes a commit on top of parent (a branch or a commit SHA)
// that sets each file of files to its content ("" deletes it), points
// branch at it, creating the branch if need be, and returns its SHA. The
// open pull requests of branch move to it, as a push moves them: their
// approvals are dismissed where the base's rules dismiss stale ones, and
// their base is taken to be where the new head and the base's head meet
// (so a head made on the base's head is up to date). It panics when
// parent is neither.
func (s *Server) PushFiles(branch, parent string, files map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, ok := s.resolve(parent)
	if !ok {
		panic(fmt.Sprintf("githubtest: PushFiles on %q: no such branch or commit", parent))
	}
	out := maps.Clone(s.filesOf(from))
	for p, c := range files {
		if c == "" {
			delete(out, p)
		} else {
			out[p] = c
		}
	}
	sha := s.commitOn([]string{from}, out, "Change "+strings.Join(slices.Sorted(maps.Keys(files)), ", "))
	s.moveBranch(branch, sha)
	for _, p := range s.pulls {
		if p.Head != branch || p.Closed || p.Merged {
			continue
		}
		p.HeadSHA, p.baseAt, p.conflicting, p.pusher = sha, s.mergeBase(sha, s.branches[p.Base]), false, ""
		s.dismissStale(p, sha)
		s.touch(p)
	}
	return sha
}

// dismissStale dismisses the approvals of p other than of sha, where its
// base's rules dismiss stale approvals. Callers hold s.mu.
func (s *Server) dismissStale(p *pull, sha string) {
	if !s.rulesOf(p.Base).dismissStale {
		return
	}
	for _, r := range s.reviews[p.Number] {
		if r.GetState() == "APPROVED" && r.GetCommitID() != sha {
			r.State = gh.String("DISMISSED")
		}
	}
}

// Branch returns the commit branch points to, and whether it exists.
func (s *Server) Branch(branch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha, ok := s.branches[branch]
	return sha, ok
}

// Files returns the files of commit sha (path → content), or nil when
// the repository has no such commit.
func (s *Server) Files(sha string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.object(sha)
	if c == nil {
		return nil
	}
	return maps.Clone(c.files)
}

// Tree returns the tree SHA of commit sha, or "" when the repository has
// no such commit.
func (s *Server) Tree(sha string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.object(sha); c != nil {
		return c.tree
	}
	return ""
}

// Parents returns the parents of commit sha.
func (s *Server) Parents(sha string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.object(sha); c != nil {
		return slices.Clone(c.parents)
	}
	return nil
}

// IsAncestor reports whether commit a is commit b or one of its
// ancestors.
func (s *Server) IsAncestor(a, b string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isAncestor(a, b)
}

// refMoved records that a ref update (PATCH /git/refs, POST /merges)
// moved branch to sha: the open pull requests into it have their
// mergeability computed anew, and those whose head is now reachable from
// it are merged, as GitHub marks a pull request merged when its commits
// are pushed to its base, with sha as their merge_commit_sha. Callers
// hold s.mu.
func (s *Server) refMoved(branch, sha string) {
	s.moveBranch(branch, sha)
	for _, p := range s.pulls {
		if p.Base == branch && !p.Closed && !p.Merged && s.isAncestor(p.HeadSHA, sha) {
			s.merges++
			p.Merged, p.MergeCommitSHA = true, sha
			s.touch(p)
		}
	}
}

// refJSON is a git reference as GitHub's git database API answers it.
type refJSON struct {
	Ref    string `json:"ref"`
	NodeID string `json:"node_id"`
	URL    string `json:"url"`
	Object struct {
		Type string `json:"type"`
		SHA  string `json:"sha"`
		URL  string `json:"url"`
	} `json:"object"`
}

func (s *Server) refJSON(branch string) refJSON {
	var out refJSON
	out.Ref = "refs/heads/" + branch
	out.NodeID = "REF_" + hex.EncodeToString([]byte(out.Ref))
	out.URL = fmt.Sprintf("%srepos/%s/%s/git/%s", s.APIURL(), Owner, Repo, out.Ref)
	out.Object.Type, out.Object.SHA = "commit", s.branches[branch]
	out.Object.URL = s.gitCommitURL(out.Object.SHA)
	return out
}

func (s *Server) gitCommitURL(sha string) string {
	return fmt.Sprintf("%srepos/%s/%s/git/commits/%s", s.APIURL(), Owner, Repo, sha)
}

func (s *Server) commitHTMLURL(sha string) string {
	return fmt.Sprintf("https://github.example/%s/%s/commit/%s", Owner, Repo, sha)
}

// branchOfRef returns the branch a ref path ("heads/<branch>") names.
func branchOfRef(ref string) (string, bool) {
	b, ok := strings.CutPrefix(ref, "heads/")
	return b, ok && b != ""
}

func notFound(w http.ResponseWriter, doc string) {
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": doc})
}

const gitRefsDoc = "https://docs.github.com/rest/git/refs"

// getRef answers GET /repos/{owner}/{repo}/git/ref/{ref}.
func (s *Server) getRef(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := branchOfRef(r.PathValue("ref"))
	if _, exists := s.branches[b]; !ok || !exists {
		notFound(w, gitRefsDoc+"#get-a-reference")
		return
	}
	writeJSON(w, http.StatusOK, s.refJSON(b))
}

// createRef answers POST /repos/{owner}/{repo}/git/refs.
func (s *Server) createRef(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := branchOfRef(strings.TrimPrefix(req.Ref, "refs/"))
	switch {
	case !strings.HasPrefix(req.Ref, "refs/") || !ok:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Validation Failed"))
	case s.object(req.SHA) == nil:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Object does not exist"))
	default:
		if _, exists := s.branches[b]; exists {
			writeFault(w, Error(http.StatusUnprocessableEntity, "Reference already exists"))
			return
		}
		s.refMoved(b, req.SHA)
		writeJSON(w, http.StatusCreated, s.refJSON(b))
	}
}

// updateRef answers PATCH /repos/{owner}/{repo}/git/refs/{ref}: without
// force, only a fast forward (the new commit descends from the old).
func (s *Server) updateRef(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := branchOfRef(r.PathValue("ref"))
	old, exists := s.branches[b]
	switch {
	case !ok || !exists:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Reference does not exist"))
	case s.object(req.SHA) == nil:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Object does not exist"))
	case !req.Force && !s.isAncestor(old, req.SHA):
		writeFault(w, Error(http.StatusUnprocessableEntity, "Update is not a fast forward"))
	default:
		s.refMoved(b, req.SHA)
		writeJSON(w, http.StatusOK, s.refJSON(b))
	}
}

// deleteRef answers DELETE /repos/{owner}/{repo}/git/refs/{ref}. The
// default branch may not be deleted.
func (s *Server) deleteRef(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := branchOfRef(r.PathValue("ref"))
	_, exists := s.branches[b]
	switch {
	case !ok || !exists:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Reference does not exist"))
	case b == s.defaultBranch:
		writeFault(w, Error(http.StatusUnprocessableEntity, "Validation Failed"))
	default:
		delete(s.branches, b)
		w.WriteHeader(http.StatusNoContent)
	}
}

// gitUser is an author or committer of a commit.
type gitUser struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Date  string `json:"date"`
}

// gitParent is a parent of a commit.
type gitParent struct {
	SHA     string `json:"sha"`
	URL     string `json:"url"`
	HTMLURL string `json:"html_url"`
}

// gitCommitJSON is a commit as GET /repos/{owner}/{repo}/git/commits/{sha}
// answers it.
type gitCommitJSON struct {
	SHA       string  `json:"sha"`
	NodeID    string  `json:"node_id"`
	URL       string  `json:"url"`
	HTMLURL   string  `json:"html_url"`
	Author    gitUser `json:"author"`
	Committer gitUser `json:"committer"`
	Message   string  `json:"message"`
	Tree      struct {
		SHA string `json:"sha"`
		URL string `json:"url"`
	} `json:"tree"`
	Parents      []gitParent `json:"parents"`
	Verification struct {
		Verified   bool    `json:"verified"`
		Reason     string  `json:"reason"`
		Signature  *string `json:"signature"`
		Payload    *string `json:"payload"`
		VerifiedAt *string `json:"verified_at"`
	} `json:"verification"`
}

func (s *Server) gitCommitJSON(c *gitCommit) gitCommitJSON {
	who := gitUser{Name: "lifecycle-bot", Email: "lifecycle-bot@users.noreply.github.example", Date: c.at.UTC().Format(time.RFC3339)}
	out := gitCommitJSON{SHA: c.sha, NodeID: "C_" + c.sha[:12], URL: s.gitCommitURL(c.sha), HTMLURL: s.commitHTMLURL(c.sha),
		Author: who, Committer: who, Message: c.message, Parents: []gitParent{}}
	out.Tree.SHA = c.tree
	out.Tree.URL = fmt.Sprintf("%srepos/%s/%s/git/trees/%s", s.APIURL(), Owner, Repo, c.tree)
	for _, p := range c.parents {
		out.Parents = append(out.Parents, gitParent{SHA: p, URL: s.gitCommitURL(p), HTMLURL: s.commitHTMLURL(p)})
	}
	out.Verification.Reason = "unsigned"
	return out
}

// getGitCommit answers GET /repos/{owner}/{repo}/git/commits/{sha}.
func (s *Server) getGitCommit(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.object(r.PathValue("sha"))
	if c == nil {
		notFound(w, "https://docs.github.com/rest/git/commits#get-a-commit-object")
		return
	}
	writeJSON(w, http.StatusOK, s.gitCommitJSON(c))
}

// mergeBranch answers POST /repos/{owner}/{repo}/merges: head (a branch
// or a commit SHA) merged into branch base with a merge commit (201, the
// commit as GET /repos/{owner}/{repo}/commits/{ref} shows it; a merge
// commit even when base could fast-forward), 204 when base already
// contains head, 404 when either does not exist, 409 when they conflict.
func (s *Server) mergeBranch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Base          string `json:"base"`
		Head          string `json:"head"`
		CommitMessage string `json:"commit_message"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	const doc = "https://docs.github.com/rest/branches/branches#merge-a-branch"
	baseSHA, okBase := s.branches[req.Base]
	headSHA, okHead := s.resolve(req.Head)
	switch {
	case !okBase:
		notFound(w, doc)
		return
	case !okHead:
		notFound(w, doc)
		return
	case s.isAncestor(headSHA, baseSHA):
		w.WriteHeader(http.StatusNoContent)
		return
	}
	files, conflicts := s.mergeFiles(baseSHA, headSHA)
	if len(conflicts) > 0 {
		writeJSON(w, http.StatusConflict, map[string]string{"message": "Merge conflict", "documentation_url": doc})
		return
	}
	msg := req.CommitMessage
	if msg == "" {
		msg = fmt.Sprintf("Merge %s into %s", req.Head, req.Base)
	}
	sha := s.commitOn([]string{baseSHA, headSHA}, files, msg)
	s.refMoved(req.Base, sha)
	c := s.gitCommitJSON(s.objects[sha])
	writeJSON(w, http.StatusCreated, map[string]any{
		"url": fmt.Sprintf("%srepos/%s/%s/commits/%s", s.APIURL(), Owner, Repo, sha), "sha": sha, "node_id": c.NodeID,
		"html_url": c.HTMLURL, "comments_url": fmt.Sprintf("%srepos/%s/%s/commits/%s/comments", s.APIURL(), Owner, Repo, sha),
		"commit": map[string]any{
			"url": c.URL, "author": c.Author, "committer": c.Committer, "message": c.Message, "tree": c.Tree,
			"comment_count": 0, "verification": c.Verification,
		},
		"author": user("lifecycle-bot"), "committer": user("lifecycle-bot"), "parents": c.Parents,
	})
}
