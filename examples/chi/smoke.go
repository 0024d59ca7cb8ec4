package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
)

// smokeTest serves the example on a free port in a temporary directory and
// checks, through the chi router: the host's own route, the OpenAPI
// document and a task under the prefix, an event stream that delivers the
// task's events, and links in events that point under the prefix.
func smokeTest(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "lifecycle-chi")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	type served struct{ base, key string }
	ready := make(chan served, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, "127.0.0.1:0", dir, "", func(base, key string) { ready <- served{base, key} })
	}()
	var s served
	select {
	case s = <-ready:
	case err := <-done:
		return err
	}
	checkErr := check(ctx, s.base, s.key)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(checkErr, err)
	}
	return checkErr
}

// check makes the smoke test's requests.
func check(ctx context.Context, base, key string) error {
	root := strings.TrimSuffix(base, prefix)
	resp, err := http.Get(root + "/")
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "host program's own page") {
		return fmt.Errorf("GET / = %d %q", resp.StatusCode, page)
	}

	c, err := client.New(client.Config{BaseURL: base, APIKey: key})
	if err != nil {
		return err
	}
	if doc, err := c.OpenAPI(ctx); err != nil || !strings.HasPrefix(string(doc), "openapi:") {
		return fmt.Errorf("GET %s/openapi.yaml: %.20q, %v", base, doc, err)
	}
	stream := c.Events(ctx, client.StreamParams{MaxReconnectDelay: 100 * time.Millisecond})
	defer stream.Close()
	events := make(chan lifecycle.Event, 16)
	go func() {
		for {
			ev, err := stream.Next()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()
	// The stream starts at the live tail once connected: create tasks until
	// one of their events arrives.
	for i := 1; ; i++ {
		task, err := c.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("CHI-%d", i), Title: "Mounted under chi",
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/CHI"}})
		if err != nil {
			return fmt.Errorf("create a task under %s: %w", base, err)
		}
		if got, err := c.Task(ctx, task.ID); err != nil || got.ID != task.ID {
			return fmt.Errorf("read the task back: %v", err)
		}
		select {
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("the event stream ended: %w", ctx.Err())
			}
			var data struct {
				Links struct {
					Task string `json:"task"`
				} `json:"links"`
			}
			if err := json.Unmarshal(ev.Data, &data); err != nil {
				return err
			}
			if !strings.HasPrefix(data.Links.Task, base+"/tasks/tsk_") {
				return fmt.Errorf("event link %q is not under %s", data.Links.Task, base)
			}
			return nil
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
