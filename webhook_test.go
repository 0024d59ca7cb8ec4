package lifecycle_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// hookSecret is the secret of the test subscriptions.
const hookSecret = "s3cret-s3cret-s3cret"

// delivery is a request a receiver got.
type delivery struct {
	path   string
	header http.Header
	body   []byte
}

// receiver is internal/apitest's TLS webhook receiver, under the names the
// root's tests use.
type receiver struct{ *apitest.Receiver }

func newReceiver(t *testing.T) *receiver { return &receiver{apitest.NewReceiver(t)} }

// delivered is d under the root's names.
func delivered(d apitest.Delivery) delivery {
	return delivery{path: d.Path, header: d.Header, body: d.Body}
}

// next returns the next delivery, failing when none comes within 5s.
func (rc *receiver) next() delivery { return delivered(rc.Next()) }

func (rc *receiver) setRespond(f func(n int, w http.ResponseWriter)) { rc.SetRespond(f) }
func (rc *receiver) quiet(d time.Duration)                           { rc.Quiet(d) }
func (rc *receiver) url(path string) string                          { return rc.URL(path) }
func (rc *receiver) trust(c *lifecycle.Config)                       { rc.Trust(c) }

// noJitter makes retries wait exactly the schedule.
func noJitter(c *lifecycle.Config) { c.WebhookRetryJitter = -1 }

// newHookEnv builds an env that delivers to rc, and starts it.
func newHookEnv(t *testing.T, rc *receiver, mutate ...func(*lifecycle.Config)) *env {
	t.Helper()
	e := newEnv(t, append([]func(*lifecycle.Config){rc.trust}, mutate...)...)
	e.Start()
	return e
}

// subBody is a subscription body for url with every event type.
func subBody(url string) map[string]any { return apitest.SubBody(url, hookSecret) }

