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
	// PollInterval is how often the environment's deployments are listed
	// again while waiting for the deployment of the merge commit to
	// finish. A Deployment Hook delivered through [Adapter.WebhookHandler]
	// makes a waiting Deploy list them at once. Defaults to 15 seconds.
	PollInterval time.Duration
}

// Deployer is a [lifecycle.Deployer] on GitLab's deployments. Deploy
// waits for a deployment of the merge commit of req.PullRequest in the
// target environment to finish, and follows whichever GitLab has:
//
//   - A deployment made by a CI job with environment: (GitLab's standard
//     CD: the deploy job of the target branch's pipeline). GitLab creates
//     it with the pipeline of the merge commit, linked to the job, and
//     the job sets its status; it never updates one made through the API.
//     created (a pending or manual job), blocked (waiting for a deployment
//     approval) and running keep Deploy waiting; success is the
//     deployment; failed, canceled and skipped are a
//     [*lifecycle.RefusedError] (retry the job at GitLab, then ship again).
//   - Otherwise one recorded through the Deployments API (status
//     running, on the target branch) for a deploy system that sets its
//     status through that API (PUT /projects/:id/deployments/:id):
//     success, failed or canceled.
//
// Deploy first lists the environment's newest deployments (50). One of
// the merge commit made by a job is followed. Else, in an environment
// whose listed deployments include one made by a job (it is deployed by
// CI jobs), Deploy records nothing and waits for the job's deployment to
// appear; in any other, it records one through the API, or finds the one
// it recorded before a crash (a running or successful one; after a failed
// or canceled one a new ship records a new one). While waiting it lists
// the environment's deployments again every PollInterval, and at once
// when a Deployment Hook reports any deployment (see
// [Deployer.ObserveDeployment]); when a job's deployment of the merge
// commit appears, it follows that one and cancels the one it recorded,
// which nothing would finish. The wait is bounded by ctx, which the
// Service bounds by its deploy timeout.
type Deployer struct {
	a    *Adapter
	poll time.Duration

	mu   sync.Mutex
	wake chan struct{} // closed, and replaced, when a deployment status is observed
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
	return &Deployer{a: cfg.Adapter, poll: cfg.PollInterval, wake: make(chan struct{})}, nil
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
	w := &deployWait{env: d.environment(req.Environment), ref: mr.TargetBranch, sha: want}
	first := true
	for {
		wake := d.wakeUp() // before reading, so that no hook is missed
		list, err := d.list(ctx, s, w.env)
		if err != nil {
			return lifecycle.Deployment{}, err
		}
		w.see(list)
		if first && w.job == nil && w.own == nil && !w.byJobs {
			// Sent once: a lost answer is found again by the next Deploy.
			own, resp, err := d.a.client.Deployments.CreateProjectDeployment(s.id, &gl.CreateProjectDeploymentOptions{
				Environment: &w.env, Ref: &w.ref, SHA: &want, Tag: gl.Ptr(false), Status: gl.Ptr(gl.DeploymentStatusRunning),
			}, gl.WithContext(ctx))
			if err != nil {
				return lifecycle.Deployment{}, d.a.fail(ctx, "record a deployment to "+w.env, resp, err)
			}
			w.own, w.listed[own.ID] = own, true
			d.a.log.InfoContext(ctx, "GitLab deployment recorded; waiting for the deploy system to finish it", "deployment", own.ID, "environment", w.env, "commit", want, "operation", req.OperationID)
		}
		if first && w.job == nil && w.own == nil {
			d.a.log.InfoContext(ctx, "GitLab environment deployed by CI jobs; waiting for the deploy job's deployment of the merge commit", "environment", w.env, "commit", want, "operation", req.OperationID)
		}
		first = false
		if w.job != nil && w.own != nil && w.own.Status == "running" && !w.canceled {
			d.cancel(ctx, s, w)
		}
		if dep := w.following(); dep != nil && !w.listed[dep.ID] {
			// Past the newest 50 of a busy environment: read it.
			again, resp, err := d.a.client.Deployments.GetProjectDeployment(s.id, dep.ID, gl.WithContext(ctx))
			if err != nil {
				return lifecycle.Deployment{}, d.a.fail(ctx, fmt.Sprintf("read deployment %d", dep.ID), resp, err)
			}
			w.update(again)
		}
		if dep := w.following(); dep != nil {
			switch dep.Status {
			case "success":
				return d.deployed(req, dep), nil
			case "failed", "canceled", "skipped":
				by := "recorded through the API"
				if dep.Deployable.ID != 0 {
					by = fmt.Sprintf("of job %s (%d)", dep.Deployable.Name, dep.Deployable.ID)
				}
				return lifecycle.Deployment{}, &lifecycle.RefusedError{Message: fmt.Sprintf("GitLab deployment %d %s of %s to %s %s.", dep.ID, by, want, w.env, dep.Status)}
			}
		}
		select {
		case <-ctx.Done():
			return lifecycle.Deployment{}, fmt.Errorf("gitlab: %s: %w", w.waitingFor(), ctx.Err())
		case <-wake:
		case <-d.a.clock.After(d.poll):
		}
	}
}

