package github

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// The equivalence test: random histories at GitHub (pushes, check runs
// and statuses in every state, re-runs, reviews, dismissals, drafts,
// pushes to the base that make pull requests conflict or fall behind,
// retargets, closes, reopens, merges by hand, label and title edits,
// changes of the base's protection), told by webhooks or not (some lost,
// duplicated or delivered late, out of order), with reconciler sweeps
// between them. After each sweep, what the Service stores of every task
// (through a real lifecycle.Service on store/memory, a fake clock and the
// Adapter on githubtest) must equal what a full reading (ReadNow, by an
// Adapter of its own) gives.
//
// One fact may lag one sweep, as it does at GitHub: after a push to the
// base, GitHub answers mergeability UNKNOWN until a read starts its
// computation; a sweep that finds UNKNOWN keeps the mergeability it knew,
// and the next sweep reads the result. So every change at the host is on
// the task within two sweeps without a webhook, and within one for all
// but that.
//
// A failure names its seed; run it again with
//
//	go test -race -run 'TestSweepEquivalence/<mode>' ./adapter/github -equivalence.seed=<seed>

var equivalenceSeed = flag.Uint64("equivalence.seed", 0, "seed of TestSweepEquivalence (0: a new one)")

// equivalenceSteps is the number of host events per webhook mode: three
// modes make 2,100.
const equivalenceSteps = 700

// hookMode is how webhooks reach the Service in a run.
type hookMode int

const (
	hooksNone    hookMode = iota // no webhook: sweeps only
	hooksApplied                 // WebhookHandler(svc): applied before the answer
	hooksQueued                  // WebhookHandler(svc.QueuedEvents()): read by the reconciler
)

func (m hookMode) String() string { return [...]string{"no-webhooks", "applied", "queued"}[m] }

func TestSweepEquivalence(t *testing.T) {
	t.Parallel()
	seed := *equivalenceSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	for _, mode := range []hookMode{hooksNone, hooksApplied, hooksQueued} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			runEquivalence(t, seed, mode, equivalenceSteps)
		})
	}
}

// eqTask is a task the test follows, and its pull request.
type eqTask struct {
	id, sub string
	n       int
	branch  string
	reviews []int64 // the host's review IDs of its pull request
}

// eqDelivery is a webhook delivery kept to be sent later.
type eqDelivery struct {
	event, id string
	payload   []byte
}

// equivalence is one run.
type equivalence struct {
	t     *testing.T
	e     *env
	ref   *Adapter
	clock *fakeclock.Clock
	rng   *rand.Rand
	seed  uint64
	mode  hookMode
	tasks []*eqTask
	runs  map[string]string // the conclusion of the latest run, by head and name
	later []eqDelivery
	// queued says a delivery was queued since the last settle.
	queued bool
	trail  []string // the latest steps, for a failure's message
	step   int
	ids    int
	// sweeps counts them; protectionB says the base's second protection
	// is in force.
	sweeps      int
	protectionB bool
}

// The base branch's protections: A requires build and one approval and
// dismisses stale approvals; B requires build and lint and two
// approvals. "release" has none that the credentials may read (403), so
// the Adapter counts every check and decides reviews itself.
var (
	protectionA = &gh.Protection{
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1, DismissStaleReviews: true},
		RequiredStatusChecks:       &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}},
	}
	protectionB = &gh.Protection{
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 2},
		RequiredStatusChecks:       &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}, {Context: "lint"}}},
	}
)

