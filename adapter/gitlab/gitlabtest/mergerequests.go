package gitlabtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// What moves a merge request's updated_at, as at GitLab:
//
//   - A change of the merge request's own row is saved, and Rails sets
//     updated_at: an edit of its title (a draft is a title prefix), its
//     description, labels, reviewers or target branch
//     (MergeRequests::UpdateService), a close, a reopen, a merge, the lock
//     of a merge under way (the state machine of state). See save.
//   - A system note touches the merge request it is on (Note#touch_noteable
//     calls noteable.touch), and MergeRequest includes ThrottledTouch
//     (app/models/concerns/throttled_touch.rb: touch does nothing while
//     updated_at is less than TOUCH_INTERVAL, a minute, old): commits pushed
//     ("added 1 commit"), an approval or its removal
//     (SystemNoteService.approve_mr, unapprove_mr), a review
//     (requested_changes). A change made this way within a minute of the
//     last one leaves updated_at where it was. See touch.
//   - Nothing else: a pipeline, a job or a commit status changing is a row
//     of its own (ci_pipelines, ci_builds); the merge request's merge
//     status changing (marked unchecked when its target branch moves,
//     worked out by a mergeability check) is timeless (the merge_status
//     state machine wraps its transitions in Gitlab::Timeless.timeless);
//     checks GitLab works out on each request (blocking discussions,
//     external status checks, a blocking merge request: see
//     SetDetailedMergeStatus) are kept on no column of the merge request.

// touchInterval is how long after a merge request's updated_at GitLab
// leaves it as it is when a system note touches it (ThrottledTouch).
const touchInterval = time.Minute

type mergeRequest struct {
	iid                  int64
	id                   int64
	sourceProject        int64 // ProjectID, or a fork's ID
	source, target       string
	title, description   string
	state                string
	sha                  string
	mergeCommit, squashC string
	squash               bool
	reviewers            []int64
	reviewerState        map[int64]string
	approvedBy           []int64
	headPipeline         int64
	labels               []string
	notes                []*gl.Note // system notes the fake writes (the merge train's)
	createdAt, updatedAt time.Time
	mergedAt             time.Time

	// mergeStatus is GitLab's merge_status: preparing (just opened),
	// unchecked (its branches moved since the last check), checking,
	// can_be_merged, cannot_be_merged, cannot_be_merged_recheck (it could
	// not be merged, and its branches moved since: it still shows a
	// conflict) or cannot_be_merged_rechecking (that checked again).
	mergeStatus string
	// checkDue is when the mergeability check a request asked for is done
	// (with Options.CheckDelay), or zero.
	checkDue time.Time
	// conflicts says the source branch conflicts with the target: the
	// next check finds it cannot be merged.
	conflicts bool
	// behind says the target branch moved on since the last push.
	behind bool
	// override is a detailed_merge_status a test set.
	override string
}

// MergeRequest is what the fake holds of a merge request.
type MergeRequest struct {
	// IID is its number in the project.
	IID int64
	// SourceProjectID is the project of its source branch: ProjectID, or
	// a fork's.
	SourceProjectID int64
	// SourceBranch and TargetBranch are its branches.
	SourceBranch, TargetBranch string
	// Title and Description are as last set.
	Title, Description string
	// State is opened, closed, merged, or locked (while a merge runs).
	State string
	// SHA is its head commit.
	SHA string
	// MergeCommitSHA is its merge commit; empty unless merged with one.
	MergeCommitSHA string
	// SquashCommitSHA is its squash commit; empty unless squashed.
	SquashCommitSHA string
	// ReviewerIDs are the user IDs of its reviewers.
	ReviewerIDs []int64
	// ReviewerStates are the reviewers' states by user ID.
	ReviewerStates map[int64]string
	// ApprovedBy are the user IDs of those who approved it.
	ApprovedBy []int64
	// DetailedMergeStatus is GitLab's detailed_merge_status as a list of
	// merge requests shows it now.
	DetailedMergeStatus string
	// HeadPipelineID is the ID of its head pipeline, or 0.
	HeadPipelineID int64
	// SquashOnMerge is its squash setting.
	SquashOnMerge bool
	// CreatedAt and UpdatedAt are its created_at and updated_at.
	CreatedAt, UpdatedAt time.Time
}

