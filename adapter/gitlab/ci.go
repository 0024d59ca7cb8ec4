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
// (its head pipeline and its head) and the statuses of that pipeline,
// every page of them (GET .../repository/commits/:sha/statuses with
// pipeline_id); see [Adapter.ReadPullRequests] for the checks a reading
// reports. A merge queue candidate (q.Candidate set) is read from the
// branch pipeline its push to the queue branch ran instead (see
// candidateCI).
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	if q.Candidate != nil {
		return a.candidateCI(ctx, q.Candidate, strings.ToLower(q.HeadSHA))
	}
	s, mr, err := a.read(ctx, q.PullRequest)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	return a.ci(ctx, s, mr, strings.ToLower(q.HeadSHA))
}

// ci reads the checks of commit head of merge request mr from its head
// pipeline:
//
//   - a pipeline of head (a branch pipeline, ref the source branch, or a
//     merge request pipeline, ref refs/merge-requests/<iid>/head): its
//     statuses;
//   - a merged-results pipeline (GitLab Premium's pipelines for merged
//     results, and merge trains: ref refs/merge-requests/<iid>/merge or
//     /train, at a merge commit of the head into the target branch), when
//     head is the merge request's head and the merge commit merges it:
//     the statuses of that pipeline at its merge commit. That the merge
//     commit merges head is checked once per merge commit (one more
//     request, GET .../repository/commits/:sha, whose parents are kept):
//     GitLab keeps the previous head's pipeline as head pipeline after a
//     push until a pipeline of the new head runs;
//   - otherwise (no head pipeline, or one of another commit: commits were
//     pushed and their pipeline has not started) CI is pending.
//
// The checks are the pipeline's statuses (its jobs, and statuses posted
// by other CI systems into it), the latest of each name, and the
// pipeline's own status where its jobs do not say it (see report).
func (a *Adapter) ci(ctx context.Context, s *settings, mr *gl.MergeRequest, head string) (lifecycle.CIReport, error) {
	hp := mr.HeadPipeline
	if hp == nil || head == "" {
		return lifecycle.CIReport{Pending: true}, nil
	}
	at := strings.ToLower(hp.SHA)
	switch {
	case at == head:
	case mergedResults(hp.Ref, mr.IID) && strings.EqualFold(mr.SHA, head):
		merges, err := a.mergesHead(ctx, s, at, head)
		if err != nil || !merges {
			return lifecycle.CIReport{Pending: true}, err
		}
	default:
		return lifecycle.CIReport{Pending: true}, nil
	}
	statuses, err := a.statuses(ctx, s, at, hp.ID)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	return report(slices.DeleteFunc(statuses, func(st *gl.CommitStatus) bool { return st.PipelineID != hp.ID }), hp), nil
}

// candidateCI reads the checks of a merge queue candidate, commit sha on
// queue branch req.Branch: GitLab runs a branch pipeline for the push of
// the candidate, so the project's newest pipeline of that commit and ref
// (GET /projects/:id/pipelines with sha and ref, newest first) is read,
// its statuses as for a merge request's head pipeline. Before GitLab has
// made one, CI is pending.
func (a *Adapter) candidateCI(ctx context.Context, req *lifecycle.CandidateRequest, sha string) (lifecycle.CIReport, error) {
	s, err := a.queueProject(ctx, req.Repo)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	if sha == "" {
		return lifecycle.CIReport{Pending: true}, nil
	}
	list, resp, err := a.client.Pipelines.ListProjectPipelines(s.id, &gl.ListProjectPipelinesOptions{
		SHA: gl.Ptr(sha), Ref: gl.Ptr(req.Branch), OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc"),
		ListOptions: gl.ListOptions{PerPage: 1},
	}, gl.WithContext(ctx))
	if err != nil {
		return lifecycle.CIReport{}, a.fail(ctx, fmt.Sprintf("list the pipelines of candidate %s on %s", sha, req.Branch), resp, err)
	}
	if len(list) == 0 {
		return lifecycle.CIReport{Pending: true}, nil
	}
	p := list[0]
	hp := &gl.Pipeline{ID: p.ID, IID: p.IID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, Source: gl.PipelineSource(p.Source), WebURL: p.WebURL}
	statuses, err := a.statuses(ctx, s, sha, p.ID)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	return report(slices.DeleteFunc(statuses, func(st *gl.CommitStatus) bool { return st.PipelineID != p.ID }), hp), nil
}

// mergedResults reports whether ref is the ref of a merged-results or
// merge train pipeline of merge request iid.
func mergedResults(ref string, iid int64) bool {
	rest, ok := strings.CutPrefix(ref, fmt.Sprintf("refs/merge-requests/%d/", iid))
	return ok && (rest == "merge" || rest == "train")
}

// maxStatusPages bounds the pages of statuses of one pipeline read: 100
// pages of 100 are more jobs than a pipeline holds.
const maxStatusPages = 100

// statuses reads the commit statuses of pipeline id at commit sha, every
// page of them (GitLab lists them oldest first); a pipeline with more
// than maxStatusPages pages is an error, never a partial reading.
func (a *Adapter) statuses(ctx context.Context, s *settings, sha string, id int64) ([]*gl.CommitStatus, error) {
	opt := &gl.GetCommitStatusesOptions{PipelineID: gl.Ptr(id), ListOptions: gl.ListOptions{PerPage: 100}}
	var out []*gl.CommitStatus
	for pages := 1; ; pages++ {
		page, resp, err := a.client.Commits.GetCommitStatuses(s.id, sha, opt, gl.WithContext(ctx))
		if err != nil {
			return nil, a.fail(ctx, fmt.Sprintf("read the statuses of pipeline %d at commit %s", id, sha), resp, err)
		}
		out = append(out, page...)
		if resp.NextPage == 0 {
			return out, nil
		}
		if pages == maxStatusPages {
			return nil, fmt.Errorf("gitlab: pipeline %d at commit %s has more than %d statuses: CI not read", id, sha, maxStatusPages*100)
		}
		opt.Page = resp.NextPage
	}
}

// pipelineCheck names the check a head pipeline's own status makes when
// its jobs do not say it (see report).
const pipelineCheck = "pipeline"

// report makes the checks of pipeline hp from its statuses: the latest of
// each name, in the order of first appearance. The pipeline's own status
// counts too: a pipeline that finished with no statuses is a check named
// "pipeline" of its status (GitLab fails a pipeline it cannot run, an
// invalid .gitlab-ci.yml, with no jobs), and so is a failed or canceled
// pipeline none of whose checks failed; one still to run with no
// statuses is pending.
func report(statuses []*gl.CommitStatus, hp *gl.Pipeline) lifecycle.CIReport {
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
	var rep lifecycle.CIReport
	failed := false
	for _, name := range names {
		st := latest[name]
		c := lifecycle.CICheck{Name: name, Status: checkStatus(st.Status, st.AllowFailure), URL: st.TargetURL}
		failed = failed || c.Status == lifecycle.CheckFailed
		rep.Checks = append(rep.Checks, c)
	}
	own := lifecycle.CICheck{Name: pipelineCheck, Status: checkStatus(hp.Status, false), URL: hp.WebURL}
	_, taken := latest[pipelineCheck]
	switch {
	case len(names) == 0 && finished(hp.Status):
		rep.Checks = append(rep.Checks, own)
	case len(names) == 0:
		rep.Pending = true
	case !failed && !taken && (hp.Status == "failed" || hp.Status == "canceled"):
		rep.Checks = append(rep.Checks, own)
	}
	return rep
}

// finished reports whether a pipeline status is final.
func finished(status string) bool {
	switch status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
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
