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

	"github.com/tasklifecycle/lifecycle"
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
		if _, err := e.svc.StartTask(ctx, t.ID, e.agent); err != nil {
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
// the runner works them, ShipConcurrency (16) at a time.
func BenchmarkShipRunner(b *testing.B) {
	e := newEnv(b, nil, nil)
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
	for i := 0; i < b.N; {
		op, err := e.svc.ShipOperation(ctx, ops[i])
		if err != nil {
			b.Fatal(err)
		}
		switch op.Status {
		case lifecycle.ShipSucceeded:
			i++
		case lifecycle.ShipFailed:
			b.Fatalf("ship failed: %+v", op.Error)
		default:
			time.Sleep(time.Millisecond)
		}
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
// is idle.
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
