package lifecycle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
)

// A delivery is recognised by its ID and by the digest of its signed
// body: a captured body replayed under a new delivery ID is not applied
// again (no host read, no event); the host's redelivery of a delivery it
// applied (the same ID and body) is not either; another body is applied.
func TestReplayedBodyUnderANewDeliveryIDIsIgnored(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id, _ := e.submittedTask("ENG-1")
	digest := strings.Repeat("ab", 32)
	event := func(delivery, digest string) lifecycle.ProviderEvent {
		return lifecycle.ProviderEvent{Source: "memory", DeliveryID: delivery, Digest: digest, Kind: lifecycle.ProviderHeadChanged, PullRequest: webPR(1)}
	}
	a.web.Push(1)
	before := len(e.EventsOf(id))
	e.applyEvent(event("delivery-1", digest))
	if n := len(e.EventsOf(id)) - before; n != 1 {
		t.Fatalf("%d events after the first delivery, want 1", n)
	}
	for _, again := range []struct{ name, delivery, digest string }{
		{"the body replayed under a new delivery ID", "delivery-2", digest},
		{"the body replayed without a delivery ID", "", digest},
		{"the host's redelivery", "delivery-1", digest},
	} {
		calls := a.web.TotalCalls()
		a.web.Push(1) // the host moved: a reading would see it
		e.applyEvent(event(again.delivery, again.digest))
		if n := len(e.EventsOf(id)) - before; n != 1 {
			t.Errorf("%s: %d events, want still 1", again.name, n)
		}
		if n := a.web.TotalCalls() - calls; n != 0 {
			t.Errorf("%s: %d host calls, want 0", again.name, n)
		}
	}
	e.applyEvent(event("delivery-3", strings.Repeat("cd", 32)))
	if n := len(e.EventsOf(id)) - before; n != 2 {
		t.Errorf("%d events after a delivery of another body, want 2", n)
	}
}

// A delivery that was not applied (the host could not be read) is not
// recorded, so that the host's redelivery of it, with the same ID and
// body, is applied.
func TestRedeliveryOfAFailedDeliveryIsApplied(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id, _ := e.submittedTask("ENG-1")
	ev := lifecycle.ProviderEvent{Source: "memory", DeliveryID: "delivery-1", Digest: strings.Repeat("ef", 32),
		Kind: lifecycle.ProviderHeadChanged, PullRequest: webPR(1)}
	a.web.Push(1)
	before := len(e.EventsOf(id))
	a.web.FailNext(memory.OpPullRequest, errors.New("502 Bad Gateway"))
	if err := e.Svc.ApplyProviderEvent(t.Context(), ev); err == nil {
		t.Fatal("a delivery whose host read failed was applied")
	}
	for _, rec := range []string{"delivery-1", "sha256:" + ev.Digest} {
		if _, err := e.Store.ProviderDelivery(t.Context(), "memory", rec); !errors.Is(err, lifecycle.ErrNotFound) {
			t.Errorf("record %s of a delivery not applied: error %v, want ErrNotFound", rec, err)
		}
	}
	e.applyEvent(ev)
	if n := len(e.EventsOf(id)) - before; n != 1 {
		t.Errorf("%d events after the redelivery, want 1", n)
	}
}

// A queued delivery is recorded by its ID and its digest in one write; the
// body queued again under a new ID is recognised as queued before, and
// nothing of it is recorded.
func TestQueuedReplayIsRecognised(t *testing.T) {
	t.Parallel()
	e, _ := newSubmitEnv(t)
	startService(t, e.Svc)
	e.submittedTask("ENG-1")
	digest := strings.Repeat("01", 32)
	queue := func(delivery string) {
		t.Helper()
		err := e.Svc.QueueProviderEvent(t.Context(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: delivery, Digest: digest,
			Kind: lifecycle.ProviderHeadChanged, PullRequest: webPR(1)})
		if err != nil {
			t.Fatal(err)
		}
	}
	queue("delivery-1")
	for _, rec := range []string{"delivery-1", "sha256:" + digest} {
		if _, err := e.Store.ProviderDelivery(t.Context(), "memory", rec); err != nil {
			t.Errorf("record %s of the queued delivery: %v", rec, err)
		}
	}
	queue("delivery-2")
	if _, err := e.Store.ProviderDelivery(t.Context(), "memory", "delivery-2"); !errors.Is(err, lifecycle.ErrNotFound) {
		t.Errorf("the replay under delivery-2 was recorded (error %v): it was taken as a new delivery", err)
	}
}
