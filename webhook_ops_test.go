package lifecycle_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// oneAtATime makes each subscription deliver one attempt at a time, so
// that receivers see its events in sequence order.
func oneAtATime(c *lifecycle.Config) { c.WebhookConcurrencyPerSubscription = 1 }

// envelope is what a test reads of a delivered event.
type envelope struct {
	ID       string `json:"id"`
	Sequence int64  `json:"sequence"`
	Data     struct {
		TaskIdentifier string `json:"taskIdentifier"`
	} `json:"data"`
}

func envelopeOf(t *testing.T, d delivery) envelope {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(d.body, &env); err != nil {
		t.Fatalf("delivery body: %v: %s", err, d.body)
	}
	if env.ID != d.header.Get("X-Service-Event-Id") {
		t.Fatalf("body of event %s delivered as %s", env.ID, d.header.Get("X-Service-Event-Id"))
	}
	return env
}

// replay posts a replay of subID from seq with an Idempotency-Key.
func (e *env) replay(subID string, seq int64, key string, wantStatus int) map[string]any {
	e.T.Helper()
	return e.Call(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/replay", Key: e.Admin,
		Body: map[string]any{"fromSequence": seq}, Header: http.Header{"Idempotency-Key": {key}}}, wantStatus)
}

// TestReplayDeliversTheMatchingEventsAfterTheSequence: two subscriptions
// with different filters receive their events; a replay of one from a
// sequence delivers to it exactly its events after that sequence, in
// order, with new delivery IDs and the same event IDs, and nothing to the
// other.
func TestReplayDeliversTheMatchingEventsAfterTheSequence(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newHookEnv(t, rc, oneAtATime)
	web := subBody(rc.url("/web"))
	web["filters"] = map[string]any{"projects": []string{"web"}}
	webID := e.subscribe(web).ID
	ops := subBody(rc.url("/ops"))
	ops["filters"] = map[string]any{"projects": []string{"ops"}}
	opsID := e.subscribe(ops).ID

	for i := range 10 {
		body := apitest.TaskBody(fmt.Sprintf("ENG-%d", i))
		if i%2 == 1 {
			body["context"] = map[string]any{"project": "ops", "goal": "g"}
		}
		e.CreateTask(body)
	}
	first := map[string][]envelope{} // by receiver path
	seenDelivery := map[string]bool{}
	for range 10 {
		d := rc.next()
		first[d.path] = append(first[d.path], envelopeOf(t, d))
		seenDelivery[d.header.Get("X-Service-Delivery-Id")] = true
	}
	if len(first["/web"]) != 5 || len(first["/ops"]) != 5 {
		t.Fatalf("first deliveries: %d to /web, %d to /ops; want 5 each", len(first["/web"]), len(first["/ops"]))
	}
	e.WaitDeliveries(webID, 5)
	e.WaitDeliveries(opsID, 5)

	// Replay /web after its second event: its last three come again.
	from := first["/web"][1].Sequence
	out := apitest.CallData[lifecycle.Replay](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions/" + webID + "/replay", Key: e.Admin,
		Body: map[string]any{"fromSequence": from}, Header: http.Header{"Idempotency-Key": {"replay-web-1"}}}, http.StatusAccepted)
	last := e.Events()[len(e.Events())-1].Sequence
	want := lifecycle.Replay{SubscriptionID: webID, FromSequence: from, ThroughSequence: last}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("replay answer (-want +got):\n%s", diff)
	}
	var got []envelope
	for range 3 {
		d := rc.next()
		if d.path != "/web" {
			t.Fatalf("replay delivered to %s, want /web only", d.path)
		}
		if id := d.header.Get("X-Service-Delivery-Id"); seenDelivery[id] {
			t.Errorf("replayed delivery reuses delivery ID %s", id)
		}
		if got := d.header.Get("X-Service-Signature"); got != hexHMAC(hookSecret, d.body) {
			t.Errorf("replayed delivery signature %s does not verify", got)
		}
		got = append(got, envelopeOf(t, d))
	}
	if diff := cmp.Diff(first["/web"][2:], got); diff != "" {
		t.Errorf("replayed events (-want +got):\n%s", diff)
	}
	rc.quiet(200 * time.Millisecond)

	// The history shows the new attempts as first attempts of those events.
	list := e.waitDeliveries(webID, 8)
	var newest []string
	for _, d := range list[:3] {
		newest = append(newest, fmt.Sprintf("%v %v %v", d.EventID, d.Attempt, d.Status))
	}
	wantNewest := []string{
		first["/web"][4].ID + " 1 succeeded", first["/web"][3].ID + " 1 succeeded", first["/web"][2].ID + " 1 succeeded",
	}
	if diff := cmp.Diff(wantNewest, newest); diff != "" {
		t.Errorf("newest attempts (-want +got):\n%s", diff)
	}

	// New events after a replay are delivered once, as always.
	e.CreateTask(apitest.TaskBody("ENG-10"))
	if d := rc.next(); d.path != "/web" || envelopeOf(t, d).Data.TaskIdentifier != "ENG-10" {
		t.Errorf("after the replay got %s on %s, want ENG-10's event on /web", d.body, d.path)
	}
	rc.quiet(200 * time.Millisecond)
}

