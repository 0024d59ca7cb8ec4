package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/hostbudget"
)

// versionMargin is how far before the time of a reading the next sweep
// looks for changes. GitLab touches a merge request's updated_at through
// the system notes of a push, an approval or a review at most once a
// minute (ThrottledTouch), so a change within a minute of the previous
// one leaves updated_at where it was; the rest covers the Date header's
// second, the clocks of GitLab's nodes and transactions committed after
// the reading.
const versionMargin = 90 * time.Second

// readConcurrency bounds the merge requests a batch reads in full at
// once.
const readConcurrency = 4

// ReadPullRequests implements [lifecycle.BatchReader].
//
// A merge request read in full costs three requests, four when it has
// reviewers: the merge request (GET .../merge_requests/:iid: head,
// state, draft, detailed_merge_status, head pipeline), the statuses of
// its head pipeline (see [Adapter.Checks]; none when that pipeline is not
// of the head, and CI is pending), its approvals and, when it has
// reviewers, their states (see [Adapter.ReviewDecision]). Reading.Version
// records GitLab's time of the reading (the Date of the answer that read
// the merge request, less a margin of 90 seconds: GitLab touches a merge
// request's updated_at at most once a minute for the changes it makes
// known through system notes), its head and its source branch.
//
// With [lifecycle.ReadSweep], the merge requests whose requests carry a
// Version are not read one by one. Two lists tell which changed since
// the earliest of their Versions: the project's merge requests updated
// since (GET .../merge_requests?updated_after=...&state=all&scope=all&
// order_by=updated_at, 100 a page), and its pipelines updated since (GET
// .../pipelines?updated_after=...&order_by=updated_at, 100 a page): a
// pipeline changing status does not touch its merge request, so CI is
// found changed through its pipeline, matched to a merge request by its
// ref (the source branch, refs/merge-requests/<iid>/...) or its commit.
// More pages are read only when more changed. A merge request found in
// neither list after its own Version is Unchanged, with a Version that
// moves on to the sweep's time; the others are read in full. So is one
// whose Version cannot be read (or is of another head than the
// request's), and one whose mergeability was still being worked out at
// its last reading (GitLab does not touch updated_at when it has). A
// quiet sweep is two requests, whatever the number of merge requests.
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

