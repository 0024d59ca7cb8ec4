package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// A queued provider event is taken in one write and applied by the
// reconciler in the background: a push reaches the task as a new headSha
// with task.updated; the same delivery queued again reads the host no more.
func TestQueuedProviderEventAppliedInTheBackground(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	startService(t, e.Svc)
	id := e.startedTask("ENG-1")
	sub := e.SubmitOK(id, "queue-submit-1", apitest.SubmitBody())
	number := int(sub["prNumber"].(float64))
	markerID := e.startedTask("ENG-2")
	marker := int(e.SubmitOK(markerID, "queue-submit-marker", apitest.SubmitBody())["prNumber"].(float64))
	pushed := a.web.Push(number)
	ev := lifecycle.ProviderEvent{Source: "memory", DeliveryID: "d-1", Kind: lifecycle.ProviderHeadChanged,
		PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: number}}
	before := a.web.Calls(memory.OpPullRequest)
	if err := e.Svc.QueuedEvents().ApplyProviderEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "headSha to be the pushed "+pushed, func() bool { return e.Task(id)["headSha"] == pushed })
	evs := e.EventsOf(id)
	last := evs[len(evs)-1]
	if last["type"] != "task.updated" || !slices.Contains(last["data"].(map[string]any)["changedFields"].([]any), any("headSha")) {
		t.Errorf("last event = %v %v, want task.updated naming headSha", last["type"], last["data"])
	}
	reads := a.web.Calls(memory.OpPullRequest)
	if reads == before {
		t.Fatal("the host was not read")
	}
	if err := e.Svc.QueueProviderEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	// A marker queued after the repeat: once the reconciler has applied
	// it, it has swept every task due, the first one too had the repeat
	// made it due. Only the marker's reads may have been made.
	markerPushed := a.web.Push(marker)
	markerEv := ev
	markerEv.DeliveryID, markerEv.PullRequest.Number = "d-marker", marker
	if err := e.Svc.QueueProviderEvent(t.Context(), markerEv); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the marker's head to be applied", func() bool { return e.Task(markerID)["headSha"] == markerPushed })
	if n := a.web.Calls(memory.OpPullRequest) - reads; n != reads-before {
		t.Errorf("%d host reads for the repeat and the marker, want %d (the marker's only)", n, reads-before)
	}
}

// Without a started Service there is no reconciler: a queued event is
// applied at once.
func TestQueuedProviderEventWithoutReconcilerAppliesAtOnce(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	number := int(e.SubmitOK(id, "queue-submit-2", apitest.SubmitBody())["prNumber"].(float64))
	pushed := a.web.Push(number)
	err := e.Svc.QueueProviderEvent(context.Background(), lifecycle.ProviderEvent{Source: "memory", DeliveryID: "d-2",
		Kind: lifecycle.ProviderHeadChanged, PullRequest: lifecycle.PullRequestRef{Owner: "acme", Repo: "web", Number: number}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Task(id)["headSha"]; got != pushed {
		t.Errorf("headSha = %v, want %s at once", got, pushed)
	}
}