// draft reports whether a title makes a merge request a draft, as
// GitLab's prefixes do.
func draft(title string) bool {
	low := strings.ToLower(strings.TrimSpace(title))
	for _, p := range []string{"draft:", "[draft]", "(draft)", "draft -"} {
		if strings.HasPrefix(low, p) {
			return true
		}
	}
	return false
}

// save records a change of mr's own row: its updated_at moves.
func (s *Server) save(mr *mergeRequest) { mr.updatedAt = s.now() }

// touch records a change GitLab makes known through a system note
// (commits pushed, an approval, a review): the note touches the merge
// request, which moves its updated_at unless that moved within the last
// minute.
func (s *Server) touch(mr *mergeRequest) {
	if now := s.now(); now.Sub(mr.updatedAt) > touchInterval {
		mr.updatedAt = now
	}
}

// uncheck makes GitLab work out mr's mergeability again (its branches
// moved), as MergeRequest's mark_as_unchecked does: one that could not be
// merged is cannot_be_merged_recheck (and still shows conflict), any
// other unchecked. Like GitLab's, the change of merge_status leaves
// updated_at as it is, and no check is queued: one runs when a request
// asks for it.
func uncheck(mr *mergeRequest) {
	switch mr.mergeStatus {
	case "can_be_merged", "checking":
		mr.mergeStatus = "unchecked"
	case "cannot_be_merged", "cannot_be_merged_rechecking":
		mr.mergeStatus = "cannot_be_merged_recheck"
	}
	mr.checkDue = time.Time{}
}

// pending reports whether mr's mergeability is not worked out yet.
func (mr *mergeRequest) pending() bool {
	switch mr.mergeStatus {
	case "preparing", "unchecked", "checking", "cannot_be_merged_recheck", "cannot_be_merged_rechecking":
		return true
	}
	return false
}

// check works out mr's mergeability as GitLab's mergeability check does,
// leaving updated_at as it is.
func (s *Server) check(mr *mergeRequest) {
	mr.checkDue = time.Time{}
	if !mr.pending() {
		return
	}
	mr.mergeStatus = "can_be_merged"
	if mr.conflicts || s.conflictsLocked(mr) {
		mr.mergeStatus = "cannot_be_merged"
	}
}

// askCheckLocked starts the mergeability check of a merge request a
// request asked about (a reading of it alone, a list with
// with_merge_status_recheck): it is checking, and the check is done once
// Options.CheckDelay has passed (at the next request after it), or, with
// no delay, right after the answer (done reports whether the caller must
// do it then). A peek starts nothing.
func (s *Server) askCheckLocked(r *http.Request, mr *mergeRequest) (done bool) {
	if peek(r) || !mr.pending() || (mr.state != "opened" && mr.state != "locked") {
		return false
	}
	switch mr.mergeStatus {
	case "unchecked", "preparing":
		mr.mergeStatus = "checking"
	case "cannot_be_merged_recheck":
		mr.mergeStatus = "cannot_be_merged_rechecking"
	}
	if s.opts.CheckDelay <= 0 {
		return true
	}
	if mr.checkDue.IsZero() {
		mr.checkDue = s.now().Add(s.opts.CheckDelay)
	}
	return false
}

// dueChecksLocked finishes the mergeability checks whose time has come.
func (s *Server) dueChecksLocked() {
	now := s.now()
	for _, mr := range s.mrs {
		if !mr.checkDue.IsZero() && !now.Before(mr.checkDue) {
			s.check(mr)
		}
	}
}

