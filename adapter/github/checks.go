package github

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// Checks reports the CI of q.HeadSHA: its check runs (the latest of each,
// every page) and its commit statuses. A check run not completed is
// running; success, neutral and skipped pass (GitHub merges with them);
// every other conclusion fails. A status that is pending is running,
// success passes, failure and error fail.
//
// When the base branch's protection or rulesets name required checks,
// only those are reported, and one without a result yet makes the report
// Pending. When the required checks are unknown (the protection cannot be
// read with these credentials, or names none), every check counts, and CI
// passes only when every check suite of the head has completed too: a
// suite queued or in progress, as a CI app's is before its first check
// run, makes the report Pending. The suites are read (conditionally) only
// then, and only when no check already keeps CI from passing.
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
	rep, _, err := a.judgeCI(ctx, q.HeadSHA, latest, p.requiredChecks, nil)
	return rep, err
}

// judge reports the latest checks of a head: when required names the
// required checks (nil: unknown), those and the ones marked required by
// GitHub, Pending when one has no result; otherwise every check.
func judge(latest map[string]found, required, marked []string) lifecycle.CIReport {
	var rep lifecycle.CIReport
	if required == nil {
		for _, name := range slices.Sorted(maps.Keys(latest)) {
			rep.Checks = append(rep.Checks, latest[name].check)
		}
		return rep
	}
	seen := map[string]bool{}
	for _, name := range append(slices.Clone(required), marked...) {
		if seen[name] {
			continue
		}
		seen[name] = true
		if f, ok := latest[name]; ok {
			rep.Checks = append(rep.Checks, f.check)
		} else {
			rep.Pending = true
		}
	}
	return rep
}

// judgeCI is judge, and with the required checks unknown and every check
// passed, the check suites of sha: one not completed makes the report
// Pending (and is reported as waiting), one completed without a check run
// and with a failing conclusion fails it.
func (a *Adapter) judgeCI(ctx context.Context, sha string, latest map[string]found, required, marked []string) (lifecycle.CIReport, bool, error) {
	rep := judge(latest, required, marked)
	if required != nil {
		return rep, false, nil
	}
	for _, c := range rep.Checks {
		if c.Status != lifecycle.CheckPassed && c.Status != lifecycle.CheckSkipped {
			return rep, false, nil // CI does not pass whatever the suites say
		}
	}
	suites, err := a.checkSuites(ctx, sha)
	if err != nil {
		return lifecycle.CIReport{}, false, err
	}
	waiting := false
	for _, s := range suites {
		if s.Status != "completed" {
			rep.Pending, waiting = true, true
			continue
		}
		if s.LatestCheckRunsCount == 0 && checkStatus("completed", s.Conclusion) == lifecycle.CheckFailed {
			name := "check suite"
			if s.App != nil && s.App.Name != "" {
				name = s.App.Name + " check suite"
			}
			rep.Checks = append(rep.Checks, lifecycle.CICheck{Name: name, Status: lifecycle.CheckFailed})
		}
	}
	return rep, waiting, nil
}

// checkSuite is a check suite of GET
// /repos/{owner}/{repo}/commits/{ref}/check-suites: go-github v60's lacks
// latest_check_runs_count.
type checkSuite struct {
	ID                   int64  `json:"id"`
	Status               string `json:"status"`
	Conclusion           string `json:"conclusion"`
	LatestCheckRunsCount int    `json:"latest_check_runs_count"`
	App                  *struct {
		Slug string `json:"slug"`
		Name string `json:"name"`
	} `json:"app"`
}

// checkSuites returns the check suites of sha, every page.
func (a *Adapter) checkSuites(ctx context.Context, sha string) ([]checkSuite, error) {
	var all []checkSuite
	for page := 1; ; {
		u := fmt.Sprintf("repos/%s/%s/commits/%s/check-suites?per_page=100&page=%d", url.PathEscape(a.cfg.Owner), url.PathEscape(a.cfg.Repo), url.PathEscape(sha), page)
		req, err := a.client.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, fmt.Errorf("github: list check suites of %s: %w", sha, err)
		}
		var res struct {
			TotalCount  int          `json:"total_count"`
			CheckSuites []checkSuite `json:"check_suites"`
		}
		resp, err := a.client.Do(ctx, req, &res)
		if err != nil {
			return nil, wrap(err, "list check suites of %s", sha)
		}
		all = append(all, res.CheckSuites...)
		if resp.NextPage == 0 {
			return all, nil
		}
		page = resp.NextPage
	}
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
			keep(into, found{check: lifecycle.CICheck{Name: r.GetName(), Status: checkStatus(r.GetStatus(), r.GetConclusion()), URL: r.GetHTMLURL()}, at: at, id: r.GetID(), run: true})
		}
		if resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}

// checkStatus maps a check run's (or suite's) status and conclusion, in
// REST's lower case.
func checkStatus(status, conclusion string) lifecycle.CheckStatus {
	if status != "completed" {
		return lifecycle.CheckRunning
	}
	switch conclusion {
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
			keep(into, found{check: lifecycle.CICheck{Name: s.GetContext(), Status: statusState(s.GetState()), URL: s.GetTargetURL()}, at: s.GetUpdatedAt().Time, id: s.GetID()})
		}
		if resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}
