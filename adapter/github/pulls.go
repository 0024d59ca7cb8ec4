package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// EnsurePullRequest finds the open pull request of req's head branch into
// its base, or opens one. The head defaults to Config.BranchPrefix and the
// task's identifier in lower case, the base to Config.BaseBranch or the
// repository's default branch. The title and body given are applied to an
// existing pull request, and the reviewers requested; draft applies to a
// pull request opened by this call only (GitHub changes it through
// GraphQL, not REST). A head branch that does not exist at GitHub is a
// *lifecycle.ValidationError on pullRequest.head.
func (a *Adapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.PullRequest{}, err
	}
	head := req.Head
	if head == "" {
		head = a.cfg.BranchPrefix + strings.ToLower(req.Task.Identifier)
	}
	base := req.Base
	if base == "" {
		var err error
		if base, err = a.defaultBase(ctx); err != nil {
			return lifecycle.PullRequest{}, err
		}
	}
	// One call at a time per head in this process; GitHub's 422 "already
	// exists" covers other processes.
	unlock := a.lockBranch(head)
	defer unlock()

	pr, err := a.findOpen(ctx, head, base)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	created := false
	if pr == nil {
		pr, created, err = a.create(ctx, req, head, base)
		if err != nil {
			return lifecycle.PullRequest{}, err
		}
	} else if pr, err = a.update(ctx, pr, req); err != nil {
		return lifecycle.PullRequest{}, err
	}
	if err := a.requestReviewers(ctx, pr, req.Reviewers); err != nil {
		return lifecycle.PullRequest{}, err
	}
	out, err := a.convert(ctx, pr)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	out.Created = created
	return out, nil
}

// lockBranch takes the lock of a head branch and returns its release.
func (a *Adapter) lockBranch(head string) func() {
	a.mu.Lock()
	l, ok := a.branchLocks[head]
	if !ok {
		l = new(sync.Mutex)
		a.branchLocks[head] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// defaultBase returns Config.BaseBranch or the repository's default
// branch, read once.
func (a *Adapter) defaultBase(ctx context.Context) (string, error) {
	a.mu.Lock()
	b := a.baseBranch
	a.mu.Unlock()
	if b != "" {
		return b, nil
	}
	repo, _, err := a.client.Repositories.Get(ctx, a.cfg.Owner, a.cfg.Repo)
	if err != nil {
		return "", wrap(err, "read repository %s/%s", a.cfg.Owner, a.cfg.Repo)
	}
	a.mu.Lock()
	a.baseBranch = repo.GetDefaultBranch()
	a.mu.Unlock()
	return repo.GetDefaultBranch(), nil
}

// findOpen returns the open pull request from head into base, or nil. The
// head filter is owner-qualified: GitHub ignores a bare branch name and
// returns every pull request.
func (a *Adapter) findOpen(ctx context.Context, head, base string) (*gh.PullRequest, error) {
	prs, _, err := a.client.PullRequests.List(ctx, a.cfg.Owner, a.cfg.Repo, &gh.PullRequestListOptions{
		State: "open", Head: a.cfg.Owner + ":" + head, Base: base, ListOptions: gh.ListOptions{PerPage: 10},
	})
	if err != nil {
		return nil, wrap(err, "list pull requests of %s", head)
	}
	for _, pr := range prs {
		if pr.GetHead().GetRef() == head && pr.GetBase().GetRef() == base {
			return pr, nil
		}
	}
	return nil, nil
}

// create opens a pull request; a race lost to another opener is answered
// with the pull request it opened.
func (a *Adapter) create(ctx context.Context, req lifecycle.PullRequestRequest, head, base string) (*gh.PullRequest, bool, error) {
	title, body := req.Title, req.Body
	if title == "" {
		title = fmt.Sprintf("%s: %s", req.Task.Identifier, req.Task.Title)
	}
	if body == "" {
		body = defaultBody(req)
	}
	pr, _, err := a.client.PullRequests.Create(ctx, a.cfg.Owner, a.cfg.Repo, &gh.NewPullRequest{
		Title: gh.String(title), Head: gh.String(head), Base: gh.String(base), Body: gh.String(body), Draft: gh.Bool(req.Draft),
	})
	if err == nil {
		return pr, true, nil
	}
	if statusOf(err) != http.StatusUnprocessableEntity {
		return nil, false, wrap(err, "open a pull request from %s into %s", head, base)
	}
	if alreadyExists(err) {
		pr, ferr := a.findOpen(ctx, head, base)
		if ferr != nil {
			return nil, false, ferr
		}
		if pr != nil {
			return pr, false, nil
		}
	}
	switch field := invalidField(err); field {
	case "head", "base":
		return nil, false, &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{
			Field: "pullRequest." + field, Reason: fmt.Sprintf("GitHub refused branch %q: %s", map[string]string{"head": head, "base": base}[field], ghMessage(err)),
		}}}
	}
	return nil, false, &lifecycle.RefusedError{Message: "GitHub refused to open the pull request: " + ghMessage(err), Err: err}
}

