package github

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
)

// GitHub's merge queue. Into a base whose rulesets require it, GitHub
// refuses a merge ("Changes must be made through the merge queue"):
// Merge adds the pull request to the queue instead (the GraphQL mutation
// enqueuePullRequest, at the expected head), and follows its entry until
// GitHub merges it or removes it. GitHub tests each entry on a merge
// group, a commit of the base with the entries ahead and the entry merged
// on the branch gh-readonly-queue/<base>/pr-<number>-<head>, where CI runs
// on the merge_group event.
//
// Following is cheap: one GraphQL query reads a base's whole queue and
// the checks of its merge groups (one rate-limit point), at most once per
// Config.MergeQueuePollInterval, and every Merge following an entry of
// that queue shares the reading.

// queueGroupPrefix is the ref prefix of the merge group branches of base.
func queueGroupPrefix(base string) string { return "refs/heads/gh-readonly-queue/" + base + "/" }

// queueGroupName is the name, under queueGroupPrefix, of the merge group
// branch of pull request n at head.
func queueGroupName(n int, head string) string {
	return fmt.Sprintf("pr-%d-%s", n, strings.ToLower(head))
}

// mergeQueues is what the Adapter keeps of GitHub's merge queues.
type mergeQueues struct {
	mu sync.Mutex
	// snaps are the readings of each base's queue, the last one kept.
	snaps map[string]*queueSnap
	// followed are the pull requests this Adapter added to a queue, or
	// found in one, and follows.
	followed map[int]queueFollow
	// reads counts the readings of queues begun: a reading's gen.
	reads uint64
}

// queueFollow is a pull request followed in a merge queue.
type queueFollow struct {
	head string
	// after is the last reading begun before it was known to be queued:
	// that reading, and those before, may not show it.
	after uint64
	// group is the commit of its merge group, as last read, or "".
	group string
}

// queueSnap is a reading of a base's merge queue.
type queueSnap struct {
	// at is when it was read, gen its number among the readings; done is
	// closed once it was (err says whether it failed).
	at   time.Time
	gen  uint64
	done chan struct{}
	err  error
	// entries are by pull request number; total is the queue's length.
	entries map[int]queueEntry
	total   int
}

// queueEntry is a merge queue entry as read.
type queueEntry struct {
	position int
	state    string // MergeQueueEntryState
	head     string
	// group is its merge group's commit and checks, when its group
	// branch was found.
	group  string
	checks []groupCheck
}

// groupCheck is a check of a merge group.
type groupCheck struct {
	name   string
	status lifecycle.CheckStatus
}

// queueQuery reads a base's merge queue and the checks of its merge
// groups: the entries connection, the refs connection of the group
// branches, and a contexts connection under each ref, 1 + 1 + 100
// requests in GitHub's computation, one rate-limit point.
type queueQuery struct {
	Repository struct {
		MergeQueue *struct {
			Entries struct {
				TotalCount int `graphql:"totalCount"`
				Nodes      []struct {
					Position   int    `graphql:"position"`
					State      string `graphql:"state"`
					HeadCommit *struct {
						Oid string `graphql:"oid"`
					} `graphql:"headCommit"`
					PullRequest *struct {
						Number int `graphql:"number"`
					} `graphql:"pullRequest"`
				} `graphql:"nodes"`
				PageInfo struct {
					HasNextPage bool   `graphql:"hasNextPage"`
					EndCursor   string `graphql:"endCursor"`
				} `graphql:"pageInfo"`
			} `graphql:"entries(first: 100, after: $after)"`
		} `graphql:"mergeQueue(branch: $base)"`
		Refs *struct {
			Nodes []struct {
				Name   string `graphql:"name"`
				Target *struct {
					Commit struct {
						Oid               string `graphql:"oid"`
						StatusCheckRollup *struct {
							Contexts struct {
								Nodes []struct {
									Typename string `graphql:"__typename"`
									CheckRun struct {
										Name       string `graphql:"name"`
										Status     string `graphql:"status"`
										Conclusion string `graphql:"conclusion"`
									} `graphql:"... on CheckRun"`
									StatusContext struct {
										Context string `graphql:"context"`
										State   string `graphql:"state"`
									} `graphql:"... on StatusContext"`
								} `graphql:"nodes"`
							} `graphql:"contexts(first: 100)"`
						} `graphql:"statusCheckRollup"`
					} `graphql:"... on Commit"`
				} `graphql:"target"`
			} `graphql:"nodes"`
		} `graphql:"refs(refPrefix: $prefix, first: 100)"`
	} `graphql:"repository(owner: $owner, name: $name)"`
	RateLimit *rateLimitField `graphql:"rateLimit"`
}

