package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// draftPrefix marks a draft merge request in its title.
const draftPrefix = "Draft: "

// EnsurePullRequest implements [lifecycle.ProviderAdapter]. It finds the
// open merge request from the task's branch into the target branch and
// applies req to it, or opens one. A 409 from GitLab on create means
// another call opened it meanwhile: it is found again. Reviewer logins
// GitLab does not know are a *lifecycle.ValidationError on
// pullRequest.reviewers.
//
// Applied to an open merge request (a resubmission), req changes only
// what it gives: the title when req.Title is set (a title edited at
// GitLab is kept otherwise), the description when req.Body or
// req.Summary is set, and reviewers added to those requested at GitLab.
// A draft stays a draft: req.Draft makes the merge request one (GitLab's
// "Draft: " title prefix), and nothing makes it ready again but a person
// at GitLab.
func (a *Adapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.PullRequest{}, err
	}
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	source := req.Head
	if source == "" {
		source = a.cfg.BranchPrefix + strings.ToLower(req.Task.Identifier)
	}
	target := req.Base
	if target == "" {
		target = a.cfg.TargetBranch
	}
	if target == "" {
		target = s.defaultBranch
	}
	reviewers, err := a.userIDs(ctx, req.Reviewers)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	title, body := titleOf(req), bodyOf(req)
	if mr, err := a.findOpen(ctx, s, source, target); err != nil || mr != nil {
		if err != nil {
			return lifecycle.PullRequest{}, err
		}
		return a.apply(ctx, s, mr, req, body, reviewers)
	}
	opt := &gl.CreateMergeRequestOptions{
		Title:              &title,
		Description:        &body,
		SourceBranch:       &source,
		TargetBranch:       &target,
		RemoveSourceBranch: gl.Ptr(a.cfg.Merge.RemoveSourceBranch),
		Squash:             gl.Ptr(a.cfg.Merge.Squash),
	}
	if len(reviewers) > 0 {
		opt.ReviewerIDs = &reviewers
	}
	created, resp, err := a.client.MergeRequests.CreateMergeRequest(s.id, opt, gl.WithContext(ctx))
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusConflict {
			// Opened by a concurrent call: use it.
			mr, ferr := a.findOpen(ctx, s, source, target)
			if ferr != nil {
				return lifecycle.PullRequest{}, ferr
			}
			if mr != nil {
				return a.apply(ctx, s, mr, req, body, reviewers)
			}
		}
		if resp != nil && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity) {
			return lifecycle.PullRequest{}, mergeRequestRefused(source, target, parseAPIError(err))
		}
		return lifecycle.PullRequest{}, a.fail(ctx, "open a merge request from "+source, resp, err)
	}
	pr := a.pullRequest(s, &created.BasicMergeRequest)
	pr.Created = true
	return pr, nil
}