// alreadyExists reports whether a 422 says a pull request for the branch
// already exists.
func alreadyExists(err error) bool {
	return strings.Contains(strings.ToLower(ghMessage(err)), "already exists")
}

// invalidField returns the field ("head" or "base") a 422 refuses, or "".
func invalidField(err error) string {
	var er *gh.ErrorResponse
	if !errors.As(err, &er) {
		return ""
	}
	for _, e := range er.Errors {
		if e.Field == "head" || e.Field == "base" {
			return e.Field
		}
	}
	return ""
}

func defaultBody(req lifecycle.PullRequestRequest) string {
	var b strings.Builder
	if req.Summary != "" {
		b.WriteString(req.Summary)
		b.WriteString("\n\n")
	}
	if req.Task.Links.Issue != "" {
		fmt.Fprintf(&b, "Task %s: %s\n", req.Task.Identifier, req.Task.Links.Issue)
	} else {
		fmt.Fprintf(&b, "Task %s\n", req.Task.Identifier)
	}
	return b.String()
}

// update applies the title and body a request gives to an existing pull
// request, when they differ.
func (a *Adapter) update(ctx context.Context, pr *gh.PullRequest, req lifecycle.PullRequestRequest) (*gh.PullRequest, error) {
	edit := &gh.PullRequest{}
	changed := false
	if req.Title != "" && req.Title != pr.GetTitle() {
		edit.Title, changed = gh.String(req.Title), true
	}
	if req.Body != "" && req.Body != pr.GetBody() {
		edit.Body, changed = gh.String(req.Body), true
	}
	if !changed {
		return pr, nil
	}
	out, _, err := a.client.PullRequests.Edit(ctx, a.cfg.Owner, a.cfg.Repo, pr.GetNumber(), edit)
	if err != nil {
		return nil, wrap(err, "edit pull request #%d", pr.GetNumber())
	}
	return out, nil
}

// requestReviewers requests the reviews of those not yet requested.
func (a *Adapter) requestReviewers(ctx context.Context, pr *gh.PullRequest, reviewers []string) error {
	var missing []string
	for _, r := range reviewers {
		if !slices.ContainsFunc(pr.RequestedReviewers, func(u *gh.User) bool { return strings.EqualFold(u.GetLogin(), r) }) {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	out, _, err := a.client.PullRequests.RequestReviewers(ctx, a.cfg.Owner, a.cfg.Repo, pr.GetNumber(), gh.ReviewersRequest{Reviewers: missing})
	if err != nil {
		if statusOf(err) == http.StatusUnprocessableEntity {
			return &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{Field: "pullRequest.reviewers", Reason: "GitHub refused the reviewers: " + ghMessage(err)}}}
		}
		return wrap(err, "request reviewers of pull request #%d", pr.GetNumber())
	}
	pr.RequestedReviewers = out.RequestedReviewers
	return nil
}

// PullRequest reads a pull request. DismissesStaleReviews comes from the
// branch protection or rulesets of its base (read at most once per
// Config.ProtectionTTL).
func (a *Adapter) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	if err := a.checkRef(ref); err != nil {
		return lifecycle.PullRequest{}, err
	}
	pr, _, err := a.client.PullRequests.Get(ctx, a.cfg.Owner, a.cfg.Repo, ref.Number)
	if err != nil {
		return lifecycle.PullRequest{}, wrap(err, "read pull request #%d", ref.Number)
	}
	return a.convert(ctx, pr)
}

// convert turns GitHub's pull request into the lifecycle's, and remembers
// its base branch. It fails only when the policy of an open pull
// request's base cannot be had (see Adapter.policy).
func (a *Adapter) convert(ctx context.Context, pr *gh.PullRequest) (lifecycle.PullRequest, error) {
	out := lifecycle.PullRequest{
		PullRequestRef: a.ref(pr.GetNumber()),
		URL:            pr.GetHTMLURL(),
		Head:           pr.GetHead().GetRef(),
		Base:           pr.GetBase().GetRef(),
		HeadSHA:        strings.ToLower(pr.GetHead().GetSHA()),
		Draft:          pr.GetDraft(),
		State:          lifecycle.PullRequestOpen,
	}
	switch {
	case pr.GetMerged() || pr.MergedAt != nil:
		out.State = lifecycle.PullRequestMerged
		out.MergeCommitSHA = strings.ToLower(pr.GetMergeCommitSHA())
	case pr.GetState() == "closed":
		out.State = lifecycle.PullRequestClosed
	}
	for _, u := range pr.RequestedReviewers {
		out.RequestedReviewers = append(out.RequestedReviewers, u.GetLogin())
	}
	a.mu.Lock()
	a.bases[pr.GetNumber()] = out.Base
	a.mu.Unlock()
	if out.State == lifecycle.PullRequestOpen {
		out.Mergeable = restMergeability(pr)
		p, err := a.policy(ctx, out.Base)
		if err != nil {
			return lifecycle.PullRequest{}, err
		}
		out.DismissesStaleReviews = p.dismissStale
		if pr.GetMergeableState() == "blocked" && !out.Draft {
			out.Mergeable, out.BlockedReason = a.hostBlocked(ctx, out)
		}
	}
	return out, nil
}

