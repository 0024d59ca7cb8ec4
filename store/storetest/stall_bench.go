package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// BenchmarkMarkStalled measures on s, an empty Store, a sweep of the stall watchdog over
// 100,000 tasks (half done, half in progress or in review, active a
// minute ago): none-due is the sweep that finds nothing, the usual one;
// 1000-due marks 1,000 tasks, in two statements of 500, with the
// transaction's commit. The tasks marked are written back unmarked
// between iterations, off the clock.
func BenchmarkMarkStalled(b *testing.B, s lifecycle.Store) {
	marker, ok := s.(lifecycle.StallMarker)
	if !ok {
		b.Skip(noStallMarker)
	}
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
			err := marker.MarkStalled(b.Context(), p, func(tx lifecycle.Tx, m []lifecycle.Task) error {
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
