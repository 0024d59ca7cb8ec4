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
	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
)

// Checks reports the CI of q.HeadSHA: its check runs (the latest of each,
// every page) and its commit statuses. A check run not completed is
// running; success, neutral and skipped pass (GitHub merges with them);
// every other conclusion fails. A status that is pending is running,
// success passes, failure and error fail.
//
// The checks that count are those GitHub requires: those the base
// branch's protection and rulesets name, and, when the protection cannot
// be read with these credentials (most App and bot tokens get 403), those
// GitHub's GraphQL isRequired(pullRequestNumber:) marks among the head's
// checks, read with one small query (one rate-limit point). Only those
// are reported, and one named without a result yet makes the report
// Pending. When GitHub requires none (or none can be known), every check
// counts, and CI passes only when every check suite of the head has
// completed too: a suite queued or in progress, as a CI App's is before
// its first check run, makes the report Pending. With the protection
// unreadable, a suite with no check run yet makes it Pending likewise
// (its first run may be a required check). A suite with no check run
// that has not completed Config.StaleSuiteAfter after its creation is
// reported in Stale instead, and not waited on. The suites are read
// (conditionally) only when they can matter: no check already keeps CI
// from passing.
func (a *Adapter) Checks(ctx context.Context, q lifecycle.CIQuery) (lifecycle.CIReport, error) {
	err := a.checkRef(q.PullRequest)
	if err != nil {
		return lifecycle.CIReport{}, err
	}
	var base string
	if q.Candidate != nil {
		base = q.Candidate.Base // a merge queue candidate is judged by its base's rules
	} else if base, err = a.baseOf(ctx, q.PullRequest); err != nil {
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
	var marked []string
	if p.protectionUnreadable && len(latest) > 0 {
		if marked, err = a.markedRequired(ctx, q.PullRequest.Number, q.HeadSHA); err != nil {
			// Every check counts, as when nothing is known to be
			// required: stricter, never laxer.
			a.log.WarnContext(ctx, "read which checks GitHub requires; every check counts", "pr", q.PullRequest.Number, "err", err)
		}
	}
	rep, _, err := a.judgeCI(ctx, q.HeadSHA, latest, p, marked)
	return rep, err
}

// markedQuery reads which checks of a commit GitHub requires of a pull
// request: isRequired of each context of the commit's rollup.
type markedQuery struct {
	Repository struct {
		Object *struct {
			Commit struct {
				StatusCheckRollup *struct {
					Contexts struct {
						Nodes []struct {
							Typename string `graphql:"__typename"`
							CheckRun struct {
								Name       string `graphql:"name"`
								IsRequired bool   `graphql:"isRequired(pullRequestNumber: $n)"`
							} `graphql:"... on CheckRun"`
							StatusContext struct {
								Context    string `graphql:"context"`
								IsRequired bool   `graphql:"isRequired(pullRequestNumber: $n)"`
							} `graphql:"... on StatusContext"`
						} `graphql:"nodes"`
						PageInfo struct {
							HasNextPage bool   `graphql:"hasNextPage"`
							EndCursor   string `graphql:"endCursor"`
						} `graphql:"pageInfo"`
					} `graphql:"contexts(first: 100, after: $after)"`
				} `graphql:"statusCheckRollup"`
			} `graphql:"... on Commit"`
		} `graphql:"object(oid: $oid)"`
	} `graphql:"repository(owner: $owner, name: $name)"`
	RateLimit *rateLimitField `graphql:"rateLimit"`
}

// markedRequired returns the names of the checks and statuses of sha that
// GitHub's isRequired says pull request n requires, every page: any
// reader may ask it, whereas branch protection needs admin rights.
func (a *Adapter) markedRequired(ctx context.Context, n int, sha string) ([]string, error) {
	var marked []string
	var after *githubv4.String
	for {
		var q markedQuery
		vars := map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo),
			"oid": githubv4.GitObjectID(sha), "n": githubv4.Int(n), "after": after}
		errs, err := a.query(ctx, &q, vars)
		if err != nil {
			return nil, fmt.Errorf("github: read the required checks of %s: %w", sha, err)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("github: read the required checks of %s: %s (%s)", sha, errs[0].Message, errs[0].Type)
		}
		a.observeRateLimit(q.RateLimit)
		o := q.Repository.Object
		if o == nil || o.Commit.StatusCheckRollup == nil {
			return marked, nil
		}
		page := o.Commit.StatusCheckRollup.Contexts
		for _, c := range page.Nodes {
			switch {
			case c.Typename == "CheckRun" && c.CheckRun.IsRequired:
				marked = append(marked, c.CheckRun.Name)
			case c.Typename == "StatusContext" && c.StatusContext.IsRequired:
				marked = append(marked, c.StatusContext.Context)
			}
		}
		if !page.PageInfo.HasNextPage || page.PageInfo.EndCursor == "" {
			return marked, nil
		}
		cursor := githubv4.String(page.PageInfo.EndCursor)
		after = &cursor
	}
}

