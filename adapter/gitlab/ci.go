package gitlab

import (
	"context"
	"fmt"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// Checks implements [lifecycle.CIProvider] from the merge request's
// pipeline of q.HeadSHA, found through the commit statuses of that
// commit, in one request whatever the merge request: the statuses GitLab
// keeps of a commit each name their pipeline and its ref, and those of
// this merge request's pipelines have as ref its source branch (branch
// pipelines) or refs/merge-requests/<iid>/head (merge request
// pipelines). The newest such pipeline is the head pipeline, and its
// statuses (its jobs, and statuses posted by other CI systems into it),
// the latest of each name, are the checks. Statuses of other pipelines of
// the same commit (other merge requests, other branches) do not count.
// A commit with no status of such a pipeline yet is pending: GitLab has
// not started its pipeline, or its jobs are not created yet.
//
// The source branch is q.Task.Branch, which the Service keeps from the
// merge request; only for a task that names none is the merge request
// read for it. A reading of a task's facts (the merge request, its CI, its
// reviews) thus reads the merge request once.
//
// GitLab's statuses map as: success → passed; failed and canceled →
// failed, except a job allowed to fail, which is skipped (it carries no
// verdict); created, waiting_for_resource, preparing, pending, running
// and scheduled → running; manual → running for a blocking manual job
// (not allowed to fail: it holds the pipeline until someone runs it),
// skipped for one allowed to fail; skipped → skipped.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	if err := a.checkRef(s, q.PullRequest); err != nil {
		return lifecycle.CIReport{}, err
	}
	var branch string
	if q.Task.Branch != nil {
		branch = *q.Task.Branch
	}
	if branch == "" {
		_, mr, err := a.read(ctx, q.PullRequest)
		if err != nil {
			return lifecycle.CIReport{}, err
		}
		branch = mr.SourceBranch
	}
	mrRef := fmt.Sprintf("refs/merge-requests/%d/head", q.PullRequest.Number)
	var (
		head   int64 // the newest pipeline of the merge request at the commit
		ofHead []*gl.CommitStatus
	)
	opt := &gl.GetCommitStatusesOptions{ListOptions: gl.ListOptions{PerPage: 100}}
	for pages := 0; ; pages++ {
		page, resp, err := a.client.Commits.GetCommitStatuses(s.id, strings.ToLower(q.HeadSHA), opt, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.CIReport{}, a.fail(ctx, "read the statuses of commit "+q.HeadSHA, resp, err)
		}
		for _, st := range page {
			if st.Ref != branch && st.Ref != mrRef {
				continue
			}
			switch {
			case st.PipelineID > head:
				head, ofHead = st.PipelineID, []*gl.CommitStatus{st}
			case st.PipelineID == head:
				ofHead = append(ofHead, st)
			}
		}
		if resp.NextPage == 0 || pages >= 10 {
			break
		}
		opt.Page = resp.NextPage
	}
	latest := map[string]*gl.CommitStatus{}
	var names []string
	for _, st := range ofHead {
		prev, ok := latest[st.Name]
		if !ok {
			names = append(names, st.Name)
		}
		if !ok || st.ID > prev.ID {
			latest[st.Name] = st
		}
	}
	if len(names) == 0 {
		return lifecycle.CIReport{Pending: true}, nil
	}
	var rep lifecycle.CIReport
	for _, name := range names {
		st := latest[name]
		rep.Checks = append(rep.Checks, lifecycle.CICheck{Name: name, Status: checkStatus(st.Status, st.AllowFailure), URL: st.TargetURL})
	}
	return rep, nil
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
