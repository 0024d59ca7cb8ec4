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
