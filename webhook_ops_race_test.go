package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// gatedStore blocks chosen Store reads until released, to make the
// interleavings of operators and the dispatcher happen.
type gatedStore struct {
	*sqlite.Store
	mu          sync.Mutex
	eventGate   chan struct{} // when set, the next read of an event by its ID blocks on it
	eventHit    chan struct{}
	pendingGate chan struct{} // when set, the next read of pending deliveries blocks on it
	pendingHit  chan struct{}
}

func (g *gatedStore) Events(ctx context.Context, f lifecycle.EventFilter) ([]lifecycle.Event, error) {
	if f.ID != "" {
		g.pass(&g.eventGate, &g.eventHit)
	}
	return g.Store.Events(ctx, f)
}

func (g *gatedStore) Deliveries(ctx context.Context, f lifecycle.DeliveryFilter) (lifecycle.DeliveryPage, error) {
	if f.Pending {
		g.pass(&g.pendingGate, &g.pendingHit)
	}
	return g.Store.Deliveries(ctx, f)
}

// pass blocks on *gate, when it is set, after closing *hit; the gate
// holds one call only.
func (g *gatedStore) pass(gate, hit *chan struct{}) {
	g.mu.Lock()
	wait, reached := *gate, *hit
	*gate = nil
	g.mu.Unlock()
	if wait != nil {
		close(reached)
		<-wait
	}
}

func withGate(g **gatedStore) func(*lifecycle.Config) {
	return func(c *lifecycle.Config) {
		*g = &gatedStore{Store: c.Store.(*sqlite.Store)}
		c.Store = *g
	}
}

// statusResponder answers the status held in code.
func statusResponder(code *atomic.Int64) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) { w.WriteHeader(int(code.Load())) }
}

// TestConcurrentRetriesMakeOneAttempt: two retries of one failed delivery
// at once, the dispatcher making the first one's attempt while the second
// is under way: the second is refused, and one attempt is made.
func TestConcurrentRetriesMakeOneAttempt(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	var code atomic.Int64
	code.Store(500)
	rc.setRespond(statusResponder(&code))
	var g *gatedStore
	e := newHookEnv(t, rc, noJitter, withGate(&g), func(c *lifecycle.Config) { c.WebhookRetrySchedule = []time.Duration{time.Minute} })
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	e.WaitDeliveries(subID, 1)
	e.Clock.Advance(time.Minute)
	rc.next()
	list := e.WaitDeliveries(subID, 2)
	failedID := list[0]["deliveryId"].(string)
	code.Store(200)

	// op2 reads the delivery (failed, newest), then stalls reading the event.
	g.mu.Lock()
	gate, hit := make(chan struct{}), make(chan struct{})
	g.eventGate, g.eventHit = gate, hit
	g.mu.Unlock()
	op2 := make(chan error, 1)
	go func() {
		_, err := e.Svc.RetryDelivery(context.Background(), subID, failedID)
		op2 <- err
	}()
	<-hit
	// op1 retries; the dispatcher makes attempt 3 and records it.
	if _, err := e.Svc.RetryDelivery(context.Background(), subID, failedID); err != nil {
		t.Fatal(err)
	}
	rc.next()
	e.WaitDeliveries(subID, 3)
	close(gate)
	err := <-op2
	var conflict *lifecycle.ConflictError
	if !errors.As(err, &conflict) || conflict.Reason != "delivery_superseded" {
		t.Errorf("the second retry: %v, want 409 delivery_superseded", err)
	}
	// A marker: the worker delivers the next event only after whatever
	// the refused retry might have left due, so the first delivery to
	// arrive now is the marker's unless the refused retry made an attempt.
	e.CreateTask(apitest.TaskBody("ENG-2"))
	if d := rc.next(); !strings.Contains(string(d.body), `"taskIdentifier":"ENG-2"`) {
		t.Errorf("delivered %s after the refused retry, want the marker ENG-2's event", d.body)
	}
	var history []string
	for _, d := range e.WaitDeliveries(subID, 4) {
		history = append(history, fmt.Sprintf("%v:%v:%v", d["deliveryId"], d["attempt"], d["status"]))
	}
	if len(history) != 4 {
		t.Errorf("history %v; want 3 attempts of the first event and the marker's", history)
	}
}

