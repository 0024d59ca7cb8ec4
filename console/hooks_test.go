package console_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// newHookEnv builds an env that delivers to rc, and starts it.
func newHookEnv(t *testing.T, rc *apitest.Receiver, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	e := newEnv(t, append([]func(*lifecycle.Config){rc.Trust}, mutate...)...)
	e.Start()
	return e
}

// oneAtATime makes each subscription deliver one attempt at a time, so
// that receivers see its events in sequence order.
func oneAtATime(c *lifecycle.Config) { c.WebhookConcurrencyPerSubscription = 1 }

// envelope is what a test reads of a delivered event.
type envelope struct {
	ID string `json:"id"`
}

func envelopeOf(t *testing.T, d apitest.Delivery) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(d.Body, &env); err != nil {
		t.Fatalf("delivery body: %v: %s", err, d.Body)
	}
	if env.ID != d.EventID() {
		t.Fatalf("body of event %s delivered as %s", env.ID, d.EventID())
	}
	return env
}

// subBody is a subscription body for url with every event type.
func subBody(url string) map[string]any { return apitest.SubBody(url, "s3cret-s3cret-s3cret") }

// waitShip polls a ship operation until it has finished.
func (e *env) waitShip(opID string) map[string]any {
	e.T.Helper()
	var op map[string]any
	apitest.WaitFor(e.T, func() bool {
		op = e.Call(apitest.Request{Method: "GET", Path: "/ship-operations/" + opID, Key: e.Admin}, http.StatusOK)
		st := op["data"].(map[string]any)["status"]
		return st == "succeeded" || st == "failed"
	})
	return op
}
