package github

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// mergeQueueRule is a ruleset's merge_queue rule, as GitHub's REST API
// describes it (repository-rule-merge-queue).
const mergeQueueRule = `{"type":"merge_queue","parameters":{"check_response_timeout_minutes":60,"grouping_strategy":"ALLGREEN","max_entries_to_build":5,"max_entries_to_merge":5,"merge_method":"MERGE","min_entries_to_merge":1,"min_entries_to_merge_wait_minutes":5},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`

// requireBuild is a ruleset's required_status_checks rule requiring
// "build".
const requireBuild = `{"type":"required_status_checks","parameters":{"strict_required_status_checks_policy":false,"required_status_checks":[{"context":"build"}]},"ruleset_source_type":"Repository","ruleset_source":"acme/widgets","ruleset_id":42}`

const queuePoll = 30 * time.Second

// queueFake returns a fake whose main requires the merge queue and the
// check "build", and an Adapter on it with a fake clock.
func queueFake(t *testing.T) (*fakeGitHub, *Adapter, *fakeclock.Clock) {
	t.Helper()
	f := newFakeGitHubWith(t, githubtest.Options{EnforceBranchProtection: true})
	f.SetRulesJSON("main", mergeQueueRule, requireBuild)
	clock := fakeclock.New(time.Now())
	return f, f.adapter(t, Config{Clock: clock, MergeQueuePollInterval: queuePoll}), clock
}

type mergeOutcome struct {
	res lifecycle.MergeResult
	err error
}

// mergeAsync runs Merge of pr in the background.
func mergeAsync(ctx context.Context, a *Adapter, pr lifecycle.PullRequest) <-chan mergeOutcome {
	out := make(chan mergeOutcome, 1)
	go func() {
		res, err := a.Merge(ctx, lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
		out <- mergeOutcome{res, err}
	}()
	return out
}

// poll waits for Merge to wait on the clock, then moves it a poll on.
func poll(t *testing.T, clock *fakeclock.Clock, waiters int) {
	t.Helper()
	if !clock.WaitForWaiters(waiters, 10*time.Second) {
		t.Fatalf("Merge does not wait for the next poll (%d waiters)", clock.Waiters())
	}
	clock.Advance(queuePoll)
}

func outcome(t *testing.T, ch <-chan mergeOutcome) mergeOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("Merge did not return")
	}
	return mergeOutcome{}
}

// TestMergeQueueRequired: a base whose rulesets require GitHub's merge
// queue reads mergeable once the rest is met (ship is offered), and Merge
// goes through the queue: enqueued at the expected head, followed until
// GitHub merges the merge group whose required checks passed.
func TestMergeQueueRequired(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	r := readOne(t, a, lifecycle.ReadNow, pr)
	if r.PullRequest.Mergeable != lifecycle.MergeabilityMergeable || r.PullRequest.BlockedReason != "" {
		t.Errorf("reading: %q %q, want mergeable: the merge queue is the lifecycle's way in", r.PullRequest.Mergeable, r.PullRequest.BlockedReason)
	}
	ch := mergeAsync(t.Context(), a, pr)
	poll(t, clock, 1) // enqueued; the first reading after it shows the entry
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	if pos, state, ok := f.QueueEntry(1); !ok || pos != 1 || state != "AWAITING_CHECKS" {
		t.Fatalf("entry: %d %q %v, want position 1 awaiting checks", pos, state, ok)
	}
	_, group, ok := f.MergeGroup(1)
	if !ok {
		t.Fatal("no merge group")
	}
	f.CheckRun(group, "build", "success") // GitHub merges the group
	clock.Advance(queuePoll)
	o := outcome(t, ch)
	if o.err != nil || o.res.MergeCommitSHA != group || o.res.AlreadyMerged {
		t.Fatalf("Merge = %+v, %v; want merged as the group commit %s", o.res, o.err, group)
	}
	if p := f.pull(t, 1); !p.Merged || f.Enqueues(1) != 1 || f.Calls(githubtest.RouteMerge) != 0 {
		t.Errorf("merged %v, %d enqueues, %d REST merges; want merged, 1, 0", p.Merged, f.Enqueues(1), f.Calls(githubtest.RouteMerge))
	}
	// Merged before: AlreadyMerged, nothing queued again.
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil || !res.AlreadyMerged || res.MergeCommitSHA != group || f.Enqueues(1) != 1 {
		t.Errorf("Merge again = %+v, %v (%d enqueues); want already merged", res, err, f.Enqueues(1))
	}
}