// hexHMAC and standardSignature compute the signatures independently of
// the library.
func hexHMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func standardSignature(secret, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newHookEnv(t, rc, noPolling)
	srv := e.serve()
	sub := e.Subscribe(subBody(rc.url("/hooks")))
	sse := stream(t, srv, e.Admin, "", nil)

	taskID := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	d := rc.next()
	frame := parseFrame(t, sse.next())
	var env struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			TaskID string `json:"taskId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.body, &env); err != nil {
		t.Fatalf("body is not the JSON envelope: %v\n%s", err, d.body)
	}
	if env.ID != frame.ID || env.Type != "task.updated" || env.Data.TaskID != taskID {
		t.Errorf("delivered %s %s of %s, want %s task.updated of %s", env.ID, env.Type, env.Data.TaskID, frame.ID, taskID)
	}
	if want := wantFrame(t, frame); !strings.Contains(want, "\ndata: "+string(d.body)+"\n\n") {
		t.Errorf("body differs from the stream's data line:\nbody:  %s\nframe: %s", d.body, want)
	}

	h := d.header
	ts := h.Get("Webhook-Timestamp")
	want := map[string]string{
		"Content-Type":          "application/json",
		"X-Service-Event-Id":    env.ID,
		"X-Service-Event-Type":  "task.updated",
		"X-Service-Signature":   hexHMAC(hookSecret, d.body),
		"Webhook-Id":            env.ID,
		"Webhook-Timestamp":     strconv.FormatInt(apitest.Epoch.Unix(), 10),
		"Webhook-Signature":     standardSignature(hookSecret, env.ID, ts, d.body),
		"X-Service-Delivery-Id": h.Get("X-Service-Delivery-Id"),
		"User-Agent":            h.Get("User-Agent"),
	}
	got := map[string]string{}
	for k := range want {
		got[k] = h.Get(k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(h.Get("X-Service-Delivery-Id"), "dlv_") || h.Get("User-Agent") == "" {
		t.Errorf("X-Service-Delivery-Id %q, User-Agent %q", h.Get("X-Service-Delivery-Id"), h.Get("User-Agent"))
	}
	if err := lifecycle.VerifyWebhookSignature(d.body, h.Get("X-Service-Signature"), hookSecret); err != nil {
		t.Errorf("VerifyWebhookSignature: %v", err)
	}
	// Independent implementations: @octokit/webhooks-methods and
	// standardwebhooks, at the time of the Service's clock.
	verifyWithNodeAt(t, e.Clock.Now(), hookSecret, d.body, h)

	list := e.WaitDeliveries(sub["id"].(string), 1)
	wantList := []map[string]any{{
		"eventId": env.ID, "deliveryId": h.Get("X-Service-Delivery-Id"), "attempt": 1.0, "status": "succeeded",
		"responseStatus": 200.0, "error": nil, "attemptedAt": "2026-11-21T10:00:00.000Z", "nextAttemptAt": nil,
	}}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if strings.Contains(e.LogText(), hookSecret) {
		t.Error("the secret appears in the logs")
	}
}

// failing answers status to the first n requests and 200 after.
func failing(n, status int) func(int, http.ResponseWriter) {
	return func(i int, w http.ResponseWriter) {
		if i <= n {
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

func TestWebhookRetriesOnSchedule(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(3, http.StatusInternalServerError))
	e := newHookEnv(t, rc, noJitter)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))

	first := rc.next()
	eventID := first.header.Get("X-Service-Event-Id")
	deliveryIDs := map[string]bool{first.header.Get("X-Service-Delivery-Id"): true}
	for i, delay := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute} {
		list := e.WaitDeliveries(subID, i+1)
		wantNext := apitest.Epoch.Add(sumDurations(i + 1)).Format("2006-01-02T15:04:05.000Z")
		if list[0]["status"] != "pending" || list[0]["nextAttemptAt"] != wantNext || list[0]["responseStatus"] != 500.0 {
			t.Fatalf("after attempt %d, newest delivery = %v; want pending until %s", i+1, list[0], wantNext)
		}
		e.Clock.Advance(delay - time.Millisecond)
		rc.quiet(50 * time.Millisecond)
		e.Clock.Advance(time.Millisecond)
		d := rc.next()
		if got := d.header.Get("X-Service-Event-Id"); got != eventID {
			t.Errorf("attempt %d event ID %s, want %s", i+2, got, eventID)
		}
		if id := d.header.Get("X-Service-Delivery-Id"); deliveryIDs[id] {
			t.Errorf("attempt %d reuses delivery ID %s", i+2, id)
		} else {
			deliveryIDs[id] = true
		}
		if !hmac.Equal([]byte(d.body), first.body) {
			t.Errorf("attempt %d body differs from the first", i+2)
		}
	}
	list := e.WaitDeliveries(subID, 4)
	var got []string
	for _, d := range list {
		got = append(got, fmt.Sprintf("%v %v %v", d["attempt"], d["status"], d["attemptedAt"]))
	}
	want := []string{
		"4 succeeded 2026-11-21T10:11:10.000Z",
		"3 failed 2026-11-21T10:01:10.000Z",
		"2 failed 2026-11-21T10:00:10.000Z",
		"1 failed 2026-11-21T10:00:00.000Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

// sumDurations is the time from the first attempt to attempt n+1 under the
// default schedule.
func sumDurations(n int) time.Duration {
	var d time.Duration
	for _, x := range lifecycle.DefaultWebhookRetrySchedule()[:n] {
		d += x
	}
	return d
}

func TestWebhookEightFailuresEndFailed(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(100, http.StatusBadGateway))
	e := newHookEnv(t, rc, noJitter)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	for i, delay := range lifecycle.DefaultWebhookRetrySchedule() {
		e.WaitDeliveries(subID, i+1)
		e.Clock.Advance(delay)
		rc.next()
	}
	list := e.WaitDeliveries(subID, 8)
	if len(list) != 8 {
		t.Fatalf("%d attempts recorded, want 8", len(list))
	}
	last := list[0]
	if last["attempt"] != 8.0 || last["status"] != "failed" || last["nextAttemptAt"] != nil ||
		!strings.Contains(fmt.Sprint(last["error"]), "502") {
		t.Errorf("last attempt = %v, want attempt 8 failed with the 502 and no next attempt", last)
	}
	for _, d := range list[1:] {
		if d["status"] != "failed" {
			t.Errorf("earlier attempt %v is %v, want failed", d["attempt"], d["status"])
		}
	}
	e.Clock.Advance(100 * time.Hour)
	rc.quiet(100 * time.Millisecond)
}

func TestWebhookRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration
	}{
		{"honoured", http.StatusServiceUnavailable, "15", 15 * time.Second},
		{"clamped up to the schedule", http.StatusTooManyRequests, "2", 10 * time.Second},
		{"clamped down to twice the schedule", http.StatusServiceUnavailable, "3600", 20 * time.Second},
		{"http date", http.StatusTooManyRequests, apitest.Epoch.Add(12 * time.Second).Format(http.TimeFormat), 12 * time.Second},
		{"ignored on other statuses", http.StatusInternalServerError, "15", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t)
			rc.setRespond(func(n int, w http.ResponseWriter) {
				w.Header().Set("Retry-After", tt.retryAfter)
				w.WriteHeader(tt.status)
			})
			e := newHookEnv(t, rc, noJitter)
			subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
			e.CreateTask(apitest.TaskBody("ENG-1"))
			list := e.WaitDeliveries(subID, 1)
			want := apitest.Epoch.Add(tt.want).Format("2006-01-02T15:04:05.000Z")
			if list[0]["nextAttemptAt"] != want {
				t.Errorf("nextAttemptAt = %v, want %s", list[0]["nextAttemptAt"], want)
			}
		})
	}
}

func TestWebhookJitter(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(100, http.StatusInternalServerError))
	e := newHookEnv(t, rc, func(c *lifecycle.Config) { c.WebhookRetryJitter = 0.5 })
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	for i := range 20 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
	}
	seen := map[string]bool{}
	for _, d := range e.WaitDeliveries(subID, 20) {
		at, err := time.Parse(time.RFC3339, d["nextAttemptAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if delay := at.Sub(apitest.Epoch); delay < 5*time.Second || delay > 10*time.Second {
			t.Errorf("retry after %s, want 10s made up to 50%% shorter", delay)
		}
		seen[d["nextAttemptAt"].(string)] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 retries all scheduled at %v: no jitter", seen)
	}
}

func TestWebhookRestartLosesNothing(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(1, http.StatusInternalServerError))
	e := newEnv(t, rc.trust, noJitter)
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	first := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	rc.next()
	e.WaitDeliveries(subID, 1) // attempt 1 failed; attempt 2 is due in 10s
	if err := e.Svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	// An event committed while no dispatcher runs.
	cfg := lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()}
	rc.trust(&cfg)
	noJitter(&cfg)
	svc2, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := svc2.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "ENG-2", Title: "t", Priority: lifecycle.PriorityLow,
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-2"}})
	if err != nil {
		t.Fatal(err)
	}
	e.Svc = svc2
	e.Start()
	d := rc.next()
	if !strings.Contains(string(d.body), second.ID) {
		t.Errorf("after the restart got %s, want the event of %s", d.body, second.ID)
	}
	e.Clock.Advance(10 * time.Second)
	d = rc.next()
	if !strings.Contains(string(d.body), first) {
		t.Errorf("the retry delivered %s, want the event of %s", d.body, first)
	}
	list := e.WaitDeliveries(subID, 3)
	var got []string
	for _, d := range list {
		got = append(got, fmt.Sprintf("%v %v", d["attempt"], d["status"]))
	}
	if diff := cmp.Diff([]string{"2 succeeded", "1 succeeded", "1 failed"}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

func TestWebhookAbandonedAttemptIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.Hold(make(chan struct{}))
	e := newEnv(t, rc.trust)
	if err := e.Svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 1 })
	// Stop while the receiver holds the attempt: nothing is recorded.
	if err := e.Svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if list := e.Deliveries(subID); len(list) != 0 {
		t.Fatalf("deliveries after an abandoned attempt: %v", list)
	}
	rc.Hold(nil)

	e.restart(rc)
	d := rc.next()
	if d.header.Get("X-Service-Event-Type") != "task.updated" {
		t.Errorf("redelivered %s", d.body)
	}
	if list := e.WaitDeliveries(subID, 1); list[0]["status"] != "succeeded" {
		t.Errorf("deliveries = %v", list)
	}
}

func TestWebhookDeleteStopsDeliveries(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	hold := make(chan struct{})
	defer close(hold)
	rc.Hold(hold)
	e := newHookEnv(t, rc)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 1 })
	e.Call(apitest.Request{Method: "DELETE", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusNoContent)
	// The attempt under way was abandoned: the receiver saw it cancelled.
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 0 })
	rc.Hold(nil)
	e.CreateTask(apitest.TaskBody("ENG-2"))
	rc.quiet(200 * time.Millisecond)
	e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID + "/deliveries", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "DELETE", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusNotFound)
}

func TestWebhookGoneDisables(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(func(int, http.ResponseWriter) {})
	rc.setRespond(func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	e := newHookEnv(t, rc)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	list := e.WaitDeliveries(subID, 1)
	if list[0]["status"] != "failed" || list[0]["responseStatus"] != 410.0 || list[0]["nextAttemptAt"] != nil {
		t.Errorf("delivery = %v, want failed with 410 and no retry", list[0])
	}
	apitest.WaitFor(t, func() bool {
		sub := e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
		return sub["status"] == "disabled"
	})
	e.CreateTask(apitest.TaskBody("ENG-2"))
	e.Clock.Advance(time.Hour)
	rc.quiet(200 * time.Millisecond)
}

func TestWebhookFilters(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newHookEnv(t, rc)
	keep := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	other := apitest.TaskBody("OPS-1")
	other["context"] = map[string]any{"project": "ops", "goal": "g"}
	opsTask := e.CreateTask(other)["id"].(string)

	byTask := subBody(rc.url("/by-task"))
	byTask["filters"] = map[string]any{"taskIds": []string{keep}}
	byProject := subBody(rc.url("/by-project"))
	byProject["filters"] = map[string]any{"projects": []string{"ops"}}
	byType := subBody(rc.url("/by-type"))
	byType["eventTypes"] = []string{"task.awaiting_user"}
	for _, b := range []map[string]any{byTask, byProject, byType} {
		e.Subscribe(b)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + keep + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + opsTask + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + opsTask + "/blocker", Key: e.Admin, Body: map[string]any{
		"reason": "needs_secret", "actionRequired": "add a key", "resumeInstructions": "rerun", "sourceRunId": "run_1"}}, http.StatusOK)

	got := map[string]bool{}
	for range 4 {
		d := rc.next()
		var env struct {
			Type string `json:"type"`
			Data struct {
				TaskID string `json:"taskId"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.body, &env); err != nil {
			t.Fatal(err)
		}
		got[d.path+" "+env.Type+" "+env.Data.TaskID] = true
	}
	want := map[string]bool{
		"/by-task task.updated " + keep:             true,
		"/by-project task.updated " + opsTask:       true,
		"/by-project task.awaiting_user " + opsTask: true,
		"/by-type task.awaiting_user " + opsTask:    true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	rc.quiet(100 * time.Millisecond)
}

func TestSubscriptionValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.WebhookResolver = fakeResolver{"hooks.example.com": "93.184.216.34"} })
	long := strings.Repeat("x", 129)
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"empty", `{}`, []string{"url", "eventTypes", "secret"}},
		{"all wrong", `{"url":"http://hooks.example.com/x","eventTypes":["task.created"],"secret":"short","description":"` + strings.Repeat("d", 201) + `","filters":{"taskIds":["nope"],"projects":[""]}}`,
			[]string{"url", "eventTypes[0]", "secret", "description", "filters.taskIds[0]", "filters.projects[0]"}},
		{"secret too long", `{"url":"https://hooks.example.com/x","eventTypes":["task.updated"],"secret":"` + long + `"}`, []string{"secret"}},
		{"empty event types", `{"url":"https://hooks.example.com/x","eventTypes":[],"secret":"` + hookSecret + `"}`, []string{"eventTypes"}},
		{"relative url", `{"url":"/hooks","eventTypes":["task.updated"],"secret":"` + hookSecret + `"}`, []string{"url"}},
		{"credentials in url", `{"url":"https://u:p@hooks.example.com/x","eventTypes":["task.updated"],"secret":"` + hookSecret + `"}`, []string{"url"}},
		{"unknown member", `{"url":"https://hooks.example.com/x","eventTypes":["task.updated"],"secret":"` + hookSecret + `","extra":1}`, []string{"extra"}},
		{"wrong type", `{"url":"https://hooks.example.com/x","eventTypes":"task.updated","secret":"` + hookSecret + `"}`, []string{"eventTypes"}},
		{"unresolvable host", `{"url":"https://nowhere.example.com/x","eventTypes":["task.updated"],"secret":"` + hookSecret + `"}`, []string{"url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: tt.body,
				Header: http.Header{"Idempotency-Key": {"validation-" + strings.ReplaceAll(tt.name, " ", "-")}}})
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if diff := cmp.Diff(tt.fields, errorFields(t, rec)); diff != "" {
				t.Errorf("fields (-want +got):\n%s\n%s", diff, rec.Body)
			}
		})
	}
	t.Run("missing idempotency key", func(t *testing.T) {
		rec := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: subBody("https://hooks.example.com/x")})
		if diff := cmp.Diff([]string{"Idempotency-Key"}, errorFields(t, rec)); rec.Code != http.StatusBadRequest || diff != "" {
			t.Errorf("status %d, fields diff %s", rec.Code, diff)
		}
	})
}

