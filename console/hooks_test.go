package console_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// receiver is a TLS webhook receiver that records the bodies it gets and
// answers what respond says (200 when nil).
type receiver struct {
	t   *testing.T
	srv *httptest.Server
	got chan delivery

	mu      sync.Mutex
	respond func(n int, w http.ResponseWriter) // n counts from 1
	n       int
}

// delivery is a request a receiver got.
type delivery struct {
	eventID string // its X-Service-Event-Id
	body    []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, got: make(chan delivery, 1000)}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		rc.mu.Lock()
		rc.n++
		n, respond := rc.n, rc.respond
		rc.mu.Unlock()
		rc.got <- delivery{eventID: r.Header.Get("X-Service-Event-Id"), body: body}
		if respond != nil {
			respond(n, w)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// setRespond changes the receiver's answers.
func (rc *receiver) setRespond(f func(n int, w http.ResponseWriter)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = f
}

// next returns the next delivery, failing when none comes within 5s.
func (rc *receiver) next() delivery {
	rc.t.Helper()
	select {
	case d := <-rc.got:
		return d
	case <-time.After(5 * time.Second):
		rc.t.Fatal("no delivery within 5s")
	}
	return delivery{}
}

// quiet fails when a delivery arrives within d.
func (rc *receiver) quiet(d time.Duration) {
	rc.t.Helper()
	select {
	case got := <-rc.got:
		rc.t.Fatalf("unexpected delivery of %s: %s", got.eventID, got.body)
	case <-time.After(d):
	}
}

// url is the receiver's URL for path.
func (rc *receiver) url(path string) string { return rc.srv.URL + path }

// newHookEnv builds an env that delivers to rc, and starts it.
func newHookEnv(t *testing.T, rc *receiver, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	trust := func(c *lifecycle.Config) {
		pool := x509.NewCertPool()
		pool.AddCert(rc.srv.Certificate())
		c.AllowPrivateWebhookTargets = true
		c.WebhookTLSConfig = &tls.Config{RootCAs: pool}
	}
	e := newEnv(t, append([]func(*lifecycle.Config){trust}, mutate...)...)
	e.start()
	return e
}

// oneAtATime makes each subscription deliver one attempt at a time, so
// that receivers see its events in sequence order.
func oneAtATime(c *lifecycle.Config) { c.WebhookConcurrencyPerSubscription = 1 }

// envelope is what a test reads of a delivered event.
type envelope struct {
	ID string `json:"id"`
}

func envelopeOf(t *testing.T, d delivery) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(d.body, &env); err != nil {
		t.Fatalf("delivery body: %v: %s", err, d.body)
	}
	if env.ID != d.eventID {
		t.Fatalf("body of event %s delivered as %s", env.ID, d.eventID)
	}
	return env
}

// subscribe creates a subscription through the API and returns its record.
func (e *env) subscribe(body map[string]any) map[string]any {
	e.t.Helper()
	out := e.call(request{method: "POST", path: "/event-subscriptions", key: e.admin, body: body,
		header: http.Header{"Idempotency-Key": {"sub-" + strconv.FormatInt(time.Now().UnixNano(), 10)}}}, http.StatusCreated)
	return out["data"].(map[string]any)
}

// subBody is a subscription body for url with every event type.
func subBody(url string) map[string]any {
	return map[string]any{
		"url":        url,
		"eventTypes": []string{"task.updated", "task.reviewed", "task.shipped", "task.awaiting_user"},
		"secret":     "s3cret-s3cret-s3cret",
	}
}

// deliveries lists the delivery attempts of a subscription, newest first.
func (e *env) deliveries(subID string) []map[string]any {
	e.t.Helper()
	out := e.call(request{method: "GET", path: "/event-subscriptions/" + subID + "/deliveries?limit=200", key: e.admin}, http.StatusOK)
	var list []map[string]any
	for _, d := range out["data"].([]any) {
		list = append(list, d.(map[string]any))
	}
	return list
}

// waitDeliveries waits until subID has n attempts recorded and returns
// them.
func (e *env) waitDeliveries(subID string, n int) []map[string]any {
	e.t.Helper()
	var list []map[string]any
	waitFor(e.t, func() bool {
		list = e.deliveries(subID)
		return len(list) >= n
	})
	return list
}

// waitFor polls cond for up to five seconds of real time.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// task reads a task's data.
func (e *env) task(id string) map[string]any {
	e.t.Helper()
	return e.call(request{method: "GET", path: "/tasks/" + id, key: e.admin}, http.StatusOK)["data"].(map[string]any)
}

// submitBody is a valid submission.
func submitBody() map[string]any {
	return map[string]any{
		"summary": "Fixed the redirect and added a regression test.",
		"pullRequest": map[string]any{
			"title": "Fix login redirect", "body": "Keeps the query string.", "draft": false,
			"reviewers": []string{"octocat", "hubot"},
		},
		"checks": []map[string]any{{"name": "unit", "status": "passed"}, {"name": "lint", "status": "skipped"}},
		"notes":  "The old code dropped the query string.",
	}
}

// shipBody is a ship request.
func shipBody(mode, env, sha string) map[string]any {
	return map[string]any{"mode": mode, "targetEnvironment": env, "expectedHeadSha": sha}
}

// waitShip polls a ship operation until it has finished.
func (e *env) waitShip(opID string) map[string]any {
	e.t.Helper()
	var op map[string]any
	waitFor(e.t, func() bool {
		op = e.call(request{method: "GET", path: "/ship-operations/" + opID, key: e.admin}, http.StatusOK)
		st := op["data"].(map[string]any)["status"]
		return st == "succeeded" || st == "failed"
	})
	return op
}
