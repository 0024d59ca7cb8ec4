package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
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

// BenchmarkMarkStalled measures a sweep of the stall watchdog over
// 100,000 tasks (half done, half in progress or in review, active a
// minute ago): none-due is the sweep that finds nothing, the usual one;
// 1000-due marks 1,000 tasks, in two statements of 500, with the
// transaction's commit. The tasks marked are written back unmarked
// between iterations, off the clock.
func BenchmarkMarkStalled(b *testing.B) {
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	active, old := lifecycle.NewTimestamp(now.Add(-time.Minute)), lifecycle.NewTimestamp(now.Add(-48*time.Hour))
	tasks := make([]lifecycle.Task, n)
	for i := range tasks {
		st, last := lifecycle.StatusDone, old
		switch i % 4 {
		case 1:
			st, last = lifecycle.StatusInProgress, active
		case 2:
			st, last = lifecycle.StatusInReview, active
		}
		tasks[i] = lifecycle.Task{ID: fmt.Sprintf("tsk_bench%06d", i), Identifier: fmt.Sprintf("B-%d", i), Title: "t", Status: st,
			Priority: lifecycle.PriorityLow, Links: lifecycle.TaskLinks{Issue: "https://x"}, Version: 1, AcceptanceCriteria: []string{},
			Labels: []string{}, CreatedAt: last, UpdatedAt: last, LastActivityAt: last}
	}
	for i := 0; i < n; i += 5000 {
		err := s.Update(b.Context(), func(tx lifecycle.Tx) error {
			for _, t := range tasks[i : i+5000] {
				if err := tx.CreateTask(b.Context(), t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	p := lifecycle.MarkStalledParams{Now: now, Limit: 500, Rules: []lifecycle.StallRule{
		{Status: lifecycle.StatusInProgress, Before: now.Add(-30 * time.Minute)},
		{Status: lifecycle.StatusInReview, Before: now.Add(-30 * time.Minute)},
	}}
	sweep := func(b *testing.B) int {
		marked := 0
		for {
			var got int
			err := s.MarkStalled(b.Context(), p, func(tx lifecycle.Tx, m []lifecycle.Task) error {
				got = len(m)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			marked += got
			if got < p.Limit {
				return marked
			}
		}
	}
	b.Run("none-due", func(b *testing.B) {
		for b.Loop() {
			if got := sweep(b); got != 0 {
				b.Fatalf("marked %d", got)
			}
		}
	})
	b.Run("1000-due", func(b *testing.B) {
		due := make([]lifecycle.Task, 0, 1000)
		for i := 1; len(due) < cap(due); i += 4 { // in progress
			t := tasks[i]
			t.LastActivityAt = old
			due = append(due, t)
		}
		reset := func() {
			err := s.Update(b.Context(), func(tx lifecycle.Tx) error {
				for _, t := range due {
					if err := tx.UpdateTask(b.Context(), t); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			b.StopTimer()
			reset()
			b.StartTimer()
			if got := sweep(b); got != len(due) {
				b.Fatalf("marked %d, want %d", got, len(due))
			}
		}
		b.StopTimer()
		reset()
	})
}
