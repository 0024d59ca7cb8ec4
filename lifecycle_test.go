package lifecycle_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  lifecycle.Config
		want string
	}{
		{"no store", lifecycle.Config{BaseURL: testBase}, "Config.Store is required"},
		{"no base URL", lifecycle.Config{Store: e.store}, "Config.BaseURL"},
		{"relative base URL", lifecycle.Config{Store: e.store, BaseURL: "/api"}, "Config.BaseURL"},
		{"agent without ID", lifecycle.Config{Store: e.store, BaseURL: testBase, Agents: []lifecycle.Agent{{Name: "x"}}}, "Config.Agents[0]"},
	}
	for _, tt := range tests {
		_, err := lifecycle.New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestBaseURLTrailingSlash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.BaseURL = testBase + "/" })
	rec := e.do(request{method: "POST", path: "/tasks", key: e.admin, body: taskBody("ENG-1")})
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, testBase+"/tasks/tsk_") {
		t.Errorf("Location = %q, want %s/tasks/tsk_...", loc, testBase)
	}
}

func TestPruneDeletesEventsPastRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) {
		c.EventRetention = 72 * time.Hour
		c.PruneInterval = time.Hour
	})
	id := e.createTask(taskBody("ENG-1"))["id"].(string)
	e.clock.Advance(71 * time.Hour)
	e.call(request{method: "POST", path: "/tasks/" + id + "/start", key: e.admin}, http.StatusOK)
	if err := e.svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.svc.Close(context.Background()) })
	if n := len(e.events()); n != 2 {
		t.Fatalf("%d events at 71 hours, want 2", n)
	}
	e.clock.Advance(2 * time.Hour) // creation is 73 hours old, the start 2
	// Step the clock until the prune loop, wherever it sleeps, has run.
	waitFor(t, func() bool {
		e.clock.Advance(time.Minute)
		return len(e.events()) == 1
	})
	if got := e.events()[0].TaskVersion; got != 2 {
		t.Errorf("kept the event of version %d, want the start (2)", got)
	}
}

func TestStartCloseLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Start(t.Context()); err == nil {
		t.Error("a second Start succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.svc.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.svc.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := e.svc.Start(t.Context()); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestTwoServicesInOneProcess(t *testing.T) {
	t.Parallel()
	a, b := newEnv(t), newEnv(t)
	a.createTask(taskBody("ENG-1"))
	list := b.call(request{method: "GET", path: "/tasks", key: b.admin}, http.StatusOK)
	if n := len(list["data"].([]any)); n != 0 {
		t.Errorf("the second Service sees %d tasks of the first", n)
	}
	a.call(request{method: "GET", path: "/tasks", key: b.admin}, http.StatusUnauthorized)
}

// waitFor polls cond for up to five seconds of real time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 5*time.Second, "the condition", cond)
}
