package gitlab_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// The benchmarks run a Service against the fake GitLab on loopback: they
// measure the adapter, client-go and the Service, not GitLab. Each reports
// api-calls/op, the requests the fake served per operation.

// BenchmarkSubmit submits started tasks through the Service from 8
// clients: the merge request list and its creation (the project's
// settings are cached), then the CI and approvals of the new head.
func BenchmarkSubmit(b *testing.B) {
	st := newBenchStack(b)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = st.started(b, fmt.Sprintf("SUB-%d", i))
	}
	before := st.f.TotalCalls()
	b.ResetTimer()
	clients(b.N, func(i int) {
		if _, err := st.svc.Submit(b.Context(), ids[i], lifecycle.SubmitParams{Summary: "Fixed.", Actor: agent}); err != nil {
			b.Error(err)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
	b.ReportMetric(float64(st.f.TotalCalls()-before)/float64(b.N), "api-calls/op")
}

// BenchmarkShipRunner queues b.N ships (merge_only) of tasks whose CI
// passed from 8 clients, then waits for all of them to succeed: acceptance, the runner's
// read of the merge request, the merge at the expected head, the task
// done, operations run ShipConcurrency (16) at a time.
func BenchmarkShipRunner(b *testing.B) {
	st := newBenchStack(b)
	tasks := make([]lifecycle.Task, b.N)
	for i := range tasks {
		tasks[i] = st.green(b, st.submitted(b, fmt.Sprintf("SHP-%d", i)))
	}
	ops := make([]string, b.N)
	before := st.f.TotalCalls()
	b.ResetTimer()
	clients(b.N, func(i int) {
		op, err := st.svc.Ship(b.Context(), tasks[i].ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
			ExpectedHeadSHA: *tasks[i].HeadSHA, Actor: lifecycle.Actor{ID: "lead", Role: lifecycle.RoleUser}})
		if err != nil {
			b.Error(err)
		}
		ops[i] = op.OperationID
	})
	for _, id := range ops {
		if got := st.finished(b, id); got.Status != lifecycle.ShipSucceeded {
			b.Fatalf("operation %+v failed: %+v", got, got.Error)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(st.f.TotalCalls()-before)/float64(b.N), "api-calls/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkWebhookIntake serves Merge Request Hook deliveries (new
// commits), each a new delivery: "intake" with a sink that keeps nothing
// (token check, parse, mapping), "applied" with the Service, which reads
// the merge request, its CI and approvals and records what changed.
func BenchmarkWebhookIntake(b *testing.B) {
	st := newBenchStack(b)
	tk := st.submitted(b, "HOOK-1")
	pr := lifecycle.PullRequest{PullRequestRef: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: *tk.PRNumber}}
	for _, bc := range []struct {
		name string
		sink lifecycle.ProviderEventSink
	}{{"intake", discardSink{}}, {"applied", st.svc}} {
		b.Run(bc.name, func(b *testing.B) {
			h := st.a.WebhookHandler(bc.sink)
			tmpl := delivery(st.f, pr, lifecycle.ProviderHeadChanged, hookToken)
			body, _ := io.ReadAll(tmpl.Body)
			before := st.f.TotalCalls()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				req := httptest.NewRequest(http.MethodPost, "/hooks/gitlab", bytes.NewReader(body))
				req.Header = tmpl.Header.Clone()
				req.Header.Set("Idempotency-Key", gitlabtest.NewSHA())
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("answered %d: %s", rec.Code, rec.Body)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(st.f.TotalCalls()-before)/float64(b.N), "api-calls/op")
		})
	}
}

// clients calls f(0) to f(n-1) from 8 goroutines.
func clients(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

type discardSink struct{}

func (discardSink) ApplyProviderEvent(context.Context, lifecycle.ProviderEvent) error { return nil }

// newBenchStack is a stack for benchmarks: no approvals required, the
// reconciler out of the way.
func newBenchStack(b *testing.B) *stack {
	b.Helper()
	return newStack(b, stackOptions{reconcile: time.Hour})
}