// detailed is mr's detailed_merge_status.
func (s *Server) detailed(mr *mergeRequest) string {
	switch {
	case mr.state != "opened" && mr.state != "locked":
		return "not_open"
	case mr.mergeStatus == "preparing" || mr.mergeStatus == "unchecked" || mr.mergeStatus == "checking":
		// As GitLab's DetailedMergeStatusService, before any check.
		return mr.mergeStatus
	case mr.mergeStatus == "cannot_be_merged_rechecking":
		return "checking"
	case mr.override != "":
		return mr.override
	case draft(mr.title):
		return "draft_status"
	case mr.mergeStatus == "cannot_be_merged" || mr.mergeStatus == "cannot_be_merged_recheck":
		return "conflict"
	case mr.behind && s.opts.MergeMethod != "merge":
		return "need_rebase"
	case s.opts.ApprovalsRequired > int64(len(mr.approvedBy)):
		return "not_approved"
	}
	return "mergeable"
}

// Push moves a branch to a new commit (creating the branch if needed), as
// an agent pushing would, and returns the commit. Open merge requests
// from the branch get it as their head (their mergeability is checked
// again; where approvals are reset on push, they lose theirs); open merge
// requests into the branch are behind it and checked again.
func (s *Server) Push(branch string) string {
	s.mu.Lock()
	return s.unlockAfterPush(branch, s.pushLocked(branch))
}

func (s *Server) pushLocked(branch string) string {
	c := NewSHA()
	if s.git != nil {
		parent, ok := s.branches[branch]
		if !ok {
			parent = s.branches["main"]
		}
		c = s.commitLocked(parent, map[string]string{"pushes/" + branch + ".txt": fmt.Sprintf("push %d\n", s.git.commit+1)})
		s.branchPushedLocked(branch, c)
		return c
	}
	s.branches[branch] = c
	s.movedLocked(branch)
	s.pushedLocked(branch, c)
	return c
}

// pushedLocked gives the open merge requests from branch its new head c:
// their mergeability is checked again, their approvals dropped where
// approvals are reset on push, and their refs/merge-requests/<iid>/head
// follows in git mode.
func (s *Server) pushedLocked(branch, c string) {
	for _, mr := range s.mrs {
		if mr.sourceProject == ProjectID && mr.source == branch && mr.state == "opened" {
			mr.sha = c
			s.mrRefLocked(mr)
			mr.behind, mr.conflicts = false, false // rebased, conflicts resolved
			uncheck(mr)
			if s.opts.ResetApprovalsOnPush {
				mr.approvedBy = nil
			}
			s.touch(mr) // "added 1 commit"
		}
	}
}

// movedLocked records that branch moved: open merge requests into it are
// behind, and checked again.
func (s *Server) movedLocked(branch string) {
	for _, mr := range s.mrs {
		if mr.target == branch && (mr.state == "opened" || mr.state == "locked") {
			mr.behind = true
			uncheck(mr)
		}
	}
}

// OpenForkMergeRequest opens a merge request into the project's target
// branch from branch of another project, a fork whose ID is
// sourceProjectID, as someone outside the project may, and returns its
// IID. Its head is a commit of the fork; pushes to the project's own
// branch of that name do not move it. GitLab's list of the project's merge
// requests filtered by source_branch includes it, whatever its source
// project.
func (s *Server) OpenForkMergeRequest(sourceProjectID int64, branch, target, title string) int64 {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sourceProjectID == ProjectID {
		s.t.Fatalf("gitlabtest: a fork's project ID must not be the project's (%d)", ProjectID)
	}
	if _, ok := s.branches[target]; !ok {
		s.t.Fatalf("gitlabtest: no target branch %q", target)
	}
	mr := s.newMRLocked(sourceProjectID, branch, target, title, "", NewSHA(), false)
	s.check(mr)
	return mr.iid
}

func (s *Server) newMRLocked(sourceProject int64, source, target, title, description, sha string, squash bool) *mergeRequest {
	s.nextID++
	now := s.now()
	mr := &mergeRequest{iid: int64(len(s.mrs) + 1), id: s.nextID, sourceProject: sourceProject, source: source, target: target,
		title: title, description: description, state: "opened", sha: sha, squash: squash,
		mergeStatus: "preparing", reviewerState: map[int64]string{}, createdAt: now, updatedAt: now}
	s.mrs = append(s.mrs, mr)
	return mr
}

