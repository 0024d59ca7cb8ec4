package gitlab

import (
	"context"
	"fmt"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// Checks implements [lifecycle.CIProvider] from the merge request's head
// pipeline. A head pipeline that is absent, or of another commit than
// q.HeadSHA, is pending: GitLab has not started the pipeline of that
// commit yet. Otherwise the checks are the commit statuses of that
// pipeline (its jobs, and statuses posted by other CI systems into it),
// the latest of each name; statuses of other pipelines of the same commit
// (other merge requests, other branches) do not count.
//
// GitLab's statuses map as: success → passed; failed and canceled →
// failed, except a job allowed to fail, which is skipped (it carries no
// verdict); created, waiting_for_resource, preparing, pending, running
// and scheduled → running; skipped and manual → skipped.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	s, mr, err := a.read(ctx, q.PullRequest)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	hp := mr.HeadPipeline
	if hp == nil || !strings.EqualFold(hp.SHA, q.HeadSHA) {
		return lifecycle.CIReport{Pending: true}, nil
	}
	latest := map[string]*gl.CommitStatus{}
	var names []string
	opt := &gl.GetCommitStatusesOptions{PipelineID: gl.Ptr(hp.ID), ListOptions: gl.ListOptions{PerPage: 100}}
	for {
		page, resp, err := a.client.Commits.GetCommitStatuses(s.id, strings.ToLower(q.HeadSHA), opt, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.CIReport{}, a.fail(ctx, fmt.Sprintf("read the statuses of pipeline %d", hp.ID), resp, err)
		}
		for _, st := range page {
			if st.PipelineID != 0 && st.PipelineID != hp.ID {
				continue
			}
			prev, ok := latest[st.Name]
			if !ok {
				names = append(names, st.Name)
			}
			if !ok || st.ID > prev.ID {
				latest[st.Name] = st
			}
		}
		if resp.NextPage == 0 || len(names) > 1000 {
			break
		}
		opt.Page = resp.NextPage
	}
	var rep lifecycle.CIReport
	for _, name := range names {
		st := latest[name]
		rep.Checks = append(rep.Checks, lifecycle.CICheck{Name: name, Status: checkStatus(st.Status, st.AllowFailure), URL: st.TargetURL})
	}
	if len(rep.Checks) == 0 {
		// A pipeline without jobs listed yet: its own status stands.
		rep.Checks = []lifecycle.CICheck{{Name: "pipeline", Status: checkStatus(hp.Status, false), URL: hp.WebURL}}
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
	case "skipped", "manual":
		return lifecycle.CheckSkipped
	}
	// created, waiting_for_resource, preparing, pending, running,
	// scheduled, and states GitLab may add: not finished.
	return lifecycle.CheckRunning
}
