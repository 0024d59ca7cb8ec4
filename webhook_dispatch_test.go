package lifecycle_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// claimRecorder is a Store that records the claims made through it, and
// counts the subscription updates.
type claimRecorder struct {
	lifecycle.Store

	mu      sync.Mutex
	claims  []recordedClaim
	updates int
}

// recordedClaim is one claim: what was asked and how many it returned.
type recordedClaim struct {
	p    lifecycle.ClaimSubscriptionsParams
	held int
}

func (c *claimRecorder) Update(ctx context.Context, fn func(lifecycle.Tx) error) error {
	return c.Store.Update(ctx, func(tx lifecycle.Tx) error { return fn(&claimRecorderTx{Tx: tx, c: c}) })
}

// claimRecorderTx records the claims of one transaction.
type claimRecorderTx struct {
	lifecycle.Tx
	c *claimRecorder
}

func (x *claimRecorderTx) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	subs, err := x.Tx.ClaimSubscriptions(ctx, p)
	if err == nil {
		x.c.mu.Lock()
		x.c.claims = append(x.c.claims, recordedClaim{p: p, held: len(subs)})
		x.c.mu.Unlock()
	}
	return subs, err
}

func (x *claimRecorderTx) UpdateSubscription(ctx context.Context, sub lifecycle.Subscription) error {
	x.c.mu.Lock()
	x.c.updates++
	x.c.mu.Unlock()
	return x.Tx.UpdateSubscription(ctx, sub)
}

// updated returns how many subscription updates were made so far.
func (c *claimRecorder) updated() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates
}

// recorded returns the claims so far.
func (c *claimRecorder) recorded() []recordedClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]recordedClaim(nil), c.claims...)
}

func TestWebhookClaimBatch(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rec := &claimRecorder{}
	e := newEnv(t, rc.trust, func(c *lifecycle.Config) {
		rec.Store = c.Store
		c.Store = rec
		c.WebhookClaimBatch = 1
	})
	for range 3 {
		e.Subscribe(subBody(rc.url("/hooks")))
	}
	e.Start()
	// One subscription more per claim, until the Service holds all three.
	apitest.WaitFor(t, func() bool {
		claims := rec.recorded()
		if n := len(claims); n == 0 || claims[n-1].held < 3 {
			e.Clock.Advance(time.Second)
			return false
		}
		return true
	})
	prev := 0
	for i, c := range rec.recorded() {
		if c.p.Max != 1 || c.p.Owner == "" || !c.p.Until.Equal(c.p.Now.Add(30*time.Second)) {
			t.Errorf("claim %d asked %+v, want Max 1 and a lease of 30s", i, c.p)
		}
		if c.held > prev+1 {
			t.Errorf("claim %d took %d subscriptions more, want at most 1", i, c.held-prev)
		}
		prev = c.held
	}
}

func TestWebhookClaimBatchDefault(t *testing.T) {
	t.Parallel()
	rec := &claimRecorder{}
	e := newEnv(t, func(c *lifecycle.Config) {
		rec.Store = c.Store
		c.Store = rec
	})
	e.Start()
	apitest.WaitFor(t, func() bool { return len(rec.recorded()) > 0 })
	if got := rec.recorded()[0].p.Max; got != 64 {
		t.Errorf("claim Max = %d by default, want 64", got)
	}
	if _, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, WebhookClaimBatch: -1}); err == nil {
		t.Error("New with a negative WebhookClaimBatch succeeded")
	}
}

// restart replaces e's Service, stopped, with a new one on the same Store
// that delivers to rc, and starts it.
func (e *env) restart(rc *receiver) {
	e.T.Helper()
	cfg := lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, Logger: e.Logger()}
	rc.trust(&cfg)
	svc, err := lifecycle.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	e.Svc = svc
	e.Start()
}

// storedCursor returns the cursor of a subscription as stored.
func (e *env) storedCursor(subID string) int64 {
	e.T.Helper()
	sub, err := e.Store.Subscription(e.T.Context(), subID)
	if err != nil {
		e.T.Fatal(err)
	}
	return sub.Cursor
}