// Approve records an approval of merge request iid by a user (alice, bob
// or carol); a reviewer's state becomes approved.
func (s *Server) Approve(iid int64, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr, id := s.mr(iid), s.user(user)
	if !slices.Contains(mr.approvedBy, id) {
		mr.approvedBy = append(mr.approvedBy, id)
	}
	if _, ok := mr.reviewerState[id]; ok {
		mr.reviewerState[id] = "approved"
	}
	s.touch(mr) // "approved this merge request"
}

// Unapprove takes a user's approval of merge request iid back.
func (s *Server) Unapprove(iid int64, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr, id := s.mr(iid), s.user(user)
	mr.approvedBy = slices.DeleteFunc(mr.approvedBy, func(u int64) bool { return u == id })
	if mr.reviewerState[id] == "approved" {
		mr.reviewerState[id] = "unapproved"
	}
	s.touch(mr) // "unapproved this merge request"
}

// SetReviewerState sets a user's reviewer state on merge request iid, as
// submitting a review at GitLab does: "reviewed" (a review without
// approval), "requested_changes" (which, as at GitLab, takes the user's
// approval back), "unreviewed" (review requested again). The user becomes
// a reviewer if not one.
func (s *Server) SetReviewerState(iid int64, user, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr, id := s.mr(iid), s.user(user)
	if !slices.Contains(mr.reviewers, id) {
		mr.reviewers = append(mr.reviewers, id)
	}
	mr.reviewerState[id] = state
	if state == "requested_changes" {
		mr.approvedBy = slices.DeleteFunc(mr.approvedBy, func(u int64) bool { return u == id })
	}
	s.touch(mr) // the review's note
}

// SetTitle edits merge request iid's title, as a person does at GitLab.
func (s *Server) SetTitle(iid int64, title string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.title = title
	s.save(mr)
}

// SetLabels replaces merge request iid's labels, as a person does at
// GitLab.
func (s *Server) SetLabels(iid int64, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.labels = slices.Clone(labels)
	s.save(mr)
}

// SetReviewers replaces merge request iid's reviewers (alice, bob or
// carol), as a person does at GitLab; those who stay keep their state.
func (s *Server) SetReviewers(iid int64, users ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	var ids []int64
	for _, u := range users {
		ids = append(ids, s.user(u))
	}
	mr.setReviewers(ids)
	s.save(mr)
}

// Retarget makes open merge request iid merge into branch target, which
// must exist, as a person editing its target branch does: its
// mergeability is worked out again against the new target.
func (s *Server) Retarget(iid int64, target string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.branches[target]; !ok {
		s.t.Fatalf("gitlabtest: no target branch %q", target)
	}
	mr := s.mr(iid)
	mr.target, mr.behind = target, false
	uncheck(mr)
	s.save(mr)
}

// PushConflicting moves branch to a new commit whose changes conflict
// with the open merge requests iids into it, as a person pushing to their
// target branch does, and returns the commit. As any push to a target
// branch, it touches no merge request: they are unchecked, and GitLab
// finds the conflict when it next works out their mergeability.
func (s *Server) PushConflicting(branch string, iids ...int64) string {
	s.mu.Lock()
	for _, iid := range iids {
		if mr := s.mr(iid); mr.target == branch {
			mr.conflicts = true
		}
	}
	return s.unlockAfterPush(branch, s.pushLocked(branch))
}

// SetDetailedMergeStatus makes merge request iid's detailed_merge_status
// status while it is open, until set again ("" gives it back to the
// fake); any value but "mergeable" makes a merge answer 405, as GitLab
// does for a merge request that cannot be merged (not approved, a draft,
// conflicts, blocking discussions, a failed or running pipeline,
// mergeability not checked yet: checking, unchecked, preparing,
// approvals_syncing, ...). It stands for checks whose state GitLab does
// not keep on the merge request: its updated_at stays.
func (s *Server) SetDetailedMergeStatus(iid int64, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mr(iid).override = status
}

