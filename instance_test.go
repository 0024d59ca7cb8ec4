package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// startAsync starts svc in a goroutine and returns the channel of its
// result; the fake clock is advanced by the caller.
func startAsync(t *testing.T, svc *lifecycle.Service) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- svc.Start(t.Context()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	return done
}

// advanceUntil advances the fake clock a step at a time until done yields,
// for at most ten seconds of wall time.
func (e *env) advanceUntil(done <-chan error, step time.Duration) error {
	e.T.Helper()
	limit := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-limit:
			e.T.Fatalf("still waiting after ten seconds, the clock advanced by steps of %s", step)
			return nil
		case <-time.After(50 * time.Millisecond): // time for the Services to act on the last step
		}
		e.Clock.Advance(step)
	}
}

// A process restarted with its instance ID, after a crash that left a ship
// operation running under its lease and a submit's idempotency key
// reserved, resumes both at once: the operation does not wait for its
// 30-second lease, and the retried submit runs instead of answering 409.
func TestRestartWithSameInstanceResumesAtOnce(t *testing.T) {
	t.Parallel()
	d := &fakeDeployer{}
	e, _ := newSubmitEnv(t, func(c *lifecycle.Config) {
		c.InstanceID = "web-1"
		c.Deployer = d
		c.ReviewRouter = lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyNeverRequire}}
	})
	id, sha := e.shippableTask("ENG-1")
	rec := e.ship(id, "crash-ship-1", apitest.ShipBody("merge_only", "staging", sha))
	opID := apitest.Decode(t, rec)["data"].(map[string]any)["operationId"].(string)
	other := e.startedTask("ENG-2")

	// What the earlier life left: its instance lease, the operation running
	// under its 30-second lease, and a reservation of a submit key.
	now := e.Clock.Now()
	err := e.Store.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: "web-1",
		Update: func(*lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
			return &lifecycle.InstanceLease{ID: "web-1", Life: "lif_dead", Until: now.Add(3 * time.Second)}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Store.Update(t.Context(), func(tx lifecycle.Tx) error {
		ops, err := tx.ClaimShipOperations(t.Context(), lifecycle.ClaimShipOperationsParams{Owner: "web-1", Now: now, Until: now.Add(30 * time.Second), Limit: 10})
		if err != nil || len(ops) != 1 {
			return errors.Join(err, errors.New("the queued operation was not claimed"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The earlier life is a Service with the same ID that took the submit's
	// key and hangs in the adapter: as good as dead.
	hang := &hangingAdapter{Adapter: memory.New(memory.Config{}), entered: make(chan struct{}), release: make(chan struct{})}
	dead, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, InstanceID: "web-1",
		Adapters: []lifecycle.AdapterBinding{{Project: "web", Adapter: hang}}, Logger: e.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	deadDone := make(chan struct{})
	go func() {
		defer close(deadDone)
		e.submitTo(dead.Handler(), other, "crash-submit-1")
	}()
	<-hang.entered
	t.Cleanup(func() { close(hang.release); <-deadDone })

	// The restarted process waits out the dead life's instance lease (3 s),
	// no more: once it waits, advancing the clock by the lease frees it.
	started := startAsync(t, e.Svc)
	if !e.Clock.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("Start did not wait for the dead life's instance lease")
	}
	e.Clock.Advance(3*time.Second + 10*time.Millisecond)
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start after a crash: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start still waits once the dead life's instance lease ended")
	}
	if op := e.waitShip(opID)["data"].(map[string]any); op["status"] != "succeeded" {
		t.Errorf("resumed operation = %v, want succeeded", op)
	}
	if e.Clock.Now().Sub(now) >= 30*time.Second {
		t.Error("the operation waited for its ship lease")
	}
	if rec := e.Submit(other, "crash-submit-1", apitest.SubmitBody()); rec.Code != http.StatusAccepted {
		t.Errorf("retried submit after the restart = %d %s, want 202 at once", rec.Code, rec.Body)
	}
}

// Two live processes with one instance ID: the second Start sees the
// first renew its lease while it waits, and fails with ErrInstanceInUse.
func TestSecondLiveInstanceRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.InstanceID = "web-1" })
	if err := e.advanceUntil(startAsync(t, e.Svc), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	twin, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, InstanceID: "web-1", Logger: e.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	err = e.advanceUntil(startAsync(t, twin), 250*time.Millisecond)
	if !errors.Is(err, lifecycle.ErrInstanceInUse) {
		t.Fatalf("second Start = %v, want ErrInstanceInUse", err)
	}
	// Once the first closes (giving the lease up), the ID is free at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, InstanceID: "web-1", Logger: e.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands still: a Start that waited for the lease would not
	// return, however long the wall clock runs.
	select {
	case err := <-startAsync(t, third):
		if err != nil {
			t.Errorf("Start after the holder closed = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start after the holder closed still waits with the clock stopped")
	}
}

// leaselessStore is a Store without instance leases: it hides the
// lifecycle.InstanceLeaser of the store it wraps.
type leaselessStore struct{ lifecycle.Store }

// A Store without instance leases serves one Service: New says so in one
// Info line, Start takes no lease and waits for none (a second Service
// with the same ID starts too: nothing can tell them apart), and the
// Service reports its lease held.
func TestStoreWithoutInstanceLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const notice = "the Store keeps no instance leases"
	if strings.Contains(e.LogText(), notice) {
		t.Fatalf("a Service on SQLite, which keeps instance leases, logged %q:\n%s", notice, e.LogText())
	}
	store := leaselessStore{e.Store}
	if _, ok := lifecycle.Store(store).(lifecycle.InstanceLeaser); ok {
		t.Fatal("leaselessStore is an InstanceLeaser")
	}
	var svcs []*lifecycle.Service
	for range 2 {
		svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: apitest.BaseURL, Clock: e.Clock, InstanceID: "web-1", Logger: e.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	var lines []string
	for _, l := range strings.Split(e.LogText(), "\n") {
		if strings.Contains(l, notice) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "instance=web-1") {
		t.Errorf("lines logged by two New = %q, want one Info line each, naming the instance", lines)
	}
	for i, svc := range svcs {
		// Start returns without the clock moving: there is no lease to wait for.
		if err := <-startAsync(t, svc); err != nil {
			t.Fatalf("Start of Service %d: %v", i, err)
		}
		if h := svc.Health(t.Context()); h.Status != "ready" || h.Checks["instanceLease"] != "held" {
			t.Errorf("Ready of Service %d = %+v, want ready with the lease held", i, h)
		}
	}
	err := e.Store.UpdateInstanceLease(t.Context(), lifecycle.UpdateInstanceLeaseParams{ID: "web-1",
		Update: func(cur *lifecycle.InstanceLease) (*lifecycle.InstanceLease, error) {
			if cur != nil {
				t.Errorf("lease stored for web-1: %+v, want none taken", cur)
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
}
