package gitlab_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
)

// The benchmarks run against the fake GitLab on loopback: they measure
// the adapter, client-go (and, for the Service's, the Service), not
// GitLab. Each reports api-calls/op, the requests the fake served per
// operation, or requests per what it names.
//
// The adapter's, named after what the Service does with it:
//
//	go test -run '^$' -bench 'Requests' -benchtime 20x ./adapter/gitlab/

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
// newBenchStack is a stack for the Service's throughput: GitLab works out
// mergeability at once (BenchmarkShipRequests measures the readings of a
// merge request whose target just moved).
func newBenchStack(b *testing.B) *stack {
	b.Helper()
	return newStack(b, stackOptions{reconcile: time.Hour, settled: true})
}

// BenchmarkSubmitRequests counts the requests of a submission at the
// adapter: EnsurePullRequest (the list of the branch's open merge
// requests and the create; the project's settings are kept), then the
// reading of the new merge request with ReadNow (the merge request, its
// approvals; no pipeline of the new head yet). "with reviewer" asks for
// a review: the reviewer's login is resolved, and the reading reads the
// reviewers' states.
func BenchmarkSubmitRequests(b *testing.B) {
	for _, bc := range []struct {
		name      string
		reviewers []string
	}{{"plain", nil}, {"with reviewer", []string{"bob"}}} {
		b.Run(bc.name, func(b *testing.B) {
			fl := newFleet(b, 1, gitlabtest.Options{}) // the project's settings read
			var requests, n int
			for b.Loop() {
				n++
				ident := fmt.Sprintf("SUB-%d", n)
				fl.f.Push("lifecycle/" + strings.ToLower(ident))
				before := fl.f.TotalCalls()
				pr, err := fl.a.EnsurePullRequest(b.Context(), lifecycle.PullRequestRequest{Task: task(ident), Reviewers: bc.reviewers})
				if err != nil {
					b.Fatal(err)
				}
				got, err := fl.a.ReadPullRequests(b.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow,
					Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}})
				if err != nil || got[0].Err != nil {
					b.Fatal(err, got[0].Err)
				}
				requests += fl.f.TotalCalls() - before
			}
			b.ReportMetric(float64(requests)/float64(n), "requests/submit")
		})
	}
}

// BenchmarkShipRequests counts the requests of a ship at the adapter: the
// reading right before the merge (ReadMerge: the merge request, its head
// pipeline's statuses, its approvals, and its reviewers' states when it
// has reviewers), then the merge. The ships follow one another within a
// minute: the project's settings, read again once a minute (two
// requests), are not. Each ship merges another merge request
// into main, which moves main under the others: GitLab works out their
// mergeability again, and reading one at once says unknown
// ("checking"). "settled" lets GitLab's background checks catch up
// before each ship; "target just moved" does not: the reading reads the
// merge request again while GitLab checks, and the benchmark reads again,
// as the Service does for an unknown mergeability, until it is known.
func BenchmarkShipRequests(b *testing.B) {
	for _, bc := range []struct {
		name      string
		settle    bool
		reviewers []string
	}{{"settled", true, nil}, {"settled with reviewer", true, []string{"bob"}}, {"target just moved", false, nil}} {
		b.Run(bc.name, func(b *testing.B) {
			fl := newFleet(b, 0, gitlabtest.Options{ApprovalsRequired: 1})
			fl.advanceWhileWaiting(b) // the adapter's waits while GitLab checks
			var requests, besides, readings, n int
			for b.Loop() {
				n++
				ident := fmt.Sprintf("SHP-%d", n)
				fl.f.Push("lifecycle/" + strings.ToLower(ident))
				pr, err := fl.a.EnsurePullRequest(b.Context(), lifecycle.PullRequestRequest{Task: task(ident), Reviewers: bc.reviewers})
				if err != nil {
					b.Fatal(err)
				}
				iid := int64(pr.Number)
				fl.f.Pipeline(iid, "success", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "test", Status: "success"})
				fl.f.Approve(iid, "alice")
				if bc.settle {
					fl.f.SettleMergeability()
				} else if _, err := fl.a.PullRequest(b.Context(), pr.PullRequestRef); err != nil { // the submission read it
					b.Fatal(err)
				}
				if n > 1 { // the previous ship moved main
					fl.f.Push("main")
					if bc.settle {
						fl.f.SettleMergeability()
					}
				}
				before := fl.f.TotalCalls()
				q := lifecycle.BatchQuery{Purpose: lifecycle.ReadMerge, Reads: []lifecycle.ReadRequest{{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA}}}
				var r lifecycle.Reading
				for range 3 {
					got, err := fl.a.ReadPullRequests(b.Context(), q)
					if err != nil || got[0].Err != nil {
						b.Fatal(err, got[0].Err)
					}
					r = got[0]
					readings++
					if r.PullRequest.Mergeable != lifecycle.MergeabilityUnknown {
						break
					}
				}
				if r.PullRequest.Mergeable != lifecycle.MergeabilityMergeable || r.Reviews.Decision != lifecycle.DecisionApproved || len(r.CI.Checks) != 2 {
					b.Fatalf("not shippable: %+v", r)
				}
				besides += fl.f.TotalCalls() - before
				if _, err := fl.a.Merge(b.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: r.PullRequest.HeadSHA}); err != nil {
					b.Fatal(err)
				}
				requests += fl.f.TotalCalls() - before
			}
			b.ReportMetric(float64(requests)/float64(n), "requests/ship")
			b.ReportMetric(float64(besides)/float64(n), "besides-merge/ship")
			b.ReportMetric(float64(readings)/float64(n), "readings/ship")
		})
	}
}

