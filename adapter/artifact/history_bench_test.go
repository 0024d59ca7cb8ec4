package artifact_test

import (
	"context"
	"flag"
	"fmt"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

var historyMerges = flag.Int("artifact.history", 10000, "BenchmarkHistory: the merges in the repository with a long history")

// historySettle is a diagnostic: on ext4 without a journal (this
// machine's file system), creating a file costs more for about 30 seconds
// after many files were removed near it (the inode allocator skips the
// inodes freed in the last dirty_expire_interval), and building the long
// repository just before timing it removes many. Waiting before timing
// separates that from what the history itself costs.
var historySettle = flag.Duration("artifact.settle", 0, "BenchmarkHistory: how long to wait between building the repositories and timing them")

// BenchmarkHistory measures whether the cost of a submission and of a ship
// stays flat as a repository's history grows. It runs the workload of the
// local demos through one Adapter: each step submits a new task (a commit
// on a new branch and a pull request record) and merges the pull request
// opened historyOpen steps earlier, so that, as with several clients, pull
// requests fork from a base that has moved on since. It builds two
// repositories that way, "short" with 100 merges and "long" with
// -artifact.history merges (10,000 by default), then times historySample
// steps in each, alternating between them so that the load of the machine
// weighs on both alike, and reports the median and 90th percentile of the
// submissions and merges of each, and the ratio of their medians (submit
// plus ship, long over short). Run it once: -benchtime 1x.
func BenchmarkHistory(b *testing.B) {
	const (
		historyOpen   = 6
		historySample = 300
		short         = 100
	)
	long := *historyMerges
	if long < short {
		b.Fatalf("-artifact.history %d: want at least %d", long, short)
	}
	for b.Loop() {
		a, err := artifact.New(artifact.Config{Dir: b.TempDir(), Now: time.Now})
		if err != nil {
			b.Fatal(err)
		}
		if c, ok := any(a).(interface{ Close() error }); ok {
			defer c.Close()
		}
		type repo struct {
			project string
			tasks   int
			open    []lifecycle.PullRequest
		}
		// step submits a task and merges the oldest open pull request once
		// historyOpen are open, and returns how long each took.
		step := func(r *repo) (submit, ship time.Duration) {
			r.tasks++
			req := submission(task(r.project, fmt.Sprintf("ENG-%d", r.tasks)), fmt.Sprintf("sub_%d", r.tasks))
			start := time.Now()
			pr, err := a.EnsurePullRequest(b.Context(), req)
			submit = time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			r.open = append(r.open, pr)
			if len(r.open) <= historyOpen {
				return submit, -1
			}
			pr, r.open = r.open[0], r.open[1:]
			start = time.Now()
			_, err = a.Merge(b.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
			ship = time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			return submit, ship
		}
		shortRepo, longRepo := &repo{project: "short"}, &repo{project: "long"}
		for _, r := range []struct {
			repo   *repo
			merges int
		}{{shortRepo, short}, {longRepo, long}} {
			for merges := 0; merges < r.merges; {
				if _, ship := step(r.repo); ship >= 0 {
					merges++
				}
			}
		}
		if *historySettle > 0 {
			b.StopTimer()
			<-time.After(*historySettle)
			b.StartTimer()
		}
		// The timed steps are labelled with their repository in CPU
		// profiles (-cpuprofile; go tool pprof -tagfocus repo=long).
		timed := func(r *repo) (submit, ship time.Duration) {
			pprof.Do(b.Context(), pprof.Labels("repo", r.project), func(context.Context) {
				submit, ship = step(r)
			})
			return submit, ship
		}
		var subS, shipS, subL, shipL []time.Duration
		for range historySample {
			s, m := timed(shortRepo)
			subS, shipS = append(subS, s), append(shipS, m)
			s, m = timed(longRepo)
			subL, shipL = append(subL, s), append(shipL, m)
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		stats := func(ds []time.Duration) (med, p90 float64) {
			s := slices.Clone(ds)
			slices.Sort(s)
			return ms(s[len(s)/2]), ms(s[len(s)*9/10])
		}
		report := func(ds []time.Duration, unit string) float64 {
			med, p90 := stats(ds)
			b.ReportMetric(med, unit)
			b.ReportMetric(p90, "p90-"+unit)
			return med
		}
		s1 := report(subS, "submit-ms@100")
		m1 := report(shipS, "ship-ms@100")
		s2 := report(subL, "submit-ms@N")
		m2 := report(shipL, "ship-ms@N")
		b.ReportMetric((s2+m2)/(s1+m1), "ratio")
	}
}
