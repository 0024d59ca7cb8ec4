package sqlite_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
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

// BenchmarkListReadyTasks measures GET /tasks?ready=true's read of the
// Store over 100,000 tasks, one in ten with dependencies: a page of 50
// ready tasks (in todo, waiting on nothing), page after page from the
// cursor through the whole listing, then again. It reports the 50th and
// 99th percentiles of one page's read; the target is a p99 of 20 ms.
func BenchmarkListReadyTasks(b *testing.B) {
	s, err := sqlite.New(sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const tasks = 100_000
	statuses := []lifecycle.Status{lifecycle.StatusTodo, lifecycle.StatusTodo, lifecycle.StatusTodo, lifecycle.StatusTodo,
		lifecycle.StatusInProgress, lifecycle.StatusInProgress, lifecycle.StatusInReview, lifecycle.StatusDone, lifecycle.StatusDone, lifecycle.StatusDone}
	project := "web"
	now := lifecycle.NewTimestamp(time.Now())
	err = s.Update(b.Context(), func(tx lifecycle.Tx) error {
		for i := range tasks {
			t := lifecycle.Task{ID: fmt.Sprintf("tsk_bench%06d", i), Identifier: fmt.Sprintf("B-%d", i), Title: "Fix the login redirect",
				Description: "Users land on a 404 after login; keep the query string.", Status: statuses[i*7%len(statuses)],
				Priority: lifecycle.PriorityMedium, Links: lifecycle.TaskLinks{Issue: fmt.Sprintf("https://issues.example.com/B-%d", i)},
				Context: lifecycle.TaskContext{Project: &project, Goal: "login works"}, Version: 1, AcceptanceCriteria: []string{"redirects to /home"},
				Labels: []string{"frontend"}, DependsOn: []string{}, WaitingOn: []string{}, CreatedAt: now, UpdatedAt: now}
			if i%10 == 9 { // one in ten depends on two earlier tasks, and waits on the first
				t.DependsOn = []string{fmt.Sprintf("tsk_bench%06d", i-9), fmt.Sprintf("tsk_bench%06d", i-1)}
				t.WaitingOn = t.DependsOn[:1]
			}
			if err := tx.CreateTask(b.Context(), t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	var after int64
	listed := 0
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		page, err := s.ListTasks(b.Context(), lifecycle.TaskFilter{Ready: true, After: after, Limit: 50})
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range page.Tasks {
			if t.Status != lifecycle.StatusTodo || len(t.WaitingOn) != 0 {
				b.Fatalf("listed as ready: %s, %s, waiting on %v", t.ID, t.Status, t.WaitingOn)
			}
		}
		listed += len(page.Tasks)
		after = page.Next // 0 after the last page: from the start again
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(listed)/float64(b.N), "tasks/page")
}
