package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	// dismissStale says approvals of an earlier head do not count.
	dismissStale bool
}

type policyEntry struct {
	p  policy
	at time.Time
}

// policy returns the policy of base, read at most once per ProtectionTTL.
// Branch protection needs admin rights to read: a 403 or 404 there falls
// back to Config.DefaultRequiredApprovals and to every check counting,
// while GitHub's 404 "Branch not protected" is an answer (nothing
// required); the rulesets, which any reader may read, add their
// requirements in either case. When GitHub cannot be asked (a rate limit,
// a server error), the policy last read is kept, however old; with none,
// the error is returned: a policy that could not be read is not a lenient
// one.
func (a *Adapter) policy(ctx context.Context, base string) (policy, error) {
	now := a.cfg.Clock.Now()
	a.mu.Lock()
	e, ok := a.policies[base]
	a.mu.Unlock()
	if ok && now.Sub(e.at) < a.cfg.ProtectionTTL {
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
		if rs := prot.RequiredStatusChecks; rs != nil {
			if rs.Checks != nil {
				for _, c := range *rs.Checks {
					p.requiredChecks = append(p.requiredChecks, c.Context)
				}
			} else if rs.Contexts != nil {
				p.requiredChecks = append(p.requiredChecks, *rs.Contexts...)
			}
		}
		if rv := prot.RequiredPullRequestReviews; rv != nil {
			p.approvals = rv.RequiredApprovingReviewCount
			p.dismissStale = rv.DismissStaleReviews
		}
	case errors.Is(err, lifecycle.ErrTemporary): // a rate limit's 403 or 429, a 5xx: not an answer
		return policy{}, wrap(err, "read the protection of branch %s", base)
	case errors.Is(err, gh.ErrBranchNotProtected):
		p.approvals = 0 // an answer: the branch requires nothing
	case statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound:
		// Not readable with these credentials.
	default:
		return policy{}, wrap(err, "read the protection of branch %s", base)
	}
	rules, err := a.branchRules(ctx, base)
	switch {
	case err == nil:
		for _, r := range rules {
			switch r.Type {
			case "required_status_checks":
				var params struct {
					RequiredStatusChecks []struct {
						Context string `json:"context"`
					} `json:"required_status_checks"`
				}
				if json.Unmarshal(r.Parameters, &params) == nil {
					for _, c := range params.RequiredStatusChecks {
						p.requiredChecks = append(p.requiredChecks, c.Context)
					}
				}
			case "pull_request":
				var params struct {
					DismissStale bool `json:"dismiss_stale_reviews_on_push"`
					Approvals    int  `json:"required_approving_review_count"`
				}
				if json.Unmarshal(r.Parameters, &params) == nil {
					p.approvals = max(p.approvals, params.Approvals)
					p.dismissStale = p.dismissStale || params.DismissStale
				}
			}
		}
	case !errors.Is(err, lifecycle.ErrTemporary) && (statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound):
		// Not readable with these credentials.
	default:
		return policy{}, wrap(err, "read the rules of branch %s", base)
	}
	if p.approvals < 0 {
		p.approvals = a.cfg.DefaultRequiredApprovals
	}
	if len(p.requiredChecks) == 0 {
		// Status checks required, but none named: GitHub then requires
		// none, and every check counts.
		p.requiredChecks = nil
	}
	return p, nil
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