// TestReplayIsIdempotent: the same key and body answer the first replay
// again and deliver nothing more; the same key with another body is 409.
func TestReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newHookEnv(t, rc, oneAtATime)
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	e.CreateTask(apitest.TaskBody("ENG-1"))
	e.CreateTask(apitest.TaskBody("ENG-2"))
	rc.next()
	second := envelopeOf(t, rc.next())
	e.WaitDeliveries(subID, 2)

	firstAnswer := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/replay", Key: e.Admin,
		Body: map[string]any{"fromSequence": second.Sequence - 1}, Header: http.Header{"Idempotency-Key": {"replay-once"}}})
	if firstAnswer.Code != http.StatusAccepted {
		t.Fatalf("replay = %d %s", firstAnswer.Code, firstAnswer.Body)
	}
	if d := envelopeOf(t, rc.next()); d.ID != second.ID {
		t.Errorf("replayed %s, want %s", d.ID, second.ID)
	}
	e.WaitDeliveries(subID, 3)
	again := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/replay", Key: e.Admin,
		Body: map[string]any{"fromSequence": second.Sequence - 1}, Header: http.Header{"Idempotency-Key": {"replay-once"}}})
	if again.Code != http.StatusAccepted || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != firstAnswer.Body.String() {
		t.Errorf("the same replay again = %d (replayed %q) %s; want the first answer, replayed", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
	rc.quiet(200 * time.Millisecond)
	other := e.replay(subID, 0, "replay-once", http.StatusConflict)
	if code := apitest.ErrorCode(other); code != "conflict" {
		t.Errorf("the key with another body: %s, want conflict", code)
	}

	// The Go API keeps the same rules.
	r1, err := e.Svc.ReplaySubscription(t.Context(), subID, lifecycle.ReplayParams{FromSequence: second.Sequence - 1, IdempotencyKey: "go-replay-1"})
	if err != nil {
		t.Fatal(err)
	}
	envelopeOf(t, rc.next())
	e.WaitDeliveries(subID, 4)
	r2, err := e.Svc.ReplaySubscription(t.Context(), subID, lifecycle.ReplayParams{FromSequence: second.Sequence - 1, IdempotencyKey: "go-replay-1"})
	if err != nil || r2 != r1 {
		t.Errorf("Go replay again = %+v, %v; want %+v", r2, err, r1)
	}
	rc.quiet(200 * time.Millisecond)
}

// TestReplayRefusals: bad bodies, unknown subscriptions, missing keys,
// scopes, and a range whose events were pruned.
func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e := newHookEnv(t, rc)
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	last := e.Events()[len(e.Events())-1].Sequence

	for _, tc := range []struct {
		name   string
		path   string
		body   any
		header http.Header
		key    string
		status int
		code   string
		field  string
	}{
		{"no body", "/event-subscriptions/" + subID + "/replay", nil, nil, e.Admin, 400, "validation_error", "body"},
		{"no fromSequence", "/event-subscriptions/" + subID + "/replay", map[string]any{}, nil, e.Admin, 400, "validation_error", "fromSequence"},
		{"negative", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": -1}, nil, e.Admin, 400, "validation_error", "fromSequence"},
		{"a string", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": "3"}, nil, e.Admin, 400, "validation_error", "fromSequence"},
		{"after the last event", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": last + 1}, nil, e.Admin, 400, "validation_error", "fromSequence"},
		{"unknown member", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": 0, "to": 3}, nil, e.Admin, 400, "validation_error", "to"},
		{"no Idempotency-Key", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": 0}, http.Header{}, e.Admin, 400, "validation_error", "Idempotency-Key"},
		{"unknown subscription", "/event-subscriptions/whs_nosuchsubscription00000/replay", map[string]any{"fromSequence": 0}, nil, e.Admin, 404, "not_found", ""},
		{"read-only key", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": 0}, nil, e.Key(lifecycle.ScopeWebhooksRead), 403, "insufficient_scope", ""},
		{"no key", "/event-subscriptions/" + subID + "/replay", map[string]any{"fromSequence": 0}, nil, "", 401, "unauthorized", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.header
			if header == nil {
				header = http.Header{"Idempotency-Key": {"refusal-" + strings.ReplaceAll(tc.name, " ", "-")}}
			}
			out := apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: tc.path, Key: tc.key, Body: tc.body, Header: header}, tc.status).Error
			if out.Code != tc.code {
				t.Errorf("code %s, want %s", out.Code, tc.code)
			}
			if tc.field != "" {
				if out.Details == nil || len(out.Details.Fields) == 0 {
					t.Fatalf("error %+v names no field, want %s", out, tc.field)
				}
				if f := out.Details.Fields[0].Field; f != tc.field {
					t.Errorf("field %v, want %s", f, tc.field)
				}
			}
		})
	}

	// Events older than the retention are pruned; a replay that needs
	// them is 410, one after them is fine.
	e.Clock.Advance(73 * time.Hour)
	apitest.WaitFor(t, func() bool { return len(e.Events()) == 0 })
	e.CreateTask(apitest.TaskBody("ENG-2"))
	rc.next()
	oldest := e.Events()[0].Sequence
	gone := apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/replay", Key: e.Admin,
		Body: map[string]any{"fromSequence": oldest - 2}, Header: http.Header{"Idempotency-Key": {"replay-pruned"}}}, http.StatusGone).Error
	if gone.Code != "cursor_expired" {
		t.Errorf("replay of a pruned range: %s, want cursor_expired", gone.Code)
	}
	if msg := gone.Message; !strings.Contains(msg, fmt.Sprint(oldest-1)) {
		t.Errorf("message %q does not name %d, the earliest sequence to replay from", msg, oldest-1)
	}
	e.replay(subID, oldest-1, "replay-kept", http.StatusAccepted)
	if d := envelopeOf(t, rc.next()); d.Sequence != oldest {
		t.Errorf("replayed %d, want %d\n%s", d.Sequence, oldest, e.LogText())
	}
}

// failingUntil answers status until it is told to succeed.
type switchable struct{ ok chan struct{} }

func (s *switchable) respond(status int) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) {
		select {
		case <-s.ok:
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(status)
		}
	}
}