// sweep finds which of reads changed since their Versions: those that
// did not get an Unchanged reading in out; those that did, or whose
// Version says nothing, are marked in full. Its error means it could not
// tell.
func (a *Adapter) sweep(ctx context.Context, reads []lifecycle.ReadRequest, out []lifecycle.Reading, full []bool) error {
	s, err := a.knownProject(ctx)
	if err != nil {
		return err
	}
	vs := make([]version, len(reads))
	var since time.Time
	for i, r := range reads {
		v, ok := parseVersion(r.Version)
		if !ok || !v.current(s, r) {
			full[i] = true
			continue
		}
		vs[i] = v
		if since.IsZero() || v.at.Before(since) {
			since = v.at
		}
	}
	if since.IsZero() {
		return nil
	}
	mrs, listedAt, err := a.mergeRequestsSince(ctx, s, since)
	if err != nil {
		return err
	}
	pipes, err := a.pipelinesSince(ctx, s, since)
	if err != nil {
		return err
	}
	for i, r := range reads {
		v := vs[i]
		if full[i] {
			continue
		}
		if at, ok := mrs[v.iid]; ok && !at.Before(v.at) {
			full[i] = true
			continue
		}
		if pipes.changed(v, strings.ToLower(r.HeadSHA)) {
			full[i] = true
			continue
		}
		out[i] = lifecycle.Reading{Unchanged: true, Version: v.since(listedAt).String()}
	}
	return nil
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

// mergeRequestsSince lists the project's merge requests updated at or
// after since, newest first, and returns their updated_at by IID and
// GitLab's time (its Date) of the first answer, or zero when it gave
// none. Ordered newest first, pages read one after the other miss only
// merge requests that changed after the first page was read, whose
// updated_at is after that time.
func (a *Adapter) mergeRequestsSince(ctx context.Context, s *settings, since time.Time) (map[int64]time.Time, time.Time, error) {
	opt := &gl.ListProjectMergeRequestsOptions{
		State: gl.Ptr("all"), Scope: gl.Ptr("all"), OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc"),
		UpdatedAfter: gl.Ptr(since.UTC()), ListOptions: gl.ListOptions{PerPage: 100},
	}
	out := map[int64]time.Time{}
	var first time.Time
	for {
		list, resp, err := a.client.MergeRequests.ListProjectMergeRequests(s.id, opt, gl.WithContext(ctx))
		if err != nil {
			return nil, time.Time{}, a.fail(ctx, "list the merge requests updated since "+since.UTC().Format(time.RFC3339), resp, err)
		}
		if opt.Page <= 1 {
			first = dateOf(resp)
		}
		for _, mr := range list {
			if mr == nil || mr.UpdatedAt == nil {
				continue
			}
			if at, ok := out[mr.IID]; !ok || mr.UpdatedAt.After(at) {
				out[mr.IID] = *mr.UpdatedAt
			}
		}
		if resp.NextPage == 0 {
			return out, first, nil
		}
		opt.Page = resp.NextPage
	}
}

// changedPipelines are the pipelines updated since a sweep's earliest
// Version: the latest updated_at of each ref, merge request (of refs
// refs/merge-requests/<iid>/...) and commit.
type changedPipelines struct {
	byRef, bySHA map[string]time.Time
	byIID        map[int64]time.Time
}

// changed reports whether a pipeline of the merge request of Version v,
// whose head the Service last read as head, changed after v.
func (c changedPipelines) changed(v version, head string) bool {
	after := func(at time.Time, ok bool) bool { return ok && !at.Before(v.at) }
	if at, ok := c.byIID[v.iid]; after(at, ok) {
		return true
	}
	if at, ok := c.bySHA[v.head]; after(at, ok) {
		return true
	}
	if at, ok := c.bySHA[head]; head != "" && after(at, ok) {
		return true
	}
	at, ok := c.byRef[v.branch]
	return v.branch != "" && after(at, ok)
}

// pipelinesSince lists the project's pipelines updated at or after since,
// newest first (see mergeRequestsSince).
func (a *Adapter) pipelinesSince(ctx context.Context, s *settings, since time.Time) (changedPipelines, error) {
	opt := &gl.ListProjectPipelinesOptions{
		OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc"), UpdatedAfter: gl.Ptr(since.UTC()), ListOptions: gl.ListOptions{PerPage: 100},
	}
	c := changedPipelines{byRef: map[string]time.Time{}, bySHA: map[string]time.Time{}, byIID: map[int64]time.Time{}}
	later := func(m map[string]time.Time, k string, at time.Time) {
		if old, ok := m[k]; !ok || at.After(old) {
			m[k] = at
		}
	}
	for {
		list, resp, err := a.client.Pipelines.ListProjectPipelines(s.id, opt, gl.WithContext(ctx))
		if err != nil {
			return changedPipelines{}, a.fail(ctx, "list the pipelines updated since "+since.UTC().Format(time.RFC3339), resp, err)
		}
		for _, p := range list {
			if p == nil || p.UpdatedAt == nil {
				continue
			}
			at := *p.UpdatedAt
			later(c.byRef, p.Ref, at)
			later(c.bySHA, strings.ToLower(p.SHA), at)
			if iid, ok := mergeRequestRef(p.Ref); ok {
				if old, ok := c.byIID[iid]; !ok || at.After(old) {
					c.byIID[iid] = at
				}
			}
		}
		if resp.NextPage == 0 {
			return c, nil
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
		if !settle || reads == settleReads || mr.State != "opened" || mergeability(&mr.BasicMergeRequest) != lifecycle.MergeabilityUnknown {
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
	pr := a.pullRequest(s, &mr.BasicMergeRequest)
	ci, err := a.ci(ctx, s, mr, pr.HeadSHA)
	if err != nil {
		return lifecycle.Reading{}, err
	}
	reviews, err := a.reviews(ctx, s, mr.IID, pr.HeadSHA, len(mr.Reviewers) > 0)
	if err != nil {
		return lifecycle.Reading{}, err
	}
	v := version{project: s.id, iid: mr.IID, head: pr.HeadSHA, branch: mr.SourceBranch,
		unsettled: pr.State == lifecycle.PullRequestOpen && pr.Mergeable == lifecycle.MergeabilityUnknown}
	if !at.IsZero() {
		v.at = at.Add(-versionMargin)
	}
	return lifecycle.Reading{PullRequest: pr, CI: &ci, Reviews: &reviews, Version: v.String()}, nil
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

// maxVersion bounds a Version, as lifecycle.Reading does.
const maxVersion = 1000

// version is what a Reading's Version records of a merge request read in
// full: the time since which GitLab may hold changes the reading did not
// see (GitLab's time of the reading, less versionMargin), the project,
// the merge request, its head and source branch, and whether its
// mergeability was still being worked out.
type version struct {
	project, iid int64
	at           time.Time
	head, branch string
	unsettled    bool
}

// String encodes v as a query string ("at=...&head=...&iid=...&p=...&v=1"),
// without the branch when it would make it longer than maxVersion.
func (v version) String() string {
	q := url.Values{"v": {"1"}, "p": {strconv.FormatInt(v.project, 10)}, "iid": {strconv.FormatInt(v.iid, 10)}, "head": {v.head}}
	if !v.at.IsZero() {
		q.Set("at", strconv.FormatInt(v.at.Unix(), 10))
	}
	if v.unsettled {
		q.Set("m", "unknown")
	}
	short := q.Encode()
	q.Set("src", v.branch)
	if long := q.Encode(); len(long) <= maxVersion {
		return long
	}
	return short
}

// parseVersion reads a Version of this adapter; ok is false for anything
// else.
func parseVersion(s string) (v version, ok bool) {
	q, err := url.ParseQuery(s)
	if err != nil || q.Get("v") != "1" {
		return version{}, false
	}
	v.project, err = strconv.ParseInt(q.Get("p"), 10, 64)
	if err != nil {
		return version{}, false
	}
	v.iid, err = strconv.ParseInt(q.Get("iid"), 10, 64)
	if err != nil {
		return version{}, false
	}
	if at := q.Get("at"); at != "" {
		sec, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			return version{}, false
		}
		v.at = time.Unix(sec, 0).UTC()
	}
	v.head, v.branch, v.unsettled = strings.ToLower(q.Get("head")), q.Get("src"), q.Get("m") != ""
	return v, true
}

// current reports whether a sweep may judge r by v: v is of r's merge
// request in project s, has a time, is of the head the Service holds,
// and its mergeability was settled.
func (v version) current(s *settings, r lifecycle.ReadRequest) bool {
	return v.project == s.id && v.iid == int64(r.PullRequest.Number) && !v.at.IsZero() && !v.unsettled &&
		(r.HeadSHA == "" || strings.EqualFold(r.HeadSHA, v.head)) &&
		r.PullRequest.Owner == s.owner && r.PullRequest.Repo == s.repo
}

// since returns v moved on to a sweep whose first answer came at GitLab's
// time at (zero: v as it is).
func (v version) since(at time.Time) version {
	if !at.IsZero() {
		if t := at.Add(-versionMargin); t.After(v.at) {
			v.at = t
		}
	}
	return v
}
