package gitlab_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

var (
	equivalenceSeed  = flag.Uint64("equivalence.seed", 0, "seed of TestSweepEquivalence's random histories (0: a new one each run)")
	equivalenceSteps = flag.Int("equivalence.steps", 2000, "random host events of TestSweepEquivalence, over all its histories")
)

// equivalenceConfig is a project's setup for a history.
type equivalenceConfig struct {
	name      string
	approvals int64  // approvals every merge request needs (approval rules)
	method    string // the project's merge method
	hooks     bool   // webhooks are delivered (some lost, duplicated or reordered)
	// interval is the Service's ReconcileInterval: its default, a
	// minute, or 3 s, far within ThrottledTouch's minute.
	interval time.Duration
}

// A random history of GitLab, driven through a real Service (the memory
// Store, a fake clock, the adapter on the fake GitLab, whose updated_at
// moves only where GitLab's does): pushes, pipelines whose jobs and
// statuses take every state (a pipeline failed with no jobs among them),
// approvals and their removal, reviews, drafts, title and label edits,
// reviewers, retargets, closes, reopens, merges by hand, pushes to the
// target branch (some conflicting, behind on a fast-forward project),
// GitLab's own blocking checks, with and without webhooks, some lost,
// duplicated or delivered late and out of order, with sweeps a minute or
// three seconds apart. After each of the reconciler's sweeps, every task
// shows what a full reading of GitLab shows, read without disturbing the
// fake (gitlabtest.PeekHeader), except what GitLab itself has not worked
// out yet: mergeability while GitLab checks it (unknown). Reviews GitLab
// made known through a system note whose touch ThrottledTouch dropped,
// which no REST list shows, are on the task too: the sweep reads them
// through GraphQL (doc.go, "What the sweep reads").
func TestSweepEquivalence(t *testing.T) {
	t.Parallel()
	seed := *equivalenceSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	configs := []equivalenceConfig{
		{name: "merge commits, no webhooks", method: "merge", interval: time.Minute},
		{name: "fast-forward, an approval required, webhooks", approvals: 1, method: "ff", hooks: true, interval: time.Minute},
		{name: "merge commits, an approval required, no webhooks", approvals: 1, method: "merge", interval: time.Minute},
		{name: "fast-forward, webhooks", method: "ff", hooks: true, interval: time.Minute},
		{name: "merge commits, an approval required, no webhooks, sweeps 3s apart", approvals: 1, method: "merge", interval: 3 * time.Second},
		{name: "fast-forward, no webhooks, sweeps 3s apart", method: "ff", interval: 3 * time.Second},
	}
	for i, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: go test -race -run 'TestSweepEquivalence' ./adapter/gitlab/ -args -equivalence.seed=%d", seed)
				}
			})
			h := newHistory(t, cfg, seed+uint64(i))
			h.run(max(*equivalenceSteps/len(configs), 1))
		})
	}
}

// history is one random history of a GitLab project and the Service that
// follows it.
type history struct {
	t              *testing.T
	cfg            equivalenceConfig
	rng            *rand.Rand
	clock          *fakeclock.Clock
	f              *gitlabtest.Server
	svc            *lifecycle.Service
	store          *memory.Store
	peek           *gitlab.Adapter         // reads as the fake stands
	metrics        *sdkmetric.ManualReader // the Service's measures: a sweep is over once measured
	hook           http.Handler
	tasks          []*historyTask
	late           []hookDelivery // webhooks held back, delivered later in another order
	log            []string       // what happened, for a failure's message
	n              int            // tasks opened
	sweeps, events int
}

type historyTask struct {
	id     string
	iid    int64
	branch string
	done   bool
}

// hookDelivery is a webhook delivery, kept as bytes so that it can be sent
// twice.
type hookDelivery struct {
	what   string
	body   []byte
	header http.Header
}

