package github

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v60/github"
	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
)

// ReviewDecision decides the review of a pull request as GitHub's branch
// rules do, from the reviews of people with write access only (author
// association OWNER, MEMBER or COLLABORATOR): an outsider's review, on a
// public repository say, counts for nothing and is not returned. The
// latest review of each writer counts, COMMENTED reviews do not change
// it, a DISMISSED one withdraws it; when the base branch dismisses stale
// approvals, only approvals of q.HeadSHA count. Any writer requesting
// changes makes the decision changes_requested; otherwise the approvals
// are held against the required count from branch protection and
// rulesets, and a required count of zero is not_required. When neither
// says (the protection cannot be read with these credentials, and no
// ruleset has a pull_request rule), GitHub's own reviewDecision decides,
// read through GraphQL: null, which GitHub answers when the base requires
// no review, is not_required (changes_requested when a writer asks for
// changes); Config.DefaultRequiredApprovals applies only when that cannot
// be read either. The reviews returned are the writers' approving,
// change-requesting and commenting reviews, oldest first.
// (ReadPullRequests reads GitHub's own reviewDecision, which also honours
// code owners and the approval of the last push.)
func (a *Adapter) ReviewDecision(ctx context.Context, q lifecycle.ReviewQuery) (lifecycle.HostReviews, error) {
	if err := a.checkRef(q.PullRequest); err != nil {
		return lifecycle.HostReviews{}, err
	}
	base, err := a.baseOf(ctx, q.PullRequest)
	if err != nil {
		return lifecycle.HostReviews{}, err
	}
	var all []*gh.PullRequestReview
	opts := &gh.ListOptions{PerPage: 100}
	for {
		page, resp, err := a.client.PullRequests.ListReviews(ctx, a.cfg.Owner, a.cfg.Repo, q.PullRequest.Number, opts)
		if err != nil {
			return lifecycle.HostReviews{}, wrap(err, "list reviews of pull request #%d", q.PullRequest.Number)
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].GetSubmittedAt().Before(all[j].GetSubmittedAt().Time) })
	p, err := a.policy(ctx, base)
	if err != nil {
		return lifecycle.HostReviews{}, err
	}
	if !p.approvalsDefault {
		return decide(all, p, q.HeadSHA), nil
	}
	// Neither the protection nor a ruleset says: GitHub's own decision
	// does, which any reader may ask.
	hd, err := a.hostReviewDecision(ctx, q.PullRequest.Number)
	if err != nil {
		a.log.WarnContext(ctx, "read GitHub's review decision; counting approvals against Config.DefaultRequiredApprovals", "pr", q.PullRequest.Number, "err", err)
		return decide(all, p, q.HeadSHA), nil
	}
	p.approvals = 0
	out := decide(all, p, q.HeadSHA)
	switch hd {
	case "APPROVED":
		out.Decision = lifecycle.DecisionApproved
	case "CHANGES_REQUESTED":
		out.Decision = lifecycle.DecisionChangesRequested
	case "REVIEW_REQUIRED":
		out.Decision = lifecycle.DecisionPending
	}
	return out, nil
}

// hostReviewDecision returns GitHub's reviewDecision of pull request n
// (APPROVED, CHANGES_REQUESTED, REVIEW_REQUIRED), or "" for null: the base
// requires no review. One GraphQL query, of one point.
func (a *Adapter) hostReviewDecision(ctx context.Context, n int) (string, error) {
	var q struct {
		Repository struct {
			PullRequest *struct {
				ReviewDecision *string `graphql:"reviewDecision"`
			} `graphql:"pullRequest(number: $n)"`
		} `graphql:"repository(owner: $owner, name: $name)"`
		RateLimit *rateLimitField `graphql:"rateLimit"`
	}
	errs, err := a.query(ctx, &q, map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo), "n": githubv4.Int(n)})
	if err != nil {
		return "", fmt.Errorf("github: read the review decision of pull request #%d: %w", n, err)
	}
	if len(errs) > 0 || q.Repository.PullRequest == nil {
		var msg string
		if len(errs) > 0 {
			msg = errs[0].Message
		}
		return "", fmt.Errorf("github: read the review decision of pull request #%d: %s", n, msg)
	}
	a.observeRateLimit(q.RateLimit)
	if d := q.Repository.PullRequest.ReviewDecision; d != nil {
		return *d, nil
	}
	return "", nil
}

// decide applies GitHub's rules to reviews sorted oldest first.
func decide(reviews []*gh.PullRequestReview, p policy, head string) lifecycle.HostReviews {
	var out lifecycle.HostReviews
	latest := map[string]*gh.PullRequestReview{} // by reviewer, lower case
	for _, r := range reviews {
		if !writer(r.GetAuthorAssociation()) {
			continue
		}
		login := strings.ToLower(r.GetUser().GetLogin())
		hr := lifecycle.HostReview{ID: strconv.FormatInt(r.GetID(), 10), Reviewer: r.GetUser().GetLogin(), Body: r.GetBody(),
			CommitSHA: strings.ToLower(r.GetCommitID()), SubmittedAt: r.GetSubmittedAt().Time}
		switch r.GetState() {
		case "APPROVED":
			hr.Outcome = lifecycle.ReviewApproved
			latest[login] = r
		case "CHANGES_REQUESTED":
			hr.Outcome = lifecycle.ReviewChangesRequested
			latest[login] = r
		case "DISMISSED":
			delete(latest, login)
			continue
		case "COMMENTED":
			hr.Outcome = lifecycle.ReviewCommented
		default: // PENDING: not submitted yet
			continue
		}
		out.Reviews = append(out.Reviews, hr)
	}
	approvals, changes := 0, false
	for _, r := range latest {
		switch r.GetState() {
		case "CHANGES_REQUESTED":
			changes = true
		case "APPROVED":
			if !p.dismissStale || strings.EqualFold(r.GetCommitID(), head) {
				approvals++
			}
		}
	}
	out.Decision = decision(changes, approvals, p.approvals)
	return out
}