// judge reports the latest checks of a head: when required names checks,
// those, Pending when one has no result; otherwise every check.
func judge(latest map[string]found, required []string) lifecycle.CIReport {
	var rep lifecycle.CIReport
	if len(required) == 0 {
		for _, name := range slices.Sorted(maps.Keys(latest)) {
			rep.Checks = append(rep.Checks, latest[name].check)
		}
		return rep
	}
	seen := map[string]bool{}
	for _, name := range required {
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

// requiredOf returns the checks GitHub requires, as known: those the
// policy names and those GitHub marked required (isRequired).
func requiredOf(pol policy, marked []string) []string {
	return append(slices.Clone(pol.requiredChecks), marked...)
}

// judgeCI is judge of the checks required (requiredOf), and, where checks
// may be required that are not known (none is, or the protection is
// unreadable) and the checks read pass, the check suites of sha: one not
// completed makes the report Pending (and is reported as waiting) unless
// it has no check run and is older than Config.StaleSuiteAfter, which is
// reported in Stale; with no check known to be required, one completed
// without a check run and with a failing conclusion fails it. With the
// required checks known, a suite with check runs adds nothing: its runs
// are read, with isRequired.
func (a *Adapter) judgeCI(ctx context.Context, sha string, latest map[string]found, pol policy, marked []string) (lifecycle.CIReport, bool, error) {
	required := requiredOf(pol, marked)
	rep := judge(latest, required)
	if (len(required) > 0 && !pol.protectionUnreadable) || !ciMet(rep) {
		return rep, false, nil // CI does not pass whatever the suites say
	}
	suites, err := a.checkSuites(ctx, sha)
	if err != nil {
		return lifecycle.CIReport{}, false, err
	}
	now := a.cfg.Clock.Now()
	waiting := false
	for _, s := range suites {
		switch {
		case s.Status == "completed":
			if len(required) == 0 && s.LatestCheckRunsCount == 0 && checkStatus("completed", s.Conclusion) == lifecycle.CheckFailed {
				rep.Checks = append(rep.Checks, lifecycle.CICheck{Name: s.appName() + " check suite", Status: lifecycle.CheckFailed})
			}
		case s.LatestCheckRunsCount > 0 && len(required) > 0:
			// Its runs are among the checks read, required or not.
		case s.LatestCheckRunsCount == 0 && !s.CreatedAt.IsZero() && now.Sub(s.CreatedAt) >= a.cfg.StaleSuiteAfter:
			rep.Stale = append(rep.Stale, lifecycle.StaleCheck{Name: s.appName(), Since: lifecycle.NewTimestamp(s.CreatedAt)})
		default:
			rep.Pending, waiting = true, true
		}
	}
	return rep, waiting, nil
}

// checkSuite is a check suite of GET
// /repos/{owner}/{repo}/commits/{ref}/check-suites: go-github v60's lacks
// latest_check_runs_count.
type checkSuite struct {
	ID                   int64     `json:"id"`
	Status               string    `json:"status"`
	Conclusion           string    `json:"conclusion"`
	LatestCheckRunsCount int       `json:"latest_check_runs_count"`
	CreatedAt            time.Time `json:"created_at"`
	App                  *struct {
		Slug string `json:"slug"`
		Name string `json:"name"`
	} `json:"app"`
}

// appName returns the name of the App of s: its name, or its slug, or
// "check suite" when GitHub says neither.
func (s checkSuite) appName() string {
	switch {
	case s.App != nil && s.App.Name != "":
		return s.App.Name
	case s.App != nil && s.App.Slug != "":
		return s.App.Slug
	}
	return "check suite"
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
			if seen, ok := ctx.Value(suitesSeenKey{}).(*suitesSeen); ok {
				seen.read, seen.suites = true, all // for the reading's Version
			}
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