func newHistory(t *testing.T, cfg equivalenceConfig, seed uint64) *history {
	h := &history{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed>>7|1)),
		clock: fakeclock.New(time.Date(2026, 3, 1, 12, 0, 20, 0, time.UTC))}
	h.f = gitlabtest.NewServer(t, gitlabtest.Options{ApprovalsRequired: cfg.approvals, MergeMethod: cfg.method, Now: h.clock.Now,
		CheckDelay: time.Millisecond})
	h.f.Push("release")
	a := newAdapter(t, h.f, func(c *gitlab.Config) { c.Clock = h.clock; c.WebhookToken = hookToken })
	h.peek = newAdapter(t, h.f, func(c *gitlab.Config) {
		c.Clock = h.clock
		c.HTTPClient = &http.Client{Transport: peeking{http.DefaultTransport}}
	})
	h.metrics = sdkmetric.NewManualReader()
	h.store = memory.New()
	t.Cleanup(func() { h.store.Close() })
	var err error
	h.svc, err = lifecycle.New(lifecycle.Config{
		Store:                 h.store,
		BaseURL:               "http://lifecycle.test",
		Adapters:              []lifecycle.AdapterBinding{{Project: "gitlab", Adapter: a}},
		ReviewRouter:          lifecycle.ReviewRules{Projects: map[string]lifecycle.ReviewPlan{"gitlab": {Policy: lifecycle.PolicyGitHubRules}}},
		Clock:                 h.clock,
		ReconcileInterval:     cfg.interval,
		ReconcilePollInterval: cfg.interval,
		ShipPollInterval:      time.Hour,
		Logger:                slog.New(slog.DiscardHandler),
		MeterProvider:         sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.metrics)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.svc.Close(t.Context()) })
	h.hook = a.WebhookHandler(h.svc)
	for range 6 {
		h.open()
	}
	return h
}

// peeking sends every request with gitlabtest.PeekHeader.
type peeking struct{ next http.RoundTripper }

func (p peeking) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(gitlabtest.PeekHeader, "1")
	return p.next.RoundTrip(r)
}

// run plays events at GitLab, with sweeps in between, and checks after
// each sweep.
func (h *history) run(events int) {
	for h.events < events {
		h.event()
		if h.rng.IntN(4) == 0 {
			h.deliverLate()
		}
		if h.rng.IntN(3) == 0 {
			h.sweep()
		}
	}
	h.deliverLate()
	h.sweep()
	h.sweep() // what GitLab was working out at the last one is known now
	h.t.Logf("%d events, %d sweeps, %d tasks", h.events, h.sweeps, h.n)
}

func (h *history) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf("%s "+format, append([]any{h.clock.Now().Format("15:04:05")}, args...)...))
	if len(h.log) > 60 {
		h.log = h.log[len(h.log)-60:]
	}
}

// open creates, starts and submits a task: a merge request from its
// branch into main.
func (h *history) open() {
	h.t.Helper()
	h.n++
	ident := fmt.Sprintf("EQ-%d", h.n)
	branch := "lifecycle/" + strings.ToLower(ident)
	h.f.Push(branch)
	project := "gitlab"
	ctx := h.t.Context()
	tk, err := h.svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: ident, Title: "Work " + ident,
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident}, Context: lifecycle.TaskContext{Project: &project}})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.svc.StartTask(ctx, tk.ID, lifecycle.StartTaskParams{Actor: agent}); err != nil {
		h.t.Fatal(err)
	}
	sub, err := h.svc.Submit(ctx, tk.ID, lifecycle.SubmitParams{Summary: "Done.", Actor: agent})
	if err != nil {
		h.t.Fatalf("submit %s: %v", ident, err)
	}
	h.tasks = append(h.tasks, &historyTask{id: tk.ID, iid: int64(sub.PRNumber), branch: branch})
	h.logf("opened !%d (%s)", sub.PRNumber, ident)
}

// following returns how many tasks the Service follows: merge requests
// open or closed (whose reopening puts their tasks back in review).
func (h *history) following() int {
	n := 0
	for _, tk := range h.tasks {
		if !tk.done {
			n++
		}
	}
	return n
}

