package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of the lifecycle.Deployer of an adapter's host.

var deployTests = []test{
	{name: "DeploysTheMergedCommitOnce", skip: needs("NewDeployer"), fn: testDeploysTheMergedCommitOnce},
	{name: "UnknownCommit", skip: needs("NewDeployer"), fn: testDeployUnknownCommit},
}

// deployTimeout bounds a Deploy, so that a Deployer waiting for a
// deployment nobody finishes fails the test instead of hanging it.
const deployTimeout = 10 * time.Second

// merged opens a pull request and merges it, returning it and its merge
// commit.
func merged(t *testing.T, a lifecycle.ProviderAdapter, n int) (lifecycle.PullRequest, string) {
	t.Helper()
	pr := ensure(t, a, request(n, "sub_a"))
	res, err := mergeAt(t, a, pr, pr.HeadSHA)
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	return pr, res.MergeCommitSHA
}

func deployRequest(pr lifecycle.PullRequest, op string, env lifecycle.Environment, sha string) lifecycle.DeployRequest {
	return lifecycle.DeployRequest{Task: task(pr.Number), OperationID: op, Environment: env, PullRequest: pr.PullRequestRef, CommitSHA: sha}
}

// deploy runs Deploy, with Harness.FinishDeployment beside it when finish
// is set (a deployment the host must complete).
func deploy(t *testing.T, h Harness, a lifecycle.ProviderAdapter, d lifecycle.Deployer, req lifecycle.DeployRequest, finish bool) (lifecycle.Deployment, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deployTimeout)
	defer cancel()
	type result struct {
		dep lifecycle.Deployment
		err error
	}
	done := make(chan result, 1)
	go func() {
		dep, err := d.Deploy(ctx, req)
		done <- result{dep, err}
	}()
	if finish && h.FinishDeployment != nil {
		h.FinishDeployment(t, a, req)
	}
	r := <-done
	if ctx.Err() != nil {
		t.Fatalf("Deploy(%s to %s) did not return within %s; does it wait for a deployment nobody completes?", req.OperationID, req.Environment, deployTimeout)
	}
	return r.dep, r.err
}

func testDeploysTheMergedCommitOnce(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	d := h.NewDeployer(t, a)
	pr, sha := merged(t, a, 1)
	req := deployRequest(pr, "shp_adaptertest0001", lifecycle.EnvironmentStaging, sha)
	dep, err := deploy(t, h, a, d, req, true)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if dep.ID == "" || dep.CommitSHA != sha || dep.Environment != req.Environment || dep.DeployedAt.IsZero() {
		t.Errorf("Deploy = %+v; want an ID, commit %s, environment %s and a time", dep, sha, req.Environment)
	}

	// After a crash the ship runner deploys the same operation again: it
	// gets the deployment made, and nothing is deployed twice (which is
	// why the host is not asked to finish another deployment).
	again, err := deploy(t, h, a, d, req, false)
	if err != nil {
		t.Fatalf("Deploy of the same operation again: %v", err)
	}
	if again.ID != dep.ID || again.CommitSHA != dep.CommitSHA || !again.DeployedAt.Equal(dep.DeployedAt.Time) {
		t.Errorf("Deploy of the same operation again = %+v, want the first deployment %+v", again, dep)
	}

	// Another operation is another deployment, here to production.
	prod, err := deploy(t, h, a, d, deployRequest(pr, "shp_adaptertest0002", lifecycle.EnvironmentProduction, sha), true)
	if err != nil {
		t.Fatalf("Deploy to production: %v", err)
	}
	if prod.ID == dep.ID || prod.Environment != lifecycle.EnvironmentProduction || prod.CommitSHA != sha {
		t.Errorf("Deploy to production = %+v; want a deployment other than %s, of %s to production", prod, dep.ID, sha)
	}
}

func testDeployUnknownCommit(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	d := h.NewDeployer(t, a)
	pr, _ := merged(t, a, 1)
	req := deployRequest(pr, "shp_adaptertest0003", lifecycle.EnvironmentStaging, "0000000000000000000000000000000000000001")
	if dep, err := deploy(t, h, a, d, req, false); err == nil {
		t.Errorf("Deploy of a commit the repository does not have = %+v, want an error", dep)
	}
}