// A subscription whose filters keep none of the events still stores how
// far it read, now and then rather than per event: a restart does not read
// them all again, and once they are pruned it does not warn that they were
// not delivered.
func TestWebhookFilteredCursorIsStored(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rec := &claimRecorder{}
	e := newHookEnv(t, rc, func(c *lifecycle.Config) {
		rec.Store = c.Store
		c.Store = rec
	})
	keep := e.CreateTask(apitest.TaskBody("ENG-1"))["id"].(string)
	other := e.CreateTask(apitest.TaskBody("ENG-2"))["id"].(string)
	body := subBody(rc.url("/hooks"))
	body["filters"] = map[string]any{"taskIds": []string{keep}}
	subID := e.Subscribe(body)["id"].(string)
	appendOther := func(n int) int64 {
		t.Helper()
		var evs []*lifecycle.Event
		for range n {
			evs = append(evs, testEvent(other, lifecycle.EventTaskUpdated))
		}
		if err := e.Svc.AppendEventsForTest(t.Context(), evs); err != nil {
			t.Fatal(err)
		}
		return evs[n-1].Sequence
	}
	updatesBefore := rec.updated()

	// A few events the subscription does not keep: the cursor is stored
	// once some time has passed.
	last := appendOther(100)
	apitest.WaitFor(t, func() bool {
		if e.storedCursor(subID) == last {
			return true
		}
		e.Clock.Advance(time.Second)
		return false
	})
	// Many: it is stored once the worker has read far enough, at once.
	last = appendOther(600)
	apitest.WaitFor(t, func() bool { return e.storedCursor(subID) == last })
	if n := rec.updated() - updatesBefore; n > 10 {
		t.Errorf("%d subscription updates for 700 events read: not batched", n)
	}

	// Every process stops; the events are pruned; one starts again.
	if err := e.Svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(73 * time.Hour)
	if _, err := e.Store.Prune(t.Context(), lifecycle.PruneParams{Before: e.Clock.Now().Add(-72 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.restart(rc)
	if _, err := e.Svc.StartTask(t.Context(), keep, lifecycle.StartTaskParams{Actor: lifecycle.Actor{ID: "agent", Role: lifecycle.RoleAgent}}); err != nil {
		t.Fatal(err)
	}
	if d := rc.next(); !strings.Contains(string(d.body), keep) {
		t.Errorf("delivered %s, want the event of %s", d.body, keep)
	}
	if strings.Contains(e.LogText(), "were not delivered") {
		t.Errorf("warned of undelivered events though the subscription kept none:\n%s", e.LogText())
	}
}

// claimGate is a Store that, while closed, holds every claim after its
// transaction committed until the test lets it go on.
type claimGate struct {
	lifecycle.Store
	closed  atomic.Bool
	claimed chan []string // the subscriptions a held claim returned
	release chan struct{}
}

func (g *claimGate) Update(ctx context.Context, fn func(lifecycle.Tx) error) error {
	var held []string
	claimed := false
	err := g.Store.Update(ctx, func(tx lifecycle.Tx) error {
		held, claimed = nil, false
		return fn(&gatedTx{Tx: tx, held: &held, claimed: &claimed})
	})
	if err == nil && claimed && g.closed.Load() {
		g.claimed <- held
		<-g.release
	}
	return err
}

// gatedTx notes the claims of a claimGate's transaction.
type gatedTx struct {
	lifecycle.Tx
	held    *[]string
	claimed *bool
}

func (x *gatedTx) ClaimSubscriptions(ctx context.Context, p lifecycle.ClaimSubscriptionsParams) ([]lifecycle.Subscription, error) {
	subs, err := x.Tx.ClaimSubscriptions(ctx, p)
	*x.claimed = true
	for _, sub := range subs {
		*x.held = append(*x.held, sub.ID)
	}
	return subs, err
}

// A subscription deleted while a claim that returned it is under way is
// not started again, and the dispatcher forgets it once no claim can.
func TestWebhookDeletedSubscriptionsAreForgotten(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	gate := &claimGate{claimed: make(chan []string), release: make(chan struct{})}
	e := newEnv(t, rc.trust, func(c *lifecycle.Config) {
		gate.Store = c.Store
		c.Store = gate
	})
	// nextClaim waits for the next claim, moving the clock on so that the
	// dispatcher polls, and returns what it returned.
	nextClaim := func() []string {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case held := <-gate.claimed:
				return held
			case <-time.After(time.Millisecond):
				e.Clock.Advance(100 * time.Millisecond)
			case <-deadline:
				t.Fatal("no claim within 5s")
			}
		}
	}
	var subIDs []string
	for range 3 {
		subIDs = append(subIDs, e.Subscribe(subBody(rc.url("/hooks")))["id"].(string))
	}
	// Deleted before the dispatcher runs: no claim is under way.
	early := e.Subscribe(subBody(rc.url("/hooks")))["id"].(string)
	e.Call(apitest.Request{Method: "DELETE", Path: "/event-subscriptions/" + early, Key: e.Admin}, http.StatusNoContent)
	if _, deleted := e.Svc.WebhookStateForTest(); deleted != 0 {
		t.Errorf("%d deleted remembered before the dispatcher runs, want 0", deleted)
	}
	gate.closed.Store(true)
	e.Start()
	if held := nextClaim(); len(held) != 3 {
		t.Fatalf("the first claim returned %v, want the 3 subscriptions", held)
	}
	// Deleted while that claim is under way.
	for _, subID := range subIDs {
		e.Call(apitest.Request{Method: "DELETE", Path: "/event-subscriptions/" + subID, Key: e.Admin}, http.StatusNoContent)
	}
	gate.release <- struct{}{}
	if held := nextClaim(); len(held) != 0 {
		t.Errorf("the claim after the deletions returned %v", held)
	}
	// The first claim is over, the second has not started workers yet.
	if workers, deleted := e.Svc.WebhookStateForTest(); workers != 0 || deleted != 3 {
		t.Errorf("after the claim under way: %d workers, %d deleted remembered; want 0 and 3", workers, deleted)
	}
	gate.release <- struct{}{}
	nextClaim() // the second claim is over
	if workers, deleted := e.Svc.WebhookStateForTest(); workers != 0 || deleted != 0 {
		t.Errorf("once no claim can return them: %d workers, %d deleted remembered; want 0 and 0", workers, deleted)
	}
	gate.closed.Store(false)
	gate.release <- struct{}{}
}
