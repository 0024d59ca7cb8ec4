package claimrun

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// claimCall is one call of Claim, answered by the test.
type claimCall struct {
	limit  int
	resume bool
	answer chan []int
}

func TestRunnerFillsItsSlotsAndClaimsAgainWhenOneFrees(t *testing.T) {
	clock := fakeclock.New(t0)
	calls := make(chan claimCall)
	working := make(chan int, 8)
	finish := map[int]chan struct{}{}
	for i := range 8 {
		finish[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	r := New(Config[int]{Clock: clock, Slots: 2, Poll: time.Minute,
		Claim: func(ctx context.Context, limit int, resume bool) ([]int, error) {
			c := claimCall{limit, resume, make(chan []int)}
			select {
			case calls <- c:
			case <-ctx.Done():
				t.Error("claimed after ctx ended")
				return nil, ctx.Err()
			}
			return <-c.answer, nil
		},
		Work: func(ctx context.Context, item int) {
			working <- item
			select {
			case <-finish[item]:
			case <-ctx.Done():
			}
		},
		Go: func(f func()) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f()
			}()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	c := testenv.Receive(t, 5*time.Second, calls, "claim")
	if c.limit != 2 || !c.resume {
		t.Fatalf("first claim: limit %d, resume %v; want 2, true", c.limit, c.resume)
	}
	c.answer <- []int{0}
	testenv.Receive(t, 5*time.Second, working, "work")
	// One slot free, the claim found less than it could: the runner
	// waits for a poll.
	clock.WaitForWaiterAt(t0.Add(time.Minute), 5*time.Second)
	clock.Advance(time.Minute)
	c = testenv.Receive(t, 5*time.Second, calls, "claim")
	if c.limit != 1 || c.resume {
		t.Fatalf("second claim: limit %d, resume %v; want 1, false", c.limit, c.resume)
	}
	c.answer <- []int{1}
	testenv.Receive(t, 5*time.Second, working, "work")
	// Both slots taken: no claim until a work ends, and then at once.
	close(finish[0])
	c = testenv.Receive(t, 5*time.Second, calls, "claim")
	if c.limit != 1 {
		t.Fatalf("claim after a work ended: limit %d, want 1", c.limit)
	}
	c.answer <- nil
	// Woken: claims again.
	clock.WaitForWaiterAt(t0.Add(2*time.Minute), 5*time.Second)
	r.Wake()
	c = testenv.Receive(t, 5*time.Second, calls, "claim")
	c.answer <- []int{2}
	testenv.Receive(t, 5*time.Second, working, "work")
	cancel()
	<-done
	wg.Wait() // the works see ctx end
}

func TestHoldRenewsAndStopsTheWorkWhenTheLeaseIsLost(t *testing.T) {
	clock := fakeclock.New(t0)
	renewals := make(chan bool)
	started := make(chan struct{})
	lost := make(chan bool)
	go func() {
		lost <- Hold(context.Background(), clock, time.Second, func(ctx context.Context) bool {
			return <-renewals
		}, func(ctx context.Context) {
			close(started)
			<-ctx.Done()
		})
	}()
	<-started
	clock.WaitForWaiterAt(t0.Add(time.Second), 5*time.Second)
	clock.Advance(time.Second)
	renewals <- true
	clock.WaitForWaiterAt(t0.Add(2*time.Second), 5*time.Second)
	clock.Advance(time.Second)
	renewals <- false
	if !testenv.Receive(t, 5*time.Second, lost, "end of Hold") {
		t.Fatal("Hold did not report the lease lost")
	}
}

func TestHoldEndsWithItsWork(t *testing.T) {
	clock := fakeclock.New(t0)
	release := make(chan struct{})
	lost := make(chan bool)
	go func() {
		lost <- Hold(context.Background(), clock, time.Second, func(ctx context.Context) bool {
			t.Error("renewed after the work ended")
			return true
		}, func(ctx context.Context) { <-release })
	}()
	clock.WaitForWaiterAt(t0.Add(time.Second), 5*time.Second)
	close(release)
	if testenv.Receive(t, 5*time.Second, lost, "end of Hold") {
		t.Fatal("Hold reported the lease lost")
	}
}