// findOpen returns the open merge request from the project's branch
// source into target, or nil. GitLab's source_branch filter ignores the
// source project, so the list also holds merge requests from forks'
// branches of that name: those are someone else's work, never adopted
// (retitled, tracked, merged).
func (a *Adapter) findOpen(ctx context.Context, s *settings, source, target string) (*gl.BasicMergeRequest, error) {
	list, resp, err := a.client.MergeRequests.ListProjectMergeRequests(s.id, &gl.ListProjectMergeRequestsOptions{
		State: gl.Ptr("opened"), SourceBranch: &source, TargetBranch: &target,
		OrderBy: gl.Ptr("created_at"), Sort: gl.Ptr("asc"), ListOptions: gl.ListOptions{PerPage: 100},
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, a.fail(ctx, "list merge requests of "+source, resp, err)
	}
	for _, mr := range list {
		if mr.SourceProjectID == s.id && mr.TargetProjectID == s.id &&
			mr.SourceBranch == source && mr.TargetBranch == target && mr.State == "opened" {
			return mr, nil
		}
	}
	return nil, nil
}

// apply updates an open merge request to what req asks, when it differs
// (see EnsurePullRequest).
func (a *Adapter) apply(ctx context.Context, s *settings, mr *gl.BasicMergeRequest, req lifecycle.PullRequestRequest, body string, reviewers []int64) (lifecycle.PullRequest, error) {
	opt := &gl.UpdateMergeRequestOptions{}
	changed := false
	if title := retitle(mr, req); title != mr.Title {
		opt.Title, changed = &title, true
	}
	if (req.Body != "" || req.Summary != "") && mr.Description != body {
		opt.Description, changed = &body, true
	}
	if len(reviewers) > 0 {
		have := make([]int64, 0, len(mr.Reviewers))
		for _, u := range mr.Reviewers {
			have = append(have, u.ID)
		}
		want := slices.Clone(reviewers)
		for _, id := range have {
			if !slices.Contains(want, id) {
				want = append(want, id) // keep those requested at GitLab
			}
		}
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(have, want) {
			opt.ReviewerIDs, changed = &want, true
		}
	}
	if !changed {
		return a.pullRequest(s, mr), nil
	}
	updated, resp, err := a.client.MergeRequests.UpdateMergeRequest(s.id, mr.IID, opt, gl.WithContext(ctx))
	if err != nil {
		return lifecycle.PullRequest{}, a.fail(ctx, fmt.Sprintf("update merge request !%d", mr.IID), resp, err)
	}
	return a.pullRequest(s, &updated.BasicMergeRequest), nil
}

// userIDs resolves login names to GitLab user IDs.
func (a *Adapter) userIDs(ctx context.Context, logins []string) ([]int64, error) {
	var ids []int64
	var unknown []string
	for _, login := range logins {
		users, resp, err := a.client.Users.ListUsers(&gl.ListUsersOptions{Username: gl.Ptr(login)}, gl.WithContext(ctx))
		if err != nil {
			return nil, a.fail(ctx, "look up user "+login, resp, err)
		}
		found := false
		for _, u := range users {
			if strings.EqualFold(u.Username, login) {
				ids, found = append(ids, u.ID), true
				break
			}
		}
		if !found {
			unknown = append(unknown, login)
		}
	}
	if len(unknown) > 0 {
		return nil, &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{
			Field: "pullRequest.reviewers", Reason: "GitLab knows no user named " + strings.Join(unknown, ", ")}}}
	}
	return ids, nil
}

// titleOf returns the title of a new merge request, with GitLab's draft
// prefix when req asks for a draft.
func titleOf(req lifecycle.PullRequestRequest) string {
	title := req.Title
	if title == "" {
		title = req.Task.Identifier + ": " + req.Task.Title
	}
	title = undraft(title)
	if req.Draft {
		return draftPrefix + title
	}
	return title
}

// retitle returns the title open merge request mr gets from a
// resubmission req: req.Title if given, else its own; with GitLab's draft
// prefix when it is a draft or req asks for one.
func retitle(mr *gl.BasicMergeRequest, req lifecycle.PullRequestRequest) string {
	isDraft := mr.Draft || draftTitle(mr.Title)
	switch {
	case req.Title != "":
		title := undraft(req.Title)
		if isDraft || req.Draft {
			return draftPrefix + title
		}
		return title
	case req.Draft && !isDraft:
		return draftPrefix + undraft(mr.Title)
	}
	return mr.Title
}

// draftPrefixes are the title prefixes that make a merge request a draft
// at GitLab, whatever their case ("Draft:", "[Draft]", "(Draft)",
// "Draft - "), in lower case.
var draftPrefixes = []string{"draft:", "[draft]", "(draft)", "draft - "}

// draftTitle reports whether a title makes its merge request a draft.
func draftTitle(title string) bool {
	return undraft(title) != strings.TrimSpace(title)
}

// undraft returns a title without GitLab's draft prefixes.
func undraft(title string) string {
	title = strings.TrimSpace(title)
	for {
		low := strings.ToLower(title)
		cut := false
		for _, p := range draftPrefixes {
			if strings.HasPrefix(low, p) {
				title, cut = strings.TrimSpace(title[len(p):]), true
				break
			}
		}
		if !cut {
			return title
		}
	}
}

