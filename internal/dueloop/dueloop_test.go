package dueloop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		now  string
		iv   time.Duration
		want string
	}{
		{"2026-01-01T10:00:00Z", time.Minute, "2026-01-01T10:01:00Z"},
		{"2026-01-01T10:00:59.5Z", time.Minute, "2026-01-01T10:01:00Z"},
		{"2026-01-01T10:07:00Z", 5 * time.Minute, "2026-01-01T10:10:00Z"},
		{"2026-01-01T10:07:00Z", 0, "2026-01-01T10:07:00Z"},
	} {
		if got := Next(at(c.now), c.iv); !got.Equal(at(c.want)) {
			t.Errorf("Next(%s, %v) = %s, want %s", c.now, c.iv, got, c.want)
		}
	}
}

func TestRunKeepsTheBeatAndWakes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 40, 0, time.UTC)
	clock := fakeclock.New(t0)
	b := New(clock, time.Minute, 10*time.Minute)
	ran := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx, func(ctx context.Context) { ran <- clock.Now() })
	}()
	next := func() time.Time {
		t.Helper()
		select {
		case at := <-ran:
			return at
		case <-time.After(5 * time.Second):
			t.Fatal("the work did not run")
			panic("unreachable")
		}
	}
	if at := next(); !at.Equal(t0) {
		t.Fatalf("first run at %s, want at once", at)
	}
	// The next beat is the next whole minute, 20s away.
	beat := time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC)
	if !clock.WaitForWaiterAt(beat, 5*time.Second) {
		t.Fatal("the beat does not wait for the next whole minute")
	}
	clock.Set(beat)
	if at := next(); !at.Equal(beat) {
		t.Fatalf("ran at %s, want %s", at, beat)
	}
	clock.WaitForWaiterAt(beat.Add(time.Minute), 5*time.Second)
	b.Wake()
	if at := next(); !at.Equal(beat) {
		t.Fatalf("woken run at %s, want %s", at, beat)
	}
	cancel()
	<-done
}

func TestRunWaitsAtMostPoll(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0)
	b := New(clock, time.Hour, time.Minute)
	ran := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx, func(ctx context.Context) { ran <- struct{}{} })
	}()
	<-ran
	if !clock.WaitForWaiterAt(t0.Add(time.Minute), 5*time.Second) {
		t.Fatal("the beat waits longer than its poll interval")
	}
	cancel()
	<-done
}

func TestDrain(t *testing.T) {
	due := []int{1, 2, 3, 4, 5, 6, 7}
	var limits []int
	var worked [][]int
	claim := func(ctx context.Context, limit int) ([]int, error) {
		limits = append(limits, limit)
		n := min(limit, len(due))
		got := due[:n]
		due = due[n:]
		return got, nil
	}
	work := func(ctx context.Context, items []int) { worked = append(worked, items) }
	if err := Drain(context.Background(), 3, claim, work); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(limits, []int{3, 3, 3}) || len(worked) != 3 || !slices.Equal(worked[2], []int{7}) {
		t.Fatalf("claimed with %v, worked %v; want three chunks of at most 3", limits, worked)
	}
	// Exactly a chunk's worth: one more, empty, claim ends it.
	due, limits, worked = []int{1, 2, 3}, nil, nil
	Drain(context.Background(), 3, claim, work)
	if len(limits) != 2 || len(worked[1]) != 0 {
		t.Fatalf("claimed with %v, worked %v; want a full chunk then an empty one", limits, worked)
	}
	boom := errors.New("store down")
	err := Drain(context.Background(), 3, func(ctx context.Context, limit int) ([]int, error) { return nil, boom },
		func(ctx context.Context, items []int) { t.Error("worked after a failed claim") })
	if !errors.Is(err, boom) {
		t.Fatalf("Drain = %v, want the claim's error", err)
	}
}
