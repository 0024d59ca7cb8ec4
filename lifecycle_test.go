package lifecycle_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  lifecycle.Config
		want string
	}{
		{"no store", lifecycle.Config{BaseURL: apitest.BaseURL}, "Config.Store is required"},
		{"no base URL", lifecycle.Config{Store: e.Store}, "Config.BaseURL"},
		{"relative base URL", lifecycle.Config{Store: e.Store, BaseURL: "/api"}, "Config.BaseURL"},
		{"agent without ID", lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Agents: []lifecycle.Agent{{Name: "x"}}}, "Config.Agents[0]"},
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
	e := newEnv(t, func(c *lifecycle.Config) { c.BaseURL = apitest.BaseURL + "/" })
	rec := e.Do(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")})
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, apitest.BaseURL+"/tasks/tsk_") {
		t.Errorf("Location = %q, want %s/tasks/tsk_...", loc, apitest.BaseURL)
	}
}

func TestPruneDeletesEventsPastRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) {
		c.EventRetention = 72 * time.Hour
		c.PruneInterval = time.Hour
	})
	id := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	e.Clock.Advance(71 * time.Hour)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Svc.Close(context.Background()) })
	if n := len(e.Events()); n != 2 {
		t.Fatalf("%d events at 71 hours, want 2", n)
	}
	e.Clock.Advance(2 * time.Hour) // creation is 73 hours old, the start 2
	// Step the clock until the prune loop, wherever it sleeps, has run.
	apitest.WaitFor(t, func() bool {
		e.Clock.Advance(time.Minute)
		return len(e.Events()) == 1
	})
	if got := e.Events()[0].TaskVersion; got != 2 {
		t.Errorf("kept the event of version %d, want the start (2)", got)
	}
}

func TestStartCloseLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.Start(t.Context()); err == nil {
		t.Error("a second Start succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Svc.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Svc.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := e.Svc.Start(t.Context()); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestTwoServicesInOneProcess(t *testing.T) {
	t.Parallel()
	a, b := newEnv(t), newEnv(t)
	a.CreateTask(apitest.TaskBody("ENG-1"))
	list := b.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: b.Admin}, http.StatusOK)
	if n := len(list["data"].([]any)); n != 0 {
		t.Errorf("the second Service sees %d tasks of the first", n)
	}
	a.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: b.Admin}, http.StatusUnauthorized)
}
