package postgres_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// flakyReceiver counts the deliveries of each event and fails the next
// attempts it is told to.
type flakyReceiver struct {
	receiver
	fail atomic.Int32
}

func (r *flakyReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.fail.Add(-1) >= 0 {
		io.Copy(io.Discard, req.Body)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.fail.Store(0)
	r.receiver.ServeHTTP(w, req)
}

// TestReplicasWebhookOperations: a replay and a retry asked of one replica
// reach the dispatcher of another, which holds the subscription, through
// the store's notifications: in well under the minute its poll would take.
func TestReplicasWebhookOperations(t *testing.T) {
	needServer(t)
	t.Parallel()
	rec := &flakyReceiver{receiver: receiver{events: make(map[string]int)}}
	hook := httptest.NewTLSServer(rec)
	t.Cleanup(hook.Close)
	r := newReplicas(t, 2, hook, func(c *lifecycle.Config) {
		c.WebhookPollInterval, c.WebhookLease = time.Minute, 5*time.Minute
	})
	ctx := t.Context()
	sub, err := r.svcs[0].CreateSubscription(ctx, lifecycle.CreateSubscriptionParams{URL: hook.URL + "/hook",
		EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated}, Secret: "0123456789abcdef0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 5 {
		task, err := r.svcs[i%2].CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: "OPS-" + string(rune('A'+i)), Title: "t",
			Priority: lifecycle.PriorityLow, Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/1"}, Actor: ops})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := r.stores[0].Events(ctx, lifecycle.EventFilter{TaskID: task.ID, Limit: 10})
		if err != nil || len(evs) != 1 {
			t.Fatalf("events of %s: %v, %v", task.ID, evs, err)
		}
		ids = append(ids, evs[0].ID)
	}
	waitUntil(t, 10*time.Second, "the first deliveries", func() bool { return len(rec.count()) == 5 })
	stored, err := r.stores[0].Subscription(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	other := slices.IndexFunc([]string{"replica-0", "replica-1"}, func(s string) bool { return s != stored.LeaseOwner })
	t.Logf("%s delivers for the subscription; replica-%d replays and retries", stored.LeaseOwner, other)
	asker := r.svcs[other]

	evs, err := r.stores[0].Events(ctx, lifecycle.EventFilter{ID: ids[2], Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("Events(%s) = %d events, %v; want it", ids[2], len(evs), err)
	}
	first := evs[0]
	began := time.Now()
	if _, err := asker.ReplaySubscription(ctx, sub.ID, lifecycle.ReplayParams{FromSequence: first.Sequence - 1}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{ids[0]: 1, ids[1]: 1, ids[2]: 2, ids[3]: 2, ids[4]: 2}
	// Attempts run side by side: the last event's may land before the
	// others', so the replay is over when every one has landed.
	waitUntil(t, 10*time.Second, "the replay", func() bool { return mapsEqual(rec.count(), want) })
	t.Logf("the replay was delivered %s after it was asked", time.Since(began).Round(time.Millisecond))

	// A failed attempt, due again in 10 s, is retried now.
	rec.fail.Store(1)
	task, err := asker.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: "OPS-F", Title: "t", Priority: lifecycle.PriorityLow,
		Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/2"}, Actor: ops})
	if err != nil {
		t.Fatal(err)
	}
	var pending lifecycle.Delivery
	waitUntil(t, 10*time.Second, "the failed attempt recorded", func() bool {
		list, err := asker.Deliveries(ctx, sub.ID, lifecycle.ListParams{Limit: 1})
		if err != nil || len(list.Deliveries) == 0 || list.Deliveries[0].Status != lifecycle.DeliveryPending {
			return false
		}
		pending = list.Deliveries[0]
		return true
	})
	// OPS-F's event follows the replayed ones: once its attempt is
	// recorded, the worker has sent everything the replay made due, and
	// nothing more.
	got := rec.count()
	delete(got, pending.EventID)
	if !mapsEqual(got, want) {
		t.Errorf("deliveries after the replay %v, want %v", got, want)
	}
	began = time.Now()
	if _, err := asker.RetryDelivery(ctx, sub.ID, pending.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the retry", func() bool { return rec.count()[pending.EventID] == 1 })
	t.Logf("the retry of %s's event was delivered %s after it was asked", task.Identifier, time.Since(began).Round(time.Millisecond))
}

// mapsEqual reports whether two counts are the same.
func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