// TestMergeQueueChecksFail: GitHub removes an entry whose merge group's
// required check fails; Merge fails for good, naming GitHub's reason and
// the failing check.
func TestMergeQueueChecksFail(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	ch := mergeAsync(t.Context(), a, pr)
	poll(t, clock, 1)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	_, group, ok := f.MergeGroup(1)
	if !ok {
		t.Fatal("no merge group")
	}
	f.CheckRun(group, "build", "failure")
	clock.Advance(queuePoll)
	o := outcome(t, ch)
	var refused *lifecycle.RefusedError
	if !errors.As(o.err, &refused) || errors.Is(o.err, lifecycle.ErrTemporary) || !strings.Contains(refused.Message, githubtest.ReasonChecksFailed) ||
		!strings.Contains(refused.Message, "merge group checks failed: build") {
		t.Fatalf("Merge = %v, want a final refusal naming the reason and the failed check", o.err)
	}
	if f.pull(t, 1).Merged {
		t.Error("merged")
	}
}

// TestMergeQueueHeadMoved: a push to the head removes the entry; Merge
// fails with ErrHeadMismatch.
func TestMergeQueueHeadMoved(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	ch := mergeAsync(t.Context(), a, pr)
	poll(t, clock, 1)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	f.Push(pr.Head)
	if got := f.Removals(1); len(got) != 1 || got[0] != githubtest.ReasonHeadChanged {
		t.Fatalf("removals %v", got)
	}
	clock.Advance(queuePoll)
	if o := outcome(t, ch); !errors.Is(o.err, lifecycle.ErrHeadMismatch) {
		t.Fatalf("Merge = %+v, %v; want ErrHeadMismatch", o.res, o.err)
	}
}

// TestMergeQueueFollowedAgain: a Merge whose context ends while it waits
// is a TemporaryError of reason merge_queue saying where the entry is;
// the next Merge follows the same entry, without queueing it again.
func TestMergeQueueFollowedAgain(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	ctx := newDeadlineCtx(t.Context())
	ch := mergeAsync(ctx, a, pr)
	poll(t, clock, 1)
	_, group, _ := f.MergeGroup(1)
	f.CheckRun(group, "lint", "success")
	f.CheckRun(group, "build", "")
	poll(t, clock, 1)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	ctx.expire()
	o := outcome(t, ch)
	var te *lifecycle.TemporaryError
	if !errors.As(o.err, &te) || te.Reason != lifecycle.WaitMergeQueue || te.RetryAfter != queuePoll {
		t.Fatalf("Merge = %v, want a TemporaryError of reason merge_queue", o.err)
	}
	if msg := te.Err.Error(); !strings.Contains(msg, "position 1 of 1, state AWAITING_CHECKS; merge group checks: 1 running, 1 passed") {
		t.Errorf("wait message %q, want the position and state", msg)
	}
	ch = mergeAsync(t.Context(), a, pr)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	f.CompleteCheckRun(group, "build", "success")
	clock.Advance(queuePoll)
	if o := outcome(t, ch); o.err != nil || o.res.MergeCommitSHA != group {
		t.Fatalf("second Merge = %+v, %v; want merged", o.res, o.err)
	}
	if n := f.Enqueues(1); n != 1 {
		t.Errorf("%d enqueues, want 1", n)
	}
}

// deadlineCtx is a context whose deadline passes when the test says:
// its Err is then context.DeadlineExceeded.
type deadlineCtx struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newDeadlineCtx(parent context.Context) *deadlineCtx {
	return &deadlineCtx{Context: parent, done: make(chan struct{})}
}

// expire makes the deadline pass.
func (c *deadlineCtx) expire() { c.once.Do(func() { close(c.done) }) }

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestMergeQueuePoints: following 100 entries of one queue for an hour
// costs at most a tenth of GitHub's 5,000 GraphQL points an hour: one
// reading of the whole queue per poll, shared by every Merge.
func TestMergeQueuePoints(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	const n = 100
	prs := make([]lifecycle.PullRequest, n)
	for i := range prs {
		prs[i] = open(t, f, a, i+1)
		f.CheckRun(prs[i].HeadSHA, "build", "success")
	}
	before := f.Usage().Points
	ctx, cancel := context.WithCancel(t.Context())
	chans := make([]<-chan mergeOutcome, n)
	for i, pr := range prs {
		chans[i] = mergeAsync(ctx, a, pr)
	}
	for step := time.Duration(0); step < time.Hour; step += queuePoll {
		poll(t, clock, n) // nobody reports the merge groups' checks: all wait
	}
	if !clock.WaitForWaiters(n, 10*time.Second) {
		t.Fatal("the Merges do not wait")
	}
	cancel()
	for _, ch := range chans {
		if o := outcome(t, ch); !errors.Is(o.err, context.Canceled) {
			t.Errorf("Merge = %v, want canceled", o.err)
		}
	}
	spent := f.Usage().Points - before
	t.Logf("100 entries followed for an hour: %d GraphQL points (%d enqueues, %d polls)", spent, n, time.Hour/queuePoll)
	if spent > 500 {
		t.Errorf("%d GraphQL points, want at most 500", spent)
	}
	for i := range prs {
		if e := f.Enqueues(i + 1); e != 1 {
			t.Errorf("#%d enqueued %d times", i+1, e)
		}
	}
}

