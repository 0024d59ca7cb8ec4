package gitlab_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab"
	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
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
	waitUntil(t, 5*time.Second, "a deployment recorded", func() bool {
		id = f.RunningDeployment("production", res.MergeCommitSHA)
		return id != 0
	})
	stop()

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
	waitUntil(t, 5*time.Second, "the restarted Deployer to look for its deployment", func() bool {
		return f.Calls(gitlabtest.RouteListDeployments) >= 2
	})
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

// deployStart merges a merge request at a fake and starts a Deploy of its
// merge commit to staging, which polls only when the test's clock says
// (it never does here): Deployment Hooks wake it.
func deployStart(t *testing.T, f *gitlabtest.Server) (*gitlab.Deployer, string, <-chan deployResult) {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	a := newAdapter(t, f, func(c *gitlab.Config) { c.Clock = clock })
	f.Push("lifecycle/eng-1")
	pr := ensure(t, a, lifecycle.PullRequestRequest{Task: task("ENG-1")})
	res, err := a.Merge(t.Context(), lifecycle.MergeRequest{Ref: pr.PullRequestRef, ExpectedHeadSHA: pr.HeadSHA})
	if err != nil {
		t.Fatal(err)
	}
	d, err := gitlab.NewDeployer(gitlab.DeployerConfig{Adapter: a, PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	done := make(chan deployResult, 1)
	go func() {
		dep, err := d.Deploy(ctx, lifecycle.DeployRequest{Task: task("ENG-1"), OperationID: "shp_1", Environment: lifecycle.EnvironmentStaging,
			PullRequest: pr.PullRequestRef, CommitSHA: res.MergeCommitSHA})
		done <- deployResult{dep, err}
	}()
	return d, res.MergeCommitSHA, done
}

type deployResult struct {
	dep lifecycle.Deployment
	err error
}

// lists waits until the fake has answered more than n lists of
// deployments, and returns how many it has.
func lists(t *testing.T, f *gitlabtest.Server, n int) int {
	t.Helper()
	waitUntil(t, 5*time.Second, fmt.Sprintf("the Deployer to look at the deployments again (%d lists)", n), func() bool {
		return f.Calls(gitlabtest.RouteListDeployments) > n
	})
	return f.Calls(gitlabtest.RouteListDeployments)
}

// waitUntil polls cond until it holds, failing t with what after timeout.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, cond)
}

// An environment deployed by a CI job (environment: in .gitlab-ci.yml):
// the job makes its own deployment, linked to it, when the pipeline of the
// merge commit is created, and never updates one made through the API.
// The Deployer records none; it waits for the job's deployment of the
// merge commit to appear and follows it: created (a pending or manual
// job), blocked (waiting for approval) and running keep it waiting;
// success is deployed, failed and canceled a refusal.
func TestDeployFollowsTheDeployJobsDeployment(t *testing.T) {
	t.Parallel()
	for _, final := range []string{"success", "failed", "canceled"} {
		t.Run(final, func(t *testing.T) {
			t.Parallel()
			f := gitlabtest.NewServer(t, gitlabtest.Options{})
			f.JobDeployment("staging", gitlabtest.NewSHA(), "main", "success") // the job deployed an earlier commit
			d, commit, done := deployStart(t, f)
			n := lists(t, f, 0)
			id := f.JobDeployment("staging", commit, "main", "created")
			for _, st := range []string{"created", "blocked", "running", final} {
				f.SetDeployment(id, st)
				d.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: itoa(id), State: st})
				if st != final {
					n = lists(t, f, n)
				}
			}
			r := testenv.Receive(t, 5*time.Second, done, "Deploy to return")
			var refused *lifecycle.RefusedError
			switch {
			case final == "success" && (r.err != nil || r.dep.ID != itoa(id) || r.dep.CommitSHA != commit || r.dep.URL != "https://staging.example.com"):
				t.Errorf("Deploy = %+v, %v; want deployment %d of %s", r.dep, r.err, id, commit)
			case final != "success" && (!errors.As(r.err, &refused) || !strings.Contains(refused.Message, final)):
				t.Errorf("Deploy = %+v, %v; want a RefusedError saying it %s", r.dep, r.err, final)
			}
			if n := f.Calls(gitlabtest.RouteCreateDeployment); n != 0 {
				t.Errorf("%d deployments recorded through the API, want none: the job makes its own", n)
			}
		})
	}
}

// An environment that no job has deployed yet: the Deployer records a
// deployment through the API (for a deploy system that finishes it
// there), and when the first deploy job's deployment of the merge commit
// appears, follows that one and cancels its own, which nothing would
// finish.
func TestDeployFollowsAJobDeploymentThatAppears(t *testing.T) {
	t.Parallel()
	f := gitlabtest.NewServer(t, gitlabtest.Options{})
	d, commit, done := deployStart(t, f)
	var own int64
	waitUntil(t, 5*time.Second, "a deployment recorded through the API", func() bool {
		own = f.RunningDeployment("staging", commit)
		return own != 0
	})
	n := f.Calls(gitlabtest.RouteListDeployments)
	job := f.JobDeployment("staging", commit, "main", "running")
	d.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: itoa(job), State: "running"})
	lists(t, f, n)
	waitUntil(t, 5*time.Second, "the deployment recorded through the API to be canceled once the job's appeared", func() bool {
		st, _ := f.Deployment(own)
		return st == "canceled"
	})
	f.SetDeployment(job, "success")
	d.ObserveDeployment(t.Context(), lifecycle.DeploymentStatus{ID: itoa(job), State: "success"})
	if r := testenv.Receive(t, 5*time.Second, done, "Deploy to return"); r.err != nil || r.dep.ID != itoa(job) {
		t.Errorf("Deploy = %+v, %v; want the job's deployment %d", r.dep, r.err, job)
	}
}
