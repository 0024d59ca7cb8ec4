package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// DeployerConfig configures a [Deployer].
type DeployerConfig struct {
	// Adapter is the project's adapter, whose client, project and Clock
	// the Deployer uses. Required.
	Adapter *Adapter
	// PollInterval is how often a deployment's status is read while
	// waiting for it to finish. A Deployment Hook delivered through
	// [Adapter.WebhookHandler] ends the wait at once. Defaults to 15
	// seconds.
	PollInterval time.Duration
}

// Deployer is a [lifecycle.Deployer] on GitLab's Deployments API. Deploy
// records a deployment of the merge commit in the target environment
// (status running, on the merge request's target branch) and waits until
// the team's deploy job sets a terminal status: success, failed or
// canceled. It reads the status every PollInterval, and at once when a
// Deployment Hook reports it (see [Deployer.ObserveDeployment]); the wait
// is bounded by ctx, which the Service bounds by its deploy timeout.
//
// After a crash, Deploy finds the deployment of the commit in the
// environment again, instead of recording another: a running one is
// waited for, a successful one returned. Only after a failed or canceled
// one does a new ship record a new deployment.
type Deployer struct {
	a    *Adapter
	poll time.Duration

	mu   sync.Mutex
	wake map[int64]chan struct{}
}

var (
	_ lifecycle.Deployer           = (*Deployer)(nil)
	_ lifecycle.DeploymentObserver = (*Deployer)(nil)
)

// NewDeployer returns a Deployer for cfg.Adapter's project.
func NewDeployer(cfg DeployerConfig) (*Deployer, error) {
	if cfg.Adapter == nil {
		return nil, errors.New("gitlab: DeployerConfig.Adapter is required: give the project's *gitlab.Adapter")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 15 * time.Second
	}
	return &Deployer{a: cfg.Adapter, poll: cfg.PollInterval, wake: map[int64]chan struct{}{}}, nil
}

// environment returns the GitLab environment of a lifecycle environment.
func (d *Deployer) environment(env lifecycle.Environment) string {
	if name := d.a.cfg.Environments[env]; name != "" {
		return name
	}
	return string(env)
}

// Deploy implements [lifecycle.Deployer]. It refuses a commit that is not
// the merge commit of req.PullRequest.
func (d *Deployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	s, mr, err := d.a.read(ctx, req.PullRequest)
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	want := strings.ToLower(req.CommitSHA)
	if mr.State != "merged" || mergeCommit(&mr.BasicMergeRequest) != want {
		return lifecycle.Deployment{}, &lifecycle.RefusedError{Message: fmt.Sprintf("Commit %s is not the merge commit of merge request !%d; nothing was deployed.", want, mr.IID)}
	}
	env := d.environment(req.Environment)
	dep, err := d.find(ctx, s, env, mr.TargetBranch, want)
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	if dep == nil {
		var resp *gl.Response
		// Sent once: a lost answer is found again by the next Deploy.
		dep, resp, err = d.a.client.Deployments.CreateProjectDeployment(s.id, &gl.CreateProjectDeploymentOptions{
			Environment: &env, Ref: &mr.TargetBranch, SHA: &want, Tag: gl.Ptr(false), Status: gl.Ptr(gl.DeploymentStatusRunning),
		}, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.Deployment{}, d.a.fail(ctx, "record a deployment to "+env, resp, err)
		}
		d.a.log.InfoContext(ctx, "GitLab deployment recorded; waiting for the deploy job to finish it", "deployment", dep.ID, "environment", env, "commit", want, "operation", req.OperationID)
	}
	return d.wait(ctx, s, req, dep)
}

// find returns the newest deployment of sha from ref in env that is under
// way or succeeded, or nil.
func (d *Deployer) find(ctx context.Context, s *settings, env, ref, sha string) (*gl.Deployment, error) {
	list, resp, err := d.a.client.Deployments.ListProjectDeployments(s.id, &gl.ListProjectDeploymentsOptions{
		Environment: &env, OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc"), ListOptions: gl.ListOptions{PerPage: 50},
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, d.a.fail(ctx, "list the deployments to "+env, resp, err)
	}
	for _, dep := range list {
		if !strings.EqualFold(dep.SHA, sha) || dep.Ref != ref {
			continue
		}
		switch dep.Status {
		case "failed", "canceled":
			return nil, nil // a new ship deploys again
		}
		return dep, nil
	}
	return nil, nil
}

// wait waits for dep to reach a terminal status.
func (d *Deployer) wait(ctx context.Context, s *settings, req lifecycle.DeployRequest, dep *gl.Deployment) (lifecycle.Deployment, error) {
	defer d.forget(dep.ID)
	for {
		switch dep.Status {
		case "success":
			out := lifecycle.Deployment{ID: strconv.FormatInt(dep.ID, 10), Environment: req.Environment, CommitSHA: strings.ToLower(dep.SHA)}
			if dep.Environment != nil {
				out.URL = dep.Environment.ExternalURL
			}
			switch {
			case dep.UpdatedAt != nil:
				out.DeployedAt = lifecycle.NewTimestamp(*dep.UpdatedAt)
			case dep.CreatedAt != nil:
				out.DeployedAt = lifecycle.NewTimestamp(*dep.CreatedAt)
			default:
				out.DeployedAt = lifecycle.NewTimestamp(d.a.clock.Now())
			}
			return out, nil
		case "failed", "canceled":
			return lifecycle.Deployment{}, &lifecycle.RefusedError{Message: fmt.Sprintf("GitLab deployment %d of %s to %s %s.", dep.ID, req.CommitSHA, d.environment(req.Environment), dep.Status)}
		}
		wake := d.wakeOf(dep.ID)
		select {
		case <-ctx.Done():
			return lifecycle.Deployment{}, fmt.Errorf("gitlab: deployment %d is still %s: %w", dep.ID, dep.Status, ctx.Err())
		case <-wake:
		case <-d.a.clock.After(d.poll):
		}
		next, resp, err := d.a.client.Deployments.GetProjectDeployment(s.id, dep.ID, gl.WithContext(ctx))
		if err != nil {
			return lifecycle.Deployment{}, d.a.fail(ctx, fmt.Sprintf("read deployment %d", dep.ID), resp, err)
		}
		dep = next
	}
}

// wakeOf returns the channel closed when a status of deployment id is
// observed.
func (d *Deployer) wakeOf(id int64) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.wake[id]
	if !ok {
		ch = make(chan struct{})
		d.wake[id] = ch
	}
	return ch
}

// forget drops the wake-up channel of deployment id.
func (d *Deployer) forget(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.wake, id)
}

// ObserveDeployment implements [lifecycle.DeploymentObserver]: a
// Deployment Hook makes a Deploy waiting for that deployment read it at
// once.
func (d *Deployer) ObserveDeployment(_ context.Context, st lifecycle.DeploymentStatus) {
	id, err := strconv.ParseInt(st.ID, 10, 64)
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.wake[id]; ok {
		close(ch)
		delete(d.wake, id)
	}
}
