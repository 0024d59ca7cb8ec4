package github

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// Checks reports the CI of q.HeadSHA: its check runs (the latest of each,
// every page) and its commit statuses. A check run not completed is
// running; success, neutral and skipped pass (GitHub merges with them);
// every other conclusion fails. A status that is pending is running, success passes, failure and
// error fail. When the base branch's protection or rulesets name required
// checks, only those are reported, and one without a result yet makes the
// report Pending; otherwise every check counts.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	if err := a.checkRef(q.PullRequest); err != nil {
		return lifecycle.CIReport{}, err
	}
	base, err := a.baseOf(ctx, q.PullRequest)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	latest := map[string]found{}
	if err := a.checkRuns(ctx, q.HeadSHA, latest); err != nil {
		return lifecycle.CIReport{}, err
	}
	if err := a.statuses(ctx, q.HeadSHA, latest); err != nil {
		return lifecycle.CIReport{}, err
	}
	p, err := a.policy(ctx, base)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	var rep lifecycle.CIReport
	if req := p.requiredChecks; req != nil {
		for _, name := range req {
			if f, ok := latest[name]; ok {
				rep.Checks = append(rep.Checks, f.check)
			} else {
				rep.Pending = true
			}
		}
		return rep, nil
	}
	for _, name := range slices.Sorted(maps.Keys(latest)) {
		rep.Checks = append(rep.Checks, latest[name].check)
	}
	return rep, nil
}

// found is a check and when it last changed, to keep the latest per name.
type found struct {
	check lifecycle.CICheck
	at    time.Time
	id    int64
	run   bool // a check run, not a commit status
}

// keep records f unless a newer check of its name is recorded: between
// check runs, the one created last (the larger ID: a re-run, or the run of
// a later suite), whenever either completed; between a check run and a
// status, the one that changed last.
func keep(m map[string]found, f found) {
	if old, ok := m[f.check.Name]; ok {
		newer := old.at.After(f.at) || (old.at.Equal(f.at) && old.id > f.id)
		if old.run && f.run {
			newer = old.id > f.id
		}
		if newer {
			return
		}
	}
	m[f.check.Name] = f
}

// checkRuns adds the latest check runs of sha, every page.
func (a *Adapter) checkRuns(ctx context.Context, sha string, into map[string]found) error {
	opts := &gh.ListCheckRunsOptions{Filter: gh.String("latest"), ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		res, resp, err := a.client.Checks.ListCheckRunsForRef(ctx, a.cfg.Owner, a.cfg.Repo, sha, opts)
		if err != nil {
			return wrap(err, "list check runs of %s", sha)
		}
		for _, r := range res.CheckRuns {
			at := r.GetStartedAt().Time
			if r.CompletedAt != nil {
				at = r.GetCompletedAt().Time
			}
			keep(into, found{check: lifecycle.CICheck{Name: r.GetName(), Status: runStatus(r), URL: r.GetHTMLURL()}, at: at, id: r.GetID(), run: true})
		}
		if resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}

// runStatus maps a check run's status and conclusion.
func runStatus(r *gh.CheckRun) lifecycle.CheckStatus {
	if r.GetStatus() != "completed" {
		return lifecycle.CheckRunning
	}
	switch r.GetConclusion() {
	case "success", "neutral", "skipped":
		return lifecycle.CheckPassed
	}
	return lifecycle.CheckFailed // failure, timed_out, cancelled, action_required, stale, startup_failure
}

// statuses adds the commit statuses of sha (the latest per context, as
// the combined status lists them), every page. A combined state of
// pending with no statuses means there are none.
func (a *Adapter) statuses(ctx context.Context, sha string, into map[string]found) error {
	opts := &gh.ListOptions{PerPage: 100}
	for {
		cs, resp, err := a.client.Repositories.GetCombinedStatus(ctx, a.cfg.Owner, a.cfg.Repo, sha, opts)
		if err != nil {
			return wrap(err, "read the combined status of %s", sha)
		}
		for _, s := range cs.Statuses {
			st := lifecycle.CheckFailed
			switch strings.ToLower(s.GetState()) {
			case "pending":
				st = lifecycle.CheckRunning
			case "success":
				st = lifecycle.CheckPassed
			}
			keep(into, found{check: lifecycle.CICheck{Name: s.GetContext(), Status: st, URL: s.GetTargetURL()}, at: s.GetUpdatedAt().Time, id: s.GetID()})
		}
		if resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}
