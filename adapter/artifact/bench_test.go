package artifact_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// BenchmarkEnsurePullRequest measures submissions through the adapter on
// one repository, in b.TempDir() (set TMPDIR to choose the file system).
// Each is a new commit (two blobs, three trees, the commit and a ref
// update) on the open pull request of one of 8 tasks; "parallel" sends
// them from GOMAXPROCS goroutines, which the repository's lock serialises.
func BenchmarkEnsurePullRequest(b *testing.B) {
	setup := func(b *testing.B) (*artifact.Adapter, []lifecycle.PullRequestRequest) {
		a, err := artifact.New(artifact.Config{Dir: b.TempDir(), Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		var reqs []lifecycle.PullRequestRequest
		for i := range 8 {
			req := submission(task("web", fmt.Sprintf("ENG-%d", i+1)), "sub_first")
			if _, err := a.EnsurePullRequest(b.Context(), req); err != nil {
				b.Fatal(err)
			}
			reqs = append(reqs, req)
		}
		return a, reqs
	}
	var seq atomic.Int64
	submit := func(b *testing.B, a *artifact.Adapter, reqs []lifecycle.PullRequestRequest) {
		n := seq.Add(1)
		req := reqs[n%int64(len(reqs))]
		req.SubmissionID = fmt.Sprintf("sub_%d", n)
		if _, err := a.EnsurePullRequest(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("serial", func(b *testing.B) {
		a, reqs := setup(b)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			submit(b, a, reqs)
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "submits/s")
	})
	b.Run("parallel", func(b *testing.B) {
		a, reqs := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				submit(b, a, reqs)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
	})
}
