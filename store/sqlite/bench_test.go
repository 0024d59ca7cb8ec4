package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
	"github.com/tasklifecycle/lifecycle/store/storetest"
)

// BenchmarkAppendEvents measures the cost of one event insert inside a
// transaction (100 per commit, so the fsync is not what is measured).
func BenchmarkAppendEvents(b *testing.B) {
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	task := lifecycle.Task{ID: "tsk_bench", Identifier: "B-1", Title: "t", Status: lifecycle.StatusTodo, Priority: lifecycle.PriorityLow,
		Links: lifecycle.TaskLinks{Issue: "https://x"}, Version: 1, AcceptanceCriteria: []string{}, Labels: []string{}}
	if err := s.Update(b.Context(), func(tx lifecycle.Tx) error { return tx.CreateTask(b.Context(), task) }); err != nil {
		b.Fatal(err)
	}
	data := json.RawMessage(`{"taskId":"tsk_bench","taskIdentifier":"B-1","status":"todo","summary":"Task B-1 created and sent to triage queue trq_x","availableActions":["start"],"links":{"task":"https://tasks.example.com/api/tasks/tsk_bench","reviewFeedback":"https://tasks.example.com/api/tasks/tsk_bench/review-feedback"},"previousStatus":null,"changedFields":["id","identifier","title"],"actor":{"id":"x","role":"user"}}`)
	b.ResetTimer()
	for i := 0; i < b.N; {
		err := s.Update(b.Context(), func(tx lifecycle.Tx) error {
			for j := 0; j < 100 && i < b.N; j, i = j+1, i+1 {
				e := lifecycle.Event{ID: fmt.Sprintf("evt_%d", i), Type: lifecycle.EventTaskUpdated, TaskID: task.ID, TaskVersion: int64(i),
					OccurredAt: lifecycle.NewTimestamp(time.Now()), Data: data}
				if err := tx.AppendEvent(b.Context(), &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateDeliveries measures recording webhook delivery attempts
// in transactions of 100, as the dispatcher does, with every commit
// fsynced. deliveries/s is the rate the store sustains; the dispatcher
// needs 5,000. One attempt in ten is pending, with its request body.
func BenchmarkCreateDeliveries(b *testing.B) {
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const subs = 10
	err = s.Update(b.Context(), func(tx lifecycle.Tx) error {
		for i := range subs {
			sub := lifecycle.Subscription{ID: fmt.Sprintf("whs_bench%02d", i), URL: "https://hooks.example.com/x",
				EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated}, Status: lifecycle.SubscriptionActive,
				CreatedAt: lifecycle.NewTimestamp(time.Now()), SealedSecret: []byte("0123456789abcdef0123456789abcdef")}
			if err := tx.CreateSubscription(b.Context(), sub); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"evt_bench","type":"task.updated","occurredAt":"2026-11-21T10:04:05.123Z","data":{"taskId":"tsk_bench","taskIdentifier":"B-1","status":"todo","summary":"Task B-1 created and sent to triage queue trq_x","availableActions":["start"],"links":{"task":"https://tasks.example.com/api/tasks/tsk_bench"},"previousStatus":null,"changedFields":["id","identifier","title"],"actor":{"id":"x","role":"user"}}}`)
	ok, unavailable, reason := 200, 503, "the receiver answered 503 Service Unavailable"
	b.ResetTimer()
	for i := 0; i < b.N; {
		err := s.Update(b.Context(), func(tx lifecycle.Tx) error {
			for j := 0; j < 100 && i < b.N; j, i = j+1, i+1 {
				now := lifecycle.NewTimestamp(time.Now())
				d := lifecycle.Delivery{ID: fmt.Sprintf("dlv_%d", i), SubscriptionID: fmt.Sprintf("whs_bench%02d", i%subs),
					EventID: fmt.Sprintf("evt_%d", i), EventSequence: int64(i), Attempt: 1, Status: lifecycle.DeliverySucceeded,
					ResponseStatus: &ok, AttemptedAt: now}
				if i%10 == 0 {
					next := lifecycle.NewTimestamp(now.Add(time.Minute))
					d.Status, d.ResponseStatus, d.Error, d.NextAttemptAt, d.Body = lifecycle.DeliveryPending, &unavailable, &reason, &next, body
				}
				if err := tx.CreateDelivery(b.Context(), d); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}

// BenchmarkMarkStalled is storetest.BenchmarkMarkStalled: a sweep of the
// stall watchdog over 100,000 tasks.
func BenchmarkMarkStalled(b *testing.B) {
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkMarkStalled(b, s)
}