// errorFields returns the fields named by a validation error body.
func errorFields(t *testing.T, rec *httptest.ResponseRecorder) []string {
	t.Helper()
	var body lifecycle.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != "validation_error" || body.Error.Details == nil {
		t.Fatalf("not a validation error: %s", rec.Body)
	}
	var out []string
	for _, f := range body.Error.Details.Fields {
		out = append(out, f.Field)
	}
	return out
}

// fakeResolver maps host names to one address each.
type fakeResolver map[string]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := r[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func TestSubscriptionSSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) {
		c.WebhookResolver = fakeResolver{"hooks.example.com": "93.184.216.34", "internal.example.com": "169.254.169.254", "six.example.com": "fd00::1"}
	})
	tests := []struct {
		url, reason string
	}{
		{"https://127.0.0.1/hooks", "127.0.0.1 is a loopback address"},
		{"https://10.0.0.1/hooks", "10.0.0.1 is a private address"},
		{"https://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"},
		{"https://[::1]:8443/hooks", "::1 is a loopback address"},
		{"https://0.0.0.0/hooks", "0.0.0.0 is a unspecified address"},
		{"https://[::ffff:192.168.1.1]/hooks", "private address"},
		{"https://internal.example.com/hooks", "host internal.example.com resolves to a private or reserved address"},
		{"https://six.example.com/hooks", "host six.example.com resolves to a private or reserved address"},
		{"https://100.100.100.200/latest/meta-data", "100.100.100.200 is a special-purpose address"},
		{"https://[64:ff9b::a00:1]/hooks", "64:ff9b::a00:1 embeds 10.0.0.1, a private address"},
		{"https://[::127.0.0.1]/", "::127.0.0.1 embeds 127.0.0.1, a loopback address"},
		{"https://[::a9fe:a9fe]/", "::a9fe:a9fe embeds 169.254.169.254, a link-local address"},
		{"https://[2001:0:4136:e378:8000:63bf:5601:5601]/", "embeds 169.254.169.254, a link-local address"},
		{"https://[2002:a00:1::1]/", "embeds 10.0.0.1, a private address"},
	}
	for _, tt := range tests {
		rec := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: subBody(tt.url),
			Header: http.Header{"Idempotency-Key": {"ssrf-" + tt.url}}})
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.reason) {
			t.Errorf("%s: %d %s, want 400 saying %q", tt.url, rec.Code, rec.Body, tt.reason)
		}
		// The address a name resolves to goes to the log, never to the client.
		if strings.Contains(tt.url, "example.com") && (strings.Contains(rec.Body.String(), "169.254") || strings.Contains(rec.Body.String(), "fd00")) {
			t.Errorf("%s: the answer names the address: %s", tt.url, rec.Body)
		}
	}
	for _, logged := range []string{"addr=169.254.169.254", "addr=fd00::1"} {
		if !strings.Contains(e.LogText(), logged) {
			t.Errorf("the log does not name the refused address %s:\n%s", logged, e.LogText())
		}
	}
	e.Subscribe(subBody("https://hooks.example.com/hooks"))
}