// BenchmarkSweepRequests counts the requests of the reconciler's sweeps
// of merge requests in review whose readings carry Versions, a minute
// apart unless said: "1000 quiet" one sweep of 1,000 quiet merge
// requests per op, "150 quiet x10" ten sweeps of 150 per op. "1000, 10
// changed" has ten of the 1,000 change at GitLab before each sweep (a
// push, a pipeline failing, an approval, a review, each in turn), which
// the sweep reads in full. "1000, changed 10s before" sweeps, three
// seconds apart for 90 s, 1,000 merge requests each pushed and read ten
// seconds before the first sweep: within ThrottledTouch's minute, so each
// is read through GraphQL (a hundred a request) until that minute is
// over, then listed (max-requests/sweep is the busiest sweep); "then a
// target push" pushes to main right before the first sweep, which leaves
// them all for GitLab to check again: listed as well, since only the
// REST list asks GitLab to. "150
// opened over the last minute" sweeps, three seconds apart for two
// minutes, 150 merge requests opened and read one every 400 ms.
func BenchmarkSweepRequests(b *testing.B) {
	b.Run("1000 quiet", func(b *testing.B) {
		fl := newFleet(b, 1000, gitlabtest.Options{})
		var requests, n int
		for b.Loop() {
			n++
			got, calls := fl.sweep(b)
			if c := changed(got); len(c) != 0 {
				b.Fatalf("%d read in full", len(c))
			}
			requests += calls
		}
		b.ReportMetric(float64(requests)/float64(n), "requests/sweep")
	})
	b.Run("150 quiet x10", func(b *testing.B) {
		fl := newFleet(b, 150, gitlabtest.Options{})
		var requests, n int
		for b.Loop() {
			n++
			for range 10 {
				got, calls := fl.sweep(b)
				if c := changed(got); len(c) != 0 {
					b.Fatalf("%d read in full", len(c))
				}
				requests += calls
			}
		}
		b.ReportMetric(float64(requests)/float64(n), "requests/10-sweeps")
	})
	b.Run("1000, 10 changed", func(b *testing.B) {
		fl := newFleet(b, 1000, gitlabtest.Options{})
		var requests, full, n int
		for b.Loop() {
			n++
			for j := range 10 {
				k := (n*10 + j) % len(fl.prs)
				pr, iid := fl.prs[k], int64(fl.prs[k].Number)
				switch j % 4 {
				case 0:
					fl.prs[k].HeadSHA = fl.f.Push(pr.Head)
				case 1:
					fl.f.SetCheck(fl.f.MergeRequest(iid).SHA, fmt.Sprintf("flaky-%d", n), "failed", "")
				case 2:
					fl.f.Approve(iid, "alice")
				case 3:
					fl.f.SetReviewerState(iid, "bob", "reviewed")
				}
			}
			fl.f.SettleMergeability()
			got, calls := fl.sweep(b)
			full += len(changed(got))
			requests += calls
		}
		b.ReportMetric(float64(requests)/float64(n), "requests/sweep")
		b.ReportMetric(float64(full)/float64(n), "read-in-full/sweep")
	})
	for _, targetPush := range []bool{false, true} {
		name := "1000, changed 10s before"
		if targetPush {
			name += ", then a target push"
		}
		b.Run(name, func(b *testing.B) {
			var requests, sweeps, most int
			for b.Loop() {
				b.StopTimer()
				fl := newFleet(b, 1000, gitlabtest.Options{MergeabilityAtOnce: true})
				for i, pr := range fl.prs {
					fl.reads[i].HeadSHA = fl.f.Push(pr.Head)
				}
				fl.read(b, lifecycle.ReadNow)
				fl.clock.Advance(10 * time.Second)
				if targetPush {
					fl.f.Push("main") // every merge request unchecked, none touched
				}
				b.StartTimer()
				quietSweeps(b, fl, 30, &requests, &sweeps, &most) // 90 s: past the minute
			}
			b.ReportMetric(float64(requests)/float64(sweeps), "requests/sweep")
			b.ReportMetric(float64(most), "max-requests/sweep")
		})
	}
	b.Run("150 opened over the last minute", func(b *testing.B) {
		var requests, sweeps, most int
		for b.Loop() {
			b.StopTimer()
			fl := newFleet(b, 0, gitlabtest.Options{MergeabilityAtOnce: true})
			for i := range 150 {
				ident := fmt.Sprintf("NEW-%d", i)
				fl.f.Push("lifecycle/" + strings.ToLower(ident))
				pr, err := fl.a.EnsurePullRequest(b.Context(), lifecycle.PullRequestRequest{Task: task(ident)})
				if err != nil {
					b.Fatal(err)
				}
				fl.f.Pipeline(int64(pr.Number), "success", &gl.CommitStatus{Name: "build", Status: "success"})
				fl.reads = append(fl.reads, lifecycle.ReadRequest{PullRequest: pr.PullRequestRef, HeadSHA: pr.HeadSHA})
				got, err := fl.a.ReadPullRequests(b.Context(), lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: fl.reads[i:]})
				if err != nil || got[0].Err != nil {
					b.Fatal(err, got[0].Err)
				}
				fl.reads[i].Version = got[0].Version
				fl.clock.Advance(400 * time.Millisecond)
			}
			b.StartTimer()
			quietSweeps(b, fl, 40, &requests, &sweeps, &most)
		}
		b.ReportMetric(float64(requests)/float64(sweeps), "requests/sweep")
		b.ReportMetric(float64(most), "max-requests/sweep")
	})
}

