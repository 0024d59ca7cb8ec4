package github

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
)

// deployPayload is the payload of the deployments the Adapter creates: it
// names the ship operation, so that a deployment is found again after a
// crash instead of being created twice.
type deployPayload struct {
	OperationID string `json:"operation_id"`
	Task        string `json:"task,omitempty"`
}

// Deploy creates a GitHub deployment of req.CommitSHA in req.Environment
// (auto_merge false, required_contexts empty, the operation ID in its
// payload) for the team's deploy system to act on, then waits for a
// terminal deployment status: success is a Deployment with the status's
// environment URL, failure or error a *lifecycle.RefusedError. A
// deployment of the same commit, environment and operation made before
// (by a process that crashed) is found and waited for instead of creating
// a second. It reads the statuses every Config.DeployPollInterval, and at
// once when ObserveDeployment hears of the deployment, but not before the
// first wait for a deployment it created, which has none yet; it waits
// until ctx ends (the Service's DeployTimeout).
func (a *Adapter) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	env := string(req.Environment)
	dep, err := a.findDeployment(ctx, req.CommitSHA, env, req.OperationID)
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	created := dep == nil
	if created {
		dep, _, err = a.client.Repositories.CreateDeployment(ctx, a.cfg.Owner, a.cfg.Repo, &gh.DeploymentRequest{
			Ref:                   gh.String(req.CommitSHA),
			Task:                  gh.String("deploy"),
			AutoMerge:             gh.Bool(false),
			RequiredContexts:      &[]string{},
			Payload:               deployPayload{OperationID: req.OperationID, Task: req.Task.Identifier},
			Environment:           gh.String(env),
			Description:           gh.String(fmt.Sprintf("%s: %s", req.Task.Identifier, req.Task.Title)),
			ProductionEnvironment: gh.Bool(req.Environment == lifecycle.EnvironmentProduction),
		})
		if err != nil {
			return lifecycle.Deployment{}, wrap(err, "create a deployment of %s in %s", req.CommitSHA, env)
		}
		a.log.InfoContext(ctx, "deployment created", "deployment", dep.GetID(), "sha", req.CommitSHA, "environment", env, "operation", req.OperationID)
	}
	id := strconv.FormatInt(dep.GetID(), 10)
	wake := a.watch(id)
	defer a.unwatch(id, wake)
	// A deployment this call created has no status yet: wait first. A
	// status observed before the wait began wakes it at once (see watch).
	for first := true; ; first = false {
		if !first || !created {
			st, done, err := a.deploymentState(ctx, dep.GetID())
			if err != nil {
				return lifecycle.Deployment{}, err
			}
			if done {
				return a.deployed(st, id, req)
			}
		}
		select {
		case <-ctx.Done():
			return lifecycle.Deployment{}, fmt.Errorf("github: wait for deployment %s: %w", id, ctx.Err())
		case <-wake:
		case <-a.cfg.Clock.After(a.cfg.DeployPollInterval):
		}
	}
}

// deployed returns the outcome of deployment id, whose terminal status is
// st.
func (a *Adapter) deployed(st *gh.DeploymentStatus, id string, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	if st.GetState() == "success" {
		return lifecycle.Deployment{ID: id, Environment: req.Environment, CommitSHA: req.CommitSHA, URL: st.GetEnvironmentURL(),
			DeployedAt: lifecycle.NewTimestamp(st.GetCreatedAt().Time)}, nil
	}
	msg := fmt.Sprintf("Deployment %s to %s ended %s", id, req.Environment, st.GetState())
	if d := st.GetDescription(); d != "" {
		msg += ": " + d
	}
	return lifecycle.Deployment{}, &lifecycle.RefusedError{Message: msg}
}

// findDeployment returns the deployment of sha in env made for operation,
// or nil.
func (a *Adapter) findDeployment(ctx context.Context, sha, env, operation string) (*gh.Deployment, error) {
	opts := &gh.DeploymentsListOptions{SHA: sha, Environment: env, ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		deps, resp, err := a.client.Repositories.ListDeployments(ctx, a.cfg.Owner, a.cfg.Repo, opts)
		if err != nil {
			return nil, wrap(err, "list deployments of %s in %s", sha, env)
		}
		for _, d := range deps {
			var p deployPayload
			if len(d.Payload) > 0 && json.Unmarshal(d.Payload, &p) == nil && p.OperationID == operation {
				return d, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// deploymentState returns the terminal status of a deployment and true,
// or false while it has none. GitHub lists statuses newest first, and the
// newest decides: a deploy system that retries after a failure posts
// in_progress again, and the deployment is not over. Only "inactive" is
// looked past: GitHub marks a deployment inactive when a later one to the
// same environment succeeds, so it had succeeded first.
func (a *Adapter) deploymentState(ctx context.Context, id int64) (*gh.DeploymentStatus, bool, error) {
	opts := &gh.ListOptions{PerPage: 100}
	for {
		sts, resp, err := a.client.Repositories.ListDeploymentStatuses(ctx, a.cfg.Owner, a.cfg.Repo, id, opts)
		if err != nil {
			return nil, false, wrap(err, "list the statuses of deployment %d", id)
		}
		for _, st := range sts {
			switch st.GetState() {
			case "inactive":
				continue
			case "success", "failure", "error":
				return st, true, nil
			}
			return nil, false, nil // queued, pending, in_progress
		}
		if resp.NextPage == 0 {
			return nil, false, nil
		}
		opts.Page = resp.NextPage
	}
}

// maxEarly bounds the deployments observed while no Deploy waited for
// them that the Adapter remembers.
const maxEarly = 1024

// ObserveDeployment wakes the Deploy waiting for the deployment st names,
// which then reads its statuses. A status of a deployment nobody waits for
// yet (posted between its creation and the wait) is remembered, so that
// the wait, once it begins, reads at once.
func (a *Adapter) ObserveDeployment(_ context.Context, st lifecycle.DeploymentStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiters[st.ID]) == 0 {
		if len(a.early) >= maxEarly {
			clear(a.early) // statuses of deployments of others, mostly
		}
		a.early[st.ID] = struct{}{}
		return
	}
	for ch := range a.waiters[st.ID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch returns the channel ObserveDeployment wakes for deployment id,
// already woken if a status of it was observed before.
func (a *Adapter) watch(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.early[id]; ok {
		delete(a.early, id)
		ch <- struct{}{}
	}
	if a.waiters[id] == nil {
		a.waiters[id] = map[chan struct{}]struct{}{}
	}
	a.waiters[id][ch] = struct{}{}
	return ch
}

func (a *Adapter) unwatch(id string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiters[id], ch)
	if len(a.waiters[id]) == 0 {
		delete(a.waiters, id)
	}
}