// pick returns a task whose merge request is in state (opened, closed),
// or nil.
func (h *history) pick(state string) *historyTask {
	var in []*historyTask
	for _, tk := range h.tasks {
		if !tk.done && h.f.MergeRequest(tk.iid).State == state {
			in = append(in, tk)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return in[h.rng.IntN(len(in))]
}

var (
	users        = []string{"alice", "bob", "carol"}
	jobStates    = []string{"created", "waiting_for_resource", "preparing", "pending", "running", "success", "failed", "canceled", "skipped", "manual", "scheduled"}
	doneStates   = []string{"success", "failed", "canceled", "skipped"}
	activeStates = []string{"created", "waiting_for_resource", "preparing", "pending", "running", "canceling"}
	hostBlocks   = []string{"discussions_not_resolved", "external_status_checks", "merge_request_blocked", "jira_association_missing", ""}
)

// event makes one random change at GitLab, as people and CI do, after
// some time passes, and delivers (or loses) its webhooks.
func (h *history) event() {
	h.events++
	// Time passes within the interval, at least a millisecond (GitLab's
	// clock moves between two changes): the next sweep stays ahead.
	next := h.clock.Now().Truncate(h.cfg.interval).Add(h.cfg.interval)
	d := time.Duration(1+h.rng.IntN(int(h.cfg.interval/time.Millisecond)/3)) * time.Millisecond
	if !h.clock.Now().Add(d).Before(next.Add(-time.Second)) {
		d = time.Millisecond
	}
	h.clock.Advance(d)
	tk := h.pick("opened")
	if tk == nil || h.rng.IntN(30) == 0 {
		if tk := h.pick("closed"); tk != nil && (h.rng.IntN(2) == 0 || h.following() >= 8) {
			h.f.Reopen(tk.iid)
			h.logf("reopened !%d", tk.iid)
			h.mrHook(tk.iid, "reopen", false)
			return
		}
		if h.following() < 8 {
			h.open()
			return
		}
		if tk == nil {
			return
		}
	}
	iid := tk.iid
	switch k := h.rng.IntN(22); k {
	case 0, 1:
		h.f.Push(tk.branch)
		h.logf("pushed to !%d", iid)
		h.mrHook(iid, "update", true)
	case 2, 3:
		// A new pipeline at the head: its status follows its jobs; with
		// none, GitLab could not run it (an invalid .gitlab-ci.yml).
		var jobs []*gl.CommitStatus
		for j := range h.rng.IntN(4) {
			jobs = append(jobs, &gl.CommitStatus{Name: fmt.Sprintf("job-%d", j), Status: jobStates[h.rng.IntN(len(jobStates))], AllowFailure: h.rng.IntN(5) == 0})
		}
		status := ""
		if len(jobs) == 0 {
			status = []string{"failed", "created", "running"}[h.rng.IntN(3)]
		}
		var id int64
		if h.rng.IntN(3) == 0 {
			id = h.f.MergeRequestPipeline(iid, status, jobs...)
		} else {
			id = h.f.Pipeline(iid, status, jobs...)
		}
		_, st, _ := h.f.HeadPipeline(iid)
		h.logf("pipeline %d on !%d: %s with %d jobs", id, iid, st, len(jobs))
		h.pipelineHook(id)
	case 4, 5, 6:
		// A job of the head pipeline changes state. In a pipeline that
		// is over, or waits for a person or a time, a job changes only by
		// being retried or played, which runs the pipeline again.
		mr := h.f.MergeRequest(iid)
		id, before, jobs := h.f.HeadPipeline(iid)
		name := fmt.Sprintf("job-%d", h.rng.IntN(4))
		if len(jobs) > 0 && h.rng.IntN(3) > 0 {
			name = jobs[h.rng.IntN(len(jobs))].Name
		}
		status := jobStates[h.rng.IntN(len(jobStates))]
		if id != 0 && !slices.Contains(activeStates, before) {
			status = []string{"pending", "running"}[h.rng.IntN(2)]
		}
		h.f.SetCheck(mr.SHA, name, status, "")
		now, after, _ := h.f.HeadPipeline(iid)
		h.logf("job %s of !%d: %s (pipeline %d %s → %d %s)", name, iid, status, id, before, now, after)
		h.hooks(gitlabtest.EventJob, h.f.JobHook(now, name, hookToken))
		if now != id || after != before {
			h.pipelineHook(now)
		}
	case 7:
		// Another CI system posts a status into the head pipeline: a
		// final one only while the pipeline runs (see doc.go: posted
		// final into a finished pipeline whose status it leaves, it moves
		// nothing GitLab shows but the statuses themselves).
		id, before, _ := h.f.HeadPipeline(iid)
		if id == 0 {
			return
		}
		status := []string{"pending", "running"}[h.rng.IntN(2)]
		if !slices.Contains(doneStates, before) && before != "manual" {
			status = doneStates[h.rng.IntN(len(doneStates))]
		}
		mr := h.f.MergeRequest(iid)
		h.f.AddStatus(&gl.CommitStatus{SHA: mr.SHA, Ref: mr.SourceBranch, Name: "external/ci", Status: status, PipelineID: id})
		_, after, _ := h.f.HeadPipeline(iid)
		h.logf("external status %s on pipeline %d of !%d (%s → %s)", status, id, iid, before, after)
		if after != before {
			h.pipelineHook(id)
		}
	case 8, 9:
		u := users[h.rng.IntN(len(users))]
		h.f.Approve(iid, u)
		h.logf("%s approved !%d", u, iid)
		h.mrHook(iid, "approved", false)
	case 10:
		u := users[h.rng.IntN(len(users))]
		h.f.Unapprove(iid, u)
		h.logf("%s unapproved !%d", u, iid)
		h.mrHook(iid, "unapproved", false)
	case 11:
		u := users[h.rng.IntN(len(users))]
		state := []string{"reviewed", "requested_changes", "unreviewed"}[h.rng.IntN(3)]
		h.f.SetReviewerState(iid, u, state)
		h.logf("%s reviewed !%d: %s", u, iid, state)
		h.mrHook(iid, "update", false)
	case 12:
		title := h.f.MergeRequest(iid).Title
		if after, ok := strings.CutPrefix(title, "Draft: "); ok {
			title = after
		} else {
			title = "Draft: " + title
		}
		h.f.SetTitle(iid, title)
		h.logf("retitled !%d: %q", iid, title)
		h.mrHook(iid, "update", false)
	case 13:
		h.f.SetTitle(iid, fmt.Sprintf("Work %d, edited at %s", iid, h.clock.Now().Format("15:04:05")))
		h.logf("edited the title of !%d", iid)
		h.mrHook(iid, "update", false)
	case 14:
		h.f.SetLabels(iid, []string{"bug", "backend", "ready"}[:h.rng.IntN(4)]...)
		h.logf("labelled !%d", iid)
		h.mrHook(iid, "update", false)
	case 15:
		target := "main"
		if h.f.MergeRequest(iid).TargetBranch == "main" {
			target = "release"
		}
		h.f.Retarget(iid, target)
		h.logf("retargeted !%d to %s", iid, target)
		h.mrHook(iid, "update", false)
	case 16:
		// A push to a target branch, conflicting with some of the merge
		// requests into it: no merge request is touched, and GitLab sends
		// no merge request hook.
		target := []string{"main", "release"}[h.rng.IntN(2)]
		var conflicting []int64
		for _, o := range h.tasks {
			if mr := h.f.MergeRequest(o.iid); mr.TargetBranch == target && h.rng.IntN(4) == 0 {
				conflicting = append(conflicting, o.iid)
			}
		}
		h.f.PushConflicting(target, conflicting...)
		h.logf("pushed to %s, conflicting with %v", target, conflicting)
	case 17:
		block := hostBlocks[h.rng.IntN(len(hostBlocks))]
		h.f.SetDetailedMergeStatus(iid, block)
		h.logf("GitLab's own check of !%d: %q", iid, block)
	case 18:
		h.f.Close(iid)
		h.logf("closed !%d", iid)
		h.mrHook(iid, "close", false)
	case 19:
		h.f.SetReviewers(iid, users[:h.rng.IntN(len(users)+1)]...)
		h.logf("set the reviewers of !%d", iid)
		h.mrHook(iid, "update", false)
	case 20:
		// GitLab's background work catches up: someone looked at the
		// merge requests, and their mergeability is worked out.
		h.f.SettleMergeability()
		h.logf("GitLab worked out every mergeability")
	case 21:
		if h.rng.IntN(4) > 0 {
			return
		}
		h.f.SetDetailedMergeStatus(iid, "")
		h.f.SettleMergeability()
		if mr := h.f.MergeRequest(iid); mr.DetailedMergeStatus == "conflict" || mr.DetailedMergeStatus == "need_rebase" {
			return
		}
		h.f.MergeByHand(iid)
		tk.done = true
		h.logf("merged !%d by hand", iid)
		h.mrHook(iid, "merge", false)
	}
}

// mrHook sends (or loses) a Merge Request Hook of iid.
func (h *history) mrHook(iid int64, action string, newCommits bool) {
	h.hooks(gitlabtest.EventMergeRequest+" "+action, h.f.MergeRequestHook(iid, action, newCommits, hookToken))
}

// pipelineHook sends (or loses) a Pipeline Hook of pipeline id.
func (h *history) pipelineHook(id int64) {
	h.hooks(gitlabtest.EventPipeline, h.f.PipelineHook(id, hookToken))
}

// hooks delivers a webhook now, twice, late (after other events, in
// another order) or never; without webhooks, never.
func (h *history) hooks(what string, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := hookDelivery{what: what, body: body, header: req.Header.Clone()}
	if !h.cfg.hooks {
		return
	}
	switch r := h.rng.IntN(20); {
	case r < 3:
		h.logf("lost %s", what)
	case r < 5:
		h.deliver(d)
		h.deliver(d)
	case r < 9:
		h.late = append(h.late, d)
	default:
		h.deliver(d)
	}
}

// deliverLate delivers the webhooks held back, in a random order.
func (h *history) deliverLate() {
	h.rng.Shuffle(len(h.late), func(i, j int) { h.late[i], h.late[j] = h.late[j], h.late[i] })
	for _, d := range h.late {
		h.deliver(d)
	}
	h.late = nil
}

func (h *history) deliver(d hookDelivery) {
	req := httptest.NewRequestWithContext(h.t.Context(), http.MethodPost, "/hooks/gitlab", bytes.NewReader(d.body))
	req.Header = d.header.Clone()
	rec := httptest.NewRecorder()
	h.hook.ServeHTTP(rec, req)
	switch rec.Code {
	case http.StatusOK, http.StatusNoContent:
	default:
		h.t.Fatalf("webhook %s answered %d: %s", d.what, rec.Code, rec.Body)
	}
	h.logf("delivered %s", d.what)
}

// sweep moves the clock to the reconciler's next beat and waits until
// its sweep is over: the Service has measured it
// (lifecycle.reconcile.sweep.tasks).
func (h *history) sweep() {
	h.t.Helper()
	h.sweeps++
	beat := h.clock.Now().Truncate(h.cfg.interval).Add(h.cfg.interval)
	if !h.clock.WaitForWaiterAt(beat, 10*time.Second) {
		h.t.Fatalf("the reconciler does not wait for the beat at %s", beat.Format(time.TimeOnly))
	}
	before := h.swept()
	h.clock.Set(beat)
	deadline := time.Now().Add(10 * time.Second)
	for h.swept() == before {
		if time.Now().After(deadline) {
			h.t.Fatalf("the sweep at %s did not end", beat.Format(time.TimeOnly))
		}
		time.Sleep(time.Millisecond) // real time: the reconciler's goroutine works
	}
	h.logf("swept")
	h.check()
}

// swept returns how many sweeps that read tasks the Service measured.
func (h *history) swept() uint64 {
	var rm metricdata.ResourceMetrics
	if err := h.metrics.Collect(h.t.Context(), &rm); err != nil {
		h.t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "lifecycle.reconcile.sweep.tasks" {
				var n uint64
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
				return n
			}
		}
	}
	return 0
}

// check compares what each task shows with a full reading of GitLab as
// it stands.
func (h *history) check() {
	h.t.Helper()
	ctx := h.t.Context()
	var tasks []lifecycle.Task
	var reads []lifecycle.ReadRequest
	for _, ht := range h.tasks {
		tk, err := h.svc.Task(ctx, ht.id)
		if err != nil {
			h.t.Fatal(err)
		}
		if tk.PRNumber == nil || (tk.Status != lifecycle.StatusInReview && tk.Status != lifecycle.StatusInProgress) {
			continue
		}
		tasks = append(tasks, tk)
		reads = append(reads, lifecycle.ReadRequest{PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: *tk.PRNumber}})
	}
	got, err := h.peek.ReadPullRequests(ctx, lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: reads})
	if err != nil {
		h.t.Fatal(err)
	}
	for i, tk := range tasks {
		r := got[i]
		if r.Err != nil {
			h.t.Fatal(r.Err)
		}
		if diff := h.differences(tk, r); len(diff) > 0 {
			h.t.Fatalf("after sweep %d (event %d), task %s (!%d, %s) differs from a full reading of GitLab:\n  %s\nhistory:\n  %s",
				h.sweeps, h.events, tk.Identifier, *tk.PRNumber, tk.Status, strings.Join(diff, "\n  "), strings.Join(h.log, "\n  "))
		}
	}
}

