package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

// The sweep's bounds on GitLab's time.
const (
	// listMargin is how far before the time of its last look (GitLab's
	// Date of the answer) a sweep lists the pipelines updated since: a
	// pipeline updated in a transaction that committed after that answer,
	// or on a node whose clock runs behind, is listed all the same.
	listMargin = 30 * time.Second
	// touchInterval is ThrottledTouch's TOUCH_INTERVAL: a system note
	// (commits pushed, an approval, its removal, a review) touches a merge
	// request, moving its updated_at, only when that is over a minute old.
	touchInterval = time.Minute
	// touchSlop is how long after touchInterval the reviews of a merge
	// request read within it are read again: a touch GitLab decided not
	// to make before the minute was over has committed by then.
	touchSlop = 10 * time.Second
	// recheckPatience is how long a sweep waits for GitLab to work out a
	// merge request's mergeability, which its list asks for
	// (with_merge_status_recheck), before it reads the merge request
	// alone, which starts the check too.
	recheckPatience = 2 * time.Minute
	// graphQLPause is how long the sweep leaves GraphQL alone after
	// GitLab refused its query (see sweep).
	graphQLPause = time.Hour
	// maxVersionAge is the oldest a Version may be for a sweep to judge a
	// merge request by it; an older one is read in full, rather than the
	// sweep listing every pipeline updated since.
	maxVersionAge = time.Hour
)

// readConcurrency bounds the merge requests a batch reads at once.
const readConcurrency = 4