// bodyOf returns the merge request's description.
func bodyOf(req lifecycle.PullRequestRequest) string {
	if req.Body != "" {
		return req.Body
	}
	var b strings.Builder
	if req.Summary != "" {
		b.WriteString(req.Summary)
		b.WriteString("\n\n")
	}
	if req.Notes != "" {
		b.WriteString(req.Notes)
		b.WriteString("\n\n")
	}
	if req.Task.Links.Issue != "" {
		fmt.Fprintf(&b, "Task %s: %s\n", req.Task.Identifier, req.Task.Links.Issue)
	} else {
		fmt.Fprintf(&b, "Task %s\n", req.Task.Identifier)
	}
	return b.String()
}

// PullRequest implements [lifecycle.ProviderAdapter]: the merge request
// with iid ref.Number, one request (see [Adapter.ReadPullRequests] for
// what is read of it).
func (a *Adapter) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	s, mr, err := a.read(ctx, ref)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	return a.pullRequest(s, &mr.BasicMergeRequest), nil
}

// read reads a merge request.
func (a *Adapter) read(ctx context.Context, ref lifecycle.PullRequestRef) (*settings, *gl.MergeRequest, error) {
	s, err := a.project(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := a.checkRef(s, ref); err != nil {
		return nil, nil, err
	}
	mr, resp, err := a.client.MergeRequests.GetMergeRequest(s.id, int64(ref.Number), nil, gl.WithContext(ctx))
	if err != nil {
		return nil, nil, a.fail(ctx, fmt.Sprintf("read merge request !%d", ref.Number), resp, err)
	}
	return s, mr, nil
}

// pullRequest turns a merge request into the lifecycle's terms.
func (a *Adapter) pullRequest(s *settings, mr *gl.BasicMergeRequest) lifecycle.PullRequest {
	pr := lifecycle.PullRequest{
		PullRequestRef:        lifecycle.PullRequestRef{Owner: s.owner, Repo: s.repo, Number: int(mr.IID)},
		URL:                   mr.WebURL,
		Head:                  mr.SourceBranch,
		Base:                  mr.TargetBranch,
		HeadSHA:               strings.ToLower(mr.SHA),
		Draft:                 mr.Draft || draftTitle(mr.Title),
		DismissesStaleReviews: s.resetOnPush,
	}
	switch mr.State {
	case "merged":
		pr.State = lifecycle.PullRequestMerged
		pr.MergeCommitSHA = mergeCommit(mr)
	case "closed":
		pr.State = lifecycle.PullRequestClosed
	default: // opened, locked (a merge under way)
		pr.State = lifecycle.PullRequestOpen
		pr.Mergeable, pr.BlockedReason = mergeability(mr)
	}
	for _, u := range mr.Reviewers {
		pr.RequestedReviewers = append(pr.RequestedReviewers, u.Username)
	}
	return pr
}

// mergeability says whether GitLab can merge an open merge request into
// its target branch, from its detailed_merge_status (GitLab's
// documentation: merge_requests.md, "Merge status"), and, when it is
// blocked, why in words:
//
//   - conflict (or has_conflicts) is conflicting; need_rebase (a
//     fast-forward or semi-linear merge method, and the target moved on)
//     is behind;
//   - while GitLab works it out (checking, unchecked, preparing,
//     approvals_syncing) it is unknown;
//   - what the lifecycle models is judged from the rest of the reading,
//     and the merge request is mergeable as far as GitLab's own rules go:
//     mergeable; draft_status (the Draft fact); ci_must_pass and
//     ci_still_running (CI, from the head pipeline); not_approved and
//     requested_changes (the review decision, see
//     [Adapter.ReviewDecision]);
//   - anything else is a requirement of GitLab's that the lifecycle does
//     not model, and the merge request is blocked, with the reason in
//     words (see blockReason): discussions_not_resolved,
//     merge_request_blocked (and blocked_status, its name before GitLab
//     16.3), status_checks_must_pass (and external_status_checks),
//     jira_association_missing, locked_paths, locked_lfs_files,
//     security_policy_violations, merge_time, title_regex,
//     commits_status, broken_status, and any value GitLab adds.
//
// A GitLab before 15.6 gives no detailed_merge_status: only conflicts
// (has_conflicts) are said, and otherwise the adapter does not say ("").
func mergeability(mr *gl.BasicMergeRequest) (lifecycle.Mergeability, string) {
	switch st := mr.DetailedMergeStatus; {
	case mergePending(st, ""):
		return lifecycle.MergeabilityUnknown, ""
	case st == "conflict" || mr.HasConflicts:
		return lifecycle.MergeabilityConflicting, ""
	case st == "need_rebase":
		return lifecycle.MergeabilityBehind, ""
	case st == "":
		return "", ""
	case modelled(st):
		return lifecycle.MergeabilityMergeable, ""
	default:
		return lifecycle.MergeabilityBlocked, blockReason(st)
	}
}

// modelled reports whether a detailed_merge_status says only what the
// lifecycle judges from the rest of a reading (CI, reviews, drafts), or
// that nothing stops the merge.
func modelled(status string) bool {
	switch status {
	case "mergeable", "draft_status", "ci_must_pass", "ci_still_running", "not_approved", "requested_changes", "not_open":
		return true
	}
	return false
}

// blockReason says in words why GitLab will not merge a merge request
// whose detailed_merge_status is status, a requirement the lifecycle does
// not model.
func blockReason(status string) string {
	if why := mergeBlock(status); why != "" {
		return "GitLab: " + why
	}
	return "GitLab will not merge it: its detailed_merge_status is " + status
}

// mergeCommit is the commit a merged merge request became: its merge
// commit, else its squash commit, else (fast-forward) its head.
func mergeCommit(mr *gl.BasicMergeRequest) string {
	switch {
	case mr.MergeCommitSHA != "":
		return strings.ToLower(mr.MergeCommitSHA)
	case mr.SquashCommitSHA != "":
		return strings.ToLower(mr.SquashCommitSHA)
	}
	return strings.ToLower(mr.SHA)
}

// Merge implements [lifecycle.ProviderAdapter] with GitLab's accept merge
// request call at sha = req.ExpectedHeadSHA, sent once (client-go's
// retries are off; the ship runner owns them). A 409 (the SHA is not the
// head) is lifecycle.ErrHeadMismatch. A 405 (GitLab cannot merge it now)
// or 422 (the merge failed) reads the merge request again: merged at the
// expected head is AlreadyMerged; locked (GitLab is merging it) or a
// detailed_merge_status that passes by itself (checking, unchecked,
// preparing, approvals_syncing, ci_still_running) is a
// *lifecycle.TemporaryError; anything else is a *lifecycle.RefusedError
// with GitLab's message and the reason it reports. A merge whose answer
// does not come before ctx's deadline reads the merge request again too,
// within mergeReadTimeout: merged at the expected head is AlreadyMerged,
// still open or locked a TemporaryError.
func (a *Adapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if err := a.checkRef(s, req.Ref); err != nil {
		return lifecycle.MergeResult{}, err
	}
	want := strings.ToLower(req.ExpectedHeadSHA)
	if s.mergeTrains {
		return a.mergeByTrain(ctx, s, req, want)
	}
	opt := &gl.AcceptMergeRequestOptions{
		SHA:                      &want,
		Squash:                   gl.Ptr(a.cfg.Merge.Squash),
		ShouldRemoveSourceBranch: gl.Ptr(a.cfg.Merge.RemoveSourceBranch),
	}
	if req.CommitTitle != "" {
		if a.cfg.Merge.Squash {
			opt.SquashCommitMessage = &req.CommitTitle
		} else {
			opt.MergeCommitMessage = &req.CommitTitle
		}
	}
	mr, resp, err := a.client.MergeRequests.AcceptMergeRequest(s.id, int64(req.Ref.Number), opt, gl.WithContext(ctx))
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		switch {
		case status == http.StatusConflict:
			return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge !%d at %s: %s: %w", req.Ref.Number, want, message(err), lifecycle.ErrHeadMismatch)
		case status == http.StatusMethodNotAllowed || status == http.StatusUnprocessableEntity || status == http.StatusNotAcceptable:
			return a.notMerged(ctx, req, want, message(err))
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded):
			return a.mergeTimedOut(ctx, req, want, err)
		}
		return lifecycle.MergeResult{}, a.fail(ctx, fmt.Sprintf("merge !%d", req.Ref.Number), resp, err)
	}
	if mr.State != "merged" {
		// Accepted but not finished (GitLab merges in the background):
		// read it again; the runner retries a temporary failure, and the
		// next Merge finds it merged.
		_, again, rerr := a.read(ctx, req.Ref)
		if rerr != nil {
			return lifecycle.MergeResult{}, rerr
		}
		if again.State != "merged" {
			return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: ReasonMerging, Err: fmt.Errorf("gitlab: merge !%d accepted, but it is still %s (%s)", req.Ref.Number, again.State, again.DetailedMergeStatus)}
		}
		mr = again
	}
	if !strings.EqualFold(mr.SHA, want) {
		return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge !%d merged head %s, not %s: %w", req.Ref.Number, mr.SHA, want, lifecycle.ErrHeadMismatch)
	}
	return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest)}, nil
}