// differences lists what task tk shows differently from reading r.
func (h *history) differences(tk lifecycle.Task, r lifecycle.Reading) []string {
	ctx := h.t.Context()
	var diff []string
	differ := func(what string, stored, read any) {
		if fmt.Sprint(stored) != fmt.Sprint(read) {
			diff = append(diff, fmt.Sprintf("%s: stored %v, GitLab shows %v", what, stored, read))
		}
	}
	pr := r.PullRequest
	differ("pull request state", tk.Facts.PRState, pr.State)
	if pr.State == lifecycle.PullRequestClosed && tk.Status == lifecycle.StatusInProgress {
		return diff // the task is its agent's again; nothing else is followed
	}
	differ("status", tk.Status, lifecycle.StatusInReview)
	differ("head", *tk.HeadSHA, pr.HeadSHA)
	differ("base", *tk.BaseBranch, pr.Base)
	differ("draft", tk.Facts.Draft, pr.Draft)
	if pr.Mergeable != lifecycle.MergeabilityUnknown {
		differ("mergeable", tk.Facts.Mergeable, pr.Mergeable)
	}
	ci, _, err := h.svc.CIStatus(ctx, tk.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	var stored, read []string
	for _, c := range ci.Checks {
		stored = append(stored, c.Name+"="+string(c.Status))
	}
	for _, c := range r.CI.Checks {
		read = append(read, c.Name+"="+string(c.Status))
	}
	slices.Sort(stored)
	slices.Sort(read)
	differ("checks", stored, read)
	differ("CI pending", tk.Facts.CIPending, r.CI.Pending)
	differ("review decision", tk.Facts.HostDecision, r.Reviews.Decision)
	reviews, err := h.store.Reviews(ctx, *tk.SubmissionID)
	if err != nil {
		h.t.Fatal(err)
	}
	have := map[string]bool{}
	for _, rv := range reviews {
		have[rv.HostID] = true
	}
	for _, rv := range r.Reviews.Reviews {
		if !have[rv.ID] {
			diff = append(diff, fmt.Sprintf("review %s (%s by %s) not recorded", rv.ID, rv.Outcome, rv.Reviewer))
		}
	}
	return diff
}
