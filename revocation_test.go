package lifecycle_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// keyID returns the ID of the key whose actor is actorID.
func (e *env) keyID(actorID string) string {
	e.T.Helper()
	keys, err := e.Svc.APIKeys(e.T.Context())
	if err != nil {
		e.T.Fatal(err)
	}
	for _, k := range keys {
		if k.Actor.ID == actorID {
			return k.ID
		}
	}
	e.T.Fatalf("no key for %s", actorID)
	return ""
}

// Revoking a key through the API ends its open streams at once, with a
// last comment saying why; other keys' streams go on.
func TestRevocationEndsStreams(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		f    func(*lifecycle.Config)
	}{{"taken over", func(c *lifecycle.Config) { c.TakeOverStreams = true }}, {"in handler", func(*lifecycle.Config) {}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, noPolling, mode.f)
			srv := e.serve()
			watcher := e.KeyAs(lifecycle.Actor{ID: "dashboard", Role: lifecycle.RoleUser}, lifecycle.ScopeEventsRead)
			c := stream(t, srv, watcher, "", nil)
			other := stream(t, srv, e.Admin, "", nil)
			e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + e.keyID("dashboard"), Key: e.Admin}, http.StatusNoContent)
			if b := c.next(); b != ": revoked: the API key of this stream was revoked; the stream ends\n\n" {
				t.Fatalf("last block %q", b)
			}
			if err := c.ended(); !errors.Is(err, io.EOF) {
				t.Fatalf("stream ended with %v", err)
			}
			e.CreateTask(apitest.TaskBody("REV-1"))
			if ev := other.event(); ev.Type != lifecycle.EventTaskUpdated {
				t.Errorf("the other stream got %v", ev)
			}
			resp, cancel := openStream(t, srv, watcher, "", nil)
			defer cancel()
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("reconnecting with the revoked key: %d", resp.StatusCode)
			}
		})
	}
}

// A key revoked through another process sharing the Store ends the
// streams of this one within KeyCacheTTL.
func TestRevocationByAnotherProcessEndsStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noPolling)
	// This process looks for revocations every KeyCacheTTL/2 (2.5 s) of
	// its clock: once its watcher is parked on the clock, it cannot look
	// before the clock moves.
	look := e.Clock.Now().Add(2500 * time.Millisecond)
	e.Start()
	if !e.Clock.WaitForWaiterAt(look, 5*time.Second) {
		t.Fatal("the revocation watcher is not waiting KeyCacheTTL/2 on the clock")
	}
	other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := e.serve()
	watcher := e.KeyAs(lifecycle.Actor{ID: "dashboard", Role: lifecycle.RoleUser}, lifecycle.ScopeEventsRead)
	c := stream(t, srv, watcher, "", nil)
	if _, err := other.RevokeAPIKey(t.Context(), e.keyID("dashboard")); err != nil {
		t.Fatal(err)
	}
	if !e.Clock.PendingAt(look) {
		t.Fatal("this process looked for revocations before its clock moved")
	}
	e.Clock.Advance(5 * time.Second) // KeyCacheTTL
	var last string
	select {
	case last = <-c.blocks:
	case <-time.After(streamTimeout):
	}
	if last != ": revoked: the API key of this stream was revoked; the stream ends\n\n" {
		t.Fatalf("within KeyCacheTTL, last block %q", last)
	}
	if err := c.ended(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v", err)
	}
}