// SetConflicts says whether merge request iid's source branch conflicts
// with its target branch (someone pushed conflicting changes to the
// target). GitLab finds out when it checks the merge request's
// mergeability again: detailed_merge_status is unchecked until then
// (checking while it checks), and then conflict or mergeable; the
// merge request's updated_at stays. A push to the source branch resolves
// the conflict.
func (s *Server) SetConflicts(iid int64, conflicts bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.conflicts = conflicts
	uncheck(mr)
}

// SettleMergeability finishes the mergeability checks GitLab has not run
// yet (its background jobs catch up). Otherwise a merge request's check
// runs when it is read alone (GET .../merge_requests/:iid answers
// checking, and the next reading has the result) or merged.
func (s *Server) SettleMergeability() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, mr := range s.mrs {
		s.check(mr)
	}
}

// LockForMerge makes merge request iid locked, the state GitLab gives a
// merge request while it merges it (a person pressed the merge button, a
// merge train merges it): a merge meanwhile answers 405. MergeByHand then
// finishes the merge.
func (s *Server) LockForMerge(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state = "locked"
	s.save(mr)
}

// MergeByHand merges merge request iid at its head with a merge commit,
// as a person pressing the merge button does, and returns the commit.
func (s *Server) MergeByHand(iid int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state, mr.mergeCommit, mr.mergedAt = "merged", s.mergeCommitLocked(mr.target, mr.sha, false), s.now()
	s.setBranchLocked(mr.target, mr.mergeCommit)
	s.save(mr)
	s.movedLocked(mr.target)
	return mr.mergeCommit
}

// Close closes merge request iid without merging it.
func (s *Server) Close(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state = "closed"
	s.save(mr)
}

// Reopen reopens merge request iid; its mergeability is checked again,
// and a detailed_merge_status set with SetDetailedMergeStatus is
// dropped.
func (s *Server) Reopen(iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	mr.state, mr.override = "opened", ""
	uncheck(mr)
	s.save(mr)
}

// MergeRequest returns what the fake holds of merge request iid.
func (s *Server) MergeRequest(iid int64) MergeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mr(iid)
	return MergeRequest{
		IID: mr.iid, SourceProjectID: mr.sourceProject, SourceBranch: mr.source, TargetBranch: mr.target, Title: mr.title, Description: mr.description,
		State: mr.state, SHA: mr.sha, MergeCommitSHA: mr.mergeCommit, SquashCommitSHA: mr.squashC,
		ReviewerIDs: slices.Clone(mr.reviewers), DetailedMergeStatus: s.detailed(mr), ApprovedBy: slices.Clone(mr.approvedBy),
		HeadPipelineID: mr.headPipeline, ReviewerStates: cloneStates(mr.reviewerState), SquashOnMerge: mr.squash,
		CreatedAt: mr.createdAt, UpdatedAt: mr.updatedAt,
	}
}