// flipResolver answers from a map that can change.
type flipResolver struct {
	mu   sync.Mutex
	addr string
}

func (r *flipResolver) set(a string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addr = a
}

func (r *flipResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []netip.Addr{netip.MustParseAddr(r.addr)}, nil
}

func TestWebhookDialRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	res := &flipResolver{addr: "93.184.216.34"}
	e := newEnv(t, rc.trust, func(c *lifecycle.Config) {
		c.AllowPrivateWebhookTargets = false
		c.WebhookResolver = res
	})
	e.Start()
	// The host resolved to a public address when subscribed, then its DNS
	// changed to point at the receiver on loopback.
	port := rc.Server().Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	subID := e.Subscribe(subBody(fmt.Sprintf("https://hooks.example.com:%d/hooks", port)))["id"].(string)
	res.set("127.0.0.1")
	e.CreateTask(apitest.TaskBody("ENG-1"))
	list := e.WaitDeliveries(subID, 1)
	if list[0]["status"] != "pending" || !strings.Contains(fmt.Sprint(list[0]["error"]), "resolves to a private or reserved address") ||
		strings.Contains(fmt.Sprint(list[0]["error"]), "127.0.0.1") {
		t.Errorf("delivery = %v, want pending with the refusal, without the address", list[0])
	}
	if !strings.Contains(e.LogText(), "addr=127.0.0.1") {
		t.Errorf("the log does not name the refused address")
	}
	rc.quiet(50 * time.Millisecond)
}

func TestSubscriptionIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.AllowPrivateWebhookTargets = true })
	send := func(body map[string]any) *httptest.ResponseRecorder {
		return e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions", Key: e.Admin, Body: body,
			Header: http.Header{"Idempotency-Key": {"create-hooks-1"}}})
	}
	first := send(subBody("https://hooks.example.com/x"))
	if first.Code != http.StatusCreated {
		t.Fatalf("create = %d: %s", first.Code, first.Body)
	}
	again := send(subBody("https://hooks.example.com/x"))
	if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay = %d %q %s, want the first answer replayed", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
	other := send(subBody("https://hooks.example.com/y"))
	if other.Code != http.StatusConflict {
		t.Errorf("same key, other body = %d, want 409", other.Code)
	}
	list := e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions", Key: e.Admin}, http.StatusOK)["data"].([]any)
	if len(list) != 1 {
		t.Errorf("%d subscriptions, want 1", len(list))
	}
	if strings.Contains(first.Body.String(), hookSecret) {
		t.Error("the secret was returned")
	}
}

func TestSubscriptionRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.AllowPrivateWebhookTargets = true })
	body := subBody("https://hooks.example.com/x")
	body["description"] = "ops pager"
	body["eventTypes"] = []string{"task.shipped", "task.shipped", "task.reviewed"}
	body["filters"] = map[string]any{"projects": []string{"web"}}
	created := e.Subscribe(body)
	subID := created["id"].(string)
	want := map[string]any{
		"id": subID, "url": "https://hooks.example.com/x", "eventTypes": []any{"task.shipped", "task.reviewed"},
		"description": "ops pager", "filters": map[string]any{"taskIds": []any{}, "projects": []any{"web"}},
		"status": "active", "createdAt": "2026-11-21T10:00:00.000Z",
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	got := e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusOK)["data"]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
	minimal := e.Subscribe(subBody("https://hooks.example.com/y"))
	if minimal["description"] != nil {
		t.Errorf("description = %v, want null", minimal["description"])
	}
	e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/whs_unknown123456789012345", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/nope", Key: e.Admin}, http.StatusNotFound)
}

func TestSubscriptionList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.AllowPrivateWebhookTargets = true })
	var ids []string
	for i := range 5 {
		ids = append(ids, e.Subscribe(subBody(fmt.Sprintf("https://hooks.example.com/%d", i)))["id"].(string))
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		out := e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions?limit=2&cursor=" + cursor, Key: e.Admin}, http.StatusOK)
		for _, s := range out["data"].([]any) {
			got = append(got, s.(map[string]any)["id"].(string))
		}
		if out["nextCursor"] == nil {
			break
		}
		cursor = out["nextCursor"].(string)
		if pages > 5 {
			t.Fatal("listing does not end")
		}
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "cursor=bogus"} {
		e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions?" + q, Key: e.Admin}, http.StatusBadRequest)
	}
}

func TestSubscriptionScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.AllowPrivateWebhookTargets = true })
	reader := e.Key(lifecycle.ScopeWebhooksRead)
	writer := e.Key(lifecycle.ScopeWebhooksWrite)
	subID := e.Subscribe(subBody("https://hooks.example.com/x"))["id"].(string)
	hdr := http.Header{"Idempotency-Key": {"scopes-key-1"}}
	tests := []struct {
		method, path, key string
		want              int
	}{
		{"GET", "/event-subscriptions", "", http.StatusUnauthorized},
		{"GET", "/event-subscriptions", writer, http.StatusForbidden},
		{"GET", "/event-subscriptions", reader, http.StatusOK},
		{"GET", "/event-subscriptions/" + subID, reader, http.StatusOK},
		{"GET", "/event-subscriptions/" + subID + "/deliveries", reader, http.StatusOK},
		{"GET", "/event-subscriptions/" + subID + "/deliveries", writer, http.StatusForbidden},
		{"POST", "/event-subscriptions", reader, http.StatusForbidden},
		{"DELETE", "/event-subscriptions/" + subID, reader, http.StatusForbidden},
		{"POST", "/event-subscriptions", writer, http.StatusCreated},
		{"DELETE", "/event-subscriptions/" + subID, writer, http.StatusNoContent},
	}
	for _, tt := range tests {
		rec := e.Do(apitest.Request{Method: tt.method, Path: tt.path, Key: tt.key, Body: subBody("https://hooks.example.com/z"), Header: hdr})
		if rec.Code != tt.want {
			t.Errorf("%s %s = %d, want %d: %s", tt.method, tt.path, rec.Code, tt.want, rec.Body)
		}
	}
}