// hostBlocked tells what GitHub's mergeable_state "blocked" means for pr:
// blocked by the requirements the lifecycle models (CI, reviews), which
// leaves it mergeable (the lifecycle refuses to ship it for those itself),
// or by others, MergeabilityBlocked with their words. It takes one full
// reading of the pull request through GraphQL (one rate-limit point),
// which judges CI and reviews as ReadPullRequests does; when that fails,
// or the head moved meanwhile, the pull request is mergeable as far as
// the adapter can tell, and the merge lets GitHub decide.
func (a *Adapter) hostBlocked(ctx context.Context, pr lifecycle.PullRequest) (lifecycle.Mergeability, string) {
	reads := []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}
	out := make([]lifecycle.Reading, 1)
	if err := a.readFull(ctx, []int{0}, reads, out); err != nil || out[0].Err != nil {
		a.log.WarnContext(ctx, "read why GitHub blocks a pull request; taking it as mergeable", "pr", pr.Number, "err", errors.Join(err, out[0].Err))
		return lifecycle.MergeabilityMergeable, ""
	}
	if got := out[0].PullRequest; got.HeadSHA == pr.HeadSHA && got.State == lifecycle.PullRequestOpen {
		return got.Mergeable, got.BlockedReason
	}
	return lifecycle.MergeabilityMergeable, ""
}

// restMergeability maps the REST API's mergeable (null while GitHub
// computes it) and mergeable_state; "blocked" is mergeable here, and
// told apart by hostBlocked.
func restMergeability(pr *gh.PullRequest) lifecycle.Mergeability {
	switch state := pr.GetMergeableState(); {
	case state == "dirty" || (pr.Mergeable != nil && !*pr.Mergeable):
		return lifecycle.MergeabilityConflicting
	case state == "behind":
		return lifecycle.MergeabilityBehind
	case pr.Mergeable == nil || state == "unknown" || state == "":
		return lifecycle.MergeabilityUnknown
	}
	return lifecycle.MergeabilityMergeable
}

// rereadTimeout bounds the reading of a pull request after a failed merge.
const rereadTimeout = 10 * time.Second