// mergeReadTimeout bounds the reading of a merge request after a merge
// whose answer did not come before the caller's deadline.
const mergeReadTimeout = 10 * time.Second

// mergeTimedOut reads a merge request again after a merge whose answer did
// not come before ctx's deadline (GitLab may have merged it, or be merging
// it): merged at want is a success, merged at another head
// ErrHeadMismatch, and open or locked a *lifecycle.TemporaryError, since
// the merge may still be under way; a merge request that cannot be read
// is temporary too. The next Merge then finds it merged, or merges it.
func (a *Adapter) mergeTimedOut(ctx context.Context, req lifecycle.MergeRequest, want string, cause error) (lifecycle.MergeResult, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mergeReadTimeout)
	defer cancel()
	_, mr, err := a.read(rctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Err: fmt.Errorf("gitlab: merge !%d: %w; reading it again: %w", req.Ref.Number, cause, err)}
	}
	switch mr.State {
	case "merged":
		if strings.EqualFold(mr.SHA, want) {
			return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest), AlreadyMerged: true}, nil
		}
		return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge request !%d is merged at %s, not %s: %w", mr.IID, mr.SHA, want, lifecycle.ErrHeadMismatch)
	case "opened", "locked":
		return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Err: fmt.Errorf("gitlab: merge !%d got no answer in time and it is %s: %w", req.Ref.Number, mr.State, cause)}
	}
	return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: fmt.Sprintf("GitLab did not merge merge request !%d: it is %s", mr.IID, mr.State), Err: cause}
}