func TestWebhookSecretSealedAtRest(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	e := newHookEnv(t, rc, func(c *lifecycle.Config) { c.WebhookSecretKey = key })
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	stored, err := e.Store.Subscription(t.Context(), subID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored.SealedSecret), hookSecret) {
		t.Error("the stored secret holds the plaintext")
	}
	e.CreateTask(apitest.TaskBody("ENG-1"))
	d := rc.next()
	if got := d.header.Get("X-Service-Signature"); got != hexHMAC(hookSecret, d.body) {
		t.Errorf("signature %s does not match the secret", got)
	}
	if _, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, WebhookSecretKey: key[:16]}); err == nil {
		t.Error("New accepted a 16-byte WebhookSecretKey")
	}
}

func TestWebhookConcurrencyAndOrder(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	// A slow receiver is what this test is about: deliveries overlap, and
	// must still arrive one at a time and in order.
	rc.setRespond(func(int, http.ResponseWriter) { time.Sleep(5 * time.Millisecond) })
	e := newHookEnv(t, rc, func(c *lifecycle.Config) { c.WebhookConcurrencyPerSubscription = 1 })
	e.Subscribe(subBody(rc.url("/hooks")))
	for i := range 10 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
	}
	var last int64
	for range 10 {
		var env struct {
			Sequence int64 `json:"sequence"`
		}
		json.Unmarshal(rc.next().body, &env)
		if env.Sequence <= last {
			t.Errorf("sequence %d after %d: first attempts out of order", env.Sequence, last)
		}
		last = env.Sequence
	}
	if _, most := rc.InFlight(); most != 1 {
		t.Errorf("%d attempts in flight at once, want at most 1", most)
	}
}

func TestWebhookHangingReceiverDoesNotSlowOthers(t *testing.T) {
	t.Parallel()
	hung, healthy := newReceiver(t), newReceiver(t)
	hold := make(chan struct{})
	defer close(hold)
	hung.Hold(hold)
	e := newEnv(t, hung.trust, func(c *lifecycle.Config) {
		pool := c.WebhookTLSConfig.RootCAs
		pool.AddCert(healthy.Server().Certificate())
		c.WebhookConcurrencyPerSubscription = 2
	})
	e.Start()
	e.Subscribe(subBody(hung.url("/hooks")))
	e.Subscribe(subBody(healthy.url("/hooks")))
	for i := range 20 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
	}
	for range 20 {
		healthy.next()
	}
	if now, most := hung.InFlight(); now < 1 || most > 2 {
		t.Errorf("the hanging receiver holds %d attempts (at most %d), want 1 or 2: the per-subscription limit is 2", now, most)
	}
}

// killableStore is a Store that stops answering once killed, as if its
// process had died: nothing more is read or written through it.
type killableStore struct {
	lifecycle.Store
	dead atomic.Bool
}

var errKilled = errors.New("the process is dead")

func (k *killableStore) Update(ctx context.Context, fn func(lifecycle.Tx) error) error {
	if k.dead.Load() {
		return errKilled
	}
	return k.Store.Update(ctx, fn)
}

func (k *killableStore) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.Store.Events(ctx, f)
}

func (k *killableStore) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if k.dead.Load() {
		return lifecycle.DeliveryPage{}, errKilled
	}
	return k.Store.Deliveries(ctx, f)
}