// Merge merges the pull request at req.ExpectedHeadSHA (GitHub's "sha"
// parameter: GitHub refuses another head with 409, which is
// lifecycle.ErrHeadMismatch), with the merge method of Config.MergeMethod
// when GitHub allows it, else the first of merge, squash and rebase that
// the repository's settings and the base's rules allow. A 405 naming the
// method ("Squash merges are not allowed on this repository.": the
// settings or rules changed since read) has the settings and the rules
// read again, and the merge tried once more with another method.
//
// After any failure the pull request is read again: merged at the
// expected head is a success with AlreadyMerged set, so a merge whose
// answer was lost is never made twice; and the reading tells what a 405
// means. GitHub's 405 "Base branch was modified", and its "Pull Request is
// not mergeable" unless the pull request read again has a reason of its
// own not to be (closed, a draft, conflicting, behind a base that must be
// up to date, blocked by the base's rules), are a
// *lifecycle.TemporaryError around a *lifecycle.RefusedError with
// GitHub's message, which the ship runner reports when its retry budget
// is spent: GitHub works out the mergeability of every open pull request
// anew for seconds after each merge into their base, refuses merges
// meanwhile, and may read mergeable by the time the pull request is read
// again. That one's Reason is "mergeability_unknown". Its other 405s are
// a *lifecycle.RefusedError with GitHub's message: not mergeable for a
// reason of the pull request's own, and the refusals of branch protection
// and rulesets (a review required, a code owner's review, a required
// check, unresolved conversations).
//
// Into a base whose rulesets require GitHub's merge queue (as read, or as
// GitHub's 405 "Changes must be made through the merge queue" says), the
// pull request goes through the queue instead: see mergeByQueue.
func (a *Adapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	if err := a.checkRef(req.Ref); err != nil {
		return lifecycle.MergeResult{}, err
	}
	expected := strings.ToLower(req.ExpectedHeadSHA)
	base, err := a.baseOf(ctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if a.queueFollowed(req.Ref.Number) {
		return a.mergeByQueue(ctx, req, base, expected)
	}
	if pol, err := a.policy(ctx, base); err == nil && pol.mergeQueue {
		return a.mergeByQueue(ctx, req, base, expected)
	}
	method, err := a.mergeMethod(ctx, base, "")
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	res, err := a.mergeWith(ctx, req, expected, method)
	if m := refusedMethod(err); m != "" {
		a.log.InfoContext(ctx, "GitHub refused the merge method; reading the repository's settings and the base's rules again", "pr", req.Ref.Number, "method", m, "err", err)
		if method, err = a.mergeMethod(ctx, base, m); err != nil {
			return lifecycle.MergeResult{}, err
		}
		res, err = a.mergeWith(ctx, req, expected, method)
	}
	if err == nil && res.GetMerged() {
		return lifecycle.MergeResult{MergeCommitSHA: strings.ToLower(res.GetSHA())}, nil
	}
	if err == nil {
		err = &lifecycle.RefusedError{Message: "GitHub did not merge the pull request: " + res.GetMessage()}
	}
	// Whatever happened, the pull request tells whether it is merged; the
	// answer may have been lost to ctx's deadline, so it is read beyond it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rereadTimeout)
	defer cancel()
	pr, _, rerr := a.client.PullRequests.Get(rctx, a.cfg.Owner, a.cfg.Repo, req.Ref.Number)
	if rerr == nil && (pr.GetMerged() || pr.MergedAt != nil) {
		if strings.EqualFold(pr.GetHead().GetSHA(), expected) {
			return lifecycle.MergeResult{MergeCommitSHA: strings.ToLower(pr.GetMergeCommitSHA()), AlreadyMerged: true}, nil
		}
		return lifecycle.MergeResult{}, fmt.Errorf("github: pull request #%d was merged at %s: %w", req.Ref.Number, pr.GetHead().GetSHA(), lifecycle.ErrHeadMismatch)
	}
	msg := ghMessage(err)
	switch statusOf(err) {
	case http.StatusConflict:
		return lifecycle.MergeResult{}, fmt.Errorf("github: merge pull request #%d at %s: %s: %w", req.Ref.Number, expected, msg, lifecycle.ErrHeadMismatch)
	case http.StatusMethodNotAllowed:
		lmsg := strings.ToLower(msg)
		switch {
		case strings.Contains(lmsg, "base branch was modified"):
			// Retried; GitHub's words are the refusal once the retry
			// budget is spent.
			return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Err: &lifecycle.RefusedError{Message: msg, Err: err}}
		case strings.Contains(lmsg, "merge queue"):
			// The rules read did not say it yet: GitHub's refusal does.
			a.log.InfoContext(ctx, "GitHub requires its merge queue; merging through it", "pr", req.Ref.Number, "branch", base)
			return a.mergeByQueue(ctx, req, base, expected)
		case strings.Contains(lmsg, "not mergeable"):
			if rerr == nil {
				if why := ownReason(pr); why != "" {
					return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: msg + " (" + why + ")", Err: err}
				}
			}
			return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: lifecycle.WaitMergeabilityUnknown, Err: &lifecycle.RefusedError{Message: msg, Err: err}}
		}
		return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: msg, Err: err}
	case http.StatusUnprocessableEntity:
		return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: msg, Err: err}
	}
	return lifecycle.MergeResult{}, wrap(err, "merge pull request #%d", req.Ref.Number)
}

// mergeWith asks GitHub to merge the pull request at expected with
// method.
func (a *Adapter) mergeWith(ctx context.Context, req lifecycle.MergeRequest, expected, method string) (*gh.PullRequestMergeResult, error) {
	res, _, err := a.client.PullRequests.Merge(ctx, a.cfg.Owner, a.cfg.Repo, req.Ref.Number, "", &gh.PullRequestOptions{
		SHA: expected, MergeMethod: method, CommitTitle: req.CommitTitle,
	})
	return res, err
}

// ownReason returns, in words for people, the reason of its own a pull
// request read from the REST API has not to be merged, or "": closed, a
// draft, conflicting (mergeable_state dirty, or mergeable false), behind a
// base that must be up to date, or blocked by the base's rules.
func ownReason(pr *gh.PullRequest) string {
	switch state := pr.GetMergeableState(); {
	case pr.GetState() == "closed":
		return "it is closed"
	case pr.GetDraft() || state == "draft":
		return "it is a draft"
	case state == "dirty" || (pr.Mergeable != nil && !*pr.Mergeable):
		return "it conflicts with its base"
	case state == "behind":
		return "its head is behind its base, which must be up to date"
	case state == "blocked":
		return "the rules of its base block it"
	}
	return ""
}
