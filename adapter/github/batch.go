package github

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// How many pull requests one GraphQL query reads at most. GitHub charges
// a query the requests its connections need, one per connection and pull
// request, divided by 100 and rounded to the nearest whole number, and at
// least one point: a probe, with one connection each (the head's checks),
// costs one point for 149 (1.49, rounded); a full reading, with two
// connections each (the head's checks, the reviews), one point for 50.
// A query GitHub gives up on as too slow makes the next ones smaller (see
// batchSizer).
const (
	probeBatch = 149
	fullBatch  = 50
)

// ReadPullRequests reads the pull requests q names through GitHub's
// GraphQL API, in as few queries as their number allows.
//
// A reading for lifecycle.ReadSweep with a Version first probes: up to
// 149 pull requests in one query, one rate-limit point, of the fields
// that move whenever something a task shows changes (state, draft, head,
// base, mergeability, review decision, last update, the head's check runs
// and commit statuses with their counts by state), and of the policy of
// their base (read through REST at most once per Config.ProtectionTTL).
// A pull request whose probe matches the Version is answered Unchanged.
// The others, and every pull request of a ReadNow or ReadMerge reading,
// are read in full, 50 to a query (one point): the probe's fields, the
// head's checks and statuses with isRequired, and the latest opinionated
// reviews; a head with more than 100 checks is paged further on its own.
// CI and reviews are judged by the rules of Checks and ReviewDecision,
// with GitHub's reviewDecision first. A pull request whose Version says
// the probe cannot vouch for it (a check suite keeping CI running, more
// checks than a page, a review decision the Adapter makes from reviews)
// is read in full.
//
// A query GitHub gives up on as too slow (a timeout, 502 or 504, "Something
// went wrong while executing your query") is asked again in halves, and
// later queries read fewer pull requests until enough have succeeded.
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
	// A probe's chunk holds up to probeSize connections: one per pull
	// request, two for one whose check suites are read too.
	probeCost := func(i int) int {
		if parseVersion(q.Reads[i].Version).has(flagSuites) {
			return 2
		}
		return 1
	}
	read = a.chunked(ctx, &a.probeSize, probe, probeCost, fail, func(chunk []int) error {
		changed, err := a.probe(ctx, q.Reads, chunk, out)
		full = append(full, changed...)
		return err
	}) || read
	slices.Sort(full)
	read = a.chunked(ctx, &a.fullSize, full, func(int) int { return 1 }, fail, func(chunk []int) error {
		return a.readFull(ctx, chunk, q.Reads, out)
	}) || read
	if !read && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// chunked calls do with idx in chunks that cost at most size's current
// size in all (cost(i) each, at least one pull request a chunk), and
// reports whether one succeeded. A chunk GitHub gave up on as too slow is
// taken again in smaller chunks, size halved, down to one pull request; a
// chunk that fails otherwise, or alone, is failed with its error.
func (a *Adapter) chunked(ctx context.Context, size *batchSizer, idx []int, cost func(i int) int, fail func(idx []int, err error), do func(chunk []int) error) bool {
	read := false
	for pending := idx; len(pending) > 0; {
		if err := ctx.Err(); err != nil {
			fail(pending, err)
			break
		}
		limit := size.get()
		n, spent := 1, cost(pending[0])
		for n < len(pending) && spent+cost(pending[n]) <= limit {
			spent += cost(pending[n])
			n++
		}
		err := do(pending[:n])
		switch {
		case err == nil:
			read = true
			size.succeeded(spent)
		case n > 1 && ctx.Err() == nil && tooSlow(err):
			size.failed(spent)
			a.log.WarnContext(ctx, "GitHub gave up on a query as too slow; reading fewer pull requests a query", "pull_requests", n, "cost_now", size.get(), "err", err)
			continue // the same pull requests, in smaller chunks
		default:
			fail(pending[:n], err)
		}
		pending = pending[n:]
	}
	return read
}