func cloneStates(m map[int64]string) map[int64]string {
	out := make(map[int64]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mr returns merge request iid, failing the test if there is none.
func (s *Server) mr(iid int64) *mergeRequest {
	if iid < 1 || iid > int64(len(s.mrs)) {
		s.t.Fatalf("gitlabtest: no merge request !%d", iid)
	}
	return s.mrs[iid-1]
}

// listMRs answers GET .../merge_requests ("List project merge
// requests"): filtered by iids[], state (opened, closed, locked, merged
// or all), source_branch, target_branch, updated_after and updated_before
// (both inclusive), ordered by order_by (created_at unless updated_at)
// and sort (desc unless asc), paginated, each in the shape of a listed
// merge request. As GitLab's list ("Listing merge requests might not
// proactively update merge_status"), it works out no mergeability unless
// with_merge_status_recheck=true asks for it: then the check of each
// listed merge request whose mergeability is not worked out starts, as a
// reading of it alone starts it.
func (s *Server) listMRs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	q := r.URL.Query()
	after, ok := timeParam(w, q, "updated_after")
	if !ok {
		return
	}
	before, ok := timeParam(w, q, "updated_before")
	if !ok {
		return
	}
	var want []int64
	for _, v := range q["iids[]"] {
		iid, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "iids is invalid"})
			return
		}
		want = append(want, iid)
	}
	var list []*mergeRequest
	for _, mr := range s.mrs {
		if (len(want) == 0 || slices.Contains(want, mr.iid)) &&
			(q.Get("state") == "" || q.Get("state") == "all" || q.Get("state") == mr.state) &&
			(q.Get("source_branch") == "" || q.Get("source_branch") == mr.source) &&
			(q.Get("target_branch") == "" || q.Get("target_branch") == mr.target) &&
			(after.IsZero() || !mr.updatedAt.Before(after)) &&
			(before.IsZero() || !mr.updatedAt.After(before)) {
			list = append(list, mr)
		}
	}
	key := func(mr *mergeRequest) string { return timeJSON(mr.createdAt) }
	if q.Get("order_by") == "updated_at" {
		key = func(mr *mergeRequest) string { return timeJSON(mr.updatedAt) }
	}
	sortBy(list, q.Get("sort"), key, func(mr *mergeRequest) int64 { return mr.id })
	recheck := q.Get("with_merge_status_recheck") == "true"
	var asked []*mergeRequest
	out := make([]map[string]any, 0, len(list))
	for _, mr := range list {
		m := s.mrJSON(mr) // as it stands: the check is asynchronous
		if recheck && s.askCheckLocked(r, mr) {
			asked = append(asked, mr)
		}
		for k := range m {
			if !s.listKeys[k] {
				delete(m, k)
			}
		}
		out = append(out, m)
	}
	writePage(w, r, out)
	for _, mr := range asked {
		s.check(mr)
	}
}

func (s *Server) createMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title        string  `json:"title"`
		Description  string  `json:"description"`
		SourceBranch string  `json:"source_branch"`
		TargetBranch string  `json:"target_branch"`
		ReviewerIDs  []int64 `json:"reviewer_ids"`
		Squash       bool    `json:"squash"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.project(w, r) {
		return
	}
	// GitLab's validation errors: 400 with the model's errors keyed by
	// attribute.
	invalid := map[string][]string{}
	if _, ok := s.branches[body.TargetBranch]; !ok {
		invalid["target_branch"] = []string{"does not exist"}
	}
	if _, ok := s.branches[body.SourceBranch]; !ok && !s.opts.AutoBranch {
		invalid["source_branch"] = []string{"does not exist"}
	}
	if len(invalid) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": invalid})
		return
	}
	for _, mr := range s.mrs {
		if mr.sourceProject == ProjectID && mr.source == body.SourceBranch && mr.target == body.TargetBranch && mr.state == "opened" {
			writeJSON(w, http.StatusConflict, map[string]any{"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", mr.iid)}})
			return
		}
	}
	if _, ok := s.branches[body.SourceBranch]; !ok {
		s.pushLocked(body.SourceBranch) // AutoBranch: the agent pushed its work
	}
	mr := s.newMRLocked(ProjectID, body.SourceBranch, body.TargetBranch, body.Title, body.Description, s.branches[body.SourceBranch], body.Squash)
	s.mrRefLocked(mr)
	mr.setReviewers(body.ReviewerIDs)
	writeJSON(w, http.StatusCreated, s.mrJSON(mr))
	// GitLab prepares the new merge request in the background; its
	// mergeability is checked when it is next read alone or merged.
	mr.mergeStatus = "unchecked"
}

// setReviewers makes ids the reviewers, keeping the states of those who
// stay; new ones are unreviewed.
func (mr *mergeRequest) setReviewers(ids []int64) {
	mr.reviewers = slices.Clone(ids)
	for id := range mr.reviewerState {
		if !slices.Contains(ids, id) {
			delete(mr.reviewerState, id)
		}
	}
	for _, id := range ids {
		if _, ok := mr.reviewerState[id]; !ok {
			mr.reviewerState[id] = "unreviewed"
		}
	}
}

// theMR returns the merge request of a request's {iid}, or answers 404.
func (s *Server) theMR(w http.ResponseWriter, r *http.Request) *mergeRequest {
	if !s.project(w, r) {
		return nil
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	if iid < 1 || iid > len(s.mrs) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
		return nil
	}
	return s.mrs[iid-1]
}

// getMR answers GET .../merge_requests/:iid. As at GitLab ("The
// mergeability (merge_status) of each merge request is checked
// asynchronously when a request is made to this endpoint"), reading a
// merge request whose mergeability is not worked out starts the check:
// the answer says checking, and the check is done by the next request
// (Options.CheckDelay later, with one).
func (s *Server) getMR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	if s.opts.MergeabilityAtOnce && !peek(r) && mr.state == "opened" {
		s.check(mr)
	}
	done := s.askCheckLocked(r, mr)
	writeJSON(w, http.StatusOK, s.mrJSON(mr))
	if done {
		s.check(mr)
	}
}

func (s *Server) updateMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title       *string  `json:"title"`
		Description *string  `json:"description"`
		ReviewerIDs *[]int64 `json:"reviewer_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	if body.Title != nil {
		mr.title = *body.Title
	}
	if body.Description != nil {
		mr.description = *body.Description
	}
	if body.ReviewerIDs != nil {
		mr.setReviewers(*body.ReviewerIDs)
	}
	s.save(mr)
	writeJSON(w, http.StatusOK, s.mrJSON(mr))
}

