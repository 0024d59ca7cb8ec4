package lifecycle_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// These tests cover webhooks that arrive while a reading of the same task
// is under way: the hint is not folded into a reading that may have begun
// before the change it announces, and a reading older than the facts
// stored is not applied over them.

// blindHost is a code host whose sweeps, like GitHub's updatedAt, do not
// see CI change: it answers Unchanged to a sweep whose Version matches the
// pull request's head, state and mergeability, whatever its checks. Its
// full readings can be held once read, to stand for a reading under way.
type blindHost struct {
	*memory.Adapter

	mu       sync.Mutex
	readings int           // full readings answered
	hold     bool          // hold the next full reading once it has read
	read     chan struct{} // told when a held reading has read
	release  chan struct{} // closed to let a held reading go on
}

func newBlindHost(a *memory.Adapter) *blindHost {
	return &blindHost{Adapter: a, read: make(chan struct{}, 1), release: make(chan struct{})}
}

// holdNext holds the next full reading once it has read, until release is
// closed.
func (h *blindHost) holdNext() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hold = true
}

// ReadPullRequests implements lifecycle.BatchReader.
func (h *blindHost) ReadPullRequests(ctx context.Context, q lifecycle.BatchQuery) ([]lifecycle.Reading, error) {
	full := lifecycle.BatchQuery{Purpose: lifecycle.ReadNow, Reads: q.Reads}
	readings, err := h.Adapter.Batch().ReadPullRequests(ctx, full)
	if err != nil {
		return nil, err
	}
	probed := true
	for i := range readings {
		r := &readings[i]
		if r.Err != nil {
			continue
		}
		sum := sha256.Sum256([]byte(r.PullRequest.HeadSHA + "/" + string(r.PullRequest.State) + "/" + string(r.PullRequest.Mergeable)))
		r.Version = hex.EncodeToString(sum[:8])
		if q.Purpose == lifecycle.ReadSweep && q.Reads[i].Version == r.Version {
			*r = lifecycle.Reading{Unchanged: true, Version: r.Version}
		} else {
			probed = false
		}
	}
	h.mu.Lock()
	hold := h.hold && !probed
	h.hold = h.hold && !hold
	h.mu.Unlock()
	if hold {
		h.read <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !probed {
		h.mu.Lock()
		h.readings++
		h.mu.Unlock()
	}
	return readings, nil
}

// fullReadings returns how many full readings h answered.
func (h *blindHost) fullReadings() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.readings
}

// newBlindEnv builds a ship env whose project web is read through a
// blindHost over the memory adapter.
func newBlindEnv(t *testing.T) (*env, adapters, *blindHost) {
	t.Helper()
	var host *blindHost
	e, a, _ := newShipEnv(t, func(c *lifecycle.Config) {
		web := c.Adapters[0].Adapter.(*memory.Adapter)
		host = newBlindHost(web)
		c.Adapters[0].Adapter = host
	})
	return e, a, host
}

// ciOfTask returns the overall CI of task id, read through the Go API.
func (e *env) ciOfTask(id string) lifecycle.CIOverall {
	e.T.Helper()
	st, _, err := e.Svc.CIStatus(e.T.Context(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return st.Overall
}

// queueEvent queues a checks_changed event about pull request 1, as a
// webhook handler mounted on QueuedEvents does.
func (e *env) queueEvent(delivery string) {
	e.T.Helper()
	err := e.Svc.QueueProviderEvent(e.T.Context(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: delivery,
		Kind: lifecycle.ProviderChecksChanged, PullRequest: webPR(1)})
	if err != nil {
		e.T.Fatalf("queue event %s: %v", delivery, err)
	}
}

// A webhook that arrives while the reconciler reads the same task (after
// the reading saw the host, before it applied what it saw) makes it read
// the task again, in full: a sweep's shortcut, blind to CI as GitHub's
// updatedAt is, would answer Unchanged and keep CI running for ever.
func TestHintDuringAReadingCausesAnotherReading(t *testing.T) {
	t.Parallel()
	e, a, host := newBlindEnv(t)
	id, sha := e.submittedTask("ENG-1")
	a.web.SetCheck(sha, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckRunning})
	e.queueEvent("build-started")
	apitest.WaitFor(t, func() bool { return e.ciOfTask(id) == lifecycle.CIRunning })

	host.holdNext()
	e.queueEvent("build-started-again")
	<-host.read // the reconciler has read the build as running
	a.web.SetCheck(sha, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckPassed})
	e.queueEvent("build-passed")
	close(host.release)

	// No clock moves: only the hint can make the reconciler read again.
	apitest.WaitFor(t, func() bool { return e.ciOfTask(id) == lifecycle.CIPassed })
}

// A reading that began before the one whose facts are stored is not
// applied over them: CI does not flap back to running.
func TestOlderReadingIsNotAppliedOverANewerOne(t *testing.T) {
	t.Parallel()
	e, a, host := newBlindEnv(t)
	id, sha := e.submittedTask("ENG-1")
	a.web.SetCheck(sha, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckRunning})
	e.queueEvent("build-started")
	apitest.WaitFor(t, func() bool { return e.ciOfTask(id) == lifecycle.CIRunning })

	host.holdNext()
	e.queueEvent("build-started-again")
	<-host.read // the reconciler's reading, under way, saw the build running
	e.Clock.Advance(time.Millisecond)
	a.web.SetCheck(sha, lifecycle.CICheck{Name: "build", Status: lifecycle.CheckPassed})
	e.hostEvent(lifecycle.ProviderChecksChanged, 1, "build-passed") // read and applied at once
	if ci := e.ciOfTask(id); ci != lifecycle.CIPassed {
		t.Fatalf("CI after the webhook's own reading = %s, want passed", ci)
	}
	before, read := len(e.EventsOf(id)), host.fullReadings()
	close(host.release)

	// The held reading ends; the webhook came after it began, so the
	// reconciler reads the task once more (through its shortcut: the
	// webhook's own reading began after the hint), and then finds nothing
	// due.
	apitest.WaitFor(t, func() bool {
		task, err := e.Store.Task(t.Context(), id)
		return host.fullReadings() > read && err == nil && task.ReconcileAt.After(e.Clock.Now())
	})
	if ci := e.ciOfTask(id); ci != lifecycle.CIPassed {
		t.Errorf("CI after the older reading ended = %s, want passed", ci)
	}
	for _, ev := range e.EventsOf(id)[before:] {
		if hasString(eventData(ev)["changedFields"], "ciStatus") {
			t.Errorf("the older reading changed CI again: %v", ev)
		}
	}
}