// notMerged reads a merge request GitLab refused to merge: merged at want
// is a success, never a second merge; locked, or blocked for a reason
// that passes by itself, is temporary; otherwise the refusal, in GitLab's
// words and with the reasons it gives.
func (a *Adapter) notMerged(ctx context.Context, req lifecycle.MergeRequest, want, msg string) (lifecycle.MergeResult, error) {
	_, mr, err := a.read(ctx, req.Ref)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	switch {
	case mr.State == "merged" && strings.EqualFold(mr.SHA, want):
		return lifecycle.MergeResult{MergeCommitSHA: mergeCommit(&mr.BasicMergeRequest), AlreadyMerged: true}, nil
	case mr.State == "merged" || (mr.State == "opened" && !strings.EqualFold(mr.SHA, want)):
		return lifecycle.MergeResult{}, fmt.Errorf("gitlab: merge request !%d is %s at %s, not %s: %w", mr.IID, mr.State, mr.SHA, want, lifecycle.ErrHeadMismatch)
	case mr.State == "locked":
		return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: ReasonMerging,
			Err: fmt.Errorf("gitlab: merge request !%d is locked: GitLab is merging it (%s)", mr.IID, msg)}
	case mr.State == "opened" && passing(mr.DetailedMergeStatus):
		return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: waitReason(mr.DetailedMergeStatus),
			Err: fmt.Errorf("gitlab: merge request !%d cannot be merged yet: %s (detailed_merge_status %s: %s)", mr.IID, msg, mr.DetailedMergeStatus, mergeBlock(mr.DetailedMergeStatus))}
	}
	return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: refusal(mr, msg)}
}

