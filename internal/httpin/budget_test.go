package httpin

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waiting returns once n takers wait in b.
func waiting(t *testing.T, b *Budget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.waiters)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d takers wait, want %d", got, n)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

func TestAcquireInOrderOfArrival(t *testing.T) {
	t.Parallel()
	b := NewBudget(10)
	held, err := b.Acquire(t.Context(), 5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		name string
		err  error
	}
	done := make(chan result, 2)
	take := func(name string, n int64) {
		_, err := b.Acquire(t.Context(), n, time.Hour)
		done <- result{name, err}
	}
	go take("big", 8)
	waiting(t, b, 1)
	go take("small", 2)
	waiting(t, b, 2) // small waits behind big, though 5 bytes are free
	held()           // big's 8 free up, then small's 2
	held()           // a second call gives nothing back twice
	for range 2 {
		if r := <-done; r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
	}
	if b.free != 0 {
		t.Fatalf("%d bytes free, want 0", b.free)
	}
}

func TestAcquireGivesUp(t *testing.T) {
	t.Parallel()
	b := NewBudget(10)
	if _, err := b.Acquire(t.Context(), 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(t.Context(), 1, time.Millisecond); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire of a used-up budget = %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Acquire(ctx, 1, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v, want context.Canceled", err)
	}
	if len(b.waiters) != 0 {
		t.Fatalf("%d takers still wait after giving up", len(b.waiters))
	}
}