// TestMergeQueueLearntFromRefusal: rules read before the base required
// the merge queue; GitHub's 405 "Changes must be made through the merge
// queue" sends the merge through it.
func TestMergeQueueLearntFromRefusal(t *testing.T) {
	t.Parallel()
	f := newFakeGitHubWith(t, githubtest.Options{EnforceBranchProtection: true})
	f.SetRulesJSON("main", requireBuild)
	clock := fakeclock.New(time.Now())
	a := f.adapter(t, Config{Clock: clock, MergeQueuePollInterval: queuePoll, ProtectionTTL: time.Hour})
	pr := open(t, f, a, 1) // reads the base's rules: no queue yet
	f.CheckRun(pr.HeadSHA, "build", "success")
	f.SetRulesJSON("main", mergeQueueRule, requireBuild)
	ch := mergeAsync(t.Context(), a, pr)
	poll(t, clock, 1)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	if f.Calls(githubtest.RouteMerge) != 1 || f.Enqueues(1) != 1 {
		t.Fatalf("%d REST merges, %d enqueues; want the refused merge, then the queue", f.Calls(githubtest.RouteMerge), f.Enqueues(1))
	}
	_, group, _ := f.MergeGroup(1)
	f.CheckRun(group, "build", "success")
	clock.Advance(queuePoll)
	if o := outcome(t, ch); o.err != nil || o.res.MergeCommitSHA != group {
		t.Fatalf("Merge = %+v, %v; want merged through the queue", o.res, o.err)
	}
}

// TestMergeabilityWithMergeQueue: BLOCKED that only the merge queue
// explains is mergeable; other requirements still block, named without
// the queue.
func TestMergeabilityWithMergeQueue(t *testing.T) {
	t.Parallel()
	met := lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: lifecycle.CheckPassed}}}
	for _, tc := range []struct {
		name   string
		pol    policy
		want   lifecycle.Mergeability
		reason string
	}{
		{"queue only", policy{mergeQueue: true}, lifecycle.MergeabilityMergeable, ""},
		{"queue and conversations", policy{mergeQueue: true, unmodelled: []string{reqConversations}}, lifecycle.MergeabilityBlocked, reqConversations},
		{"no queue", policy{}, lifecycle.MergeabilityBlocked, "does not model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := mergeability("MERGEABLE", "BLOCKED", false, met, lifecycle.DecisionNotRequired, tc.pol)
			if got != tc.want || !strings.Contains(why, tc.reason) || strings.Contains(why, "merge queue") {
				t.Errorf("mergeability = %q %q, want %q naming %q", got, why, tc.want, tc.reason)
			}
		})
	}
}

// TestMergeQueueTwoProcesses: an Adapter whose reading of the queue
// predates another's enqueue is refused by GitHub when it enqueues in
// turn, finds the entry, and follows it: one entry, both merged.
func TestMergeQueueTwoProcesses(t *testing.T) {
	t.Parallel()
	f, a, clock := queueFake(t)
	b := f.adapter(t, Config{Clock: clock, MergeQueuePollInterval: queuePoll})
	pr := open(t, f, a, 1)
	f.CheckRun(pr.HeadSHA, "build", "success")
	if _, err := b.queueSnapshot(t.Context(), "main"); err != nil { // b's reading: nothing queued
		t.Fatal(err)
	}
	chA := mergeAsync(t.Context(), a, pr)
	if !clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Merge does not wait")
	}
	chB := mergeAsync(t.Context(), b, pr)
	poll(t, clock, 2)
	if !clock.WaitForWaiters(2, 10*time.Second) {
		t.Fatal("the Merges do not wait")
	}
	if n := f.Enqueues(1); n != 1 {
		t.Fatalf("%d enqueues, want 1", n)
	}
	_, group, _ := f.MergeGroup(1)
	f.CheckRun(group, "build", "success")
	clock.Advance(queuePoll)
	for _, ch := range []<-chan mergeOutcome{chA, chB} {
		if o := outcome(t, ch); o.err != nil || o.res.MergeCommitSHA != group {
			t.Errorf("Merge = %+v, %v; want merged as %s", o.res, o.err, group)
		}
	}
}