// readQueue reads base's merge queue, every page of it.
func (a *Adapter) readQueue(ctx context.Context, base string) (map[int]queueEntry, int, error) {
	entries := map[int]queueEntry{}
	groups := map[string]queueEntry{} // by group branch name
	total := 0
	var after *githubv4.String
	for page := 0; ; page++ {
		var q queueQuery
		errs, err := a.query(ctx, &q, map[string]any{
			"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo),
			"base": githubv4.String(base), "prefix": githubv4.String(queueGroupPrefix(base)), "after": after,
		})
		if err != nil {
			return nil, 0, fmt.Errorf("github: read the merge queue of %s: %w", base, err)
		}
		if len(errs) > 0 {
			if errs[0].Extensions.Code == undefinedField {
				// An older GitHub Enterprise Server, without the queue's
				// fields: it cannot be followed.
				return nil, 0, &lifecycle.RefusedError{Message: fmt.Sprintf("the rulesets of %s require GitHub's merge queue, which this GitHub's GraphQL API does not serve: %s", base, errs[0].Message)}
			}
			return nil, 0, &lifecycle.TemporaryError{Err: fmt.Errorf("github: read the merge queue of %s: %s (%s)", base, errs[0].Message, errs[0].Type)}
		}
		a.observeRateLimit(q.RateLimit)
		if page == 0 && q.Repository.Refs != nil {
			for _, r := range q.Repository.Refs.Nodes {
				if r.Target == nil {
					continue
				}
				g := queueEntry{group: strings.ToLower(r.Target.Commit.Oid)}
				if roll := r.Target.Commit.StatusCheckRollup; roll != nil {
					for _, c := range roll.Contexts.Nodes {
						switch c.Typename {
						case "CheckRun":
							g.checks = append(g.checks, groupCheck{name: c.CheckRun.Name,
								status: checkStatus(strings.ToLower(c.CheckRun.Status), strings.ToLower(c.CheckRun.Conclusion))})
						case "StatusContext":
							g.checks = append(g.checks, groupCheck{name: c.StatusContext.Context, status: statusState(strings.ToLower(c.StatusContext.State))})
						}
					}
				}
				groups[r.Name] = g
			}
		}
		mq := q.Repository.MergeQueue
		if mq == nil {
			return entries, 0, nil // no queue (any more): nothing queued
		}
		total = mq.Entries.TotalCount
		for _, n := range mq.Entries.Nodes {
			if n.PullRequest == nil || n.HeadCommit == nil {
				continue
			}
			e := groups[queueGroupName(n.PullRequest.Number, n.HeadCommit.Oid)]
			e.position, e.state, e.head = n.Position, n.State, strings.ToLower(n.HeadCommit.Oid)
			entries[n.PullRequest.Number] = e
		}
		if !mq.Entries.PageInfo.HasNextPage {
			return entries, total, nil
		}
		after = githubv4.NewString(githubv4.String(mq.Entries.PageInfo.EndCursor))
	}
}

