package lifecycle_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// newHostBenchEnv is a bench env whose tasks (every project) go to host,
// which also reports their CI and decides their reviews (github_rules,
// the default policy).
func newHostBenchEnv(b *testing.B, host *memory.Adapter, mutate ...func(*lifecycle.Config)) *benchEnv {
	return newBenchEnv(b, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: host}}
	}}, mutate...)...)
}

// inReview creates n tasks of project web, starts and submits them from
// 64 clients at once (the host may be slow), and returns them with the
// numbers of their pull requests.
func (e *benchEnv) inReview(b *testing.B, n int) (ids []string, prs []int) {
	b.Helper()
	ids = e.startedTasks(b, n)
	prs = make([]int, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				sub, err := e.svc.Submit(b.Context(), ids[i], lifecycle.SubmitParams{Summary: "done"})
				if err != nil {
					b.Error(err)
					return
				}
				prs[i] = sub.PRNumber
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return ids, prs
}

// ciReport is a one-check CI report; passed alternates with running so
// that each reading of the host finds the CI changed.
func ciReport(passed bool) lifecycle.CIReport {
	st := lifecycle.CheckRunning
	if passed {
		st = lifecycle.CheckPassed
	}
	return lifecycle.CIReport{Checks: []lifecycle.CICheck{{Name: "build", Status: st}}}
}

// BenchmarkApplyProviderEvent applies checks_changed deliveries to 1,000
// tasks in review against a no-latency memory host, as a webhook handler
// would: look the delivery up, find the tasks of the pull request, read
// the pull request, its CI and its review decision, store the change with
// its task.updated event, record the delivery. Each delivery follows a
// change of the CI at the host, so each one writes. Target: at least
// 2,000 events per second.
func BenchmarkApplyProviderEvent(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
			e := newHostBenchEnv(b, host)
			_, prs := e.inReview(b, 1000)
			heads := make([]string, len(prs))
			for i, n := range prs {
				pr, _ := host.PullRequest(b.Context(), webPR(n))
				heads[i] = pr.HeadSHA
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(clients)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := int(next.Add(1) - 1)
					i := k % len(prs)
					host.SetChecks(heads[i], ciReport((k/len(prs))%2 == 0))
					err := e.svc.ApplyProviderEvent(b.Context(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: fmt.Sprintf("bench-%d", k),
						Kind: lifecycle.ProviderChecksChanged, PullRequest: webPR(prs[i]), HeadSHA: heads[i]})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkReconcile1000 has the background reconciler read 1,000 tasks
// in review from a memory host that takes 50 ms per call, with the
// default ReconcileConcurrency: each iteration makes every task due (the
// fake clock moves one ReconcileInterval), and lasts until every task has
// its task.updated event (the CI changed at the host before). Target: at
// most 10 s for the 1,000.
//
// Batched, the host is read through its BatchReader: one call a sweep, of
// 500 tasks (the reconciler's claims), for all of them.
func BenchmarkReconcile1000(b *testing.B) {
	for _, batched := range []bool{false, true} {
		b.Run(fmt.Sprintf("batched=%v", batched), func(b *testing.B) { benchReconcile1000(b, batched) })
	}
}

func benchReconcile1000(b *testing.B, batched bool) {
	const tasks = 1000
	host := memory.New(memory.Config{Owner: "acme", Repo: "web", Latency: 50 * time.Millisecond})
	clock := fakeclock.New(apitest.Epoch)
	e := newHostBenchEnv(b, host, func(c *lifecycle.Config) {
		c.Clock = clock
		if batched {
			c.Adapters = []lifecycle.AdapterBinding{{Adapter: host.Batch()}}
		}
	})
	_, prs := e.inReview(b, tasks)
	heads := make([]string, len(prs))
	for i, n := range prs {
		pr, _ := host.PullRequest(b.Context(), webPR(n))
		heads[i] = pr.HeadSHA
	}
	startBench(b, e.svc)
	calls := host.Calls(memory.OpBatch) + host.Calls(memory.OpPullRequest) + host.Calls(memory.OpChecks) + host.Calls(memory.OpReviews)
	b.ResetTimer()
	for it := range b.N {
		b.StopTimer()
		for _, h := range heads {
			host.SetChecks(h, ciReport(it%2 == 0))
		}
		cursor := lastSequence(b, e)
		b.StartTimer()
		clock.Advance(time.Hour) // every task is due, and the reconciler's poll fires
		testenv.WaitFor(b, time.Minute, "an event for every task", func() bool {
			evs, err := e.store.Events(b.Context(), lifecycle.EventFilter{After: cursor, Limit: 10000})
			if err != nil {
				b.Fatal(err)
			}
			return len(evs) >= tasks
		})
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/1000tasks")
	b.ReportMetric(float64(host.Calls(memory.OpBatch)+host.Calls(memory.OpPullRequest)+host.Calls(memory.OpChecks)+host.Calls(memory.OpReviews)-calls)/float64(b.N), "hostcalls/sweep")
}

// lastSequence returns the sequence of the newest event.
func lastSequence(b *testing.B, e *benchEnv) int64 {
	b.Helper()
	var last int64
	for {
		evs, err := e.store.Events(b.Context(), lifecycle.EventFilter{After: last, Limit: 10000})
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) == 0 {
			return last
		}
		last = evs[len(evs)-1].Sequence
	}
}

// startBench starts svc for the rest of the benchmark.
func startBench(b *testing.B, svc *lifecycle.Service) {
	b.Helper()
	if err := svc.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			b.Error(err)
		}
	})
}

// BenchmarkQueuedWebhookToFact measures how soon a change at the host
// that a webhook reports reaches the task: each iteration pushes a commit
// to one of 100 pull requests in review at an in-memory host read in
// batches, queues the provider event (Service.QueueProviderEvent, as a
// webhook handler mounted on QueuedEvents does), and waits until the task
// holds the new head. Target: within 1 s.
func BenchmarkQueuedWebhookToFact(b *testing.B) {
	const tasks = 100
	host := memory.New(memory.Config{Owner: "acme", Repo: "web"})
	e := newHostBenchEnv(b, host, func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: host.Batch()}}
	})
	ids, prs := e.inReview(b, tasks)
	startBench(b, e.svc)
	var worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		k := i % tasks
		head := host.Push(prs[k])
		start := time.Now()
		err := e.svc.QueueProviderEvent(b.Context(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: fmt.Sprintf("push-%d", i),
			Kind: lifecycle.ProviderHeadChanged, PullRequest: webPR(prs[k])})
		if err != nil {
			b.Fatal(err)
		}
		testenv.WaitFor(b, time.Minute, "the pushed head to be applied", func() bool {
			t, err := e.svc.Task(b.Context(), ids[k])
			if err != nil {
				b.Fatal(err)
			}
			return t.HeadSHA != nil && *t.HeadSHA == head
		})
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
}
