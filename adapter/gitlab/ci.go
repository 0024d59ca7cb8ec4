package gitlab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// Checks implements [lifecycle.CIProvider] from the merge request's head
// pipeline at q.HeadSHA. A reading is two requests: the merge request
// (its head pipeline and its head) and one list of commit statuses, whose
// statuses each name their pipeline and its ref.
//
//   - When the merge request's head is q.HeadSHA and its head pipeline is
//     a merged-results pipeline (GitLab Premium's pipelines for merged
//     results, and merge trains: ref refs/merge-requests/<iid>/merge, at a
//     merge commit of the head into the target branch), the checks are the
//     statuses of that pipeline at its merge commit. That the merge commit
//     merges q.HeadSHA is checked once per merge commit (one more request,
//     GET .../repository/commits/:sha, whose parents are kept): GitLab
//     keeps the previous head's pipeline as head pipeline after a push
//     until a pipeline of the new head runs.
//   - Otherwise the checks are those of the newest pipeline of the merge
//     request among the statuses of q.HeadSHA: a branch pipeline (ref the
//     source branch) or a merge request pipeline (ref
//     refs/merge-requests/<iid>/head). Statuses of other pipelines of the
//     same commit (other merge requests, other branches) do not count.
//
// The checks are the pipeline's statuses (its jobs, and statuses posted
// by other CI systems into it), the latest of each name. A commit with no
// status of such a pipeline yet is pending: GitLab has not started its
// pipeline, or its jobs are not created yet.
//
// GitLab's statuses map as: success → passed; failed and canceled →
// failed, except a job allowed to fail, which is skipped (it carries no
// verdict); created, waiting_for_resource, preparing, pending, running
// and scheduled → running; manual → running for a blocking manual job
// (not allowed to fail: it holds the pipeline until someone runs it),
// skipped for one allowed to fail; skipped → skipped.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	s, mr, err := a.read(ctx, q.PullRequest)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	head := strings.ToLower(q.HeadSHA)
	mergeRef := fmt.Sprintf("refs/merge-requests/%d/merge", q.PullRequest.Number)
	if hp := mr.HeadPipeline; hp != nil && hp.Ref == mergeRef && strings.EqualFold(mr.SHA, head) {
		merges, err := a.mergesHead(ctx, s, strings.ToLower(hp.SHA), head)
		if err != nil {
			return lifecycle.CIReport{}, err
		}
		if merges {
			statuses, err := a.statuses(ctx, s, strings.ToLower(hp.SHA), &gl.GetCommitStatusesOptions{PipelineID: gl.Ptr(hp.ID)})
			if err != nil {
				return lifecycle.CIReport{}, err
			}
			return report(slices.DeleteFunc(statuses, func(st *gl.CommitStatus) bool { return st.PipelineID != hp.ID })), nil
		}
	}
	refs := []string{mr.SourceBranch, fmt.Sprintf("refs/merge-requests/%d/head", q.PullRequest.Number)}
	statuses, err := a.statuses(ctx, s, head, &gl.GetCommitStatusesOptions{})
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	var (
		newest int64 // the newest pipeline of the merge request at the commit
		ofIt   []*gl.CommitStatus
	)
	for _, st := range statuses {
		if !slices.Contains(refs, st.Ref) {
			continue
		}
		switch {
		case st.PipelineID > newest:
			newest, ofIt = st.PipelineID, []*gl.CommitStatus{st}
		case st.PipelineID == newest:
			ofIt = append(ofIt, st)
		}
	}
	return report(ofIt), nil
}

// statuses reads the commit statuses of sha, up to 10 pages of 100.
func (a *Adapter) statuses(ctx context.Context, s *settings, sha string, opt *gl.GetCommitStatusesOptions) ([]*gl.CommitStatus, error) {
	opt.PerPage = 100
	var out []*gl.CommitStatus
	for pages := 0; ; pages++ {
		page, resp, err := a.client.Commits.GetCommitStatuses(s.id, sha, opt, gl.WithContext(ctx))
		if err != nil {
			return nil, a.fail(ctx, "read the statuses of commit "+sha, resp, err)
		}
		out = append(out, page...)
		if resp.NextPage == 0 || pages >= 9 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// report makes the checks of a pipeline's statuses: the latest of each
// name, in the order of first appearance; none is pending.
func report(statuses []*gl.CommitStatus) lifecycle.CIReport {
	latest := map[string]*gl.CommitStatus{}
	var names []string
	for _, st := range statuses {
		prev, ok := latest[st.Name]
		if !ok {
			names = append(names, st.Name)
		}
		if !ok || st.ID > prev.ID {
			latest[st.Name] = st
		}
	}
	if len(names) == 0 {
		return lifecycle.CIReport{Pending: true}
	}
	var rep lifecycle.CIReport
	for _, name := range names {
		st := latest[name]
		rep.Checks = append(rep.Checks, lifecycle.CICheck{Name: name, Status: checkStatus(st.Status, st.AllowFailure), URL: st.TargetURL})
	}
	return rep
}

// maxMergeParents bounds the merge commits whose parents are kept.
const maxMergeParents = 1024

// mergesHead reports whether merge commit sha has head as a parent. A
// commit's parents never change: they are read once and kept.
func (a *Adapter) mergesHead(ctx context.Context, s *settings, sha, head string) (bool, error) {
	a.mu.Lock()
	parents, ok := a.parents[sha]
	a.mu.Unlock()
	if !ok {
		c, resp, err := a.client.Commits.GetCommit(s.id, sha, nil, gl.WithContext(ctx))
		if err != nil {
			err = a.fail(ctx, "read merge commit "+sha, resp, err)
			if errors.Is(err, lifecycle.ErrNotFound) {
				return false, nil // gone with its ref: not the head's
			}
			return false, err
		}
		parents = c.ParentIDs
		a.mu.Lock()
		if len(a.parents) >= maxMergeParents {
			clear(a.parents)
		}
		a.parents[sha] = parents
		a.mu.Unlock()
	}
	return slices.ContainsFunc(parents, func(p string) bool { return strings.EqualFold(p, head) }), nil
}

// checkStatus maps a GitLab job, status or pipeline state.
func checkStatus(status string, allowFailure bool) lifecycle.CheckStatus {
	switch status {
	case "success":
		return lifecycle.CheckPassed
	case "failed", "canceled", "canceling":
		if allowFailure {
			return lifecycle.CheckSkipped
		}
		return lifecycle.CheckFailed
	case "skipped":
		return lifecycle.CheckSkipped
	case "manual":
		// A manual job allowed to fail does not block its pipeline; one
		// that is not (when: manual in rules, allow_failure: false) holds
		// it until someone runs it.
		if allowFailure {
			return lifecycle.CheckSkipped
		}
		return lifecycle.CheckRunning
	}
	// created, waiting_for_resource, preparing, pending, running,
	// scheduled, and states GitLab may add: not finished.
	return lifecycle.CheckRunning
}
