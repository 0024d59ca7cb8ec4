package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// A subscription created, deleted, or changed in status or revision is
// announced to the listeners; a change of its cursor or lease alone is not.
func TestSubscriptionNotifications(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	changes := make(chan lifecycle.Change, 100)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() { listening <- s.Listen(ctx, func(c lifecycle.Change) { changes <- c }) }()
	t.Cleanup(func() {
		cancel()
		<-listening
	})
	// next returns the next change announced, or 0 after wait.
	next := func(wait time.Duration) lifecycle.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(wait):
			return 0
		}
	}
	if c := next(10 * time.Second); c != lifecycle.ChangeAll {
		t.Fatalf("first change %d, want ChangeAll", c)
	}
	now := lifecycle.NewTimestamp(time.Now())
	sub := lifecycle.Subscription{ID: "whs_1", URL: "https://hooks.example.com/", EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated},
		Status: lifecycle.SubscriptionActive, CreatedAt: now, SealedSecret: []byte("sealed")}
	updateSub := func(change func(sub *lifecycle.Subscription)) {
		t.Helper()
		err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
			stored, err := tx.Subscription(t.Context(), sub.ID)
			if err != nil {
				return err
			}
			change(&stored)
			return tx.UpdateSubscription(t.Context(), stored)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	expectSubscriptions := func(what string) {
		t.Helper()
		if c := next(10 * time.Second); c != lifecycle.ChangeSubscriptions {
			t.Fatalf("after %s: change %d, want ChangeSubscriptions", what, c)
		}
	}

	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.CreateSubscription(t.Context(), sub) }); err != nil {
		t.Fatal(err)
	}
	expectSubscriptions("the creation")

	// The dispatcher's work moves the cursor and renews the lease: nothing
	// to announce. An event committed after it comes first and alone, as
	// what a transaction announces is sent in the order of commits, or
	// with the next ones.
	updateSub(func(sub *lifecycle.Subscription) {
		sub.Cursor, sub.LeaseOwner, sub.LeaseUntil, sub.Rewound = 12, "dispatcher-1", time.Now().Add(time.Minute), true
	})
	err := s.Update(t.Context(), func(tx lifecycle.Tx) error {
		task := lifecycle.Task{ID: "tsk_1", Identifier: "N-1", Title: "t", Status: lifecycle.StatusTodo, Priority: lifecycle.PriorityMedium,
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/N-1"}, Version: 1, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateTask(t.Context(), task); err != nil {
			return err
		}
		e := lifecycle.Event{ID: "evt_1", Type: lifecycle.EventTaskUpdated, TaskID: task.ID, TaskVersion: 1, OccurredAt: now,
			Data: json.RawMessage(`{"taskId":"tsk_1"}`)}
		return tx.AppendEvent(t.Context(), &e)
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(10 * time.Second); c != lifecycle.ChangeEvents {
		t.Fatalf("after a change of cursor and lease and an event: change %d, want ChangeEvents alone", c)
	}
	if c := next(200 * time.Millisecond); c != 0 {
		t.Fatalf("after a change of cursor and lease and an event: change %d too, want none", c)
	}

	// An operator's replay changes the revision: the dispatchers of every
	// process look again.
	updateSub(func(sub *lifecycle.Subscription) { sub.Cursor, sub.Revision = 0, sub.Revision+1 })
	expectSubscriptions("a change of revision")
	updateSub(func(sub *lifecycle.Subscription) { sub.Status = lifecycle.SubscriptionDisabled })
	expectSubscriptions("a change of status")
	if err := s.Update(t.Context(), func(tx lifecycle.Tx) error { return tx.DeleteSubscription(t.Context(), sub.ID) }); err != nil {
		t.Fatal(err)
	}
	expectSubscriptions("the deletion")
}