// ReadPullRequests implements [lifecycle.BatchReader].
//
// A merge request read in full costs three requests, four when it has
// reviewers: the merge request (GET .../merge_requests/:iid: head,
// state, draft, detailed_merge_status, head pipeline), the statuses of
// its head pipeline (see [Adapter.Checks]; none when that pipeline is not
// of the head, and CI is pending), its approvals and, when it has
// reviewers, their states (see [Adapter.ReviewDecision]). Its Version
// records what a sweep compares: the merge request's head, updated_at
// and detailed_merge_status, its head pipeline's ID, status and
// updated_at, a digest of its reviews, and a digest of the whole
// reading (two readings that show anything different have different
// Versions).
//
// With [lifecycle.ReadSweep], the merge requests whose requests carry a
// Version are not read one by one. Those last read within
// ThrottledTouch's minute (and touchSlop) after their updated_at are read
// through GraphQL, a hundred a query (see mergeRequestsQuery), which
// shows their approvals and reviewers' states; the others, and those
// whose mergeability GitLab has not worked out, are listed, a hundred a
// request (GET .../merge_requests?iids[]=...&state=all&
// with_merge_status_recheck=true); one list gives the pipelines updated
// since the sweep before (GET .../pipelines?updated_after=...&
// order_by=updated_at, 100 a page; more pages only when more changed).
// A merge request is read in full when
//
//   - its updated_at (to the second through GraphQL), head or state is
//     not what its Version records;
//   - its detailed_merge_status is not, and GitLab has worked it out;
//   - GitLab has not worked it out for recheckPatience (two minutes):
//     reading it alone asks GitLab again;
//   - a pipeline of it (of its source branch or head commit, or of its
//     refs/merge-requests/<iid>/ refs) was updated since, or is newer
//     than its head pipeline;
//   - it is open and its head pipeline is running: its jobs change state
//     without moving the pipeline's updated_at;
//   - read through GraphQL, its approvals, its reviewers and their
//     states, its branches or its draft are not what its last reading
//     showed (reviewFacts);
//   - where GraphQL failed, its reviews, read again through the REST API
//     (its approvals, and its reviewers' states when it has reviewers:
//     one or two requests) once that minute is over, are not what its
//     Version records.
//
// Any other is Unchanged, with a Version that moves on. So is one whose
// mergeability GitLab is still working out: its list asked GitLab to
// (with_merge_status_recheck), and the next sweep has the result. A quiet
// sweep of n merge requests is 1 + ⌈n/100⌉ requests (2 + ⌈n/100⌉ while
// both GraphQL and the list have some). The package documentation says,
// for each fact a reading shows, what moves when it changes at GitLab.
//
// The requests of a sweep may be put off: they use at most
// [Config.SweepShare] of GitLab's rate limit, and when that is spent the
// sweep fails with a *lifecycle.TemporaryError that is RateLimited (its
// lists), or the readings left get one as their Err. The readings of
// [lifecycle.ReadNow] and [lifecycle.ReadMerge] are read in full and use
// all of it. ReadPullRequests fails when it read nothing; a merge request
// that does not exist, or is not in the adapter's project, has an Err
// matching [lifecycle.ErrNotFound].
func (a *Adapter) ReadPullRequests(ctx context.Context, q lifecycle.BatchQuery) ([]lifecycle.Reading, error) {
	out := make([]lifecycle.Reading, len(q.Reads))
	if len(q.Reads) == 0 {
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	full := make([]bool, len(q.Reads))
	if q.Purpose == lifecycle.ReadSweep {
		ctx = hostbudget.WithPriority(ctx, hostbudget.Deferrable)
		if err := a.sweep(ctx, q.Reads, out, full); err != nil {
			return nil, err
		}
	} else {
		for i := range full {
			full[i] = true
		}
	}
	if err := a.readFull(ctx, q.Reads, out, full, q.Purpose == lifecycle.ReadMerge); err != nil {
		return nil, err
	}
	return out, nil
}

// sweep finds which of reads changed since their Versions (see
// ReadPullRequests): those that did not get an Unchanged reading (or one
// with an Err) in out are marked in full. Its error means it could not
// tell.
func (a *Adapter) sweep(ctx context.Context, reads []lifecycle.ReadRequest, out []lifecycle.Reading, full []bool) error {
	s, err := a.knownProject(ctx)
	if err != nil {
		return err
	}
	vs := make([]version, len(reads))
	var since time.Time
	var windowed []int64
	oldest := a.clock.Now().Add(-maxVersionAge)
	for i, r := range reads {
		v, ok := parseVersion(r.Version)
		if !ok || !v.current(s, r) || v.at.Before(oldest) {
			full[i] = true
			continue
		}
		vs[i] = v
		if v.window {
			windowed = append(windowed, v.iid)
		}
		if since.IsZero() || v.at.Before(since) {
			since = v.at
		}
	}
	if since.IsZero() {
		return nil
	}
	// The merge requests within ThrottledTouch's minute are read through
	// GraphQL, which shows their approvals and reviewers' states; the
	// others, and those whose mergeability GitLab has yet to work out
	// (only the REST list asks it to), are listed.
	var gmrs map[int64]*gqlMergeRequest
	var gqlAt time.Time
	a.mu.Lock()
	gqlOff := a.clock.Now().Before(a.gqlOffUntil)
	a.mu.Unlock()
	if len(windowed) > 0 && !gqlOff {
		gmrs, gqlAt, err = a.mergeRequestsGraphQL(ctx, s, windowed)
		switch {
		case err != nil && (rateLimited(err) || ctx.Err() != nil):
			return err
		case errors.Is(err, errGraphQL) || errors.Is(err, lifecycle.ErrNotFound) || (err != nil && !isTemporary(err)):
			a.mu.Lock()
			a.gqlOffUntil = a.clock.Now().Add(graphQLPause)
			a.mu.Unlock()
			a.log.WarnContext(ctx, "GitLab's GraphQL API refused the sweep's query: the approvals of merge requests changed within a minute are read through the REST API once that minute is over, for an hour", "error", err)
			gmrs = nil
		case err != nil:
			a.log.WarnContext(ctx, "GitLab's GraphQL API failed: the approvals of merge requests changed within a minute are read through the REST API once that minute is over", "error", err)
			gmrs = nil
		}
	}
	viaGraphQL := func(v *version) *gqlMergeRequest {
		if gmrs == nil || !v.window {
			return nil
		}
		g := gmrs[v.iid]
		if g == nil || mergePending(restDetailedMergeStatus(g.DetailedMergeStatus), strings.ToLower(g.MergeStatusEnum)) {
			return nil
		}
		return g
	}
	var iids []int64
	for i := range reads {
		if !full[i] && viaGraphQL(&vs[i]) == nil {
			iids = append(iids, vs[i].iid)
		}
	}
	mrs, listedAt := map[int64]*listedMergeRequest{}, gqlAt
	if len(iids) > 0 {
		if mrs, listedAt, err = a.mergeRequestsByIID(ctx, s, iids); err != nil {
			return err
		}
	}
	pipes, err := a.pipelinesSince(ctx, s, since)
	if err != nil {
		return err
	}
	var due []int // merge requests whose reviews are read again through the REST API
	for i := range reads {
		if full[i] {
			continue
		}
		v := &vs[i]
		g := gmrs[v.iid]
		if g != nil {
			// Its approvals and reviewers' states as GraphQL shows
			// them, whichever list is compared below.
			if f, ok := g.facts(); !ok || f.digest() != v.facts {
				full[i] = true
				continue
			}
		}
		if g := viaGraphQL(v); g != nil {
			if a.changed(v, g.listed(), pipes, gqlAt, true) {
				full[i] = true
				continue
			}
		} else if mr := mrs[v.iid]; mr == nil || a.changed(v, mr, pipes, listedAt, false) {
			full[i] = true
			continue
		}
		switch {
		case !v.window:
		case g != nil:
			if !gqlAt.Before(v.updated.Add(touchInterval + touchSlop)) {
				v.window = false // GraphQL read it once the minute was over
			}
		case !listedAt.Before(v.updated.Add(touchInterval + touchSlop)):
			due = append(due, i)
		}
	}
	a.each(due, func(i int) {
		v := &vs[i]
		hr, _, err := a.reviews(ctx, s, v.iid, v.head, v.reviewers || len(mrs[v.iid].Reviewers) > 0)
		switch {
		case err != nil:
			out[i] = lifecycle.Reading{Err: err}
		case digest(hr) != v.reviews:
			full[i] = true
		default:
			v.window = false
		}
	})
	for i := range reads {
		if full[i] || out[i].Err != nil {
			continue
		}
		v := vs[i]
		if t := listedAt.Add(-listMargin); t.After(v.at) {
			v.at = t
		}
		out[i] = lifecycle.Reading{Unchanged: true, Version: v.String()}
	}
	return nil
}

// changed reports whether merge request mr, as listed at GitLab's time
// at, changed since Version v (see ReadPullRequests), given the
// pipelines updated since; it updates v's record of a mergeability
// GitLab has not worked out yet. seconds says mr's updated_at is to the
// second only (GraphQL's), and is compared so.
func (a *Adapter) changed(v *version, mr *listedMergeRequest, pipes []*gl.PipelineInfo, at time.Time, seconds bool) bool {
	same := sameMillis
	if seconds {
		same = func(a, b time.Time) bool { return a.Unix() == b.Unix() }
	}
	if !same(*mr.UpdatedAt, v.updated) || !strings.EqualFold(mr.SHA, v.head) || mr.State != v.state || (mr.State == "opened" && active(v.pipelineStatus)) {
		return true
	}
	for _, p := range pipes {
		if !ofMergeRequest(p, &mr.BasicMergeRequest) {
			continue
		}
		switch {
		case p.ID > v.pipeline:
			return true // newer than its head pipeline: it may be the new one
		case p.ID == v.pipeline && (p.Status != v.pipelineStatus || p.UpdatedAt == nil || !sameMillis(*p.UpdatedAt, v.pipelineUpdated)):
			return true
		}
	}
	if mergePending(mr.DetailedMergeStatus, mr.MergeStatus) {
		// The list asked GitLab to work it out: the next sweep has it,
		// unless GitLab keeps it waiting.
		if v.pendingSince.IsZero() {
			v.pendingSince = at
		}
		return !at.Before(v.pendingSince.Add(recheckPatience))
	}
	if mr.DetailedMergeStatus != v.status || mr.HasConflicts != v.conflicts || v.pending {
		return true
	}
	v.pendingSince = time.Time{}
	return false
}

// sameMillis reports whether two of GitLab's times are the same to the
// millisecond, as a Version records them.
func sameMillis(a, b time.Time) bool { return a.UnixMilli() == b.UnixMilli() }

// active reports whether a head pipeline's jobs may change state without
// its own status changing: it is not finished, nor waiting for a person
// (manual) or a time (scheduled), which change its status when they end.
func active(status string) bool {
	switch status {
	case "created", "waiting_for_resource", "preparing", "pending", "running", "canceling":
		return true
	}
	return false
}

// ofMergeRequest reports whether pipeline p is one of merge request mr:
// of its source branch or head commit, or of one of its refs
// (refs/merge-requests/<iid>/head, /merge, /train).
func ofMergeRequest(p *gl.PipelineInfo, mr *gl.BasicMergeRequest) bool {
	if iid, ok := mergeRequestRef(p.Ref); ok {
		return iid == mr.IID
	}
	return (p.Ref == mr.SourceBranch && mr.SourceProjectID == mr.TargetProjectID) || strings.EqualFold(p.SHA, mr.SHA)
}

// each calls fn for each of is, readConcurrency at a time.
func (a *Adapter) each(is []int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(readConcurrency, len(is)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for _, i := range is {
		next <- i
	}
	close(next)
	wg.Wait()
}

// knownProject returns the project's settings as last read, reading them
// only when they never were: a sweep that finds nothing changed needs the
// project's ID only.
func (a *Adapter) knownProject(ctx context.Context) (*settings, error) {
	a.mu.Lock()
	s := a.settings
	a.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return a.project(ctx)
}

// mergeRequestsByIID lists the project's merge requests iids, a hundred a
// request, asking GitLab to work out the mergeability of those whose it
// has not (with_merge_status_recheck), and returns them by IID with
// GitLab's time (its Date) of the first answer.
func (a *Adapter) mergeRequestsByIID(ctx context.Context, s *settings, iids []int64) (map[int64]*listedMergeRequest, time.Time, error) {
	out := make(map[int64]*listedMergeRequest, len(iids))
	var first time.Time
	for chunk := range slices.Chunk(iids, 100) {
		opt := &gl.ListProjectMergeRequestsOptions{
			IIDs: gl.Ptr(chunk), State: gl.Ptr("all"), Scope: gl.Ptr("all"), WithMergeStatusRecheck: gl.Ptr(true),
			ListOptions: gl.ListOptions{PerPage: 100},
		}
		for {
			// client-go's ListProjectMergeRequests drops merge_status.
			req, err := a.client.NewRequest(http.MethodGet, fmt.Sprintf("projects/%d/merge_requests", s.id), opt, []gl.RequestOptionFunc{gl.WithContext(ctx)})
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("gitlab: list %d merge requests: %w", len(chunk), err)
			}
			var list []*listedMergeRequest
			resp, err := a.client.Do(req, &list)
			if err != nil {
				return nil, time.Time{}, a.fail(ctx, fmt.Sprintf("list %d merge requests", len(chunk)), resp, err)
			}
			if first.IsZero() {
				first = dateOf(resp)
			}
			for _, mr := range list {
				if mr != nil && mr.UpdatedAt != nil && slices.Contains(chunk, mr.IID) {
					out[mr.IID] = mr
				}
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
	}
	if first.IsZero() {
		first = a.clock.Now()
	}
	return out, first, nil
}

// pipelinesSince lists the project's pipelines updated at or after since,
// newest first. Ordered so, pages read one after the other miss only
// pipelines that changed after the first page was read, which the next
// sweep lists.
func (a *Adapter) pipelinesSince(ctx context.Context, s *settings, since time.Time) ([]*gl.PipelineInfo, error) {
	opt := &gl.ListProjectPipelinesOptions{
		OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc"), UpdatedAfter: gl.Ptr(since.UTC()), ListOptions: gl.ListOptions{PerPage: 100},
	}
	var out []*gl.PipelineInfo
	for {
		list, resp, err := a.client.Pipelines.ListProjectPipelines(s.id, opt, gl.WithContext(ctx))
		if err != nil {
			return nil, a.fail(ctx, "list the pipelines updated since "+since.UTC().Format(time.RFC3339), resp, err)
		}
		for _, p := range list {
			if p != nil {
				out = append(out, p)
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// mergeRequestRef returns the IID of a merge request's ref
// (refs/merge-requests/<iid>/head, /merge, /train).
func mergeRequestRef(ref string) (int64, bool) {
	rest, ok := strings.CutPrefix(ref, "refs/merge-requests/")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	iid, err := strconv.ParseInt(n, 10, 64)
	return iid, err == nil && iid > 0
}

// readFull reads in full the merge requests of reads marked in full, a
// few at a time, into out; settle reads a merge request whose
// mergeability GitLab is still working out again (see reading). Its error
// means it read nothing: every one failed, none for not existing.
func (a *Adapter) readFull(ctx context.Context, reads []lifecycle.ReadRequest, out []lifecycle.Reading, full []bool, settle bool) error {
	var todo []int
	for i, f := range full {
		if f {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	s, err := a.project(ctx)
	if err != nil {
		if len(todo) == len(reads) {
			return err
		}
		for _, i := range todo {
			out[i] = lifecycle.Reading{Err: err}
		}
		return nil
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(readConcurrency, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := a.reading(ctx, s, reads[i].PullRequest, settle)
				if err != nil {
					r = lifecycle.Reading{Err: err}
				}
				out[i] = r
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(todo) < len(reads) {
		return nil
	}
	var first error
	for _, r := range out {
		switch {
		case r.Err == nil, errors.Is(r.Err, lifecycle.ErrNotFound):
			return nil
		case first == nil:
			first = r.Err
		}
	}
	return first
}

// settleReads and settleWait bound how often, and how long apart, a
// reading before a merge reads a merge request again while GitLab works
// out its mergeability (which its reading asks GitLab to do): one request
// each, where the Service reading again would cost a whole reading.
const (
	settleReads = 2
	settleWait  = 250 * time.Millisecond
)

// reading reads merge request ref in full: the merge request once (with
// settle, again while GitLab works out its mergeability, up to
// settleReads times), the CI of its head, its reviews.
func (a *Adapter) reading(ctx context.Context, s *settings, ref lifecycle.PullRequestRef, settle bool) (lifecycle.Reading, error) {
	if err := a.checkRef(s, ref); err != nil {
		return lifecycle.Reading{}, err
	}
	var (
		mr   *gl.MergeRequest
		resp *gl.Response
		err  error
		wait = settleWait
	)
	for reads := 0; ; reads++ {
		mr, resp, err = a.client.MergeRequests.GetMergeRequest(s.id, int64(ref.Number), nil, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.Reading{}, a.fail(ctx, fmt.Sprintf("read merge request !%d", ref.Number), resp, err)
		}
		if m, _ := mergeability(&mr.BasicMergeRequest); !settle || reads == settleReads || mr.State != "opened" || m != lifecycle.MergeabilityUnknown {
			break
		}
		select {
		case <-ctx.Done():
			return lifecycle.Reading{}, fmt.Errorf("gitlab: read merge request !%d: %w", ref.Number, ctx.Err())
		case <-a.clock.After(wait):
		}
		wait *= 2
	}
	at := dateOf(resp)
	if at.IsZero() {
		at = a.clock.Now()
	}
	pr := a.pullRequest(s, &mr.BasicMergeRequest)
	ci, err := a.ci(ctx, s, mr, pr.HeadSHA)
	if err != nil {
		return lifecycle.Reading{}, err
	}
	reviews, facts, err := a.reviews(ctx, s, mr.IID, pr.HeadSHA, len(mr.Reviewers) > 0)
	if err != nil {
		return lifecycle.Reading{}, err
	}
	r := lifecycle.Reading{PullRequest: pr, CI: &ci, Reviews: &reviews}
	facts.Head, facts.Base, facts.Draft, facts.Reviewers = pr.Head, pr.Base, pr.Draft, pr.RequestedReviewers
	v := readingVersion(s, mr, at, r)
	v.facts = facts.digest()
	r.Version = v.String()
	return r, nil
}

// readingVersion returns the Version of reading r of merge request mr,
// read at GitLab's time at (see ReadPullRequests).
func readingVersion(s *settings, mr *gl.MergeRequest, at time.Time, r lifecycle.Reading) version {
	v := version{project: s.id, iid: mr.IID, head: r.PullRequest.HeadSHA, status: mr.DetailedMergeStatus, state: mr.State,
		pending: mr.State == "opened" && mergePending(mr.DetailedMergeStatus, ""), conflicts: mr.HasConflicts, reviewers: len(mr.Reviewers) > 0,
		at: at.Add(-listMargin), digest: digest(r)}
	if r.Reviews != nil {
		v.reviews = digest(*r.Reviews)
	}
	if mr.UpdatedAt != nil {
		v.updated = *mr.UpdatedAt
		// Within ThrottledTouch's minute a system note may not have moved
		// updated_at: the reviews are read again once it is over.
		v.window = at.Before(v.updated.Add(touchInterval + touchSlop))
	}
	if hp := mr.HeadPipeline; hp != nil {
		v.pipeline, v.pipelineStatus = hp.ID, hp.Status
		if hp.UpdatedAt != nil {
			v.pipelineUpdated = *hp.UpdatedAt
		}
	}
	return v
}

// dateOf returns GitLab's time of an answer, its Date header, or zero.
func dateOf(resp *gl.Response) time.Time {
	if resp == nil || resp.Response == nil {
		return time.Time{}
	}
	t, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t
}
