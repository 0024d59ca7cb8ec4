package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// GitHub's rules, as the fake applies them: what a base branch requires
// (branch protection and the rules of rulesets), the review decision, the
// combined state of a commit's checks, and mergeability.

// branchRules is what a base branch requires of its pull requests.
type branchRules struct {
	approvals    int
	reviews      bool // a pull request review is required at all
	dismissStale bool
	codeOwners   bool
	lastPush     bool
	strict       bool // branches must be up to date before merging
	required     []string
	// conversations says review conversations must be resolved; ruleset
	// says a ruleset requires it (GitHub's refusal then lists the rule
	// violations).
	conversations, conversationsByRuleset bool
	// mergeQueue says a ruleset requires merging through the merge queue.
	mergeQueue bool
	// methods are the merge methods the pull_request rules allow; nil:
	// any.
	methods []string
}

// rulesOf returns what branch requires, from its protection and the
// pull_request and required_status_checks rules of its rulesets. Callers
// hold s.mu.
func (s *Server) rulesOf(branch string) branchRules {
	var r branchRules
	if p := s.protection[branch]; p != nil {
		if rv := p.RequiredPullRequestReviews; rv != nil {
			r.reviews = true
			r.approvals = rv.RequiredApprovingReviewCount
			r.dismissStale = rv.DismissStaleReviews
			r.codeOwners = rv.RequireCodeOwnerReviews
			r.lastPush = rv.RequireLastPushApproval
		}
		if c := p.RequiredConversationResolution; c != nil && c.Enabled {
			r.conversations = true
		}
		if rs := p.RequiredStatusChecks; rs != nil {
			r.strict = rs.Strict
			if rs.Checks != nil {
				for _, c := range *rs.Checks {
					r.required = append(r.required, c.Context)
				}
			} else if rs.Contexts != nil {
				r.required = append(r.required, *rs.Contexts...)
			}
		}
	}
	for _, raw := range s.rules[branch] {
		var rule struct {
			Type       string          `json:"type"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(raw, &rule) != nil {
			continue
		}
		switch rule.Type {
		case "pull_request":
			var p struct {
				DismissStale     bool     `json:"dismiss_stale_reviews_on_push"`
				CodeOwners       bool     `json:"require_code_owner_review"`
				LastPush         bool     `json:"require_last_push_approval"`
				Approvals        int      `json:"required_approving_review_count"`
				ThreadResolution bool     `json:"required_review_thread_resolution"`
				Methods          []string `json:"allowed_merge_methods"`
			}
			if json.Unmarshal(rule.Parameters, &p) == nil {
				r.reviews = true
				r.approvals = max(r.approvals, p.Approvals)
				r.dismissStale = r.dismissStale || p.DismissStale
				r.codeOwners = r.codeOwners || p.CodeOwners
				r.lastPush = r.lastPush || p.LastPush
				if p.ThreadResolution {
					r.conversations, r.conversationsByRuleset = true, true
				}
				if len(p.Methods) > 0 {
					if r.methods == nil {
						r.methods = slices.Clone(p.Methods)
					} else {
						r.methods = slices.DeleteFunc(r.methods, func(m string) bool { return !slices.Contains(p.Methods, m) })
					}
				}
			}
		case "merge_queue":
			r.mergeQueue = true
		case "required_status_checks":
			var p struct {
				Checks []struct {
					Context string `json:"context"`
				} `json:"required_status_checks"`
				Strict bool `json:"strict_required_status_checks_policy"`
			}
			if json.Unmarshal(rule.Parameters, &p) == nil {
				r.strict = r.strict || p.Strict
				for _, c := range p.Checks {
					r.required = append(r.required, c.Context)
				}
			}
		}
	}
	return r
}

// association returns login's author association with the repository:
// as set by SetAuthorAssociation, OWNER for the repository's owner, and
// COLLABORATOR otherwise. Callers hold s.mu.
func (s *Server) association(login string) string {
	if a, ok := s.associations[strings.ToLower(login)]; ok {
		return a
	}
	if strings.EqualFold(login, Owner) {
		return "OWNER"
	}
	return "COLLABORATOR"
}

// writer reports whether an author association is one of people with
// write access, whose reviews count toward GitHub's branch rules.
func writer(association string) bool {
	return association == "OWNER" || association == "MEMBER" || association == "COLLABORATOR"
}

// latestOpinions returns pull request n's latest opinionated review of
// each author (approved, changes requested, or dismissed since), in the
// order they were submitted. Callers hold s.mu.
func (s *Server) latestOpinions(n int) []*gh.PullRequestReview {
	latest := map[string]*gh.PullRequestReview{}
	for _, r := range s.reviews[n] {
		switch r.GetState() {
		case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
			latest[strings.ToLower(r.GetUser().GetLogin())] = r
		}
	}
	out := make([]*gh.PullRequestReview, 0, len(latest))
	for _, r := range latest {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetID() < out[j].GetID() })
	return out
}

// reviewDecision returns GitHub's reviewDecision of p: "" (null) when its
// base requires no review; CHANGES_REQUESTED when a writer's latest
// review requests changes; APPROVED when enough writers approved (not the
// last pusher when the last push must be approved by someone else, and a
// code owner among them when code owners must review); REVIEW_REQUIRED
// otherwise. Callers hold s.mu.
func (s *Server) reviewDecision(p *pull) string {
	r := s.rulesOf(p.Base)
	needOwner := r.codeOwners && len(s.codeOwners) > 0
	if !r.reviews || (r.approvals == 0 && !needOwner) {
		return ""
	}
	approvals, owner := 0, false
	for _, rv := range s.latestOpinions(p.Number) {
		if !writer(rv.GetAuthorAssociation()) {
			continue
		}
		switch rv.GetState() {
		case "CHANGES_REQUESTED":
			return "CHANGES_REQUESTED"
		case "APPROVED":
			login := rv.GetUser().GetLogin()
			if r.lastPush && (strings.EqualFold(login, p.pusher) || rv.GetCommitID() != p.HeadSHA) {
				continue
			}
			approvals++
			owner = owner || containsFold(s.codeOwners, login)
		}
	}
	if approvals >= r.approvals && (!needOwner || owner) {
		return "APPROVED"
	}
	return "REVIEW_REQUIRED"
}

// latestChecks returns the latest check run of each name and the latest
// status of each context of sha, oldest first. Callers hold s.mu.
func (s *Server) latestChecks(sha string) ([]*gh.CheckRun, []*gh.RepoStatus) {
	runs := map[string]*gh.CheckRun{}
	for _, c := range s.runs[sha] {
		if old, ok := runs[c.GetName()]; !ok || old.GetID() < c.GetID() {
			runs[c.GetName()] = c
		}
	}
	statuses := map[string]*gh.RepoStatus{}
	for _, st := range s.statuses[sha] {
		statuses[st.GetContext()] = st
	}
	rl := make([]*gh.CheckRun, 0, len(runs))
	for _, c := range runs {
		rl = append(rl, c)
	}
	sort.Slice(rl, func(i, j int) bool { return rl[i].GetID() < rl[j].GetID() })
	sl := make([]*gh.RepoStatus, 0, len(statuses))
	for _, st := range statuses {
		sl = append(sl, st)
	}
	sort.Slice(sl, func(i, j int) bool { return sl[i].GetID() < sl[j].GetID() })
	return rl, sl
}

// checkState is what one check or status says: passed, running or failed.
type checkState int

const (
	statePassed checkState = iota
	stateRunning
	stateFailed
)

func runState(c *gh.CheckRun) checkState {
	if c.GetStatus() != "completed" {
		return stateRunning
	}
	switch c.GetConclusion() {
	case "success", "neutral", "skipped":
		return statePassed
	}
	return stateFailed
}

func statusState(st *gh.RepoStatus) checkState {
	switch st.GetState() {
	case "success":
		return statePassed
	case "pending":
		return stateRunning
	}
	return stateFailed
}

// rollupState returns the StatusState of sha's checks and statuses, or ""
// when it has none (statusCheckRollup is then null). Callers hold s.mu.
func (s *Server) rollupState(sha string) string {
	runs, statuses := s.latestChecks(sha)
	if len(runs)+len(statuses) == 0 {
		return ""
	}
	failed, errored, running := false, false, false
	for _, c := range runs {
		switch runState(c) {
		case stateFailed:
			failed = true
		case stateRunning:
			running = true
		}
	}
	for _, st := range statuses {
		switch st.GetState() {
		case "failure":
			failed = true
		case "error":
			errored = true
		case "pending":
			running = true
		}
	}
	switch {
	case failed:
		return "FAILURE"
	case errored:
		return "ERROR"
	case running:
		return "PENDING"
	}
	return "SUCCESS"
}

// checkStates returns the state of each check and status of sha by name.
// Callers hold s.mu.
func (s *Server) checkStates(sha string) map[string]checkState {
	runs, statuses := s.latestChecks(sha)
	out := make(map[string]checkState, len(runs)+len(statuses))
	for _, st := range statuses {
		out[st.GetContext()] = statusState(st)
	}
	for _, c := range runs {
		out[c.GetName()] = runState(c)
	}
	return out
}

// behind reports whether p's base moved on since its head was based on it.
func (s *Server) behind(p *pull) bool { return s.branches[p.Base] != p.baseAt }

// mergeView returns p's mergeable and mergeStateStatus as GitHub answers
// them now: UNKNOWN both while GitHub computes mergeability (after its
// base moved, until a read starts the computation, which this fake
// finishes at once). Callers hold s.mu.
func (s *Server) mergeView(p *pull) (mergeable, status string) {
	switch {
	case p.Merged:
		return "UNKNOWN", "UNKNOWN"
	case !p.mergeKnown:
		return "UNKNOWN", "UNKNOWN"
	case p.conflicting || s.treeConflict(p):
		return "CONFLICTING", "DIRTY"
	}
	r := s.rulesOf(p.Base)
	switch {
	case p.Draft:
		return "MERGEABLE", "DRAFT"
	case r.strict && s.behind(p):
		return "MERGEABLE", "BEHIND"
	}
	states := s.checkStates(p.HeadSHA)
	for _, name := range r.required {
		if st, ok := states[name]; !ok || st != statePassed {
			return "MERGEABLE", "BLOCKED"
		}
	}
	if d := s.reviewDecision(p); d == "REVIEW_REQUIRED" || d == "CHANGES_REQUESTED" {
		return "MERGEABLE", "BLOCKED"
	}
	// Requirements of the base beside checks and reviews block the merge
	// too. With a merge queue required, a pull request ready to be queued
	// reads BLOCKED as well: GitHub's documentation does not say so;
	// tests of tools that merge through the queue model GitHub's answer
	// as mergeable_state "blocked", and a direct merge is refused.
	if (r.conversations && p.unresolved > 0) || r.mergeQueue {
		return "MERGEABLE", "BLOCKED"
	}
	for _, st := range states {
		if st != statePassed {
			return "MERGEABLE", "UNSTABLE"
		}
	}
	return "MERGEABLE", "CLEAN"
}

// computed records that a read asked for p's mergeability: GitHub starts
// computing it, and this fake has it by the next read.
func (s *Server) computed(p *pull) { p.mergeKnown = true }

// restMergeable returns the REST API's mergeable (nil is null) and
// mergeable_state of p.
func (s *Server) restMergeable(p *pull) (*bool, string) {
	m, st := s.mergeView(p)
	switch m {
	case "UNKNOWN":
		return nil, "unknown"
	case "CONFLICTING":
		return gh.Bool(false), strings.ToLower(st)
	}
	return gh.Bool(true), strings.ToLower(st)
}

// protectedBranchesURL is the documentation_url of GitHub's refusals for
// branch protection.
const protectedBranchesURL = "https://docs.github.com/articles/about-protected-branches"

// refusal returns GitHub's 405 refusing to merge p, or nil. Mergeability
// (unknown, conflicting) and drafts are always refused; the rules of the
// base only with Options.EnforceBranchProtection. Callers hold s.mu.
func (s *Server) refusal(p *pull) *Fault {
	refuse := func(msg, doc string) *Fault {
		b, _ := json.Marshal(map[string]string{"message": msg, "documentation_url": doc})
		return &Fault{Status: http.StatusMethodNotAllowed, Body: string(b)}
	}
	const mergeDoc = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"
	switch {
	case p.Draft:
		return refuse("Pull Request is still a draft", mergeDoc)
	case !p.mergeKnown || p.conflicting || s.treeConflict(p):
		return refuse("Pull Request is not mergeable", mergeDoc)
	case !s.opts.EnforceBranchProtection:
		return nil
	}
	r := s.rulesOf(p.Base)
	if r.strict && s.behind(p) && len(r.required) > 0 {
		return refuse(fmt.Sprintf("%d of %d required status checks are expected.", len(r.required), len(r.required)), protectedBranchesURL)
	}
	states := s.checkStates(p.HeadSHA)
	for _, name := range r.required {
		switch st, ok := states[name]; {
		case !ok:
			return refuse(fmt.Sprintf("Required status check %q is expected.", name), protectedBranchesURL)
		case st == stateRunning:
			return refuse(fmt.Sprintf("Required status check %q is in progress.", name), protectedBranchesURL)
		case st == stateFailed:
			return refuse(fmt.Sprintf("Required status check %q is failing.", name), protectedBranchesURL)
		}
	}
	switch s.reviewDecision(p) {
	case "REVIEW_REQUIRED", "CHANGES_REQUESTED":
		if r.codeOwners && len(s.codeOwners) > 0 && !s.ownerApproved(p) {
			return refuse("Waiting on code owner review from "+strings.Join(s.codeOwners, ", ")+".", protectedBranchesURL)
		}
		n := max(r.approvals, 1)
		if n == 1 {
			return refuse("At least 1 approving review is required by reviewers with write access.", protectedBranchesURL)
		}
		return refuse(fmt.Sprintf("At least %d approving reviews are required by reviewers with write access.", n), protectedBranchesURL)
	}
	// GitHub's REST documentation does not list these refusals' words:
	// they are GitHub's answers as tools merging through its API quote
	// them in their tests and notes (a ruleset's within "Repository rule
	// violations found").
	if r.conversations && p.unresolved > 0 {
		if r.conversationsByRuleset {
			return refuse(rulesetViolations+"A conversation must be resolved before this pull request can be merged.\n\n", mergeDoc)
		}
		return refuse("A conversation must be resolved before this pull request can be merged.", protectedBranchesURL)
	}
	if r.mergeQueue {
		return refuse(rulesetViolations+"Changes must be made through the merge queue", mergeDoc)
	}
	return nil
}

// rulesetViolations opens GitHub's refusals of a merge for the rules of
// rulesets, which it lists after it.
const rulesetViolations = "Repository rule violations found\n\n"

// methodRefusal returns GitHub's 405 refusing to merge p with method (""
// is GitHub's default, merge), or nil: the repository's settings and the
// base's pull_request rules (allowed_merge_methods) may allow it or not.
// GitHub's words are those it answers, as Mergify's engine matches them
// (mergify-engine's FORBIDDEN_*_MSG) and as a repository whose ruleset
// allows squash merges only recorded them for its other methods. Callers
// hold s.mu.
func (s *Server) methodRefusal(p *pull, method string) *Fault {
	if method == "" {
		method = "merge"
	}
	words, ok := map[string]string{
		"merge":  "Merge commits are not allowed on this repository.",
		"squash": "Squash merges are not allowed on this repository.",
		"rebase": "Rebase merges are not allowed on this repository.",
	}[method]
	if !ok { // not one of the API description's enum: GitHub validates bodies, 422
		f := Error(http.StatusUnprocessableEntity, "Validation Failed")
		return &f
	}
	allowed := s.rulesOf(p.Base).methods
	if s.mergeMethods[method] && (allowed == nil || slices.Contains(allowed, method)) {
		return nil
	}
	f := Error(http.StatusMethodNotAllowed, words)
	f.Body = strings.Replace(f.Body, "https://docs.github.com/rest", "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request", 1)
	return &f
}

// ownerApproved reports whether a code owner's latest review of p
// approves it. Callers hold s.mu.
func (s *Server) ownerApproved(p *pull) bool {
	return slices.ContainsFunc(s.latestOpinions(p.Number), func(rv *gh.PullRequestReview) bool {
		return rv.GetState() == "APPROVED" && containsFold(s.codeOwners, rv.GetUser().GetLogin())
	})
}

// requiredFor returns the checks required of pull request n's merge. Callers
// hold s.mu.
func (s *Server) requiredFor(n int) []string {
	if p, ok := s.pulls[n]; ok {
		return s.rulesOf(p.Base).required
	}
	return nil
}