func runEquivalence(t *testing.T, seed uint64, mode hookMode, steps int) {
	seed += uint64(mode)
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	e := newEnv(t, clock, func(c *lifecycle.Config) {
		// The reconciler sleeps until the next beat, a whole minute; the
		// pruning of events, at no whole minute, so that the test knows
		// the reconciler is asleep when a waiter of the clock is at the
		// next beat.
		c.ReconcileInterval, c.ReconcilePollInterval, c.PruneInterval = time.Minute, time.Hour, 7*time.Minute+17*time.Second
	})
	q := &equivalence{t: t, e: e, clock: clock, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed, mode: mode, runs: map[string]string{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (mode %s) at step %d, sweep %d; again: go test -race -run 'TestSweepEquivalence/%s' ./adapter/github -equivalence.seed=%d",
				seed, mode, q.step, q.sweeps, mode, seed-uint64(mode))
		}
	})
	e.f.SetProtection("main", protectionA)
	e.f.SetProtectionError(http.StatusForbidden)
	e.f.Push("release")
	e.f.SetAuthorAssociation("drive-by", "NONE")
	// The reference reads the base's policy anew at each sweep, as the
	// Service's Adapter must (the clock moves a minute, ProtectionTTL).
	q.ref = e.f.adapter(t, Config{Clock: clock})

	for range 5 {
		q.add()
	}
	for q.step = 1; q.step <= steps; q.step++ {
		q.act()
		// Queued webhooks are read before the next event: a reading under
		// way while the host changes may store a fact as of before the
		// change, stamped after it, which a later reading mends; the
		// test compares what sweeps store, not that race.
		q.settle()
		if q.rng.IntN(6) == 0 {
			q.sweep()
		}
	}
	q.sweep()
	t.Logf("seed %d: %d steps, %d sweeps, %d events told by webhook (some lost)", seed, steps, q.sweeps, q.ids)
}

// add submits a new task, its branch pushed.
func (q *equivalence) add() {
	task, sub := q.e.submitted(q.t)
	q.tasks = append(q.tasks, &eqTask{id: task.ID, sub: sub.SubmissionID, n: sub.PRNumber, branch: fmt.Sprintf("lifecycle/gh-%d", q.e.n)})
}

// note records a step for a failure's message.
func (q *equivalence) note(format string, args ...any) {
	q.trail = append(q.trail, fmt.Sprintf("step %d: ", q.step)+fmt.Sprintf(format, args...))
	if len(q.trail) > 40 {
		q.trail = q.trail[1:]
	}
}

