package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// policy is what a base branch requires of pull requests, from its branch
// protection and the repository's rulesets.
type policy struct {
	// requiredChecks are the check names that must pass, or nil when none
	// is named: every check then counts.
	requiredChecks []string
	// approvals is the number of approving reviews required.
	approvals int
	// approvalsDefault says approvals is Config.DefaultRequiredApprovals:
	// neither the protection nor a pull_request rule could say.
	approvalsDefault bool
	// dismissStale says approvals of an earlier head do not count.
	dismissStale bool
	// protectionUnreadable says the branch protection could not be read
	// with these credentials (403, or 404 other than "Branch not
	// protected"): it may require checks and rules not named here.
	protectionUnreadable bool
	// methods are the merge methods the rules allow (the pull_request
	// rules' allowed_merge_methods; a required linear history leaves out
	// merge commits), or nil when they restrict none.
	methods []string
	// mergeQueue says the rulesets require merging through GitHub's merge
	// queue, which Merge uses (see mergeByQueue).
	mergeQueue bool
	// unmodelled are the requirements of the base the lifecycle does not
	// model, in words for people ("conversations resolved"), in the order
	// found.
	unmodelled []string
}

// require records a requirement the lifecycle does not model, once.
func (p *policy) require(what string) {
	if !slices.Contains(p.unmodelled, what) {
		p.unmodelled = append(p.unmodelled, what)
	}
}

// allowOnly narrows the merge methods the rules allow to those of
// methods.
func (p *policy) allowOnly(methods []string) {
	if p.methods == nil {
		p.methods = slices.Clone(methods)
		return
	}
	p.methods = slices.DeleteFunc(p.methods, func(m string) bool { return !slices.Contains(methods, m) })
}

// The words of the requirements the lifecycle does not model, as
// BlockedReason names them.
const (
	reqConversations = "conversations resolved"
	reqSignatures    = "signed commits"
	reqLocked        = "no change to the base at all (it is locked)"
	reqRestricted    = "a merger among the people, teams and Apps allowed to push to the base"
	reqUpdate        = "a merger allowed to bypass the rulesets that restrict updates of the base"
	reqWorkflows     = "the workflows its rulesets require to pass"
	reqCodeScanning  = "code scanning results within its rulesets' thresholds"
)

type policyEntry struct {
	p  policy
	at time.Time
}

// policy returns the policy of base, read at most once per ProtectionTTL.
// Branch protection needs admin rights to read: a 403 or 404 there leaves
// the required checks to GraphQL's isRequired and the review rule to
// GitHub's reviewDecision (Config.DefaultRequiredApprovals when neither
// can be had), while GitHub's 404 "Branch not protected" is an answer
// (nothing required); the rulesets, which any reader may read, add their
// requirements in either case. When GitHub cannot be asked (a rate limit,
// a server error), the policy last read is kept, however old; with none,
// the error is returned: a policy that could not be read is not a lenient
// one.
func (a *Adapter) policy(ctx context.Context, base string) (policy, error) {
	return a.loadPolicy(ctx, base, false)
}

// loadPolicy is policy, read anew when fresh whatever its age.
func (a *Adapter) loadPolicy(ctx context.Context, base string, fresh bool) (policy, error) {
	now := a.cfg.Clock.Now()
	a.mu.Lock()
	e, ok := a.policies[base]
	a.mu.Unlock()
	if ok && !fresh && now.Sub(e.at) < a.cfg.ProtectionTTL {
		return e.p, nil
	}
	p, err := a.readPolicy(ctx, base)
	if err != nil {
		if ok {
			a.log.WarnContext(ctx, "read the policy of a branch; keeping the one read before", "branch", base, "read", e.at, "err", err)
			return e.p, nil
		}
		return policy{}, err
	}
	a.mu.Lock()
	a.policies[base] = policyEntry{p: p, at: now}
	a.mu.Unlock()
	return p, nil
}

// readPolicy reads the policy of base from its branch protection and the
// rules of the rulesets that apply to it.
func (a *Adapter) readPolicy(ctx context.Context, base string) (policy, error) {
	p := policy{approvals: -1}
	prot, _, err := a.client.Repositories.GetBranchProtection(ctx, a.cfg.Owner, a.cfg.Repo, base)
	switch {
	case err == nil:
		p.approvals = 0
		protectionPolicy(&p, prot)
	case errors.Is(err, lifecycle.ErrTemporary): // a rate limit's 403 or 429, a 5xx: not an answer
		return policy{}, wrap(err, "read the protection of branch %s", base)
	case errors.Is(err, gh.ErrBranchNotProtected):
		p.approvals = 0 // an answer: the branch requires nothing
	case statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound:
		p.protectionUnreadable = true // not readable with these credentials
	default:
		return policy{}, wrap(err, "read the protection of branch %s", base)
	}
	rules, err := a.branchRules(ctx, base)
	switch {
	case err == nil:
		for _, r := range rules {
			rulePolicy(&p, r)
		}
	case !errors.Is(err, lifecycle.ErrTemporary) && (statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound):
		// Not readable with these credentials.
	default:
		return policy{}, wrap(err, "read the rules of branch %s", base)
	}
	if p.approvals < 0 {
		p.approvals, p.approvalsDefault = a.cfg.DefaultRequiredApprovals, true
	}
	if len(p.requiredChecks) == 0 {
		// Status checks required, but none named: GitHub then requires
		// none, and every check counts.
		p.requiredChecks = nil
	}
	return p, nil
}

