package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// The Adapter carries the lifecycle's own merge queue with GitHub's git
// database API (refs, commits) and its merges API.
var _ lifecycle.QueueHost = (*Adapter)(nil)

// checkRepo refuses a repository other than the Adapter's.
func (a *Adapter) checkRepo(repo lifecycle.RepoRef) error {
	if !strings.EqualFold(repo.Owner, a.cfg.Owner) || !strings.EqualFold(repo.Repo, a.cfg.Repo) {
		return fmt.Errorf("github: repository %s is not %s/%s: %w", repo, a.cfg.Owner, a.cfg.Repo, lifecycle.ErrNotFound)
	}
	return nil
}

// urgent returns ctx for a write: first in line for the rate limit, as
// merges are.
func urgent(ctx context.Context) context.Context {
	return hostbudget.WithPriority(ctx, hostbudget.Urgent)
}

// NativeQueue reports whether the rulesets of base require GitHub's merge
// queue (a merge_queue rule), from the base's policy read at most once
// per Config.ProtectionTTL.
func (a *Adapter) NativeQueue(ctx context.Context, repo lifecycle.RepoRef, base string) (bool, error) {
	if err := a.checkRepo(repo); err != nil {
		return false, err
	}
	p, err := a.policy(ctx, base)
	if err != nil {
		return false, err
	}
	return p.mergeQueue, nil
}

// BranchHead returns the commit branch points to (GET
// /repos/{owner}/{repo}/git/ref/heads/{branch}); a branch that does not
// exist is an error matching lifecycle.ErrNotFound.
func (a *Adapter) BranchHead(ctx context.Context, repo lifecycle.RepoRef, branch string) (string, error) {
	if err := a.checkRepo(repo); err != nil {
		return "", err
	}
	return a.branchHead(ctx, branch)
}

func (a *Adapter) branchHead(ctx context.Context, branch string) (string, error) {
	ref, _, err := a.client.Git.GetRef(ctx, a.cfg.Owner, a.cfg.Repo, "heads/"+branch)
	if err != nil {
		return "", wrap(err, "read branch %s", branch)
	}
	return strings.ToLower(ref.GetObject().GetSHA()), nil
}

// BuildCandidate points req.Branch at req.Parent (creating the branch, or
// moving it by force whatever it pointed to) and merges each head into
// it in order with GitHub's merges API (POST /repos/{owner}/{repo}/merges),
// a merge commit each whose message is req.Title and the head's pull
// request number, as "Title (#12)". A head the branch already contains
// (GitHub's 204) adds nothing. GitHub's 409, a merge conflict, is a
// *lifecycle.CandidateConflictError naming the head; the branch is then
// left where the merges before it put it, and the next build moves it
// back to its parent. It returns the branch's final commit. Calls for the
// same branch are serialised in this process.
func (a *Adapter) BuildCandidate(ctx context.Context, req lifecycle.CandidateRequest) (string, error) {
	if err := a.checkRepo(req.Repo); err != nil {
		return "", err
	}
	if req.Branch == "" || req.Parent == "" {
		return "", errors.New("github: a candidate needs a branch and a parent commit")
	}
	ctx = urgent(ctx)
	unlock := a.lockBranch(req.Branch)
	defer unlock()
	if err := a.pointBranch(ctx, req.Branch, req.Parent); err != nil {
		return "", err
	}
	head := strings.ToLower(req.Parent)
	for _, h := range req.Heads {
		msg := fmt.Sprintf("%s (#%d)", req.Title, h.PullRequest.Number)
		if req.Title == "" {
			msg = fmt.Sprintf("Merge pull request #%d", h.PullRequest.Number)
		}
		c, resp, err := a.client.Repositories.Merge(ctx, a.cfg.Owner, a.cfg.Repo, &gh.RepositoryMergeRequest{
			Base: gh.String(req.Branch), Head: gh.String(h.SHA), CommitMessage: gh.String(msg),
		})
		switch {
		case err == nil && resp.StatusCode == http.StatusNoContent:
			// Already contained: nothing to merge.
		case err == nil:
			head = strings.ToLower(c.GetSHA())
		case statusOf(err) == http.StatusConflict:
			return "", &lifecycle.CandidateConflictError{Head: h, Message: ghMessage(err)}
		default:
			return "", wrap(err, "merge %s at %s into %s", h.PullRequest, h.SHA, req.Branch)
		}
	}
	return head, nil
}

// pointBranch points branch at sha: it creates the branch, or, when it
// exists (GitHub's 422 "Reference already exists"), moves it by force.
func (a *Adapter) pointBranch(ctx context.Context, branch, sha string) error {
	_, _, err := a.client.Git.CreateRef(ctx, a.cfg.Owner, a.cfg.Repo, &gh.Reference{
		Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(sha)},
	})
	switch {
	case err == nil:
		return nil
	case statusOf(err) != http.StatusUnprocessableEntity || !alreadyExists(err):
		return refusal(err, "create branch %s at %s", branch, sha)
	}
	_, _, err = a.client.Git.UpdateRef(ctx, a.cfg.Owner, a.cfg.Repo, &gh.Reference{
		Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(sha)},
	}, true)
	if err != nil {
		return refusal(err, "move branch %s to %s", branch, sha)
	}
	return nil
}