// TestReplayAppliedOnceByANewWorker: a subscription replayed while
// disabled, then enabled, starts its worker at the rewound cursor; a retry
// that changes its revision before the worker first records must not
// rewind it again: one replay delivers each event once.
func TestReplayAppliedOnceByANewWorker(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	var code atomic.Int64
	code.Store(200)
	rc.setRespond(statusResponder(&code))
	e := newHookEnv(t, rc, oneAtATime)
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	for i := range 4 {
		e.CreateTask(apitest.TaskBody(fmt.Sprintf("ENG-%d", i)))
		rc.next()
	}
	e.WaitDeliveries(subID, 4)
	code.Store(410)
	e.CreateTask(apitest.TaskBody("ENG-4"))
	rc.next()
	gone := e.WaitDeliveries(subID, 5)[0]["deliveryId"].(string)
	apitest.WaitFor(t, func() bool {
		return e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, 200)["data"].(map[string]any)["status"] == "disabled"
	})
	evs := e.Events()
	from := evs[1].Sequence
	if _, err := e.Svc.ReplaySubscription(t.Context(), subID, lifecycle.ReplayParams{FromSequence: from}); err != nil {
		t.Fatal(err)
	}
	code.Store(200)
	hold := make(chan struct{})
	rc.Hold(hold)
	if _, err := e.Svc.EnableSubscription(t.Context(), subID); err != nil {
		t.Fatal(err)
	}
	apitest.WaitFor(t, func() bool { n, _ := rc.InFlight(); return n == 1 })
	// A retry (not a replay) bumps the revision before the worker records.
	if _, err := e.Svc.RetryDelivery(t.Context(), subID, gone); err != nil {
		t.Fatal(err)
	}
	rc.Hold(nil)
	close(hold)
	seen := map[int64]int{}
	deadline := time.After(3 * time.Second)
loop:
	for {
		select {
		case d := <-rc.Got():
			seen[envelopeOf(t, delivered(d)).Sequence]++
		case <-deadline:
			break loop
		}
	}
	for _, ev := range evs[2:4] {
		if seen[ev.Sequence] != 1 {
			t.Errorf("event %d delivered %d times after one replay, want 1", ev.Sequence, seen[ev.Sequence])
		}
	}
}

// TestRetryAfterEnableNotFailedByTheDisabling: the disabling's clean-up of
// pending attempts reads them after the subscription was enabled again and
// a retry was accepted; it must leave that retry alone.
func TestRetryAfterEnableNotFailedByTheDisabling(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	var code atomic.Int64
	code.Store(200)
	rc.setRespond(statusResponder(&code))
	var g *gatedStore
	e := newHookEnv(t, rc, withGate(&g))
	subID := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.CreateTask(apitest.TaskBody("ENG-0"))
	rc.next()
	e.WaitDeliveries(subID, 1)
	code.Store(410)
	g.mu.Lock()
	gate, hit := make(chan struct{}), make(chan struct{})
	g.pendingGate, g.pendingHit = gate, hit
	g.mu.Unlock()
	e.CreateTask(apitest.TaskBody("ENG-1"))
	rc.next()
	<-hit // the disabling's clean-up reads the pending attempts
	gone := e.WaitDeliveries(subID, 2)[0]["deliveryId"].(string)
	if e.Deliveries(subID)[0]["status"] != "failed" {
		t.Fatalf("not disabled yet")
	}
	apitest.WaitFor(t, func() bool {
		return e.Call(apitest.Request{Method: "GET", Path: "/event-subscriptions/" + subID, Key: e.Admin}, 200)["data"].(map[string]any)["status"] == "disabled"
	})
	code.Store(200)
	if _, err := e.Svc.EnableSubscription(t.Context(), subID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.RetryDelivery(t.Context(), subID, gone); err != nil {
		t.Fatalf("retry after enabling: %v", err)
	}
	close(gate)
	select {
	case <-rc.Got():
	case <-time.After(3 * time.Second):
		var history []string
		for _, d := range e.Deliveries(subID) {
			history = append(history, fmt.Sprintf("%v:%v:%v:%v", d["attempt"], d["status"], d["error"], d["nextAttemptAt"]))
		}
		t.Errorf("the retry accepted after enabling was never made; history %v", history)
	}
}
