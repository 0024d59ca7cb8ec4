package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/hostbudget"
)

// How many pull requests one GraphQL query reads. GitHub charges a query
// the requests its connections need, one per connection and pull request,
// divided by 100 and rounded, and at least one point: a probe, without
// connections, costs one point for any number; a full reading, with two
// connections each (the head's checks, the reviews), one point for 50.
const (
	probeBatch = 200
	fullBatch  = 50
)

// ReadPullRequests reads the pull requests q names through GitHub's
// GraphQL API, in as few queries as their number allows.
//
// A reading for lifecycle.ReadSweep with a Version first probes: up to 200
// pull requests in one query of fields that cost no connection (state,
// draft, head, base, mergeability, review decision, last update, the
// head's check rollup state), one rate-limit point in all. A pull request
// whose probe matches the Version is answered Unchanged: a change of its
// base's rules shows in what GitHub works out from them (mergeStateStatus,
// reviewDecision). The others, and every pull request
// of a ReadNow or ReadMerge reading, are read in full, 50 to a query (one
// point): the probe's fields, the head's checks and statuses with
// isRequired, and the latest opinionated reviews; a head with more than
// 100 checks is paged further on its own. CI and reviews are judged by the
// rules of Checks and ReviewDecision, with GitHub's reviewDecision first.
//
// Sweeps are deferrable: they use at most Config.SweepShare of the rate
// limits, and once it is spent they fail, unsent, with a
// *lifecycle.TemporaryError that is RateLimited; other readings use all of
// it. A pull request GitHub does not know has its Reading.Err matching
// lifecycle.ErrNotFound, and the others are read.
func (a *Adapter) ReadPullRequests(ctx context.Context, q lifecycle.BatchQuery) ([]lifecycle.Reading, error) {
	out := make([]lifecycle.Reading, len(q.Reads))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.Purpose == lifecycle.ReadSweep {
		ctx = hostbudget.WithPriority(ctx, hostbudget.Deferrable)
	} else {
		ctx = hostbudget.WithPriority(ctx, hostbudget.Urgent)
	}
	var probe, full []int // indexes of q.Reads
	for i, r := range q.Reads {
		switch {
		case a.checkRef(r.PullRequest) != nil:
			out[i].Err = a.checkRef(r.PullRequest)
		case q.Purpose == lifecycle.ReadSweep && r.Version != "":
			probe = append(probe, i)
		default:
			full = append(full, i)
		}
	}
	var (
		read     bool // a query was answered
		firstErr error
	)
	fail := func(idx []int, err error) {
		for _, i := range idx {
			out[i] = lifecycle.Reading{Err: err}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	for chunk := range slices.Chunk(probe, probeBatch) {
		changed, err := a.probe(ctx, q.Reads, chunk, out)
		if err != nil {
			fail(chunk, err)
			continue
		}
		read = true
		full = append(full, changed...)
	}
	slices.Sort(full)
	for chunk := range slices.Chunk(full, fullBatch) {
		if err := a.readFull(ctx, chunk, q.Reads, out); err != nil {
			fail(chunk, err)
			continue
		}
		read = true
	}
	if !read && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// numbers returns the numbers of the pull requests reads[idx].
func numbers(reads []lifecycle.ReadRequest, idx []int) []int {
	n := make([]int, len(idx))
	for k, i := range idx {
		n[k] = reads[i].PullRequest.Number
	}
	return n
}

// aliasErrors returns the error of each alias GitHub could not resolve,
// by alias index, or an error when GitHub failed the query as a whole.
func (a *Adapter) aliasErrors(errs []gqlError, n int) (map[int]error, error) {
	byAlias := map[int]error{}
	for _, e := range errs {
		i := alias(e)
		if i < 0 || i >= n {
			if e.Type == "NOT_FOUND" && len(e.Path) == 1 {
				return nil, fmt.Errorf("github: repository %s/%s: %s: %w", a.cfg.Owner, a.cfg.Repo, e.Message, lifecycle.ErrNotFound)
			}
			return nil, fmt.Errorf("github: GraphQL query: %s (%s)", e.Message, e.Type)
		}
		if _, seen := byAlias[i]; seen {
			continue
		}
		if e.Type == "NOT_FOUND" {
			byAlias[i] = fmt.Errorf("github: %s: %w", e.Message, lifecycle.ErrNotFound)
		} else {
			byAlias[i] = fmt.Errorf("github: GraphQL: %s (%s)", e.Message, e.Type)
		}
	}
	return byAlias, nil
}

// observeRateLimit records the rateLimit a query read.
func (a *Adapter) observeRateLimit(rl *rateLimitField) {
	if rl != nil {
		a.budget.Observe(resourceGraphQL, hostbudget.State{Limit: rl.Limit, Remaining: rl.Remaining, Reset: rl.ResetAt})
	}
}

// query runs the query of T (probePR or fullPR) for reads[idx] and calls
// each with every pull request it read; those GitHub could not resolve get
// their Err in out. Its error means the query read nothing.
func query[T any](ctx context.Context, a *Adapter, what string, reads []lifecycle.ReadRequest, idx []int, out []lifecycle.Reading, each func(i int, p T)) error {
	bq := newBatchQuery[T](a.cfg.Owner, a.cfg.Repo, numbers(reads, idx))
	errs, err := a.query(ctx, bq.value.Interface(), bq.vars)
	if err != nil {
		return fmt.Errorf("github: %s %d pull requests: %w", what, len(idx), err)
	}
	a.observeRateLimit(bq.rateLimit())
	byAlias, err := a.aliasErrors(errs, len(idx))
	if err != nil {
		return err
	}
	for k, i := range idx {
		if err := byAlias[k]; err != nil {
			out[i] = lifecycle.Reading{Err: err}
			continue
		}
		p, ok := pull[T](bq, k)
		if !ok {
			out[i] = lifecycle.Reading{Err: fmt.Errorf("github: pull request #%d: %w", reads[i].PullRequest.Number, lifecycle.ErrNotFound)}
			continue
		}
		each(i, p)
	}
	return nil
}

// probe probes reads[idx], answers out[i] Unchanged for those whose
// Version still holds, and returns the others.
func (a *Adapter) probe(ctx context.Context, reads []lifecycle.ReadRequest, idx []int, out []lifecycle.Reading) ([]int, error) {
	var changed []int
	err := query(ctx, a, "probe", reads, idx, out, func(i int, p probePR) {
		// A change of the base's rules shows in what GitHub works out
		// from them (mergeStateStatus, reviewDecision): the probe needs
		// no reading of them.
		if v := parseVersion(reads[i].Version); v.waiting || v.probe != probeSum(p) || !v.sameMergeability(p.Mergeable, p.MergeStateStatus) {
			changed = append(changed, i)
			return
		}
		out[i] = lifecycle.Reading{Unchanged: true, Version: reads[i].Version}
	})
	return changed, err
}

// readFull reads reads[idx] in full into out.
func (a *Adapter) readFull(ctx context.Context, idx []int, reads []lifecycle.ReadRequest, out []lifecycle.Reading) error {
	return query(ctx, a, "read", reads, idx, out, func(i int, p fullPR) { out[i] = a.reading(ctx, p) })
}

// headCommit returns the head commit fullPR read through its head branch,
// when the branch still points at the pull request's head.
func headCommit(p fullPR) (rollup *struct {
	State    string       `graphql:"state"`
	Contexts contextsPage `graphql:"contexts(first: 100)"`
}, ok bool) {
	if p.HeadRef == nil || !strings.EqualFold(p.HeadRef.Target.Commit.Oid, p.HeadRefOid) {
		return nil, false
	}
	return p.HeadRef.Target.Commit.StatusCheckRollup, true
}

// reading turns a full reading of a pull request into the lifecycle's.
func (a *Adapter) reading(ctx context.Context, p fullPR) lifecycle.Reading {
	pr := lifecycle.PullRequest{
		PullRequestRef: a.ref(p.Number),
		URL:            p.URL,
		Head:           p.HeadRefName,
		Base:           p.BaseRefName,
		HeadSHA:        strings.ToLower(p.HeadRefOid),
		Draft:          p.IsDraft,
		State:          lifecycle.PullRequestOpen,
	}
	switch {
	case p.State == "MERGED" || p.Merged:
		pr.State = lifecycle.PullRequestMerged
		if p.MergeCommit != nil {
			pr.MergeCommitSHA = strings.ToLower(p.MergeCommit.Oid)
		}
	case p.State == "CLOSED":
		pr.State = lifecycle.PullRequestClosed
	}
	a.mu.Lock()
	a.bases[p.Number] = pr.Base
	a.mu.Unlock()
	open := pr.State == lifecycle.PullRequestOpen
	var pol policy
	if open {
		var err error
		if pol, err = a.policy(ctx, pr.Base); err != nil {
			return lifecycle.Reading{Err: err}
		}
		pr.DismissesStaleReviews = pol.dismissStale
		pr.Mergeable = mergeability(p.Mergeable, p.MergeStateStatus)
	}
	ci, waiting, err := a.batchCI(ctx, p, pol, open)
	if err != nil {
		return lifecycle.Reading{Err: err}
	}
	reviews := batchReviews(p, pol)
	return lifecycle.Reading{PullRequest: pr, CI: &ci, Reviews: &reviews, Version: version{probe: fullSum(p), mergeable: p.Mergeable, mergeState: p.MergeStateStatus, waiting: waiting}.String()}
}

// mergeability maps GitHub's mergeable and mergeStateStatus.
func mergeability(mergeable, status string) lifecycle.Mergeability {
	switch {
	case mergeable == "CONFLICTING" || status == "DIRTY":
		return lifecycle.MergeabilityConflicting
	case status == "BEHIND":
		return lifecycle.MergeabilityBehind
	case mergeable == "UNKNOWN" || status == "UNKNOWN" || mergeable == "":
		return lifecycle.MergeabilityUnknown
	}
	return lifecycle.MergeabilityMergeable
}

// batchCI judges the CI of a pull request's head from the checks and
// statuses its rollup holds, by the rules of Checks. It says whether a
// check suite not completed keeps CI running.
func (a *Adapter) batchCI(ctx context.Context, p fullPR, pol policy, open bool) (lifecycle.CIReport, bool, error) {
	rollup, ok := headCommit(p)
	if !ok {
		// The head branch is gone, or has moved on since GitHub last
		// updated the pull request: its checks are not the head's.
		return lifecycle.CIReport{Pending: open}, false, nil
	}
	var contexts []rollupContext
	if rollup != nil {
		contexts = rollup.Contexts.Nodes
		if rollup.Contexts.PageInfo.HasNextPage {
			more, err := a.moreContexts(ctx, p.Number, rollup.Contexts.PageInfo.EndCursor)
			if err != nil {
				return lifecycle.CIReport{}, false, err
			}
			contexts = append(contexts, more...)
		}
	}
	latest := map[string]found{}
	var marked []string
	for _, c := range contexts {
		switch c.Typename {
		case "CheckRun":
			r := c.CheckRun
			var at time.Time
			if r.StartedAt != nil {
				at = *r.StartedAt
			}
			if r.CompletedAt != nil {
				at = *r.CompletedAt
			}
			keep(latest, found{check: lifecycle.CICheck{Name: r.Name, Status: checkStatus(strings.ToLower(r.Status), strings.ToLower(r.Conclusion)), URL: r.DetailsURL},
				at: at, id: r.DatabaseID, run: true})
			if r.IsRequired {
				marked = append(marked, r.Name)
			}
		case "StatusContext":
			s := c.StatusContext
			keep(latest, found{check: lifecycle.CICheck{Name: s.Context, Status: statusState(s.State), URL: s.TargetURL}, at: s.CreatedAt})
			if s.IsRequired {
				marked = append(marked, s.Context)
			}
		}
	}
	if !open {
		return judge(latest, pol.requiredChecks, marked), false, nil
	}
	return a.judgeCI(ctx, p.HeadRefOid, latest, pol.requiredChecks, marked)
}

// statusState maps a commit status's state (GraphQL's StatusState or
// REST's lower-case word).
func statusState(s string) lifecycle.CheckStatus {
	switch strings.ToLower(s) {
	case "pending", "expected":
		return lifecycle.CheckRunning
	case "success":
		return lifecycle.CheckPassed
	}
	return lifecycle.CheckFailed // failure, error
}

// moreContexts reads the contexts of pull request n's head rollup after
// cursor, every page.
func (a *Adapter) moreContexts(ctx context.Context, n int, cursor string) ([]rollupContext, error) {
	t := retag(reflect.TypeFor[contextsQuery](), "$n")
	var all []rollupContext
	for {
		v := reflect.New(t)
		vars := map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo), "n": githubv4.Int(n), "after": githubv4.String(cursor)}
		errs, err := a.query(ctx, v.Interface(), vars)
		if err != nil {
			return nil, fmt.Errorf("github: read the checks of pull request #%d: %w", n, err)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("github: read the checks of pull request #%d: %s (%s)", n, errs[0].Message, errs[0].Type)
		}
		q := v.Elem().Convert(reflect.TypeFor[contextsQuery]()).Interface().(contextsQuery)
		a.observeRateLimit(q.RateLimit)
		pr := q.Repository.PullRequest
		if pr == nil || pr.HeadRef == nil || pr.HeadRef.Target.Commit.StatusCheckRollup == nil {
			return all, nil
		}
		page := pr.HeadRef.Target.Commit.StatusCheckRollup.Contexts
		all = append(all, page.Nodes...)
		if !page.PageInfo.HasNextPage || page.PageInfo.EndCursor == "" {
			return all, nil
		}
		cursor = page.PageInfo.EndCursor
	}
}

// writer reports whether a review's author association is one of people
// with write access to the repository: its owner, a member of the
// organisation that owns it, or a collaborator. An outsider's review
// (NONE, CONTRIBUTOR, FIRST_TIMER, ...) counts for nothing.
func writer(association string) bool {
	switch strings.ToUpper(association) {
	case "OWNER", "MEMBER", "COLLABORATOR":
		return true
	}
	return false
}

// batchReviews returns the review state of a pull request: GitHub's
// reviewDecision when it gives one, or else the writers' latest reviews
// held against the policy of the base (see decide). Only writers' reviews
// are returned.
func batchReviews(p fullPR, pol policy) lifecycle.HostReviews {
	var out lifecycle.HostReviews
	type latest struct {
		login  string
		state  string
		commit string
	}
	var opinions []latest
	for _, r := range p.LatestOpinionatedReviews.Nodes {
		if !writer(r.AuthorAssociation) || r.Author == nil {
			continue
		}
		hr := lifecycle.HostReview{ID: r.FullDatabaseID, Reviewer: r.Author.Login, Body: r.Body}
		if r.Commit != nil {
			hr.CommitSHA = strings.ToLower(r.Commit.Oid)
		}
		if r.SubmittedAt != nil {
			hr.SubmittedAt = *r.SubmittedAt
		}
		switch r.State {
		case "APPROVED":
			hr.Outcome = lifecycle.ReviewApproved
		case "CHANGES_REQUESTED":
			hr.Outcome = lifecycle.ReviewChangesRequested
		default: // DISMISSED: withdrawn
			continue
		}
		opinions = append(opinions, latest{login: r.Author.Login, state: r.State, commit: hr.CommitSHA})
		out.Reviews = append(out.Reviews, hr)
	}
	slices.SortStableFunc(out.Reviews, func(x, y lifecycle.HostReview) int { return x.SubmittedAt.Compare(y.SubmittedAt) })
	if p.ReviewDecision != nil {
		switch *p.ReviewDecision {
		case "APPROVED":
			out.Decision = lifecycle.DecisionApproved
			return out
		case "CHANGES_REQUESTED":
			out.Decision = lifecycle.DecisionChangesRequested
			return out
		case "REVIEW_REQUIRED":
			out.Decision = lifecycle.DecisionPending
			return out
		}
	}
	approvals, changes := 0, false
	for _, o := range opinions {
		switch o.state {
		case "CHANGES_REQUESTED":
			changes = true
		case "APPROVED":
			if !pol.dismissStale || strings.EqualFold(o.commit, p.HeadRefOid) {
				approvals++
			}
		}
	}
	out.Decision = decision(changes, approvals, pol.approvals)
	return out
}

// decision decides from the writers' latest reviews: changes requested by
// any, else approved once approvals reach required (not_required when none
// is).
func decision(changes bool, approvals, required int) lifecycle.ReviewDecision {
	switch {
	case changes:
		return lifecycle.DecisionChangesRequested
	case required == 0:
		return lifecycle.DecisionNotRequired
	case approvals >= required:
		return lifecycle.DecisionApproved
	}
	return lifecycle.DecisionPending
}

// version is what a Reading's Version holds: a digest of the probe's
// fields as read but mergeability, the mergeability (GitHub's mergeable
// and mergeStateStatus), and whether a check suite kept CI running (the
// probe does not see suites: such a pull request is read in full until it
// no longer does).
type version struct {
	probe                 string
	mergeable, mergeState string
	waiting               bool
}

const versionPrefix = "gh2"

// sameMergeability reports whether a probe's mergeable and
// mergeStateStatus say what v does. UNKNOWN says nothing: GitHub works
// mergeability out anew for every open pull request each time their base
// moves (each merge into it), and the probe that asks starts it, so the
// next one has the result; a fleet's merges so do not make every pull
// request into their base read in full twice.
func (v version) sameMergeability(mergeable, mergeState string) bool {
	return (mergeable == "UNKNOWN" || mergeable == v.mergeable) && (mergeState == "UNKNOWN" || mergeState == v.mergeState)
}

// String encodes v.
func (v version) String() string {
	w := "0"
	if v.waiting {
		w = "1"
	}
	return versionPrefix + ":" + v.probe + ":" + v.mergeable + "/" + v.mergeState + ":" + w
}

// parseVersion decodes a Version; one of another form (another adapter's,
// an older one) decodes to a version no probe matches.
func parseVersion(s string) version {
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != versionPrefix {
		return version{probe: "-"}
	}
	mergeable, mergeState, _ := strings.Cut(parts[2], "/")
	return version{probe: parts[1], mergeable: mergeable, mergeState: mergeState, waiting: parts[3] == "1"}
}

// digest returns a short digest of fields.
func digest(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// probeFields returns the fields a probe compares.
func probeFields(number int, state string, draft bool, headOid, base string, decision *string, updated time.Time, targetOid, rollup string) string {
	d := "-"
	if decision != nil {
		d = *decision
	}
	return digest(strconv.Itoa(number), state, strconv.FormatBool(draft), strings.ToLower(headOid), base, d,
		updated.UTC().Format(time.RFC3339Nano), strings.ToLower(targetOid), rollup)
}

// probeSum is the digest of a probe.
func probeSum(p probePR) string {
	target, rollup := "", "-"
	if p.HeadRef != nil {
		target = p.HeadRef.Target.Commit.Oid
		if r := p.HeadRef.Target.Commit.StatusCheckRollup; r != nil {
			rollup = r.State
		}
	}
	return probeFields(p.Number, p.State, p.IsDraft, p.HeadRefOid, p.BaseRefName, p.ReviewDecision, p.UpdatedAt, target, rollup)
}

// fullSum is the digest of a full reading's probe fields, as probeSum
// makes it of a probe of the same state.
func fullSum(p fullPR) string {
	target, rollup := "", "-"
	if p.HeadRef != nil {
		target = p.HeadRef.Target.Commit.Oid
		if r := p.HeadRef.Target.Commit.StatusCheckRollup; r != nil {
			rollup = r.State
		}
	}
	return probeFields(p.Number, p.State, p.IsDraft, p.HeadRefOid, p.BaseRefName, p.ReviewDecision, p.UpdatedAt, target, rollup)
}
