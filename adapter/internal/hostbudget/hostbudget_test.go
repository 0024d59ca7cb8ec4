package hostbudget

import (
	"context"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	reset := start.Add(30 * time.Minute)
	tests := []struct {
		name      string
		remaining int
		p         Priority
		at        time.Time
		want      time.Duration
	}{
		{"plenty left", 4000, Deferrable, start, 0},
		{"the share is spent", 1000, Deferrable, start, 30 * time.Minute},
		{"just above the reserve", 1001, Deferrable, start, 0},
		{"urgent within the reserve", 1, Urgent, start, 0},
		{"urgent with nothing left", 0, Urgent, start, 30 * time.Minute},
		{"the window has reset", 0, Urgent, reset, 0},
		{"deferrable after the reset", 0, Deferrable, reset.Add(time.Second), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.at
			b := New(0.8, func() time.Time { return now })
			b.Observe("core", State{Limit: 5000, Remaining: tt.remaining, Reset: reset})
			if got := b.Wait("core", tt.p); got != tt.want {
				t.Errorf("Wait = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWaitUnknownLimit(t *testing.T) {
	t.Parallel()
	b := New(0.8, time.Now)
	if got := b.Wait("graphql", Deferrable); got != 0 {
		t.Errorf("Wait before any answer = %s, want 0", got)
	}
}

// Answers that arrive out of order do not raise what is left within a
// window; a later window replaces it.
func TestObserveOutOfOrder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	b := New(0.8, func() time.Time { return now })
	reset := now.Add(time.Hour)
	b.Observe("core", State{Limit: 5000, Remaining: 10, Reset: reset})
	b.Observe("core", State{Limit: 5000, Remaining: 12, Reset: reset})
	if st, _ := b.State("core"); st.Remaining != 10 {
		t.Errorf("Remaining = %d after a late answer, want 10", st.Remaining)
	}
	b.Observe("core", State{Limit: 5000, Remaining: 4999, Reset: reset.Add(time.Hour)})
	if st, _ := b.State("core"); st.Remaining != 4999 {
		t.Errorf("Remaining = %d in the next window, want 4999", st.Remaining)
	}
	b.Spend("core", 9)
	if st, _ := b.State("core"); st.Remaining != 4990 {
		t.Errorf("Remaining = %d after spending 9, want 4990", st.Remaining)
	}
	now = reset.Add(2 * time.Hour)
	if st, _ := b.State("core"); st.Remaining != 5000 {
		t.Errorf("Remaining = %d after the reset, want the limit", st.Remaining)
	}
}

func TestPriorityTravelsInTheContext(t *testing.T) {
	t.Parallel()
	if p := PriorityOf(context.Background()); p != Urgent {
		t.Errorf("a plain context: %v, want urgent", p)
	}
	ctx := WithPriority(context.Background(), Deferrable)
	if p := PriorityOf(ctx); p != Deferrable {
		t.Errorf("a deferrable context: %v, want deferrable", p)
	}
	if p := PriorityOf(WithPriority(ctx, Urgent)); p != Urgent {
		t.Errorf("a deferrable context made urgent: %v, want urgent", p)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	b := New(0.8, func() time.Time { return now })
	if got := b.Snapshot(nil); len(got) != 0 {
		t.Fatalf("Snapshot of a new Budget = %v, want none", got)
	}
	b.Observe("graphql", State{Limit: 5000, Remaining: 4990, Reset: now.Add(time.Hour)})
	b.Observe("core", State{Limit: 5000, Remaining: 12, Reset: now.Add(90 * time.Second)})
	got := b.Snapshot(make([]Limit, 0, 2))
	want := []Limit{
		{Resource: "core", State: State{Limit: 5000, Remaining: 12, Reset: now.Add(90 * time.Second)}, ResetIn: 90 * time.Second},
		{Resource: "graphql", State: State{Limit: 5000, Remaining: 4990, Reset: now.Add(time.Hour)}, ResetIn: time.Hour},
	}
	if len(got) != len(want) {
		t.Fatalf("Snapshot = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Snapshot[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Once the core window has reset, its limit is whole again and its
	// reset is now.
	now = now.Add(2 * time.Minute)
	got = b.Snapshot(got[:0])
	if core := got[0]; core.Remaining != 5000 || core.ResetIn != 0 {
		t.Errorf("core after its reset = %+v, want Remaining 5000, ResetIn 0", core)
	}
	if gql := got[1]; gql.Remaining != 4990 || gql.ResetIn != time.Hour-2*time.Minute {
		t.Errorf("graphql = %+v, want Remaining 4990, ResetIn 58m", gql)
	}
}