// deployWait is what a Deploy knows of the deployments of its commit.
type deployWait struct {
	env, ref, sha string
	// job is the newest deployment of sha made by a CI job, if any.
	job *gl.Deployment
	// own is the deployment recorded through the API, if any, and
	// canceled whether Deploy canceled it (or tried to).
	own      *gl.Deployment
	canceled bool
	// byJobs says the environment is deployed by CI jobs: a listed
	// deployment was made by one.
	byJobs bool
	// listed are the IDs of the last list.
	listed map[int64]bool
}

// see takes in a list of the environment's deployments, newest first.
func (w *deployWait) see(list []*gl.Deployment) {
	w.listed = make(map[int64]bool, len(list))
	var before *gl.Deployment // the newest recorded through the API, before a crash
	for _, dep := range list {
		w.listed[dep.ID] = true
		byJob := dep.Deployable.ID != 0
		w.byJobs = w.byJobs || byJob
		switch {
		case !strings.EqualFold(dep.SHA, w.sha):
		case byJob || (w.own != nil && dep.ID == w.own.ID):
			w.update(dep)
		case w.own == nil && before == nil && dep.Ref == w.ref:
			before = dep
		}
	}
	if w.own == nil && before != nil && before.Status != "failed" && before.Status != "canceled" {
		w.own = before
	}
}

// update takes in a newer reading of a deployment of the commit.
func (w *deployWait) update(dep *gl.Deployment) {
	switch {
	case dep.Deployable.ID != 0:
		if w.job == nil || dep.ID >= w.job.ID {
			w.job = dep
		}
	case w.own != nil && dep.ID == w.own.ID:
		w.own = dep
	}
}

// following returns the deployment Deploy follows: the job's, else its
// own, else nil.
func (w *deployWait) following() *gl.Deployment {
	if w.job != nil {
		return w.job
	}
	return w.own
}

// waitingFor says what a Deploy is waiting for.
func (w *deployWait) waitingFor() string {
	if dep := w.following(); dep != nil {
		return fmt.Sprintf("deployment %d of %s to %s is still %s", dep.ID, w.sha, w.env, dep.Status)
	}
	return fmt.Sprintf("no deploy job made a deployment of %s to %s", w.sha, w.env)
}

// list returns the newest deployments of env, newest first.
func (d *Deployer) list(ctx context.Context, s *settings, env string) ([]*gl.Deployment, error) {
	list, resp, err := d.a.client.Deployments.ListProjectDeployments(s.id, &gl.ListProjectDeploymentsOptions{
		Environment: &env, OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc"), ListOptions: gl.ListOptions{PerPage: 50},
	}, gl.WithContext(ctx))
	if err != nil {
		return nil, d.a.fail(ctx, "list the deployments to "+env, resp, err)
	}
	return list, nil
}

// cancel cancels the deployment Deploy recorded, now that a job's
// deployment of the commit is followed: nothing would finish it, and
// GitLab would show it running for ever. A failure is logged only.
func (d *Deployer) cancel(ctx context.Context, s *settings, w *deployWait) {
	dep, resp, err := d.a.client.Deployments.UpdateProjectDeployment(s.id, w.own.ID, &gl.UpdateProjectDeploymentOptions{Status: gl.Ptr(gl.DeploymentStatusCanceled)}, gl.WithContext(ctx))
	w.canceled = true // tried once
	if err != nil {
		d.a.log.WarnContext(ctx, "GitLab deployment recorded through the API not canceled; the deploy job's deployment is followed", "deployment", w.own.ID, "job_deployment", w.job.ID, "err", d.a.fail(ctx, "cancel a deployment", resp, err))
		return
	}
	w.own = dep
	d.a.log.InfoContext(ctx, "GitLab deployment recorded through the API canceled: the deploy job's deployment is followed", "deployment", w.own.ID, "job_deployment", w.job.ID)
}

// deployed reports a successful deployment.
func (d *Deployer) deployed(req lifecycle.DeployRequest, dep *gl.Deployment) lifecycle.Deployment {
	out := lifecycle.Deployment{ID: strconv.FormatInt(dep.ID, 10), Environment: req.Environment, CommitSHA: strings.ToLower(dep.SHA)}
	if dep.Environment != nil {
		out.URL = dep.Environment.ExternalURL
	}
	switch {
	case dep.Deployable.FinishedAt != nil:
		out.DeployedAt = lifecycle.NewTimestamp(*dep.Deployable.FinishedAt)
	case dep.UpdatedAt != nil:
		out.DeployedAt = lifecycle.NewTimestamp(*dep.UpdatedAt)
	case dep.CreatedAt != nil:
		out.DeployedAt = lifecycle.NewTimestamp(*dep.CreatedAt)
	default:
		out.DeployedAt = lifecycle.NewTimestamp(d.a.clock.Now())
	}
	return out
}

// wakeUp returns the channel closed when a deployment status is next
// observed.
func (d *Deployer) wakeUp() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.wake
}

// ObserveDeployment implements [lifecycle.DeploymentObserver]: a
// Deployment Hook makes every waiting Deploy list its environment's
// deployments at once (the hook may be of a deploy job's deployment
// that a Deploy has not seen yet).
func (d *Deployer) ObserveDeployment(context.Context, lifecycle.DeploymentStatus) {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.wake)
	d.wake = make(chan struct{})
}