// refusal wraps an error of a write: GitHub's 422 is a
// *lifecycle.RefusedError with its message, others as wrap does.
func refusal(err error, format string, args ...any) error {
	if statusOf(err) == http.StatusUnprocessableEntity {
		what := fmt.Sprintf(format, args...)
		return &lifecycle.RefusedError{Message: fmt.Sprintf("GitHub refused to %s: %s", what, ghMessage(err)), Err: err}
	}
	return wrap(err, format, args...)
}

// AdvanceBranch moves req.Branch to req.To by a fast-forward only (PATCH
// /repos/{owner}/{repo}/git/refs/heads/{branch} with force false). When
// GitHub refuses it (422), the branch is read: at req.To, it was moved
// already (an answer lost, a call repeated) and that is a success; not
// at req.From, it is an error matching lifecycle.ErrBranchMoved naming
// where it is; at req.From, GitHub refused the update itself (the base's
// rules forbid it, say), which is a *lifecycle.RefusedError with GitHub's
// message. GitHub moves a branch only forward, so a branch moved back
// behind req.From (a force push) is not told apart from one at req.From.
func (a *Adapter) AdvanceBranch(ctx context.Context, req lifecycle.AdvanceRequest) error {
	if err := a.checkRepo(req.Repo); err != nil {
		return err
	}
	ctx = urgent(ctx)
	to := strings.ToLower(req.To)
	// GitHub's update checks only that the move is a fast-forward, not
	// where the branch was: the branch is read first, so that a base
	// moved since the candidate was planned is reported, not built on.
	// A move between this read and the update is still a fast-forward to
	// a tested commit that contains it.
	switch at, err := a.branchHead(ctx, req.Branch); {
	case errors.Is(err, lifecycle.ErrNotFound):
		return fmt.Errorf("github: move branch %s from %s to %s: it does not exist: %w", req.Branch, req.From, req.To, lifecycle.ErrBranchMoved)
	case err != nil:
		return err
	case at == to:
		return nil
	case at != strings.ToLower(req.From):
		return fmt.Errorf("github: move branch %s from %s to %s: it is at %s: %w", req.Branch, req.From, req.To, at, lifecycle.ErrBranchMoved)
	}
	_, _, err := a.client.Git.UpdateRef(ctx, a.cfg.Owner, a.cfg.Repo, &gh.Reference{
		Ref: gh.String("refs/heads/" + req.Branch), Object: &gh.GitObject{SHA: gh.String(req.To)},
	}, false)
	if err == nil {
		return nil
	}
	if statusOf(err) != http.StatusUnprocessableEntity {
		return wrap(err, "move branch %s from %s to %s", req.Branch, req.From, req.To)
	}
	at, herr := a.branchHead(ctx, req.Branch)
	switch {
	case errors.Is(herr, lifecycle.ErrNotFound):
		return fmt.Errorf("github: move branch %s from %s to %s: it no longer exists: %w", req.Branch, req.From, req.To, lifecycle.ErrBranchMoved)
	case herr != nil:
		return fmt.Errorf("github: move branch %s from %s to %s: GitHub refused (%s), and reading where it is failed: %w", req.Branch, req.From, req.To, ghMessage(err), herr)
	case at == to:
		return nil
	case at != strings.ToLower(req.From):
		return fmt.Errorf("github: move branch %s from %s to %s: it is at %s: %w", req.Branch, req.From, req.To, at, lifecycle.ErrBranchMoved)
	}
	return &lifecycle.RefusedError{Message: fmt.Sprintf("GitHub refused to move branch %s from %s to %s: %s", req.Branch, req.From, req.To, ghMessage(err)), Err: err}
}

// Tree returns the SHA of the tree of commit sha (GET
// /repos/{owner}/{repo}/git/commits/{sha}); an unknown commit is an error
// matching lifecycle.ErrNotFound.
func (a *Adapter) Tree(ctx context.Context, repo lifecycle.RepoRef, sha string) (string, error) {
	if err := a.checkRepo(repo); err != nil {
		return "", err
	}
	c, _, err := a.client.Git.GetCommit(ctx, a.cfg.Owner, a.cfg.Repo, sha)
	if err != nil {
		return "", wrap(err, "read commit %s", sha)
	}
	return strings.ToLower(c.GetTree().GetSHA()), nil
}

// DeleteBranch deletes branch (DELETE
// /repos/{owner}/{repo}/git/refs/heads/{branch}); GitHub's 422
// "Reference does not exist" (or a 404) is a success.
func (a *Adapter) DeleteBranch(ctx context.Context, repo lifecycle.RepoRef, branch string) error {
	if err := a.checkRepo(repo); err != nil {
		return err
	}
	_, err := a.client.Git.DeleteRef(urgent(ctx), a.cfg.Owner, a.cfg.Repo, "heads/"+branch)
	switch {
	case err == nil, statusOf(err) == http.StatusNotFound:
		return nil
	case statusOf(err) == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(ghMessage(err)), "does not exist"):
		return nil
	}
	return refusal(err, "delete branch %s", branch)
}