// queueSnapshot returns the reading of base's queue, read anew when the
// last one is older than Config.MergeQueuePollInterval; a reading under
// way is waited for and shared.
func (a *Adapter) queueSnapshot(ctx context.Context, base string) (*queueSnap, error) {
	for {
		now := a.cfg.Clock.Now()
		a.mq.mu.Lock()
		if a.mq.snaps == nil {
			a.mq.snaps = map[string]*queueSnap{}
		}
		s := a.mq.snaps[base]
		if s != nil {
			select {
			case <-s.done:
				if s.err == nil && now.Sub(s.at) < a.cfg.MergeQueuePollInterval {
					a.mq.mu.Unlock()
					return s, nil
				}
			default:
				a.mq.mu.Unlock()
				select {
				case <-s.done:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		a.mq.reads++
		mine := &queueSnap{at: now, gen: a.mq.reads, done: make(chan struct{})}
		a.mq.snaps[base] = mine
		a.mq.mu.Unlock()
		mine.entries, mine.total, mine.err = a.readQueue(ctx, base)
		close(mine.done)
		if mine.err != nil {
			a.mq.mu.Lock()
			if a.mq.snaps[base] == mine {
				delete(a.mq.snaps, base) // not kept: the next follower reads
			}
			a.mq.mu.Unlock()
			return nil, mine.err
		}
		return mine, nil
	}
}

// readsBegun returns the number of queue readings begun.
func (a *Adapter) readsBegun() uint64 {
	a.mq.mu.Lock()
	defer a.mq.mu.Unlock()
	return a.mq.reads
}

// queueFollowed reports whether pull request n is followed in a queue.
func (a *Adapter) queueFollowed(n int) bool {
	a.mq.mu.Lock()
	defer a.mq.mu.Unlock()
	_, ok := a.mq.followed[n]
	return ok
}

// follow records pull request n as followed, or forgets it (f nil).
func (a *Adapter) follow(n int, f *queueFollow) {
	a.mq.mu.Lock()
	defer a.mq.mu.Unlock()
	if a.mq.followed == nil {
		a.mq.followed = map[int]queueFollow{}
	}
	if f == nil {
		delete(a.mq.followed, n)
		return
	}
	a.mq.followed[n] = *f
}

// following returns what is followed of pull request n.
func (a *Adapter) following(n int) (queueFollow, bool) {
	a.mq.mu.Lock()
	defer a.mq.mu.Unlock()
	f, ok := a.mq.followed[n]
	return f, ok
}

// mergeByQueue merges pull request req.Ref into base through GitHub's
// merge queue: it finds the pull request's entry, or adds it at expected
// (enqueuePullRequest with expectedHeadOid, so that GitHub refuses
// another head), and follows it, reading the queue every
// Config.MergeQueuePollInterval, until GitHub merges it (the merge
// commit; AlreadyMerged when it was merged before this call) or removes
// it (a *lifecycle.RefusedError with GitHub's reason and the failing
// checks of its merge group; ErrHeadMismatch when its head moved). When
// ctx's deadline comes first it returns a *lifecycle.TemporaryError whose
// Reason is lifecycle.WaitMergeQueue, saying where the entry is, and the
// next Merge follows the same entry: a pull request is never queued
// twice by this Adapter.
func (a *Adapter) mergeByQueue(ctx context.Context, req lifecycle.MergeRequest, base, expected string) (lifecycle.MergeResult, error) {
	n := req.Ref.Number
	f, ok := a.following(n)
	if ok && f.head != expected {
		a.follow(n, nil) // another head is asked for: what was followed is done with
		ok = false
	}
	if !ok {
		snap, err := a.queueSnapshot(ctx, base)
		if err != nil {
			return a.queueWaitErr(ctx, n, base, nil, nil, err)
		}
		if e, queued := snap.entries[n]; queued {
			if e.head != expected {
				return lifecycle.MergeResult{}, fmt.Errorf("github: pull request #%d is in the merge queue at %s, not %s: %w", n, e.head, expected, lifecycle.ErrHeadMismatch)
			}
			f = queueFollow{head: expected, after: snap.gen - 1, group: e.group}
		} else {
			res, done, err := a.enqueue(ctx, req, base, expected)
			if done || err != nil {
				return res, err
			}
			f = queueFollow{head: expected, after: a.readsBegun()}
		}
		a.follow(n, &f)
	}
	var last *queueEntry
	var lastTotal int
	for {
		snap, err := a.queueSnapshot(ctx, base)
		if err != nil {
			return a.queueWaitErr(ctx, n, base, last, nil, err)
		}
		if snap.gen > f.after {
			e, queued := snap.entries[n]
			if !queued {
				return a.leftQueue(ctx, req, base, expected, f)
			}
			if e.head != expected {
				a.follow(n, nil)
				return lifecycle.MergeResult{}, fmt.Errorf("github: pull request #%d is in the merge queue at %s, not %s: %w", n, e.head, expected, lifecycle.ErrHeadMismatch)
			}
			last, lastTotal = &e, snap.total
			if e.group != "" && e.group != f.group {
				f.group = e.group
				a.follow(n, &f)
			}
		}
		wait := snap.at.Add(a.cfg.MergeQueuePollInterval).Sub(a.cfg.Clock.Now())
		select {
		case <-ctx.Done():
			return a.queueWaitErr(ctx, n, base, last, &lastTotal, nil)
		case <-a.cfg.Clock.After(max(wait, 0)):
		}
	}
}

// queueWaitErr is the error of a Merge that stops following pull request
// n's entry, last as last read (nil: not read yet), because ctx ended or
// a reading failed (err): ctx's deadline, or a temporary failure, is a
// *lifecycle.TemporaryError whose Reason is lifecycle.WaitMergeQueue.
func (a *Adapter) queueWaitErr(ctx context.Context, n int, base string, last *queueEntry, total *int, err error) (lifecycle.MergeResult, error) {
	var te *lifecycle.TemporaryError
	switch cerr := ctx.Err(); {
	case cerr != nil && !errors.Is(cerr, context.DeadlineExceeded):
		return lifecycle.MergeResult{}, fmt.Errorf("github: follow pull request #%d in the merge queue: %w", n, cerr)
	case cerr != nil:
		// The deadline: said below, whatever the reading's failure.
	case errors.As(err, &te) && te.RateLimited:
		return lifecycle.MergeResult{}, err // waited out by the ship runner
	case err != nil && !errors.Is(err, lifecycle.ErrTemporary):
		return lifecycle.MergeResult{}, err
	}
	var where string
	switch {
	case last == nil:
		where = fmt.Sprintf("github: pull request #%d is joining the merge queue into %s", n, base)
	default:
		of := ""
		if total != nil && *total > 0 {
			of = fmt.Sprintf(" of %d", *total)
		}
		where = fmt.Sprintf("github: pull request #%d is in the merge queue into %s: position %d%s, state %s", n, base, last.position, of, last.state)
		if s := checksSummary(last.checks); s != "" && (last.state == "AWAITING_CHECKS" || last.state == "UNMERGEABLE") {
			where += "; merge group checks: " + s
		}
	}
	if err != nil {
		where += " (" + err.Error() + ")"
	}
	return lifecycle.MergeResult{}, &lifecycle.TemporaryError{Reason: lifecycle.WaitMergeQueue, RetryAfter: a.cfg.MergeQueuePollInterval, Err: errors.New(where)}
}

// checksSummary counts checks by status: "2 running, 1 passed".
func checksSummary(checks []groupCheck) string {
	counts := map[lifecycle.CheckStatus]int{}
	for _, c := range checks {
		counts[c.status]++
	}
	var parts []string
	for _, st := range []lifecycle.CheckStatus{lifecycle.CheckRunning, lifecycle.CheckFailed, lifecycle.CheckPassed} {
		if counts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	return strings.Join(parts, ", ")
}

// enqueue adds pull request req.Ref to base's merge queue at expected,
// after reading it: done says the Merge is over (merged before, closed,
// another head).
func (a *Adapter) enqueue(ctx context.Context, req lifecycle.MergeRequest, base, expected string) (lifecycle.MergeResult, bool, error) {
	n := req.Ref.Number
	pr, _, err := a.client.PullRequests.Get(ctx, a.cfg.Owner, a.cfg.Repo, n)
	if err != nil {
		return lifecycle.MergeResult{}, true, wrap(err, "read pull request #%d", n)
	}
	head := strings.ToLower(pr.GetHead().GetSHA())
	switch {
	case (pr.GetMerged() || pr.MergedAt != nil) && head == expected:
		return lifecycle.MergeResult{MergeCommitSHA: strings.ToLower(pr.GetMergeCommitSHA()), AlreadyMerged: true}, true, nil
	case head != expected:
		return lifecycle.MergeResult{}, true, fmt.Errorf("github: pull request #%d is at %s, not %s: %w", n, head, expected, lifecycle.ErrHeadMismatch)
	case pr.GetState() == "closed":
		return lifecycle.MergeResult{}, true, &lifecycle.RefusedError{Message: fmt.Sprintf("pull request #%d is closed", n)}
	}
	var m struct {
		EnqueuePullRequest struct {
			MergeQueueEntry *struct {
				Position int    `graphql:"position"`
				State    string `graphql:"state"`
			} `graphql:"mergeQueueEntry"`
		} `graphql:"enqueuePullRequest(input: $input)"`
	}
	oid := githubv4.GitObjectID(expected)
	c := &gqlCapture{}
	err = a.graphql.Mutate(context.WithValue(ctx, gqlCaptureKey{}, c), &m, githubv4.EnqueuePullRequestInput{PullRequestID: githubv4.ID(pr.GetNodeID()), ExpectedHeadOid: &oid}, nil)
	if err == nil && len(c.errors) == 0 {
		a.log.InfoContext(ctx, "added a pull request to GitHub's merge queue", "pr", n, "branch", base, "head", expected)
		return lifecycle.MergeResult{}, false, nil
	}
	if len(c.errors) == 0 {
		return lifecycle.MergeResult{}, true, fmt.Errorf("github: add pull request #%d to the merge queue of %s: %w", n, base, err)
	}
	msg := c.errors[0].Message
	// The reading of the queue may have been stale: another process may
	// have queued it since. Queued at expected, it is followed.
	if queued, err := a.inQueue(ctx, n, expected); err == nil && queued {
		return lifecycle.MergeResult{}, false, nil
	}
	return lifecycle.MergeResult{}, true, &lifecycle.RefusedError{Message: fmt.Sprintf("GitHub refused to add pull request #%d to the merge queue of %s: %s", n, base, msg)}
}

// inQueue reports whether pull request n is in its base's merge queue at
// head (PullRequest.mergeQueueEntry), one rate-limit point.
func (a *Adapter) inQueue(ctx context.Context, n int, head string) (bool, error) {
	var q struct {
		Repository struct {
			PullRequest *struct {
				MergeQueueEntry *struct {
					HeadCommit *struct {
						Oid string `graphql:"oid"`
					} `graphql:"headCommit"`
				} `graphql:"mergeQueueEntry"`
			} `graphql:"pullRequest(number: $n)"`
		} `graphql:"repository(owner: $owner, name: $name)"`
		RateLimit *rateLimitField `graphql:"rateLimit"`
	}
	errs, err := a.query(ctx, &q, map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo), "n": githubv4.Int(n)})
	if err != nil {
		return false, err
	}
	if len(errs) > 0 {
		return false, fmt.Errorf("github: read the merge queue entry of pull request #%d: %s (%s)", n, errs[0].Message, errs[0].Type)
	}
	a.observeRateLimit(q.RateLimit)
	pr := q.Repository.PullRequest
	return pr != nil && pr.MergeQueueEntry != nil && pr.MergeQueueEntry.HeadCommit != nil && strings.EqualFold(pr.MergeQueueEntry.HeadCommit.Oid, head), nil
}

// leftQueue reads pull request req.Ref, whose entry left base's queue:
// merged at expected is the result; still open, GitHub removed it, and
// its reason and the failing checks of its merge group are read.
func (a *Adapter) leftQueue(ctx context.Context, req lifecycle.MergeRequest, base, expected string, f queueFollow) (lifecycle.MergeResult, error) {
	n := req.Ref.Number
	pr, _, err := a.client.PullRequests.Get(ctx, a.cfg.Owner, a.cfg.Repo, n)
	if err != nil {
		return a.queueWaitErr(ctx, n, base, nil, nil, wrap(err, "read pull request #%d, which left the merge queue", n))
	}
	a.follow(n, nil)
	head := strings.ToLower(pr.GetHead().GetSHA())
	switch {
	case head != expected:
		return lifecycle.MergeResult{}, fmt.Errorf("github: pull request #%d left the merge queue of %s: its head is %s, not %s: %w", n, base, head, expected, lifecycle.ErrHeadMismatch)
	case pr.GetMerged() || pr.MergedAt != nil:
		return lifecycle.MergeResult{MergeCommitSHA: strings.ToLower(pr.GetMergeCommitSHA())}, nil
	}
	why := a.removalReason(ctx, n)
	msg := fmt.Sprintf("GitHub removed pull request #%d from the merge queue of %s: %s", n, base, why)
	if f.group != "" {
		found := map[string]found{}
		if err := a.checkRuns(ctx, f.group, found); err != nil {
			a.log.WarnContext(ctx, "read the checks of a removed merge group", "pr", n, "group", f.group, "err", err)
		}
		var failed []string
		for name, c := range found {
			if c.check.Status == lifecycle.CheckFailed {
				failed = append(failed, name)
			}
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			msg += "; merge group checks failed: " + strings.Join(failed, ", ")
		}
	}
	return lifecycle.MergeResult{}, &lifecycle.RefusedError{Message: msg}
}

// removalReason returns GitHub's reason for pull request n's last
// removal from a merge queue (RemovedFromMergeQueueEvent.reason), or
// words saying it gave none or could not be read.
func (a *Adapter) removalReason(ctx context.Context, n int) string {
	var q struct {
		Repository struct {
			PullRequest *struct {
				TimelineItems struct {
					Nodes []struct {
						Removed struct {
							Reason *string `graphql:"reason"`
						} `graphql:"... on RemovedFromMergeQueueEvent"`
					} `graphql:"nodes"`
				} `graphql:"timelineItems(last: 1, itemTypes: [REMOVED_FROM_MERGE_QUEUE_EVENT])"`
			} `graphql:"pullRequest(number: $n)"`
		} `graphql:"repository(owner: $owner, name: $name)"`
		RateLimit *rateLimitField `graphql:"rateLimit"`
	}
	errs, err := a.query(ctx, &q, map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo), "n": githubv4.Int(n)})
	if err != nil || len(errs) > 0 || q.Repository.PullRequest == nil {
		a.log.WarnContext(ctx, "read why GitHub removed a pull request from its merge queue", "pr", n, "err", err)
		return "its reason could not be read"
	}
	a.observeRateLimit(q.RateLimit)
	nodes := q.Repository.PullRequest.TimelineItems.Nodes
	if len(nodes) == 0 || nodes[0].Removed.Reason == nil || *nodes[0].Removed.Reason == "" {
		return "GitHub gave no reason"
	}
	return *nodes[0].Removed.Reason
}
