package gitlab_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// A Deployer restarted after a crash finds the running deployment of the
// merge commit and waits for it (woken by a Deployment Hook, without
// polling), instead of recording another; a failed one is a refusal.
func TestDeployerFindsItsDeploymentAgain(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = clock })
	f.Push("lifecycle/eng-1") // the agent pushed its work
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	req := lifecycle.DeployRequest{Task: task("ENG-1"), OperationID: "shp_1", Environment: lifecycle.EnvironmentProduction, PullRequest: pr.PullRequestRef, CommitSHA: res.MergeCommitSHA}
	newDeployer := func() *gitlab.Deployer {
		d, err := gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: a, PollInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// The first Deployer records the deployment, then "crashes".
	first := newDeployer()
	dctx, stop := context.WithCancel(t.Context())
	go func() { _, _ = first.Deploy(dctx, req) }()
	var id int64
	for deadline := time.Now().Add(5 * time.Second); id == 0 && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		id = f.RunningDeployment("production", res.MergeCommitSHA)
	}
	stop()
	if id == 0 {
		t.Fatal("no deployment recorded")
	}

	second := newDeployer()
	type result struct {
		dep lifecycle.Deployment
		err error
	}
	done := make(chan result, 1)
	go func() {
		dep, err := second.Deploy(t.Context(), req)
		done <- result{dep, err}
	}()
	for deadline := time.Now().Add(5 * time.Second); f.Calls(gitlabtest.RouteListDeployments) < 2; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted Deployer did not look for its deployment")
		}
	}
	// The deploy job fails it; GitLab's hook says so (again, until the
	// Deployer, which never polls in this test, has started waiting).
	f.SetDeployment(id, "failed")
	var r result
	for deadline := time.Now().Add(5 * time.Second); ; {
		second.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: itoa(id), State: "failed"})
		select {
		case r = <-done:
		case <-time.After(10 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("Deploy did not return after the Deployment Hook")
		}
		break
	}
	var refused *lifecycle.RefusedError
	if !errors.As(r.err, &refused) {
		t.Fatalf("Deploy of a failed deployment = %+v, %v; want a RefusedError", r.dep, r.err)
	}
	if n := f.Calls(gitlabtest.RouteCreateDeployment); n != 1 {
		t.Errorf("%d deployments recorded, want 1 (found again after the crash)", n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
