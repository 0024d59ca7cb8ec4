package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// shipBenchEnv is a bench env whose tasks ship as soon as they are
// submitted: no review needed, and the in-memory CI trusts the passed
// check each submission reports.
func newShipBenchEnv(b *testing.B, adapter lifecycle.ProviderAdapter, ci lifecycle.CIProvider, mutate ...func(*lifecycle.Config)) *benchEnv {
	return newBenchEnv(b, append([]func(*lifecycle.Config){func(c *lifecycle.Config) {
		c.Adapters = []lifecycle.AdapterBinding{{Adapter: adapter, CI: ci}}
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
		c.Deployer = &fakeDeployer{}
	}}, mutate...)...)
}

// shippable creates n tasks ready to ship and returns them with their heads.
func (e *benchEnv) shippable(b *testing.B, n int) (ids, heads []string) {
	b.Helper()
	ids = e.startedTasks(b, n)
	heads = make([]string, n)
	for i, id := range ids {
		sub, err := e.svc.Submit(b.Context(), id, lifecycle.SubmitParams{Summary: "done",
			Checks: []lifecycle.SubmittedCheck{{Name: "unit", Status: lifecycle.CheckPassed}}})
		if err != nil {
			b.Fatal(err)
		}
		heads[i] = *sub.HeadSHA
	}
	return ids, heads
}

// BenchmarkShipAcceptance accepts ships through the handler (the runner is
// not started). Target: at least 1,500 acceptances per second.
func BenchmarkShipAcceptance(b *testing.B) {
	host := memory.New(memory.Config{CountSelfReported: true})
	e := newShipBenchEnv(b, host, host)
	ids, heads := e.shippable(b, b.N)
	e.parallelRequests(b, http.StatusAccepted, func(i int) *http.Request {
		body, _ := json.Marshal(map[string]any{"mode": "merge_and_deploy", "targetEnvironment": "production", "expectedHeadSha": heads[i]})
		r := httptest.NewRequest("POST", "/tasks/"+ids[i]+"/ship", bytes.NewReader(body))
		r.Header.Set("Idempotency-Key", fmt.Sprintf("bench-ship-%d", i))
		return r
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ships/s")
}

// runQueued queues a ship of each task, then starts the runner and waits
// until every operation has finished; only the run is timed.
func runQueued(b *testing.B, e *benchEnv, ids, heads []string) {
	b.Helper()
	for i, id := range ids {
		if _, err := e.svc.Ship(b.Context(), id, lifecycle.ShipParams{Mode: lifecycle.ShipMergeAndDeploy,
			TargetEnvironment: lifecycle.EnvironmentStaging, ExpectedHeadSHA: heads[i]}); err != nil {
			b.Fatal(err)
		}
	}
	store := e.svc
	b.StartTimer()
	if err := store.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	waitShipped(b, e, len(ids))
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.svc.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// waitShipped waits until n task.shipped events with shipStatus succeeded exist.
func waitShipped(b *testing.B, e *benchEnv, n int) {
	var after int64
	done := 0
	testenv.WaitFor(b, time.Minute, fmt.Sprintf("%d operations to finish", n), func() bool {
		evs, err := e.store.Events(b.Context(), lifecycle.EventFilter{After: after, Types: []lifecycle.EventType{lifecycle.EventTaskShipped}, Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			after = ev.Sequence
			var d lifecycle.TaskShippedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				b.Fatal(err)
			}
			if d.ShipStatus != lifecycle.ShipSucceeded {
				b.Fatalf("operation %s %s", d.OperationID, d.ShipStatus)
			}
			done++
		}
		return done >= n
	})
}

// BenchmarkShipRunner runs queued operations (merge and deploy) with a
// no-latency adapter. Target: at least 500 operations per second.
func BenchmarkShipRunner(b *testing.B) {
	host := memory.New(memory.Config{CountSelfReported: true})
	e := newShipBenchEnv(b, host, host)
	ids, heads := e.shippable(b, b.N)
	b.StopTimer()
	b.ResetTimer()
	runQueued(b, e, ids, heads)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// slowMerge takes 100 ms per merge, as a code host might.
type slowMerge struct{ *memory.Adapter }

func (s slowMerge) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return lifecycle.MergeResult{}, ctx.Err()
	}
	return s.Adapter.Merge(ctx, req)
}

// BenchmarkShipRunnerSlowMerge runs 100 queued operations against a host
// that takes 100 ms per merge. Target: under 3 seconds for the 100
// (concurrency, not one at a time: serially it would take 10 s).
func BenchmarkShipRunnerSlowMerge(b *testing.B) {
	for range b.N {
		b.StopTimer()
		host := memory.New(memory.Config{CountSelfReported: true})
		e := newShipBenchEnv(b, slowMerge{host}, host)
		ids, heads := e.shippable(b, 100)
		runQueued(b, e, ids, heads)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/100ops")
}