// tooSlow reports whether an error says GitHub gave up on a query as too
// slow: an answer 502 or 504, GitHub's message for a query it stopped
// ("Something went wrong while executing your query. This may be the
// result of a timeout"), or no answer in time.
func tooSlow(err error) bool {
	switch statusOf(err) {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	var he *hostError
	if errors.As(err, &he) && gaveUp(he.Message) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// batchSizer keeps how much a kind of query reads (pull requests, or
// connections): at most max, halved after a query GitHub gave up on as
// too slow, doubled again after growAfter queries of that much succeeded
// in a row. It is safe for concurrent use.
type batchSizer struct {
	max int

	mu   sync.Mutex
	size int // 0: max
	ok   int // queries of size that succeeded in a row
}

// growAfter is how many queries of the current size must succeed in a
// row before a batchSizer doubles it.
const growAfter = 20

// get returns the current size.
func (b *batchSizer) get() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 {
		b.size = b.max
	}
	return b.size
}

// failed records that a query of size n timed out.
func (b *batchSizer) failed(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.size, b.ok = max(1, min(b.size, n)/2), 0
}

// succeeded records that a query of size n succeeded.
func (b *batchSizer) succeeded(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.size == 0 || n < b.size {
		return
	}
	if b.ok++; b.ok >= growAfter && b.size < b.max {
		b.size, b.ok = min(b.max, 2*b.size), 0
	}
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
			return nil, fmt.Errorf("github: GraphQL query: %s (%s)", e.Message, cmp.Or(e.Type, e.Extensions.Code))
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

// query runs the query of T (probePR or fullPR) for reads[idx], each with
// the fields with(i) names (see retag), and calls each with every pull
// request it read; those GitHub could not resolve get their Err in out.
// Its error means the query read nothing.
func query[T any](ctx context.Context, a *Adapter, what string, reads []lifecycle.ReadRequest, idx []int, with func(i int) string, out []lifecycle.Reading, each func(i int, p T)) error {
	var bq batchQuery
	_, errs, err := a.run(ctx, func(sh shape) (any, map[string]any) {
		bq = newBatchQuery[T](a.cfg.Owner, a.cfg.Repo, numbers(reads, idx), sh, func(k int) string { return with(idx[k]) })
		return bq.value.Interface(), bq.vars
	})
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
	with := func(i int) string {
		if parseVersion(reads[i].Version).has(flagSuites) {
			return "suites"
		}
		return ""
	}
	err := query(ctx, a, "probe", reads, idx, with, out, func(i int, p probePR) {
		v := parseVersion(reads[i].Version)
		if v.readInFull() || !v.sameMergeability(p.Mergeable, p.MergeStateStatus) {
			changed = append(changed, i)
			return
		}
		if v.has(flagSuites) && v.suites != probeSuites(p) {
			changed = append(changed, i)
			return
		}
		// The base's policy decides which checks count and how many
		// approvals a decision of the Adapter's needs: a change of it is
		// a change of the pull request's reading.
		var pol policy
		if p.State == "OPEN" {
			var err error
			if pol, err = a.policy(ctx, p.BaseRefName); err != nil {
				changed = append(changed, i) // the full reading says why
				return
			}
		}
		if v.probe != probeSum(p, pol) {
			changed = append(changed, i)
			return
		}
		out[i] = lifecycle.Reading{Unchanged: true, Version: reads[i].Version}
	})
	return changed, err
}

// readFull reads reads[idx] in full into out.
func (a *Adapter) readFull(ctx context.Context, idx []int, reads []lifecycle.ReadRequest, out []lifecycle.Reading) error {
	return query(ctx, a, "read", reads, idx, func(int) string { return "" }, out, func(i int, p fullPR) { out[i] = a.reading(ctx, p) })
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
	}
	// The check suites judgeCI reads, if it does: CI then rests on them.
	seen := &suitesSeen{}
	ci, waiting, err := a.batchCI(context.WithValue(ctx, suitesSeenKey{}, seen), p, pol, open)
	if err != nil {
		return lifecycle.Reading{Err: err}
	}
	reviews := batchReviews(p)
	if open {
		pr.Mergeable, pr.BlockedReason = mergeability(p.Mergeable, p.MergeStateStatus, p.IsDraft, ci, reviews.Decision, pol)
	}
	r := lifecycle.Reading{PullRequest: pr, CI: &ci, Reviews: &reviews}
	v := version{probe: probeSum(p.probe(), pol), mergeable: p.Mergeable, mergeState: p.MergeStateStatus, reading: readingSum(r)}
	switch {
	case waiting:
		v.flags += flagWaiting
	case seen.read:
		v.flags += flagSuites
		v.suites = restSuites(seen.suites)
	}
	if p.HeadRef != nil && p.HeadRef.Target.Commit.StatusCheckRollup != nil && p.HeadRef.Target.Commit.StatusCheckRollup.Contexts.PageInfo.HasNextPage {
		v.flags += flagPaged
	}
	if open && p.ReviewDecision == nil && len(reviews.Reviews) > 0 {
		v.flags += flagReviews
	}
	r.Version = v.String()
	return r
}

// mergeability maps GitHub's mergeable and mergeStateStatus: conflicting
// (CONFLICTING, DIRTY), behind (BEHIND), unknown while GitHub works it out,
// and mergeable otherwise, but for BLOCKED. GitHub's BLOCKED means the
// base's rules are not all met: those the lifecycle models (required
// checks, reviews), for which the lifecycle refuses to ship by itself,
// and others (unresolved conversations, signed commits, deployments, a
// check required from a given App, a merge queue, ...). BLOCKED is
// mergeable when the only requirement the lifecycle does not model is
// GitHub's merge queue, which Merge uses; otherwise it is
// MergeabilityBlocked, with the words of blockedReason, when the
// requirements the lifecycle models are met as the reading tells them:
// not a draft, CI (ci, as the adapter judged it) neither pending, running
// nor failed, and the host's review decision approved or not required;
// otherwise those explain it, and it is mergeable.
func mergeability(mergeable, status string, draft bool, ci lifecycle.CIReport, decision lifecycle.ReviewDecision, pol policy) (lifecycle.Mergeability, string) {
	switch {
	case mergeable == "CONFLICTING" || status == "DIRTY":
		return lifecycle.MergeabilityConflicting, ""
	case status == "BEHIND":
		return lifecycle.MergeabilityBehind, ""
	case mergeable == "UNKNOWN" || status == "UNKNOWN" || mergeable == "":
		return lifecycle.MergeabilityUnknown, ""
	case status == "BLOCKED" && !draft && ciMet(ci) && (decision == lifecycle.DecisionApproved || decision == lifecycle.DecisionNotRequired):
		if pol.mergeQueue && len(pol.unmodelled) == 0 {
			// The merge queue the base requires explains BLOCKED: Merge
			// goes through it.
			return lifecycle.MergeabilityMergeable, ""
		}
		return lifecycle.MergeabilityBlocked, blockedReason(pol)
	}
	return lifecycle.MergeabilityMergeable, ""
}

// ciMet reports whether CI, as the adapter judged it, lets a pull request
// merge: nothing pending, running or failed.
func ciMet(ci lifecycle.CIReport) bool {
	if ci.Pending {
		return false
	}
	for _, c := range ci.Checks {
		if c.Status == lifecycle.CheckRunning || c.Status == lifecycle.CheckFailed {
			return false
		}
	}
	return true
}

// blockedReason says, for people, what GitHub's BLOCKED stands for when
// what the lifecycle models is met: the requirements of the base the
// lifecycle does not model, as its protection and rulesets name them.
func blockedReason(pol policy) string {
	const prefix = "GitHub blocks the merge"
	const unreadable = "branch protection, which these credentials cannot read (it needs admin rights)"
	switch {
	case len(pol.unmodelled) > 0 && pol.protectionUnreadable:
		return prefix + ": the base requires " + strings.Join(pol.unmodelled, ", ") + "; its " + unreadable + ", may require more"
	case len(pol.unmodelled) > 0:
		return prefix + ": the base requires " + strings.Join(pol.unmodelled, ", ")
	case pol.protectionUnreadable:
		return prefix + " for a requirement of the base's " + unreadable + ": such as resolved conversations, signed commits, deployments, or a required check not yet reported"
	}
	return prefix + " for a requirement of the base the lifecycle does not model"
}

// batchCI judges the CI of a pull request's head from the checks and
// statuses its rollup holds, with GitHub's isRequired, by the rules of
// Checks. It says whether a check suite not completed keeps CI running.
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
		return judge(latest, requiredOf(pol, marked)), false, nil
	}
	return a.judgeCI(ctx, p.HeadRefOid, latest, pol, marked)
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
	var all []rollupContext
	for {
		v, errs, err := a.run(ctx, func(sh shape) (any, map[string]any) {
			return reflect.New(sh.retag(reflect.TypeFor[contextsQuery](), "$n", "")).Interface(),
				map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo), "n": githubv4.Int(n), "after": githubv4.String(cursor)}
		})
		if err != nil {
			return nil, fmt.Errorf("github: read the checks of pull request #%d: %w", n, err)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("github: read the checks of pull request #%d: %s (%s)", n, errs[0].Message, errs[0].Type)
		}
		var q contextsQuery
		assign(reflect.ValueOf(&q).Elem(), reflect.ValueOf(v).Elem())
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
// reviewDecision; null, which GitHub answers when the base requires no
// review, is not_required (changes_requested when a writer's latest review
// asks for changes). Only writers' reviews are returned.
func batchReviews(p fullPR) lifecycle.HostReviews {
	var out lifecycle.HostReviews
	for _, r := range p.LatestOpinionatedReviews.Nodes {
		if !writer(r.AuthorAssociation) || r.Author == nil {
			continue
		}
		hr := lifecycle.HostReview{ID: r.FullDatabaseID, Reviewer: r.Author.Login, Body: r.Body}
		if hr.ID == "" && r.DatabaseID != nil {
			hr.ID = strconv.FormatInt(*r.DatabaseID, 10) // an Enterprise Server without fullDatabaseId
		}
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
	// GitHub's reviewDecision is null when the base requires no review:
	// not required, unless a writer's latest review asks for changes,
	// which is rework all the same.
	changes := slices.ContainsFunc(out.Reviews, func(r lifecycle.HostReview) bool { return r.Outcome == lifecycle.ReviewChangesRequested })
	out.Decision = decision(changes, 0, 0)
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
// fields as read but mergeability, and of the base's policy; the
// mergeability (GitHub's mergeable and mergeStateStatus); flags saying
// what else a probe must read, or that it cannot vouch for the reading;
// the digest of the head's check suites when CI rests on them; and a
// digest of everything the reading shows, so that two readings that show
// different things never carry the same Version.
type version struct {
	probe                 string
	mergeable, mergeState string
	flags                 string
	suites                string
	reading               string
}

// The flags of a version. flagSuites makes the probe read the head's
// check suites too; each of the others makes the pull request read in
// full at every sweep, as long as its reading says so.
const (
	// flagSuites: the required checks are unknown and every check
	// passed, so CI passes only once every check suite has completed
	// (see judgeCI); a suite created or re-requested, or completed without
	// a check run, changes CI without changing the checks.
	flagSuites = "s"
	// flagWaiting: a check suite not completed keeps CI running.
	flagWaiting = "w"
	// flagPaged: the head has more checks than a page, and the probe
	// sees the first page only.
	flagPaged = "p"
	// flagReviews: GitHub gives no review decision (the base requires no
	// review) and writers reviewed: the Adapter decides from their
	// latest reviews, which a dismissal changes without moving any field
	// the probe reads.
	flagReviews = "r"
)

const versionPrefix = "gh3"

// has reports whether v carries flag.
func (v version) has(flag string) bool { return strings.Contains(v.flags, flag) }

// readInFull reports whether v's pull request must be read in full
// whatever its probe says.
func (v version) readInFull() bool {
	return v.has(flagWaiting) || v.has(flagPaged) || v.has(flagReviews)
}

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
	return versionPrefix + ":" + v.probe + ":" + v.mergeable + "/" + v.mergeState + ":" + v.flags + ":" + v.suites + ":" + v.reading
}

// parseVersion decodes a Version; one of another form (another adapter's,
// an older one) decodes to a version no probe matches.
func parseVersion(s string) version {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != versionPrefix {
		return version{probe: "-"}
	}
	mergeable, mergeState, _ := strings.Cut(parts[2], "/")
	return version{probe: parts[1], mergeable: mergeable, mergeState: mergeState, flags: parts[3], suites: parts[4], reading: parts[5]}
}

// suitesSeen receives the check suites judgeCI read, through the context
// of a reading (see checkSuites).
type suitesSeen struct {
	read   bool
	suites []checkSuite
}

type suitesSeenKey struct{}

// restSuites is the digest of check suites as REST lists them: each one's
// ID, status and conclusion, in ID order.
func restSuites(suites []checkSuite) string {
	sorted := slices.SortedFunc(slices.Values(suites), func(x, y checkSuite) int { return cmp.Compare(x.ID, y.ID) })
	h := newDigester()
	for _, s := range sorted {
		h.add(strconv.FormatInt(s.ID, 10), strings.ToLower(s.Status), strings.ToLower(s.Conclusion))
	}
	return h.sum()
}

// probeSuites is the digest of the check suites a probe read, as
// restSuites makes it of the same suites; "" when it read none (a page
// that is not all of them reads as none).
func probeSuites(p probePR) string {
	if p.HeadRef == nil || p.HeadRef.Target.Commit.CheckSuites == nil || p.HeadRef.Target.Commit.CheckSuites.PageInfo.HasNextPage {
		return ""
	}
	nodes := p.HeadRef.Target.Commit.CheckSuites.Nodes
	suites := make([]checkSuite, len(nodes))
	for i, n := range nodes {
		suites[i] = checkSuite{ID: n.DatabaseID, Status: n.Status, Conclusion: n.Conclusion}
	}
	return restSuites(suites)
}

// digester makes a short digest of fields.
type digester struct{ h hash.Hash }

func newDigester() *digester { return &digester{h: sha256.New()} }

// add adds fields, each ended by a zero byte.
func (d *digester) add(fields ...string) *digester {
	for _, f := range fields {
		d.h.Write([]byte(f))
		d.h.Write([]byte{0})
	}
	return d
}

// sum returns the digest.
func (d *digester) sum() string { return hex.EncodeToString(d.h.Sum(nil)[:12]) }

// timeField formats a time for a digest.
func timeField(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// probeSum is the digest of a probe's fields but mergeability, and of
// the base's policy pol (the zero policy for a pull request not open).
func probeSum(p probePR, pol policy) string {
	d := "-"
	if p.ReviewDecision != nil {
		d = *p.ReviewDecision
	}
	h := newDigester().add(strconv.Itoa(p.Number), p.State, strconv.FormatBool(p.IsDraft), strings.ToLower(p.HeadRefOid), p.BaseRefName, d,
		timeField(p.UpdatedAt), fmt.Sprintf("%v", pol))
	if p.HeadRef == nil {
		return h.add("no head branch").sum()
	}
	h.add(strings.ToLower(p.HeadRef.Target.Commit.Oid))
	r := p.HeadRef.Target.Commit.StatusCheckRollup
	if r == nil {
		return h.add("no rollup").sum()
	}
	c := r.Contexts
	h.add(r.State, strconv.Itoa(c.TotalCount), strconv.FormatBool(c.PageInfo.HasNextPage))
	for _, counts := range [][]stateCount{c.CheckRunCountsByState, c.StatusContextCountsByState} {
		// GitHub lists the states in an order of its own, perhaps with
		// those of no context.
		sorted := slices.SortedFunc(slices.Values(counts), func(x, y stateCount) int { return strings.Compare(x.State, y.State) })
		for _, s := range sorted {
			if s.Count > 0 {
				h.add(s.State, strconv.Itoa(s.Count))
			}
		}
		h.add("|")
	}
	for _, n := range c.Nodes {
		switch n.Typename {
		case "CheckRun":
			r := n.CheckRun
			h.add(n.Typename, strconv.FormatInt(r.DatabaseID, 10), r.Name, r.Status, r.Conclusion, r.DetailsURL, optTime(r.StartedAt), optTime(r.CompletedAt),
				strconv.FormatBool(r.IsRequired))
		case "StatusContext":
			s := n.StatusContext
			h.add(n.Typename, s.Context, s.State, s.TargetURL, timeField(s.CreatedAt), strconv.FormatBool(s.IsRequired))
		default:
			h.add(n.Typename)
		}
	}
	return h.sum()
}

// optTime formats a time that may be missing for a digest.
func optTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return timeField(*t)
}

// readingSum is the digest of everything a reading shows: the pull
// request, its CI and its reviews.
func readingSum(r lifecycle.Reading) string {
	b, err := json.Marshal(struct {
		PullRequest lifecycle.PullRequest
		CI          *lifecycle.CIReport
		Reviews     *lifecycle.HostReviews
	}{r.PullRequest, r.CI, r.Reviews})
	if err != nil {
		panic(fmt.Sprintf("github: encode a reading: %v", err)) // plain data: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