// open returns a followed task whose pull request is open, or nil.
func (q *equivalence) open() *eqTask {
	var open []*eqTask
	for _, tk := range q.tasks {
		if p := q.e.f.pull(q.t, tk.n); !p.Closed && !p.Merged {
			open = append(open, tk)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return open[q.rng.IntN(len(open))]
}

// pick returns one of xs at random.
func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// act makes one random thing happen at GitHub, and tells it by webhook
// as the mode says.
func (q *equivalence) act() {
	f := q.e.f
	tk := q.open()
	if tk == nil {
		q.add()
		return
	}
	p := f.pull(q.t, tk.n)
	head := p.HeadSHA
	if q.rng.IntN(10) == 0 {
		head = githubtest.NewSHA() // a commit that is no pull request's head
	}
	switch x := q.rng.IntN(100); {
	case x < 10:
		sha := f.Push(tk.branch)
		q.note("push #%d: head %s", tk.n, sha[:7])
		q.hook("pull_request", f.PullRequestPayload(tk.n, "synchronize"))
	case x < 26:
		name, conclusion := pick(q.rng, "build", "build", "lint", "test"),
			pick(q.rng, "", "", "success", "success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required")
		f.CheckRun(head, name, conclusion)
		q.runs[head+" "+name] = conclusion
		q.note("check run %s %q on %s (#%d)", name, conclusion, head[:7], tk.n)
		q.hook("check_run", f.CheckRunPayload(head, name, conclusion))
	case x < 33:
		// A re-run that ends as the run before it did: only the run
		// (its URL) is new.
		name := pick(q.rng, "build", "build", "lint", "test")
		if conclusion, ok := q.runs[head+" "+name]; ok {
			f.CheckRun(head, name, conclusion)
			q.note("check run %s re-run %q on %s (#%d)", name, conclusion, head[:7], tk.n)
			q.hook("check_run", f.CheckRunPayload(head, name, conclusion))
		}
	case x < 39:
		name, conclusion := pick(q.rng, "build", "lint", "test"), pick(q.rng, "success", "failure", "skipped")
		if f.CompleteCheckRun(head, name, conclusion) {
			q.runs[head+" "+name] = conclusion
			q.note("check run %s completed %q in place on %s (#%d)", name, conclusion, head[:7], tk.n)
			q.hook("check_run", f.CheckRunPayload(head, name, conclusion))
		}
	case x < 46:
		ctx, state := pick(q.rng, "ci/jenkins", "security/snyk"), pick(q.rng, "pending", "success", "failure", "error")
		f.Status(head, ctx, state)
		q.note("status %s %s on %s (#%d)", ctx, state, head[:7], tk.n)
		q.hook("status", f.StatusPayload(head, ctx, state))
	case x < 53:
		status, conclusion := pick(q.rng, "queued", "in_progress", "completed", "completed"), ""
		if status == "completed" {
			conclusion = pick(q.rng, "success", "failure", "neutral", "startup_failure")
		}
		app := pick(q.rng, "circleci-checks", "codecov")
		f.CheckSuite(head, app, status, conclusion)
		q.note("check suite %s %s %q on %s (#%d)", app, status, conclusion, head[:7], tk.n)
		q.hook("check_suite", f.CheckSuitePayload(head, app, "completed"))
	case x < 62:
		// Outsiders' reviews and comments count for nothing: the
		// Adapter's own decision (on release) rests on writers' reviews.
		login, state := pick(q.rng, "alice", "bob", "carol", "drive-by", "drive-by"), pick(q.rng, "APPROVED", "APPROVED", "CHANGES_REQUESTED", "COMMENTED", "COMMENTED")
		at := p.HeadSHA
		if q.rng.IntN(5) == 0 {
			at = githubtest.NewSHA() // a review of an earlier head
		}
		tk.reviews = append(tk.reviews, f.Review(tk.n, login, state, at))
		q.note("review of #%d by %s: %s", tk.n, login, state)
		q.hook("pull_request_review", f.ReviewPayload(tk.n, "submitted", login, strings.ToLower(state)))
	case x < 67:
		if len(tk.reviews) > 0 {
			id := pick(q.rng, tk.reviews...)
			f.Dismiss(tk.n, id)
			q.note("review %d of #%d dismissed", id, tk.n)
			q.hook("pull_request_review", f.ReviewPayload(tk.n, "dismissed", "alice", "dismissed"))
		}
	case x < 72:
		f.SetDraft(tk.n, !p.Draft)
		action := map[bool]string{true: "converted_to_draft", false: "ready_for_review"}[!p.Draft]
		q.note("#%d %s", tk.n, action)
		q.hook("pull_request", f.PullRequestPayload(tk.n, action))
	case x < 80:
		// A push to a base: the pull requests into it are worked out
		// anew, and some now conflict. No webhook the Adapter takes.
		base := pick(q.rng, "main", "release")
		f.Push(base)
		for _, o := range q.tasks {
			if op := f.pull(q.t, o.n); op.Base == base && !op.Closed && !op.Merged && q.rng.IntN(3) == 0 {
				f.SetConflicting(o.n, true)
				q.note("#%d conflicts with %s", o.n, base)
			}
		}
		q.note("push to base %s", base)
	case x < 84:
		base := map[string]string{"main": "release", "release": "main"}[p.Base]
		f.SetBase(tk.n, base)
		q.note("#%d retargeted to %s", tk.n, base)
		q.hook("pull_request", f.PullRequestPayload(tk.n, "edited"))
	case x < 88:
		f.ClosePullRequest(tk.n)
		q.note("#%d closed", tk.n)
		q.hook("pull_request", f.PullRequestPayload(tk.n, "closed"))
	case x < 89:
		f.MergeByHand(tk.n)
		q.note("#%d merged by hand", tk.n)
		q.hook("pull_request", f.PullRequestPayload(tk.n, "closed"))
	case x < 95:
		if q.rng.IntN(2) == 0 {
			f.Label(tk.n, "needs-review", q.rng.IntN(2) == 0)
			q.note("#%d labelled", tk.n)
			q.hook("pull_request", f.PullRequestPayload(tk.n, "labeled"))
		} else {
			f.SetTitle(tk.n, fmt.Sprintf("Fix the login redirect (%d)", q.step))
			q.note("#%d retitled", tk.n)
			q.hook("pull_request", titleEdited(f.PullRequestPayload(tk.n, "edited")))
		}
	case x < 97:
		q.protectionB = !q.protectionB
		f.SetProtection("main", map[bool]*gh.Protection{false: protectionA, true: protectionB}[q.protectionB])
		q.note("main's protection now B: %v", q.protectionB)
	default:
		for _, o := range q.tasks {
			if op := f.pull(q.t, o.n); op.Closed && !op.Merged {
				f.Reopen(o.n)
				q.note("#%d reopened", o.n)
				q.hook("pull_request", f.PullRequestPayload(o.n, "reopened"))
				break
			}
		}
	}
}

// titleEdited turns an edited payload's change of base into a change of
// title.
func titleEdited(payload []byte) []byte {
	var v map[string]any
	if err := json.Unmarshal(payload, &v); err != nil {
		panic(err)
	}
	v["changes"] = map[string]any{"title": map[string]any{"from": "Fix the login redirect"}}
	b, _ := json.Marshal(v)
	return b
}

// hook delivers a webhook of what just happened, as the mode says: most
// once, some lost, some twice, some later than the next one (out of
// order), which also sends the ones kept before.
func (q *equivalence) hook(event string, payload []byte) {
	if q.mode == hooksNone {
		return
	}
	q.ids++
	d := eqDelivery{event: event, id: fmt.Sprintf("%08x-cc78-11e3-81ab-%012d", q.seed&0xffffffff, q.ids), payload: payload}
	switch x := q.rng.IntN(100); {
	case x < 30: // lost
		return
	case x < 40:
		q.later = append(q.later, d)
		return
	case x < 50:
		q.deliver(d)
		q.deliver(d) // GitHub's redelivery of the same delivery
	default:
		q.deliver(d)
	}
	later := q.later
	q.later = nil
	for _, d := range later {
		q.deliver(d)
	}
}

// deliver posts d to the webhook handler of the mode.
func (q *equivalence) deliver(d eqDelivery) {
	path := "/hooks/github"
	if q.mode == hooksQueued {
		path = "/hooks/github-queued"
	}
	req := signedDelivery(q.t, d.event, d.id, d.payload)
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host, req.URL.Path = "http", strings.TrimPrefix(q.e.srv.URL, "http://"), path
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		q.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		q.fail("a %s delivery was answered %d", d.event, resp.StatusCode)
	}
	q.queued = q.queued || q.mode == hooksQueued
}

// readableTask reports whether the reconciler reads t: in review, or back in
// progress because its pull request was closed at the host.
func readableTask(t lifecycle.Task) bool {
	return t.PRNumber != nil && (t.Status == lifecycle.StatusInReview || (t.Status == lifecycle.StatusInProgress && t.Facts.PRState == lifecycle.PullRequestClosed))
}

// task returns what the Service holds of tk.
func (q *equivalence) task(tk *eqTask) lifecycle.Task {
	got, err := q.e.svc.Task(context.Background(), tk.id)
	if err != nil {
		q.t.Fatal(err)
	}
	return got
}

// settle waits until the reconciler has read every task a queued webhook
// made due, if one was delivered since it last did.
func (q *equivalence) settle() {
	if q.mode != hooksQueued || !q.queued {
		return
	}
	q.queued = false
	testenv.WaitFor(q.t, 10*time.Second, "the reconciler to read the tasks queued webhooks made due", func() bool {
		// A task read is due at the next beat; one due earlier is to be
		// read, one due later is being read (claimed, under a lease).
		next := q.clock.Now().Truncate(time.Minute).Add(time.Minute)
		for _, tk := range q.tasks {
			if got := q.task(tk); readableTask(got) && (got.Facts.HostVersion == "" || !got.ReconcileAt.Equal(next)) {
				return false
			}
		}
		return true
	})
}

// sweep moves the clock to the next beat, waits until the reconciler has
// read every task, and compares what it stored with a full reading.
func (q *equivalence) sweep() {
	q.settle()
	q.sweeps++
	lag := map[int]bool{}
	for _, tk := range q.tasks {
		lag[tk.n] = !q.e.f.MergeabilityKnown(tk.n)
	}
	now := q.clock.Now().Add(time.Minute)
	if !q.clock.WaitForWaiterAt(now, 10*time.Second) {
		q.fail("the reconciler is not asleep until %v", now)
	}
	q.clock.Set(now)
	if q.mode == hooksQueued {
		// A webhook's wake leaves the reconciler's earlier sleep
		// pending on the fake clock: it may have been still at work
		// when the clock moved, and asleep until the next beat since. A
		// delivery about a commit no task has wakes it, as one about
		// another repository's commit would.
		if err := q.e.svc.QueueProviderEvent(context.Background(), lifecycle.ProviderEvent{Source: Source, DeliveryID: fmt.Sprintf("wake-%d", q.sweeps),
			Kind: lifecycle.ProviderChecksChanged, HeadSHA: githubtest.NewSHA()}); err != nil {
			q.t.Fatal(err)
		}
	}
	read := func() bool {
		for _, tk := range q.tasks {
			got := q.task(tk)
			if readableTask(got) && (got.Facts.CheckedAt == nil || !got.Facts.CheckedAt.Equal(now) || !got.ReconcileAt.Equal(now.Add(time.Minute))) {
				return false
			}
		}
		return true
	}
	// The reconciler sleeps until the next beat once the sweep is over:
	// no waiter is at that time before the clock moved to this one.
	q.clock.WaitForWaiterAt(now.Add(time.Minute), 10*time.Second)
	if !testenv.WaitUntil(10*time.Second, read) {
		var states []string
		for _, tk := range q.tasks {
			got := q.task(tk)
			states = append(states, fmt.Sprintf("#%d %s checked %v due %v version %q", tk.n, got.Status, got.Facts.CheckedAt, got.ReconcileAt, got.Facts.HostVersion))
		}
		q.fail("the sweep at %v did not read every task:\n  %s", now, strings.Join(states, "\n  "))
	}
	q.compare(lag)
}

// compare checks that every task's stored facts are what a full reading
// gives now; lag names the pull requests whose mergeability GitHub had
// not worked out when the sweep began.
func (q *equivalence) compare(lag map[int]bool) {
	ctx := context.Background()
	reads := make([]lifecycle.ReadRequest, len(q.tasks))
	for i, tk := range q.tasks {
		reads[i] = lifecycle.ReadRequest{PullRequest: q.e.a.ref(tk.n)}
	}
	full, err := q.ref.ReadPullRequests(ctx, lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: reads})
	if err != nil {
		q.t.Fatal(err)
	}
	var done []int
	for i, tk := range q.tasks {
		r, got := full[i], q.task(tk)
		if r.Err != nil {
			q.t.Fatal(r.Err)
		}
		pr := r.PullRequest
		switch pr.State {
		case lifecycle.PullRequestMerged:
			if got.Status != lifecycle.StatusDone {
				q.fail("task of #%d: status %s, want done: its pull request was merged%s", tk.n, got.Status, q.about(tk))
			}
			done = append(done, i)
			continue
		case lifecycle.PullRequestClosed:
			if got.Status != lifecycle.StatusInProgress || got.Facts.PRState != lifecycle.PullRequestClosed {
				q.fail("task of #%d: status %s, pull request %s; want in_progress, closed%s", tk.n, got.Status, got.Facts.PRState, q.about(tk))
			}
			continue
		}
		q.same(tk, "status", got.Status, lifecycle.StatusInReview)
		q.same(tk, "head", strOf(got.HeadSHA), pr.HeadSHA)
		q.same(tk, "base", strOf(got.BaseBranch), pr.Base)
		q.same(tk, "pull request state", got.Facts.PRState, pr.State)
		q.same(tk, "draft", got.Facts.Draft, pr.Draft)
		q.same(tk, "dismisses stale reviews", got.Facts.DismissesStaleReviews, pr.DismissesStaleReviews)
		if !lag[tk.n] {
			q.same(tk, "mergeable", got.Facts.Mergeable, pr.Mergeable)
		}
		q.same(tk, "CI pending", got.Facts.CIPending, r.CI.Pending)
		q.same(tk, "checks", q.checks(tk), checkList(r.CI.Checks))
		q.same(tk, "review decision", got.Facts.HostDecision, r.Reviews.Decision)
		stored, err := q.e.svc.Reviews(ctx, tk.sub)
		if err != nil {
			q.t.Fatal(err)
		}
		for _, hr := range r.Reviews.Reviews {
			if !slices.ContainsFunc(stored, func(rv lifecycle.Review) bool { return rv.HostID == hr.ID }) {
				q.fail("task of #%d: %s's review %s at the host is not stored", tk.n, hr.Reviewer, hr.ID)
			}
		}
	}
	for _, i := range slices.Backward(done) {
		q.tasks = slices.Delete(q.tasks, i, i+1)
		q.add()
	}
}