// protectionPolicy adds what a branch protection requires to p.
func protectionPolicy(p *policy, prot *gh.Protection) {
	if rs := prot.RequiredStatusChecks; rs != nil {
		if rs.Checks != nil {
			var bound []string
			for _, c := range *rs.Checks {
				p.requiredChecks = append(p.requiredChecks, c.Context)
				if c.AppID != nil && *c.AppID > 0 {
					bound = append(bound, c.Context)
				}
			}
			requireApps(p, bound)
		} else if rs.Contexts != nil {
			p.requiredChecks = append(p.requiredChecks, *rs.Contexts...)
		}
	}
	if rv := prot.RequiredPullRequestReviews; rv != nil {
		p.approvals = rv.RequiredApprovingReviewCount
		p.dismissStale = rv.DismissStaleReviews
	}
	if c := prot.RequiredConversationResolution; c != nil && c.Enabled {
		p.require(reqConversations)
	}
	if sig := prot.RequiredSignatures; sig != nil && sig.GetEnabled() {
		p.require(reqSignatures)
	}
	if l := prot.LockBranch; l != nil && l.GetEnabled() {
		p.require(reqLocked)
	}
	if prot.Restrictions != nil {
		p.require(reqRestricted)
	}
	if lh := prot.RequireLinearHistory; lh != nil && lh.Enabled {
		p.allowOnly([]string{"squash", "rebase"})
	}
}

// requireApps records that the checks named must be reported by the App
// they are required from: a check of the same name from another App does
// not meet the requirement, though the lifecycle, which goes by names,
// sees it passed.
func requireApps(p *policy, checks []string) {
	if len(checks) > 0 {
		p.require("the checks " + strings.Join(checks, ", ") + " reported by the Apps they are required from")
	}
}

// rulePolicy adds what a ruleset rule requires to p. The rule types and
// parameters are those of GitHub's REST API description
// (repository-rule-*); types that do not concern merging are skipped.
func rulePolicy(p *policy, r branchRule) {
	switch r.Type {
	case "required_status_checks":
		var params struct {
			RequiredStatusChecks []struct {
				Context       string `json:"context"`
				IntegrationID *int64 `json:"integration_id"`
			} `json:"required_status_checks"`
		}
		if json.Unmarshal(r.Parameters, &params) == nil {
			var bound []string
			for _, c := range params.RequiredStatusChecks {
				p.requiredChecks = append(p.requiredChecks, c.Context)
				if c.IntegrationID != nil && *c.IntegrationID > 0 {
					bound = append(bound, c.Context)
				}
			}
			requireApps(p, bound)
		}
	case "pull_request":
		var params struct {
			DismissStale        bool     `json:"dismiss_stale_reviews_on_push"`
			Approvals           int      `json:"required_approving_review_count"`
			ThreadResolution    bool     `json:"required_review_thread_resolution"`
			AllowedMergeMethods []string `json:"allowed_merge_methods"`
		}
		if json.Unmarshal(r.Parameters, &params) == nil {
			p.approvals = max(p.approvals, params.Approvals)
			p.dismissStale = p.dismissStale || params.DismissStale
			if params.ThreadResolution {
				p.require(reqConversations)
			}
			if len(params.AllowedMergeMethods) > 0 {
				p.allowOnly(params.AllowedMergeMethods)
			}
		}
	case "required_signatures":
		p.require(reqSignatures)
	case "required_deployments":
		var params struct {
			Environments []string `json:"required_deployment_environments"`
		}
		if json.Unmarshal(r.Parameters, &params) == nil && len(params.Environments) > 0 {
			p.require("successful deployments to " + strings.Join(params.Environments, ", "))
		} else {
			p.require("successful deployments")
		}
	case "merge_queue":
		p.mergeQueue = true
	case "required_linear_history":
		p.allowOnly([]string{"squash", "rebase"})
	case "update":
		p.require(reqUpdate)
	case "workflows":
		p.require(reqWorkflows)
	case "code_scanning":
		p.require(reqCodeScanning)
	}
}

// branchRule is a rule of GET /repos/{owner}/{repo}/rules/branches/{branch}:
// its type and parameters, whatever the type. go-github v60 refuses the
// whole list when it holds a type it does not know (merge_queue,
// code_scanning, ...), and GitHub keeps adding types.
type branchRule struct {
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

// branchRules returns the rules of the active rulesets that apply to
// branch, every page.
func (a *Adapter) branchRules(ctx context.Context, branch string) ([]branchRule, error) {
	var all []branchRule
	for page := 1; ; {
		u := fmt.Sprintf("repos/%s/%s/rules/branches/%s?per_page=100&page=%d", url.PathEscape(a.cfg.Owner), url.PathEscape(a.cfg.Repo),
			url.PathEscape(branch), page)
		req, err := a.client.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		var rules []branchRule
		resp, err := a.client.Do(ctx, req, &rules)
		if err != nil {
			return nil, err
		}
		all = append(all, rules...)
		if resp.NextPage == 0 {
			return all, nil
		}
		page = resp.NextPage
	}
}

// baseOf returns the base branch of pull request n, as last read, or
// reads it.
func (a *Adapter) baseOf(ctx context.Context, ref lifecycle.PullRequestRef) (string, error) {
	a.mu.Lock()
	b, ok := a.bases[ref.Number]
	a.mu.Unlock()
	if ok {
		return b, nil
	}
	pr, err := a.PullRequest(ctx, ref)
	if err != nil {
		return "", err
	}
	return pr.Base, nil
}