// retry posts a retry of a delivery.
func (e *env) retry(subID, deliveryID string, wantStatus int) map[string]any {
	e.T.Helper()
	return e.Call(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/deliveries/" + deliveryID + "/retry", Key: e.Admin}, wantStatus)
}

// retryError posts a retry of a delivery that must be refused with
// wantStatus and returns the error.
func (e *env) retryError(subID, deliveryID string, wantStatus int) lifecycle.ErrorObject {
	e.T.Helper()
	return apitest.CallAs[lifecycle.ErrorBody](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/deliveries/" + deliveryID + "/retry", Key: e.Admin}, wantStatus).Error
}

// TestRetryFailedDeliveryNow: a delivery that failed its every scheduled
// attempt is attempted once more when asked, with the same body, and the
// history shows it; older attempts, succeeded ones and unknown ones are
// refused.
func TestRetryFailedDeliveryNow(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	sw := &switchable{ok: make(chan struct{})}
	rc.setRespond(sw.respond(http.StatusInternalServerError))
	e := newHookEnv(t, rc, noJitter, func(c *lifecycle.Config) { c.WebhookRetrySchedule = []time.Duration{time.Minute} })
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	e.CreateTask(apitest.TaskBody("ENG-1"))
	firstTry := rc.next()
	e.WaitDeliveries(subID, 1)
	e.Clock.Advance(time.Minute)
	rc.next()
	list := e.waitDeliveries(subID, 2)
	lastID, firstID := list[0].ID, list[1].ID
	if list[0].Status != lifecycle.DeliveryFailed || list[0].Attempt != 2 || list[0].NextAttemptAt != nil {
		t.Fatalf("after the schedule, newest = %+v; want attempt 2 failed, the last", list[0])
	}

	old := e.retryError(subID, firstID, http.StatusConflict)
	if d := old.Details; d == nil || d.Reason != "delivery_superseded" || !strings.Contains(old.Message, lastID) {
		t.Errorf("retry of attempt 1 = %+v (details %+v); want delivery_superseded naming %s", old, d, lastID)
	}

	close(sw.ok)
	rec := e.Do(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/deliveries/" + lastID + "/retry", Key: e.Admin})
	apitest.Answer(t, "POST .../retry", rec, http.StatusAccepted)
	got := apitest.DecodeData[lifecycle.Delivery](t, rec)
	now := e.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	// nextAttemptAt is checked in its wire form too: a Timestamp decodes any RFC 3339.
	if got.ID != lastID || got.Status != lifecycle.DeliveryPending || got.NextAttemptAt == nil || got.NextAttemptAt.String() != now ||
		!strings.Contains(rec.Body.String(), `"nextAttemptAt":"`+now+`"`) {
		t.Errorf("retry answered %s; want %s pending, due %s", rec.Body, lastID, now)
	}
	d := rc.next()
	if d.header.Get("X-Service-Event-Id") != firstTry.header.Get("X-Service-Event-Id") || string(d.body) != string(firstTry.body) {
		t.Errorf("retry sent event %s %s; want the first attempt's event and body", d.header.Get("X-Service-Event-Id"), d.body)
	}
	if d.header.Get("X-Service-Delivery-Id") == lastID || d.header.Get("X-Service-Delivery-Id") == firstID {
		t.Errorf("retry reused delivery ID %s", d.header.Get("X-Service-Delivery-Id"))
	}
	list = e.waitDeliveries(subID, 3)
	var history []string
	for _, d := range list {
		history = append(history, fmt.Sprintf("%v %v", d.Attempt, d.Status))
	}
	if diff := cmp.Diff([]string{"3 succeeded", "2 failed", "1 failed"}, history); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}

	if d := e.retryError(subID, list[0].ID, http.StatusConflict).Details; d == nil || d.Reason != "delivery_succeeded" {
		t.Errorf("retry of a success: %+v, want delivery_succeeded", d)
	}
	if code := apitest.ErrorCode(e.retry(subID, "dlv_nosuchdelivery000000000", http.StatusNotFound)); code != "not_found" {
		t.Errorf("unknown delivery: %s", code)
	}
	otherID := e.subscribe(subBody(rc.url("/other"))).ID
	e.retry(otherID, lastID, http.StatusNotFound)
	if code := apitest.ErrorCode(e.Call(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/deliveries/" + lastID + "/retry",
		Key: e.Key(lifecycle.ScopeWebhooksRead)}, http.StatusForbidden)); code != "insufficient_scope" {
		t.Errorf("read-only key: %s", code)
	}
	rc.quiet(200 * time.Millisecond)
}

// TestRetryPendingDeliveryNow: a pending attempt is made at once instead
// of at its scheduled time, and the schedule goes on from it.
func TestRetryPendingDeliveryNow(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.setRespond(failing(2, http.StatusServiceUnavailable))
	e := newHookEnv(t, rc, noJitter)
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	list := e.waitDeliveries(subID, 1)
	if list[0].Status != lifecycle.DeliveryPending {
		t.Fatalf("first attempt %+v, want pending", list[0])
	}
	// The clock does not move: without the retry, attempt 2 would wait 10 s.
	e.retry(subID, list[0].ID, http.StatusAccepted)
	rc.next()
	list = e.waitDeliveries(subID, 2)
	if list[0].Attempt != 2 || list[0].Status != lifecycle.DeliveryPending {
		t.Fatalf("attempt 2 = %+v, want it made and failed, pending", list[0])
	}
	want := e.Clock.Now().Add(time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	if list[0].NextAttemptAt == nil || list[0].NextAttemptAt.String() != want {
		t.Errorf("attempt 3 due %v, want %s: the schedule goes on from attempt 2", list[0].NextAttemptAt, want)
	}
	// And in its wire form: a Timestamp decodes any RFC 3339.
	if got := e.Deliveries(subID)[0]["nextAttemptAt"]; got != want {
		t.Errorf("nextAttemptAt on the wire = %v, want %s", got, want)
	}
	e.Clock.Advance(time.Minute)
	rc.next()
	if list = e.waitDeliveries(subID, 3); list[0].Status != lifecycle.DeliverySucceeded {
		t.Errorf("attempt 3 = %+v, want succeeded", list[0])
	}
}

// TestEnableDisabledSubscription: a receiver's 410 disables its
// subscription; its deliveries cannot be retried until it is enabled
// again; enabling resumes delivery with the events committed meanwhile.
func TestEnableDisabledSubscription(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	sw := &switchable{ok: make(chan struct{})}
	rc.setRespond(sw.respond(http.StatusGone))
	e := newHookEnv(t, rc)
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	gone := e.waitDeliveries(subID, 1)[0].ID
	getSub := func() lifecycle.Subscription {
		return apitest.CallData[lifecycle.Subscription](e.Env, apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusOK)
	}
	apitest.WaitFor(t, func() bool { return getSub().Status == lifecycle.SubscriptionDisabled })

	e.CreateTask(apitest.TaskBody("ENG-2")) // committed while disabled
	rc.quiet(100 * time.Millisecond)
	if d := e.retryError(subID, gone, http.StatusConflict).Details; d == nil || d.Reason != "subscription_disabled" {
		t.Errorf("retry while disabled: %+v, want subscription_disabled", d)
	}

	close(sw.ok)
	enabled := apitest.CallData[lifecycle.Subscription](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/enable", Key: e.Admin}, http.StatusOK)
	if enabled.Status != lifecycle.SubscriptionActive || enabled.ID != subID {
		t.Errorf("enable answered %+v, want the subscription, active", enabled)
	}
	if d := envelopeOf(t, rc.next()); d.Data.TaskIdentifier != "ENG-2" {
		t.Errorf("after enabling got %s's event, want ENG-2's (committed while disabled)", d.Data.TaskIdentifier)
	}
	rc.quiet(100 * time.Millisecond)
	e.retry(subID, gone, http.StatusAccepted)
	if d := envelopeOf(t, rc.next()); d.Data.TaskIdentifier != "ENG-1" {
		t.Errorf("retry delivered %s's event, want ENG-1's", d.Data.TaskIdentifier)
	}
	again := apitest.CallData[lifecycle.Subscription](e.Env, apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/enable", Key: e.Admin, Body: map[string]any{}}, http.StatusOK)
	if again.Status != lifecycle.SubscriptionActive {
		t.Errorf("enabling an active subscription: %+v", again)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/event-subscriptions/whs_nosuchsubscription00000/enable", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "POST", Path: "/event-subscriptions/" + subID + "/enable", Key: e.Admin, Body: map[string]any{"status": "active"}}, http.StatusBadRequest)
	rc.quiet(100 * time.Millisecond)
}

// TestReplayWhileDelivering: a replay accepted while the subscription's
// worker has an attempt under way delivers that event again, and every
// later one, none lost.
func TestReplayWhileDelivering(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	hold := make(chan struct{})
	rc.Hold(hold)
	e := newHookEnv(t, rc, oneAtATime)
	subID := e.subscribe(subBody(rc.url("/hooks"))).ID
	const n = 20
	for i := range n {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
	}
	evs := e.Events()
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 1 })
	if _, err := e.Svc.ReplaySubscription(t.Context(), subID, lifecycle.ReplayParams{FromSequence: evs[0].Sequence - 1}); err != nil {
		t.Fatal(err)
	}
	rc.Hold(nil)
	close(hold)

	seen := map[int64]int{}
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case d := <-rc.Got():
			seen[envelopeOf(t, delivered(d)).Sequence]++
		case <-deadline:
			t.Fatalf("within 10s: %v; want every event, and the first twice", seen)
		}
		done = seen[evs[0].Sequence] >= 2
		for _, ev := range evs {
			done = done && seen[ev.Sequence] >= 1
		}
	}
	if _, err := e.Svc.ReplaySubscription(t.Context(), "whs_nosuchsubscription00000", lifecycle.ReplayParams{}); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("replay of an unknown subscription: %v", err)
	}
}
