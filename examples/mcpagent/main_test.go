package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/mcp"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// The agent works a task from todo to done against a server set up as
// the demo is (the artifact adapter on local repositories, an approval
// needed before shipping), its API and /mcp on a loopback listener.
func TestAgentShipsATask(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	dir := t.TempDir()
	repos, err := artifact.New(artifact.Config{Dir: dir + "/repos"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repos.Close() }) // its packers stop before dir goes
	deployer, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: repos, Dir: dir + "/deploy"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: srv.URL, Logger: slog.New(slog.DiscardHandler),
		Adapters: []lifecycle.AdapterBinding{{Adapter: repos}}, ArtifactAdapter: repos, Deployer: deployer,
		ReviewRouter: lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	_, admin, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "admin", Actor: lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser},
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeTasksAdmin, lifecycle.ScopeShipWrite,
			lifecycle.ScopeReviewsWrite, lifecycle.ScopeCIWrite, lifecycle.ScopeEventsRead, lifecycle.ScopeKeysAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcp.NewHandler(svc, mcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", svc.Handler())
	mux.Handle("/mcp", h)

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := run(ctx, srv.URL, admin, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"start_task", "submit_work", "event task.reviewed", "ship ", "event task.shipped", "is done: merged as"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, out.String())
		}
	}
}