// The reasons of the *lifecycle.TemporaryError Merge returns while it
// waits for GitLab, which the ship runner shows in ShipOperation.Wait.
const (
	// ReasonMergeabilityUnknown: GitLab is working out whether it can
	// merge the merge request (checking, unchecked, preparing,
	// approvals_syncing).
	ReasonMergeabilityUnknown = lifecycle.WaitMergeabilityUnknown
	// ReasonCIRunning: GitLab merges once the pipeline it waits for
	// passes (ci_still_running; a merge train takes a merge request once
	// its pipeline is complete).
	ReasonCIRunning = "ci_running"
	// ReasonMerging: GitLab is merging the merge request (locked).
	ReasonMerging = "merging"
	// ReasonMergeTrain: the merge request is on its target branch's merge
	// train, whose pipeline tests it before GitLab merges it.
	ReasonMergeTrain = lifecycle.WaitMergeTrain
)

// waitReason is the Reason of a wait for a detailed_merge_status that
// passes by itself.
func waitReason(status string) string {
	if status == "ci_still_running" {
		return ReasonCIRunning
	}
	return ReasonMergeabilityUnknown
}

// passing reports whether a detailed_merge_status that blocks a merge
// passes without anyone doing anything: GitLab is still working out
// whether the merge request can be merged, syncing its approvals after a
// push, or running its pipeline.
func passing(status string) bool {
	switch status {
	case "checking", "unchecked", "preparing", "approvals_syncing", "ci_still_running":
		return true
	}
	return false
}

// refusal says in words why GitLab does not merge mr.
func refusal(mr *gl.MergeRequest, msg string) string {
	out := fmt.Sprintf("GitLab refused to merge merge request !%d: %s", mr.IID, msg)
	st := mr.DetailedMergeStatus
	if mr.State != "opened" {
		return out + " (it is " + mr.State + ")"
	}
	if st == "" || st == "mergeable" {
		return out
	}
	if why := mergeBlock(st); why != "" {
		return fmt.Sprintf("%s (detailed_merge_status %s: %s)", out, st, why)
	}
	return fmt.Sprintf("%s (detailed_merge_status %s)", out, st)
}

// mergeBlock says in words what a value of detailed_merge_status that
// blocks a merge means, or "" for a value GitLab's documentation does not
// give.
func mergeBlock(status string) string {
	switch status {
	case "discussions_not_resolved":
		return "all threads must be resolved before it is merged"
	case "not_approved":
		return "the approvals required are missing"
	case "requested_changes":
		return "a reviewer requested changes"
	case "draft_status":
		return "the merge request is a draft"
	case "ci_must_pass":
		return "a pipeline must succeed before it is merged"
	case "ci_still_running":
		return "the pipeline is still running"
	case "conflict":
		return "the source branch conflicts with the target"
	case "need_rebase":
		return "the source branch must be rebased"
	case "blocked_status", "merge_request_blocked":
		return "another merge request it depends on must be merged first"
	case "checking":
		return "GitLab is still checking whether it can be merged"
	case "unchecked":
		return "GitLab has not checked whether it can be merged yet"
	case "preparing":
		return "GitLab is still preparing the merge request"
	case "approvals_syncing":
		return "GitLab is still syncing its approvals"
	case "not_open":
		return "the merge request is not open"
	case "broken_status":
		return "the source branch is broken"
	case "commits_status":
		return "the source branch must exist and hold commits"
	case "jira_association_missing":
		return "the title or description must name a Jira issue"
	case "external_status_checks", "status_checks_must_pass":
		return "its external status checks must pass"
	case "locked_paths":
		return "paths it changes are locked by other users"
	case "locked_lfs_files":
		return "LFS files it changes are locked by other users"
	case "security_policy_violations":
		return "its security policies must be satisfied"
	case "merge_time":
		return "it may not be merged before the time set for it"
	case "title_regex":
		return "its title must match the project's required pattern"
	}
	return ""
}