// mergeMR answers as GitLab's PUT .../merge ("Merge a merge request"),
// which works out the merge request's mergeability first if it must: 405
// Method Not Allowed when it cannot be merged (not open: closed, merged,
// or locked while a merge runs; or its detailed_merge_status is not
// mergeable), 409 when sha is not its head, 200 with the merged merge
// request. GitLab's 422 "Branch cannot be merged", a merge that failed
// while being made, is given with [Server.Inject].
func (s *Server) mergeMR(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SHA    string `json:"sha"`
		Squash *bool  `json:"squash"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	s.check(mr)
	switch {
	case mr.state != "opened":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		return
	case s.detailed(mr) != "mergeable":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "405 Method Not Allowed"})
		return
	case body.SHA != "" && body.SHA != mr.sha:
		writeJSON(w, http.StatusConflict, map[string]any{"message": "SHA does not match HEAD of source branch: " + mr.sha})
		return
	}
	squash := mr.squash
	if body.Squash != nil {
		squash = *body.Squash
	}
	s.mergeLocked(mr, squash)
	writeJSON(w, http.StatusOK, s.mrJSON(mr))
}

// mergeLocked merges mr into its target as GitLab does with the project's
// merge method: its head (or, with squash, a squash commit) fast-forwarded
// onto the target, or a merge commit; the merge request is merged, and
// the others into the target are behind it. It returns the commit the
// target is at then.
func (s *Server) mergeLocked(mr *mergeRequest, squash bool) string {
	head := mr.sha
	if squash {
		mr.squashC = s.mergeCommitLocked(mr.target, mr.sha, true)
		head = mr.squashC
	}
	if s.opts.MergeMethod == "ff" {
		s.setBranchLocked(mr.target, head)
	} else {
		mr.mergeCommit = s.mergeCommitLocked(mr.target, head, false)
		s.setBranchLocked(mr.target, mr.mergeCommit)
	}
	mr.state, mr.mergedAt = "merged", s.now()
	s.save(mr)
	s.movedLocked(mr.target)
	return s.branches[mr.target]
}

func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	required := s.opts.ApprovalsRequired
	a := &gl.MergeRequestApprovals{ID: mr.id, IID: mr.iid, ProjectID: ProjectID, Title: mr.title, State: mr.state,
		ApprovalsRequired: required, HasApprovalRules: required > 0}
	for _, id := range mr.approvedBy {
		a.ApprovedBy = append(a.ApprovedBy, &gl.MergeRequestApproverUser{User: s.basicUser(id)})
	}
	a.ApprovalsLeft = max(0, required-int64(len(mr.approvedBy)))
	a.Approved = a.ApprovalsLeft == 0
	writeJSON(w, http.StatusOK, a)
}

// getReviewers answers GET .../reviewers: each reviewer as
// {"user": {...}, "state": ..., "created_at": ...}.
func (s *Server) getReviewers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.theMR(w, r)
	if mr == nil {
		return
	}
	out := []any{}
	for _, id := range mr.reviewers {
		out = append(out, map[string]any{"user": s.basicUserJSON(id), "state": mr.reviewerState[id], "created_at": timeJSON(mr.createdAt)})
	}
	writeJSON(w, http.StatusOK, out)
}

// mrJSON renders a merge request in the shape of the recorded response.
func (s *Server) mrJSON(mr *mergeRequest) map[string]any {
	m := cloneMap(s.mrTemplate)
	web := fmt.Sprintf("%s/%s/-/merge_requests/%d", s.URL, ProjectPath, mr.iid)
	detailed := s.detailed(mr)
	m["id"], m["iid"], m["project_id"] = mr.id, mr.iid, ProjectID
	m["source_project_id"], m["target_project_id"] = mr.sourceProject, ProjectID
	m["title"], m["description"], m["state"] = mr.title, mr.description, mr.state
	m["created_at"], m["updated_at"] = timeJSON(mr.createdAt), timeJSON(mr.updatedAt)
	m["source_branch"], m["target_branch"] = mr.source, mr.target
	m["sha"], m["merge_commit_sha"], m["squash_commit_sha"] = mr.sha, nullable(mr.mergeCommit), nullable(mr.squashC)
	m["merged_at"] = nil
	if !mr.mergedAt.IsZero() {
		m["merged_at"] = timeJSON(mr.mergedAt)
	}
	m["draft"] = draft(mr.title)
	m["work_in_progress"] = m["draft"]
	m["squash"], m["web_url"], m["reference"] = mr.squash, web, fmt.Sprintf("!%d", mr.iid)
	m["detailed_merge_status"], m["has_conflicts"] = detailed, mr.mergeStatus == "cannot_be_merged" || detailed == "conflict"
	m["merge_status"] = mr.mergeStatus // GitLab's public_merge_status
	if mr.mergeStatus == "preparing" || mr.mergeStatus == "cannot_be_merged_rechecking" {
		m["merge_status"] = "checking"
	}
	m["blocking_discussions_resolved"] = detailed != "discussions_not_resolved"
	m["diff_refs"] = map[string]any{"base_sha": s.branches[mr.target], "head_sha": mr.sha, "start_sha": s.branches[mr.target]}
	reviewers := []any{}
	for _, id := range mr.reviewers {
		reviewers = append(reviewers, s.userJSON(id))
	}
	m["reviewers"] = reviewers
	labels := []any{}
	for _, l := range mr.labels {
		labels = append(labels, l)
	}
	m["labels"] = labels
	m["head_pipeline"], m["pipeline"] = nil, nil
	if p := s.pipelines[mr.headPipeline]; p != nil {
		hp := cloneMap(s.mrTemplate["head_pipeline"].(map[string]any))
		hp["id"], hp["sha"], hp["ref"], hp["status"], hp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		hp["created_at"], hp["updated_at"] = timeJSON(p.createdAt), timeJSON(p.updatedAt)
		m["head_pipeline"] = hp
		pp := cloneMap(s.mrTemplate["pipeline"].(map[string]any))
		pp["id"], pp["sha"], pp["ref"], pp["status"], pp["web_url"] = p.id, p.sha, p.ref, p.status, p.webURL
		pp["created_at"], pp["updated_at"] = timeJSON(p.createdAt), timeJSON(p.updatedAt)
		m["pipeline"] = pp
	}
	return m
}
