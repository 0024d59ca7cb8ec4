package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// policy is what a base branch requires of pull requests, from its branch
// protection and the repository's rulesets.
type policy struct {
	// requiredChecks are the check names that must pass, or nil when none
	// is known: every check then counts.
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
// Branch protection needs admin rights to read: a 403 or 404 there (which
// is also what an unprotected branch answers) falls back to the rulesets,
// which any reader may read, and to Config.DefaultRequiredApprovals. A
// failure to read either leaves the fallback in place, and is not kept.
func (a *Adapter) policy(ctx context.Context, base string) policy {
	now := a.cfg.Clock.Now()
	a.mu.Lock()
	e, ok := a.policies[base]
	a.mu.Unlock()
	if ok && now.Sub(e.at) < a.cfg.ProtectionTTL {
		return e.p
	}
	p, complete := a.readPolicy(ctx, base)
	if complete {
		a.mu.Lock()
		a.policies[base] = policyEntry{p: p, at: now}
		a.mu.Unlock()
	}
	return p
}

func (a *Adapter) readPolicy(ctx context.Context, base string) (policy, bool) {
	p := policy{approvals: -1}
	complete := true
	prot, _, err := a.client.Repositories.GetBranchProtection(ctx, a.cfg.Owner, a.cfg.Repo, base)
	switch {
	case err == nil:
		p.approvals = 0
		if rs := prot.RequiredStatusChecks; rs != nil {
			p.requiredChecks = []string{}
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
	case errors.Is(err, gh.ErrBranchNotProtected) || statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound:
		// Not protected, or not readable with these credentials.
	default:
		complete = false
		a.log.WarnContext(ctx, "read branch protection; every check counts meanwhile", "branch", base, "err", err)
	}
	rules, _, err := a.client.Repositories.GetRulesForBranch(ctx, a.cfg.Owner, a.cfg.Repo, base)
	switch {
	case err == nil:
		for _, r := range rules {
			if r.Parameters == nil {
				continue
			}
			switch r.Type {
			case "required_status_checks":
				var params struct {
					RequiredStatusChecks []struct {
						Context string `json:"context"`
					} `json:"required_status_checks"`
				}
				if json.Unmarshal(*r.Parameters, &params) == nil {
					for _, c := range params.RequiredStatusChecks {
						p.requiredChecks = append(p.requiredChecks, c.Context)
					}
				}
			case "pull_request":
				var params struct {
					DismissStale bool `json:"dismiss_stale_reviews_on_push"`
					Approvals    int  `json:"required_approving_review_count"`
				}
				if json.Unmarshal(*r.Parameters, &params) == nil {
					p.approvals = max(p.approvals, params.Approvals)
					p.dismissStale = p.dismissStale || params.DismissStale
				}
			}
		}
	case statusOf(err) == http.StatusForbidden || statusOf(err) == http.StatusNotFound:
	default:
		complete = false
		a.log.WarnContext(ctx, "read rulesets; every check counts meanwhile", "branch", base, "err", err)
	}
	if p.approvals < 0 {
		p.approvals = a.cfg.DefaultRequiredApprovals
	}
	return p, complete
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