func TestWebhookLeaseMovesOnWhenAProcessDies(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newEnv(t, rc.trust) // process B's Service, not started yet
	a := &killableStore{Store: e.Store}
	cfg := lifecycle.Config{Store: a, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()}
	rc.trust(&cfg)
	svcA, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svcA.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer svcA.Close(t.Context())
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	// A polls, and finds the subscription: the clock moves on in small
	// steps until it has, whenever A's poll started waiting.
	steps := 0
	apitest.WaitFor(t, func() bool {
		if steps < 50 { // at most 5 s of A's 30-second lease
			e.Clock.Advance(100 * time.Millisecond)
			steps++
		}
		sub, err := e.Store.Subscription(t.Context(), subID)
		return err == nil && sub.LeaseOwner != ""
	})

	a.dead.Store(true) // process A dies holding the lease
	e.Start()          // process B shares the store
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.quiet(200 * time.Millisecond)  // A's lease has not ended: nobody delivers
	e.Clock.Advance(31 * time.Second) // past A's lease
	d := rc.next()
	if d.header.Get("X-Service-Event-Type") != "task.updated" {
		t.Errorf("delivered %s", d.body)
	}
	if list := e.WaitDeliveries(subID, 1); list[0]["status"] != "succeeded" {
		t.Errorf("deliveries = %v", list)
	}
	rc.quiet(100 * time.Millisecond)
}

// countingStore counts the event reads of a Store.
type countingStore struct {
	lifecycle.Store
	reads atomic.Int64
}

func (c *countingStore) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	c.reads.Add(1)
	return c.Store.Events(ctx, f)
}

func TestWebhookCursorBehindPrunedEvents(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newEnv(t, rc.trust)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	e.CreateTask(apitest.TaskBody("ENG-2"))
	// Every process was down for longer than the retention: the events
	// the subscription never got are pruned.
	e.Clock.Advance(73 * time.Hour)
	if _, err := e.Store.Prune(t.Context(), lifecycle.PruneParams{Before: e.Clock.Now().Add(-72 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	counting := &countingStore{Store: e.Store}
	cfg := lifecycle.Config{Store: counting, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()}
	rc.trust(&cfg)
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Svc = svc
	e.Start()
	apitest.WaitFor(t, func() bool { return strings.Contains(e.LogText(), "were not delivered") })
	// A spin is a rate of reads: it is measured over a window of real
	// time, the one wait here that is what the test is about. The window
	// ends early, failing, as soon as the reads show a spin.
	before := counting.reads.Load()
	if testenv.WaitUntil(100*time.Millisecond, func() bool { return counting.reads.Load()-before > 10 }) {
		t.Errorf("%d event reads in 100ms while idle: the worker spins", counting.reads.Load()-before)
	}
	if _, err := svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "ENG-3", Title: "t",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-3"}}); err != nil {
		t.Fatal(err)
	}
	if d := rc.next(); !strings.Contains(string(d.body), `"taskIdentifier":"ENG-3"`) {
		t.Errorf("delivered %s, want ENG-3's event", d.body)
	}
	if list := e.WaitDeliveries(subID, 1); len(list) != 1 {
		t.Errorf("deliveries = %v", list)
	}
}

// writeFailingStore fails every Update while failing is set, as a full
// disk would.
type writeFailingStore struct {
	lifecycle.Store
	failing atomic.Bool
}

func (f *writeFailingStore) Update(ctx context.Context, fn func(lifecycle.Tx) error) error {
	if f.failing.Load() {
		return errors.New("disk full")
	}
	return f.Store.Update(ctx, fn)
}

func TestWebhookFailedRecordDoesNotResendRetries(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(100, http.StatusInternalServerError))
	e := newEnv(t, rc.trust)
	flaky := &writeFailingStore{Store: e.Store}
	cfg := lifecycle.Config{Store: flaky, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()}
	rc.trust(&cfg)
	noJitter(&cfg)
	svc, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Svc = svc
	e.Start()
	sub, err := svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{URL: rc.url("/hooks"),
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated}, Secret: hookSecret})
	if err != nil {
		t.Fatal(err)
	}
	subID := sub.ID
	if _, err := svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{Identifier: "ENG-1", Title: "t",
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-1"}}); err != nil {
		t.Fatal(err)
	}
	rc.next()
	e.WaitDeliveries(subID, 1)

	flaky.failing.Store(true)
	e.Clock.Advance(10 * time.Second)
	rc.next() // attempt 2, whose outcome cannot be recorded
	for range 5 {
		e.Clock.Advance(time.Second)
		rc.quiet(20 * time.Millisecond) // recording is retried, not the delivery
	}
	flaky.failing.Store(false)
	e.Clock.Advance(time.Second)
	list := e.WaitDeliveries(subID, 2)
	var got []string
	for _, d := range list {
		got = append(got, fmt.Sprintf("%v %v", d["attempt"], d["status"]))
	}
	if diff := cmp.Diff([]string{"2 pending", "1 failed"}, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}
