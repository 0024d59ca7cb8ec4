package githubtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// What tests set of the repository's people and pull requests, beyond
// what people do (see githubtest.go).

// SetAuthorAssociation sets login's association with the repository, as
// GitHub reports it on reviews (author_association, authorAssociation):
// OWNER, MEMBER, COLLABORATOR (people with write access: the default for
// anyone but the owner), or CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR,
// FIRST_TIMER, MANNEQUIN, NONE (outsiders, whose reviews GitHub's branch
// rules do not count).
func (s *Server) SetAuthorAssociation(login, association string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.associations[strings.ToLower(login)] = association
	for _, rs := range s.reviews {
		for _, r := range rs {
			if strings.EqualFold(r.GetUser().GetLogin(), login) {
				r.AuthorAssociation = gh.String(association)
			}
		}
	}
}

// SetCodeOwners makes logins the code owners of every file: where the
// base's rules require code owners' reviews, one of them must approve.
func (s *Server) SetCodeOwners(logins ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codeOwners = append([]string(nil), logins...)
}

// SetConflicting makes pull request n conflict with its base, as a push
// to the base that changed the same lines makes it, or no longer. GitHub
// finds it when it works mergeability out (at once, if it knows the
// mergeability now; otherwise at the next read that starts the
// computation). The pull request's updatedAt does not move: a push to the
// base touches no pull request (see touch). A push to the pull request's
// head (Push) resolves the conflict.
func (s *Server) SetConflicting(n int, conflicting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].conflicting = conflicting
}

// MergeabilityKnown reports whether GitHub has worked pull request n's
// mergeability out since its base last moved: if not, a read answers
// UNKNOWN (GraphQL) or null (REST) and starts the computation.
func (s *Server) MergeabilityKnown(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pulls[n].mergeKnown
}

// Label adds label name to pull request n, or removes it when remove is
// set (the labeled and unlabeled events): its updatedAt moves; nothing
// else the lifecycle reads changes.
func (s *Server) Label(n int, name string, remove bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	if i := slices.Index(p.Labels, name); remove && i >= 0 {
		p.Labels = slices.Delete(p.Labels, i, i+1)
	} else if !remove && i < 0 {
		p.Labels = append(p.Labels, name)
	}
	s.touch(p)
}

// SetTitle edits pull request n's title, as a person does in the web UI
// (the edited event): its updatedAt moves.
func (s *Server) SetTitle(n int, title string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	p.Title = title
	s.touch(p)
}

// ForgetMergeability makes GitHub compute pull request n's mergeability
// anew, as it does after its base moves: mergeable is null (REST) and
// UNKNOWN (GraphQL), and a merge is refused with 405 "Pull Request is not
// mergeable", until a read of the pull request starts the computation,
// which the fake finishes by the next read.
func (s *Server) ForgetMergeability(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].mergeKnown = false
}

// ComputeMergeability makes GitHub finish computing pull request n's
// mergeability without a read.
func (s *Server) ComputeMergeability(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].mergeKnown = true
}

// SetMergeMethods sets the repository's merge settings: whether pull
// requests may be merged with a merge commit, squashed or rebased
// (allow_merge_commit, allow_squash_merge, allow_rebase_merge; all three
// by default). A merge with a method not allowed is refused with GitHub's
// 405 naming it.
func (s *Server) SetMergeMethods(merge, squash, rebase bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mergeMethods = map[string]bool{"merge": merge, "squash": squash, "rebase": rebase}
}

// HideMergeSettings makes GET /repos/{owner}/{repo} answer without the
// merge settings, as GitHub answers credentials that may not push to the
// repository (an App without contents write, a fine-grained token with
// read access); GraphQL's mergeCommitAllowed, squashMergeAllowed and
// rebaseMergeAllowed still say them.
func (s *Server) HideMergeSettings(hide bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hideMergeSettings = hide
}

// SetUnresolvedConversations sets how many review conversations of pull
// request n are unresolved. Where the base requires conversations to be
// resolved (branch protection's required_conversation_resolution, a
// pull_request rule's required_review_thread_resolution), GitHub blocks
// the merge while any is: mergeStateStatus BLOCKED, and with
// Options.EnforceBranchProtection a merge is refused.
func (s *Server) SetUnresolvedConversations(n, count int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n].unresolved = count
}

// SetDraft marks pull request n as a draft, or ready for review.
func (s *Server) SetDraft(n int, draft bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	p.Draft = draft
	s.touch(p)
}

// SetBase changes pull request n's base branch (an edit at the host).
func (s *Server) SetBase(n int, base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pulls[n]
	if _, ok := s.branches[base]; !ok {
		s.branches[base] = s.commit()
	}
	p.Base, p.mergeKnown = base, s.opts.MergeabilityAtOnce
	s.touch(p)
}

// checkSuiteJSON is a check suite as GET
// /repos/{owner}/{repo}/commits/{ref}/check-suites lists it.
type checkSuiteJSON struct {
	ID                   int64          `json:"id"`
	NodeID               string         `json:"node_id"`
	HeadSHA              string         `json:"head_sha"`
	Status               string         `json:"status"`
	Conclusion           *string        `json:"conclusion"`
	URL                  string         `json:"url"`
	CreatedAt            string         `json:"created_at"`
	UpdatedAt            string         `json:"updated_at"`
	LatestCheckRunsCount int            `json:"latest_check_runs_count"`
	CheckRunsURL         string         `json:"check_runs_url"`
	App                  appJSON        `json:"app"`
	PullRequests         []any          `json:"pull_requests"`
	Repository           *gh.Repository `json:"repository"`
}

type appJSON struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

func (s *Server) listCheckSuites(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.suites[r.PathValue("ref")]
	out := make([]checkSuiteJSON, 0, len(all))
	for _, su := range all {
		j := checkSuiteJSON{
			ID: su.id, NodeID: fmt.Sprintf("CS_%d", su.id), HeadSHA: su.sha, Status: su.status,
			URL:          fmt.Sprintf("%srepos/%s/%s/check-suites/%d", s.APIURL(), Owner, Repo, su.id),
			CreatedAt:    su.createdAt.UTC().Format("2006-01-02T15:04:05Z"),
			UpdatedAt:    su.updatedAt.UTC().Format("2006-01-02T15:04:05Z"),
			CheckRunsURL: fmt.Sprintf("%srepos/%s/%s/check-suites/%d/check-runs", s.APIURL(), Owner, Repo, su.id),
			App:          appJSON{ID: su.appID, Slug: su.appSlug, Name: su.appName}, PullRequests: []any{}, Repository: s.repoJSON(),
			LatestCheckRunsCount: len(s.runsOf(su)),
		}
		if su.status == "completed" {
			j.Conclusion = &su.conclusion
		}
		out = append(out, j)
	}
	from, to := page(w, r, len(out))
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(out), "check_suites": out[from:to]})
}