// BenchmarkChangeLatency counts the sweeps, a minute apart ("60s") or
// three seconds apart ("3s"), after which a change made at GitLab without
// a webhook is in a reading, for each kind of change: a push, a job of a
// running pipeline finishing, a pipeline failed with no jobs, a
// conflicting push to the target branch, GitLab's own check failing
// (unresolved discussions), and an approval 20 s after the merge
// request's last touch, which ThrottledTouch hides. It reports the mean
// and the most over the ops. With a webhook, the Service reads at once:
// BenchmarkWebhookIntake/applied is that latency.
func BenchmarkChangeLatency(b *testing.B) {
	changes := []struct {
		name    string
		running bool // the head pipeline runs
		change  func(fl *fleet, i int)
		seen    func(r lifecycle.Reading) bool
	}{
		{"push", false, func(fl *fleet, i int) { fl.f.Push(fl.prs[i].Head) },
			func(r lifecycle.Reading) bool { return r.CI != nil && r.CI.Pending }},
		{"job of a running pipeline", true, func(fl *fleet, i int) {
			fl.f.SetCheck(fl.f.MergeRequest(int64(fl.prs[i].Number)).SHA, "slow", "success", "")
		}, func(r lifecycle.Reading) bool { return r.CI != nil && hasCheck(r.CI, "slow", lifecycle.CheckPassed) }},
		{"pipeline failed with no jobs", false, func(fl *fleet, i int) { fl.f.Pipeline(int64(fl.prs[i].Number), "failed") },
			func(r lifecycle.Reading) bool {
				return r.CI != nil && hasCheck(r.CI, "pipeline", lifecycle.CheckFailed)
			}},
		{"conflicting target push", false, func(fl *fleet, i int) { fl.f.PushConflicting("main", int64(fl.prs[i].Number)) },
			func(r lifecycle.Reading) bool { return r.PullRequest.Mergeable == lifecycle.MergeabilityConflicting }},
		{"GitLab's own check", false, func(fl *fleet, i int) {
			fl.f.SetDetailedMergeStatus(int64(fl.prs[i].Number), "discussions_not_resolved")
		},
			func(r lifecycle.Reading) bool { return r.PullRequest.Mergeable == lifecycle.MergeabilityBlocked }},
		{"approval within the touch minute", false, func(fl *fleet, i int) {
			fl.f.Approve(int64(fl.prs[i].Number), "alice")
		}, func(r lifecycle.Reading) bool {
			return r.Reviews != nil && r.Reviews.Decision == lifecycle.DecisionApproved
		}},
	}
	for _, interval := range []time.Duration{time.Minute, 3 * time.Second} {
		for _, c := range changes {
			b.Run(fmt.Sprintf("%s/%s", interval, c.name), func(b *testing.B) {
				var total, most, n int
				for b.Loop() {
					b.StopTimer()
					fl := newFleet(b, 2, gitlabtest.Options{CheckDelay: time.Second})
					// The merge request's last touch (a push) 20 s before
					// the change; its reading 10 s before it.
					iid := int64(fl.prs[0].Number)
					fl.reads[0].HeadSHA = fl.f.Push(fl.prs[0].Head)
					fl.clock.Advance(10 * time.Second)
					job := "success"
					if c.running {
						job = "running"
					}
					fl.f.Pipeline(iid, "", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "slow", Status: job})
					fl.f.SettleMergeability()
					fl.read(b, lifecycle.ReadNow)
					fl.clock.Advance(10 * time.Second)
					b.StartTimer()
					c.change(fl, 0)
					sweeps := 0
					for {
						sweeps++
						fl.clock.Advance(interval)
						if r := fl.read(b, lifecycle.ReadSweep)[0]; !r.Unchanged && c.seen(r) {
							break
						}
						if sweeps == 100 {
							b.Fatal("not seen in 100 sweeps")
						}
					}
					total, most, n = total+sweeps, max(most, sweeps), n+1
				}
				b.ReportMetric(float64(total)/float64(n), "sweeps")
				b.ReportMetric(float64(most), "max-sweeps")
			})
		}
	}
}

// quietSweeps sweeps fl n times, 3 seconds apart, failing b when a sweep
// reads a merge request in full, and adds to requests, sweeps and most
// (the most requests one sweep made).
func quietSweeps(b *testing.B, fl *fleet, n int, requests, sweeps, most *int) {
	b.Helper()
	for range n {
		fl.clock.Advance(3 * time.Second)
		before := fl.f.TotalCalls()
		if c := changed(fl.read(b, lifecycle.ReadSweep)); len(c) != 0 {
			b.Fatalf("%d read in full", len(c))
		}
		got := fl.f.TotalCalls() - before
		*requests, *sweeps, *most = *requests+got, *sweeps+1, max(*most, got)
	}
}
