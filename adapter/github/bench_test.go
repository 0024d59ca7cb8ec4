package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// The benchmarks run a lifecycle.Service (SQLite, fsynced) on an Adapter
// against the fake GitHub API on loopback, and report the fake's API calls
// per operation:
//
//	go test -run '^$' -bench . -benchtime 1000x -count 3 ./adapter/github

// started creates and starts n tasks of project github, their branches
// pushed.
func (e *env) started(b *testing.B, n int) []lifecycle.Task {
	b.Helper()
	ctx := context.Background()
	project := "github"
	tasks := make([]lifecycle.Task, n)
	for i := range n {
		e.n++
		t, err := e.svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("GH-%d", e.n), Title: "Benchmark",
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/x"}, Context: lifecycle.TaskContext{Project: &project},
			Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.svc.StartTask(ctx, t.ID, lifecycle.StartTaskParams{Actor: e.agent}); err != nil {
			b.Fatal(err)
		}
		e.f.Push(fmt.Sprintf("lifecycle/gh-%d", e.n))
		tasks[i] = t
	}
	return tasks
}

// parallel runs fn for each of n items from 8 goroutines.
func parallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSubmit: Service.Submit from 8 goroutines, each opening a pull
// request at the fake and reading its CI and review state.
func BenchmarkSubmit(b *testing.B) {
	e := newEnv(b, nil, nil)
	tasks := e.started(b, b.N)
	calls := e.f.Calls("")
	b.ResetTimer()
	start := time.Now()
	parallel(b.N, func(i int) {
		if _, err := e.svc.Submit(context.Background(), tasks[i].ID, lifecycle.SubmitParams{Summary: "done", Actor: e.agent}); err != nil {
			b.Error(err)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
	b.ReportMetric(float64(e.f.Calls("")-calls)/float64(b.N), "api-calls/submit")
}

// BenchmarkShipRunner: b.N shippable tasks shipped (merge_only) at once;
// the runner works them, ShipConcurrency (16) at a time. The fake has
// GitHub's mergeability computed at once after each merge moves the base
// (githubtest.Options.MergeabilityAtOnce): this measures throughput, not
// the 405s of merges racing GitHub's computation (see BenchmarkShip).
func BenchmarkShipRunner(b *testing.B) {
	e := newEnvWith(b, githubtest.Options{MergeabilityAtOnce: true}, nil, nil)
	ctx := context.Background()
	tasks := e.started(b, b.N)
	subs := make([]lifecycle.Submission, b.N)
	parallel(b.N, func(i int) {
		sub, err := e.svc.Submit(ctx, tasks[i].ID, lifecycle.SubmitParams{Summary: "done", Actor: e.agent})
		if err != nil {
			b.Error(err)
			return
		}
		subs[i] = sub
		e.f.CheckRun(*sub.HeadSHA, "build", "success")
		e.f.Review(sub.PRNumber, "octocat", "APPROVED", *sub.HeadSHA)
		if err := e.svc.Reconcile(ctx, tasks[i].ID); err != nil {
			b.Error(err)
		}
	})
	calls := e.f.Calls("")
	b.ResetTimer()
	start := time.Now()
	ops := make([]string, b.N)
	parallel(b.N, func(i int) {
		op, err := e.svc.Ship(ctx, tasks[i].ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
			ExpectedHeadSHA: *subs[i].HeadSHA, Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
		if err != nil {
			b.Error(err)
			return
		}
		ops[i] = op.OperationID
	})
	for _, id := range ops[:b.N] {
		waitUntil(b, time.Minute, "ship operation "+id+" to succeed", func() bool {
			op, err := e.svc.ShipOperation(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if op.Status == lifecycle.ShipFailed {
				b.Fatalf("ship failed: %+v", op.Error)
			}
			return op.Status == lifecycle.ShipSucceeded
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if e.f.Merges() != b.N {
		b.Fatalf("%d merges, want %d", e.f.Merges(), b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "merges/s")
	b.ReportMetric(float64(e.f.Calls("")-calls)/float64(b.N), "api-calls/ship")
}

// BenchmarkWebhookIntake: signed check_run deliveries POSTed over
// loopback from 8 clients to the handler on svc.QueuedEvents(), as the
// demo mounts it: signature verified, delivery recorded and its tasks made
// due in one Store write, answered; the reconciler reads the host in the
// background. api-calls/delivery counts the reads the reconciler made for
// the deliveries, once it is idle again.
func BenchmarkWebhookIntake(b *testing.B) { benchWebhookIntake(b, "/hooks/github-queued") }

// BenchmarkWebhookIntakeSync is BenchmarkWebhookIntake with each delivery
// applied before its answer (WebhookHandler(svc)): the pull request, its
// CI and reviews read at the fake, facts and delivery recorded.
func BenchmarkWebhookIntakeSync(b *testing.B) { benchWebhookIntake(b, "/hooks/github") }

func benchWebhookIntake(b *testing.B, path string) {
	e := newEnv(b, nil, func(c *lifecycle.Config) { c.ReconcileConcurrency = 16 })
	ctx := context.Background()
	const tracked = 50
	tasks := e.started(b, tracked)
	var heads []string
	for _, t := range tasks {
		sub, err := e.svc.Submit(ctx, t.ID, lifecycle.SubmitParams{Summary: "done", Actor: e.agent})
		if err != nil {
			b.Fatal(err)
		}
		heads = append(heads, *sub.HeadSHA)
	}
	calls := e.f.Calls("")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.ResetTimer()
	start := time.Now()
	parallel(b.N, func(i int) {
		payload := []byte(fmt.Sprintf(`{"action":"completed","check_run":{"id":%d,"head_sha":%q,"status":"completed","conclusion":"success"},"repository":{"name":"widgets","owner":{"login":"acme"}}}`, i, heads[i%tracked]))
		req := signedDelivery(b, "check_run", fmt.Sprintf("bench-%d", i), payload)
		req.RequestURI, req.URL.Scheme, req.URL.Host, req.URL.Path = "", "http", strings.TrimPrefix(e.srv.URL, "http://"), path
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("delivery answered %d", resp.StatusCode)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	settle(e)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(e.f.Calls("")-calls)/float64(b.N), "api-calls/delivery")
}

// settle waits until the fake has had no call for 200 ms: the reconciler
// is idle. Idleness is seen only as a quiet window of real time, so the
// window's sleep is the thing measured here (after the benchmark's timer).
func settle(e *env) {
	for last := int64(-1); ; time.Sleep(200 * time.Millisecond) {
		n := e.f.Calls("")
		if n == last {
			return
		}
		last = n
	}
}

// BenchmarkReconcile: Service.Reconcile of submitted tasks from 8
// goroutines, each reading the pull request, its CI and reviews at the
// fake and storing what changed.
func BenchmarkReconcile(b *testing.B) {
	e := newEnv(b, nil, nil)
	ctx := context.Background()
	const tracked = 200
	tasks := e.started(b, tracked)
	parallel(tracked, func(i int) {
		if _, err := e.svc.Submit(ctx, tasks[i].ID, lifecycle.SubmitParams{Summary: "done", Actor: e.agent}); err != nil {
			b.Error(err)
		}
	})
	calls := e.f.Calls("")
	b.ResetTimer()
	start := time.Now()
	parallel(b.N, func(i int) {
		if err := e.svc.Reconcile(ctx, tasks[i%tracked].ID); err != nil {
			b.Error(err)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reconciles/s")
	b.ReportMetric(float64(e.f.Calls("")-calls)/float64(b.N), "api-calls/reconcile")
}

// The benchmarks below run the Adapter alone against the fake and count
// what GitHub would: host requests (REST and GraphQL), REST requests
// charged against the core rate limit (a 304 is not), and GraphQL
// rate-limit points, per operation:
//
//	go test -run '^$' -bench 'Submit|Ship$|Sweep' -benchtime 20x -count 3 ./adapter/github

// usage is what the fake counted between two moments.
type usage struct {
	requests int64
	githubtest.Usage
}

func usageOf(f *fakeGitHub) usage { return usage{requests: f.Calls(""), Usage: f.Usage()} }

func (u usage) since(before usage) usage {
	return usage{requests: u.requests - before.requests, Usage: githubtest.Usage{
		Core: u.Core - before.Core, NotModified: u.NotModified - before.NotModified, GraphQL: u.GraphQL - before.GraphQL, Points: u.Points - before.Points}}
}

// report reports u per op, naming what an op is.
func (u usage) report(b *testing.B, op string, n int) {
	b.ReportMetric(float64(u.requests)/float64(n), "requests/"+op)
	b.ReportMetric(float64(u.Core)/float64(n), "core/"+op)
	b.ReportMetric(float64(u.NotModified)/float64(n), "304s/"+op)
	b.ReportMetric(float64(u.Points)/float64(n), "points/"+op)
}

// benchProtection is a team's usual branch protection: one approval, a
// required build check.
var benchProtection = &gh.Protection{RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcement{RequiredApprovingReviewCount: 1},
	RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: "build"}}}}

// BenchmarkSubmitReading: what a submission costs at GitHub: opening the
// pull request (EnsurePullRequest) and the ReadNow reading of it, with the
// branch protection readable, or not (its required checks unknown: the
// head's check suites are read too).
func BenchmarkSubmitReading(b *testing.B) {
	for _, readable := range []bool{true, false} {
		name := "protection-readable"
		if !readable {
			name = "protection-unreadable"
		}
		b.Run(name, func(b *testing.B) {
			f := newFakeGitHub(b)
			if readable {
				f.SetProtection("main", benchProtection)
			} else {
				f.SetProtectionError(http.StatusForbidden)
			}
			a := f.adapter(b, Config{})
			project := "github"
			warm := func(n int) {
				f.Push(fmt.Sprintf("lifecycle/eng-%d", n))
				task := lifecycle.Task{ID: fmt.Sprintf("tsk_%d", n), Identifier: fmt.Sprintf("ENG-%d", n), Title: "Benchmark", Context: lifecycle.TaskContext{Project: &project}}
				pr, err := a.EnsurePullRequest(context.Background(), lifecycle.PullRequestRequest{Task: task, SubmissionID: "sub_1"})
				if err != nil {
					b.Fatal(err)
				}
				r, err := a.ReadPullRequests(context.Background(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}})
				if err != nil || r[0].Err != nil {
					b.Fatal(err, r)
				}
			}
			warm(0) // the default branch and the policy, read once
			before := usageOf(f)
			b.ResetTimer()
			for i := range b.N {
				warm(i + 1)
			}
			b.StopTimer()
			usageOf(f).since(before).report(b, "submit", b.N)
		})
	}
}

// BenchmarkShip: what a ship costs at GitHub: the ReadMerge reading right
// before the merge, read again (at most twice more) while GitHub computes
// mergeability, which it does anew after each merge moves the base, as
// the ship runner does; then the merge. Pull requests are shipped one
// after the other into the same base. requests/ship counts the requests
// besides the merge itself.
func BenchmarkShip(b *testing.B) {
	f := newFakeGitHub(b)
	f.SetProtection("main", benchProtection)
	a := f.adapter(b, Config{})
	prs := make([]lifecycle.PullRequest, b.N+1)
	for i := range prs {
		prs[i] = open(b, f, a, i+1)
		f.CheckRun(prs[i].HeadSHA, "build", "success")
		f.Review(prs[i].Number, "alice", "APPROVED", prs[i].HeadSHA)
	}
	ship := func(pr lifecycle.PullRequest) {
		for try := 0; ; try++ {
			r, err := a.ReadPullRequests(context.Background(), lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}})
			if err != nil || r[0].Err != nil {
				b.Fatal(err, r)
			}
			got := r[0]
			if got.CI.Pending || got.Reviews.Decision != lifecycle.DecisionApproved || got.PullRequest.Draft {
				b.Fatalf("not shippable: %+v", got)
			}
			if got.PullRequest.Mergeable == lifecycle.MergeabilityMergeable {
				break
			}
			if try == 2 {
				b.Fatalf("mergeability still %q", got.PullRequest.Mergeable)
			}
		}
		if _, err := a.Merge(context.Background(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA}); err != nil {
			b.Fatal(err)
		}
	}
	ship(prs[0]) // the policy, read once
	before, merges := usageOf(f), f.Calls(githubtest.RouteMerge)
	b.ResetTimer()
	for i := range b.N {
		ship(prs[i+1])
	}
	b.StopTimer()
	u := usageOf(f).since(before)
	u.requests -= f.Calls(githubtest.RouteMerge) - merges
	u.Core -= f.Calls(githubtest.RouteMerge) - merges
	u.report(b, "ship", b.N)
	if per := float64(u.requests) / float64(b.N); per > 3 {
		b.Errorf("%.1f requests per ship besides the merge, want at most 3", per)
	}
}

// sweepEnv opens n pull requests, reads them in full, and returns their
// reads with the Versions of that reading.
func sweepEnv(b *testing.B, f *fakeGitHub, a *Adapter, n int) []lifecycle.ReadRequest {
	b.Helper()
	reads := make([]lifecycle.ReadRequest, n)
	parallel(n, func(i int) {
		f.Push(fmt.Sprintf("lifecycle/eng-%d", i+1))
		project := "github"
		pr, err := a.EnsurePullRequest(context.Background(), lifecycle.PullRequestRequest{Task: lifecycle.Task{ID: fmt.Sprintf("tsk_%d", i+1),
			Identifier: fmt.Sprintf("ENG-%d", i+1), Title: "Benchmark", Context: lifecycle.TaskContext{Project: &project}}})
		if err != nil {
			b.Error(err)
			return
		}
		f.CheckRun(pr.HeadSHA, "build", "success")
		reads[i] = lifecycle.ReadRequest{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	})
	got, err := a.ReadPullRequests(context.Background(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: reads})
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range got {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
		reads[i].Version = r.Version
	}
	return reads
}

// sweep reads reads as the reconciler does and checks every one is
// Unchanged.
func sweep(b *testing.B, a *Adapter, reads []lifecycle.ReadRequest) {
	got, err := a.ReadPullRequests(context.Background(), lifecycle.BatchQuery{Purpose: lifecycle.ReadSweep, Reads: reads})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range got {
		if !r.Unchanged {
			b.Fatalf("a quiet pull request read as changed: %+v", r)
		}
	}
}

// BenchmarkSweep1000: one reconciler sweep of 1,000 quiet pull requests
// with their Versions, every 60 s of the Adapter's clock (so the base's
// policy, kept for a minute, is read again each sweep: conditionally).
// The target: at most 20 requests and 20 points. points/h-10k-60s is
// what sweeping 10,000 such pull requests every 60 s costs in an hour,
// ten times a sweep of 1,000 (an upper bound: a sweep of 10,000 rounds
// once, 68 queries, not ten times 7): it must fit GitHub's 5,000 points.
// Beyond the 80 % share sweeps may use by default (4,000), the
// reconciler defers sweeps until the hour's reset.
func BenchmarkSweep1000(b *testing.B) {
	f := newFakeGitHub(b)
	f.SetProtection("main", benchProtection)
	clock := fakeclock.New(time.Now())
	a := f.adapter(b, Config{Clock: clock})
	reads := sweepEnv(b, f, a, 1000)
	before := usageOf(f)
	b.ResetTimer()
	for range b.N {
		clock.Advance(time.Minute)
		sweep(b, a, reads)
	}
	b.StopTimer()
	u := usageOf(f).since(before)
	u.report(b, "sweep", b.N)
	perHour := float64(u.Points) / float64(b.N) * 10 * 60
	b.ReportMetric(perHour, "points/h-10k-60s")
	if per := float64(u.requests) / float64(b.N); per > 20 || float64(u.Points)/float64(b.N) > 20 {
		b.Errorf("%.1f requests and %.1f points per sweep of 1,000, want at most 20 each", per, float64(u.Points)/float64(b.N))
	}
	if perHour > 5000 {
		b.Errorf("10,000 every 60 s cost %.0f points an hour, more than GitHub's 5,000", perHour)
	}
}

// BenchmarkQuietSweeps150: 150 quiet pull requests swept ten times, 60 s
// of the Adapter's clock apart; the metrics are per ten sweeps.
func BenchmarkQuietSweeps150(b *testing.B) {
	f := newFakeGitHub(b)
	f.SetProtection("main", benchProtection)
	clock := fakeclock.New(time.Now())
	a := f.adapter(b, Config{Clock: clock})
	reads := sweepEnv(b, f, a, 150)
	before := usageOf(f)
	b.ResetTimer()
	for range b.N {
		for range 10 {
			clock.Advance(time.Minute)
			sweep(b, a, reads)
		}
	}
	b.StopTimer()
	usageOf(f).since(before).report(b, "10sweeps", b.N)
}