// checks returns the provider checks the Service stores for tk's head.
func (q *equivalence) checks(tk *eqTask) string {
	ci, _, err := q.e.svc.CIStatus(context.Background(), tk.id)
	if err != nil {
		q.t.Fatal(err)
	}
	var list []lifecycle.CICheck
	for _, c := range ci.Checks {
		if c.Source == lifecycle.SourceProvider {
			list = append(list, lifecycle.CICheck{Name: c.Name, Status: c.Status, URL: strOf(c.URL)})
		}
	}
	return checkList(list)
}

// checkList writes checks in name order.
func checkList(checks []lifecycle.CICheck) string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = fmt.Sprintf("%s=%s(%s)", c.Name, c.Status, c.URL)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// same fails the run unless the stored fact is the one read.
func (q *equivalence) same(tk *eqTask, what string, stored, read any) {
	if stored != read {
		q.fail("task of #%d: %s stored %v, a full reading gives %v%s", tk.n, what, stored, read, q.about(tk))
	}
}

// about says when tk was read last, and its latest events.
func (q *equivalence) about(tk *eqTask) string {
	got := q.task(tk)
	evs, _ := q.e.svc.TaskEvents(context.Background(), tk.id, 100)
	var lines []string
	for _, ev := range evs[max(0, len(evs)-8):] {
		lines = append(lines, fmt.Sprintf("%v %s %s", ev.OccurredAt, ev.Type, ev.Data))
	}
	return fmt.Sprintf(" (read at %v, due %v, version %s)\nits latest events:\n  %s", got.Facts.CheckedAt, got.ReconcileAt, got.Facts.HostVersion, strings.Join(lines, "\n  "))
}

// fail stops the run, saying what differs and the steps before.
func (q *equivalence) fail(format string, args ...any) {
	q.t.Helper()
	q.t.Fatalf("after sweep %d (step %d): "+format+"\nthe steps before:\n  %s", append([]any{q.sweeps, q.step}, append(args, strings.Join(q.trail, "\n  "))...)...)
}

// strOf returns *p, or "" for nil.
func strOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
