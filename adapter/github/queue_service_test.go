package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// requireBuildStrict is requireBuild with branches required up to date.
var requireBuildStrict = strings.Replace(requireBuild, `"strict_required_status_checks_policy":false`, `"strict_required_status_checks_policy":true`, 1)

// Six agents ship at once into a base that requires branches up to date,
// with a CI of two seconds, through the lifecycle's own merge queue: all
// land without a rework; the base ends
// at a tested candidate; no pull request is merged through the merge
// endpoint, so no landed tree is an untested one.
func TestShipThroughBuiltInQueue(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	e := newEnv(t, clock, func(c *lifecycle.Config) {
		c.ShipLease = time.Hour
		c.MergeQueue = lifecycle.MergeQueueConfig{Enabled: true, PollInterval: time.Second}
	})
	e.f.SetRulesJSON("main", requireBuildStrict)
	ctx := context.Background()
	var ops []lifecycle.ShipOperation
	for range 6 {
		task, sub := e.submitted(t)
		e.shippable(t, task, sub)
		op, err := e.svc.Ship(ctx, task.ID, lifecycle.ShipParams{Mode: lifecycle.ShipMergeOnly, TargetEnvironment: lifecycle.EnvironmentStaging,
			ExpectedHeadSHA: *sub.HeadSHA, Actor: lifecycle.Actor{ID: "user", Role: lifecycle.RoleUser}})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	const ci = 2 * time.Second
	start := clock.Now()
	testing := map[string]time.Time{} // candidate commit → when its CI began
	passed := map[string]bool{}
	waitUntil(t, 60*time.Second, "the ship operations to finish", func() bool {
		qs, err := e.svc.MergeQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			for _, c := range q.Candidates {
				if c.State != "testing" || passed[c.SHA] {
					continue
				}
				if _, ok := testing[c.SHA]; !ok {
					testing[c.SHA] = clock.Now()
				}
				if clock.Now().Sub(testing[c.SHA]) >= ci {
					e.f.CheckRun(c.SHA, "build", "success")
					passed[c.SHA] = true
				}
			}
		}
		finished := 0
		for i := range ops {
			if ops[i], err = e.svc.ShipOperation(ctx, ops[i].OperationID); err != nil {
				t.Fatal(err)
			}
			if ops[i].Status == lifecycle.ShipSucceeded || ops[i].Status == lifecycle.ShipFailed {
				finished++
			}
		}
		if finished == len(ops) {
			return true
		}
		clock.Advance(500 * time.Millisecond)
		return false
	})
	took := clock.Now().Sub(start)
	main, _ := e.f.Branch("main")
	for i, op := range ops {
		if op.Status != lifecycle.ShipSucceeded || op.MergeCommitSHA == nil || !passed[*op.MergeCommitSHA] {
			t.Errorf("ship %d = %s %+v (merged as %v), want succeeded at a tested candidate", i, op.Status, op.Error, op.MergeCommitSHA)
		}
	}
	if !passed[main] {
		t.Errorf("main is at %s, which is not a tested candidate", main)
	}
	if n := e.f.Calls(githubtest.RouteMerge); n != 0 {
		t.Errorf("%d merges through the merge endpoint, want none: the queue lands tested candidates", n)
	}
	t.Logf("six changes landed in %s of fake time with a %s CI; %d candidates tested", took, ci, len(passed))
}

// The GitHub adapter passes the QueueHost conformance suite against the
// fake, whose heads are pushed as a person pushes a branch.
func TestQueueHostConformance(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		fakes = map[lifecycle.QueueHost]*fakeGitHub{}
		n     int
	)
	adaptertest.RunQueueHost(t, adaptertest.QueueHostHarness{
		New: func(t *testing.T) (lifecycle.QueueHost, lifecycle.RepoRef, string) {
			f := newFakeGitHub(t)
			a := f.adapter(t, Config{})
			mu.Lock()
			fakes[a] = f
			mu.Unlock()
			return a, lifecycle.RepoRef{Owner: githubtest.Owner, Repo: githubtest.Repo}, "main"
		},
		Commit: func(t *testing.T, h lifecycle.QueueHost, _ lifecycle.RepoRef, parent string, files map[string]string) string {
			mu.Lock()
			f := fakes[h]
			n++
			branch := fmt.Sprintf("conformance/%d", n)
			mu.Unlock()
			return f.PushFiles(branch, parent, files)
		},
	})
}
