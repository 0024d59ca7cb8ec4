package backoff

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	errTemp = errors.New("temporary")
	errHard = errors.New("for good")
)

// judge retries errTemp; one wrapped in a holdErr holds.
func judge(err error) Verdict {
	var h holdErr
	if errors.As(err, &h) {
		return Verdict{Retry: true, Hold: time.Duration(h)}
	}
	return Verdict{Retry: errors.Is(err, errTemp)}
}

type holdErr time.Duration

func (h holdErr) Error() string { return "rate limited" }

// retry runs Retry in a goroutine, each try's error taken from errs in
// turn, and advances clock through every wait; it returns the waits it
// made and Retry's error.
func retry(t *testing.T, p Policy, errs ...error) ([]time.Duration, error) {
	t.Helper()
	clock := p.Clock.(*fakeclock.Clock)
	waits := make(chan time.Duration, len(errs))
	tries := 0
	done := make(chan error, 1)
	go func() {
		done <- Retry(context.Background(), p, func(ctx context.Context) error {
			err := errs[tries]
			tries++
			return err
		}, judge, Hooks{
			Holding:  func(hold time.Duration, _ time.Time, _ error) { waits <- hold },
			Retrying: func(_ int, wait time.Duration, _ error) { waits <- wait },
		})
	}()
	var got []time.Duration
	for {
		select {
		case err := <-done:
			return got, err
		case w := <-waits:
			got = append(got, w)
			if !clock.WaitForWaiterAt(clock.Now().Add(w), 5*time.Second) {
				t.Fatalf("Retry does not wait %v", w)
			}
			clock.Advance(w)
		case <-time.After(5 * time.Second):
			t.Fatal("Retry neither waits nor returns")
		}
	}
}

func TestRetryDoublesUpToTheCap(t *testing.T) {
	p := Policy{Clock: fakeclock.New(t0), Timeout: time.Second, Budget: time.Hour, First: time.Second, Max: 4 * time.Second}
	waits, err := retry(t, p, errTemp, errTemp, errTemp, errTemp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(waits, want) {
		t.Fatalf("waited %v, want %v", waits, want)
	}
}

func TestRetryStopsAtAPermanentFailure(t *testing.T) {
	p := Policy{Clock: fakeclock.New(t0), Timeout: time.Second, Budget: time.Hour, First: time.Second, Max: time.Minute}
	waits, err := retry(t, p, errTemp, errHard, nil)
	if !errors.Is(err, errHard) || len(waits) != 1 {
		t.Fatalf("Retry = %v after waits %v, want errHard after one wait", err, waits)
	}
}

func TestRetryGivesUpPastTheBudget(t *testing.T) {
	p := Policy{Clock: fakeclock.New(t0), Timeout: time.Second, Budget: 3 * time.Second, First: time.Second, Max: time.Minute}
	waits, err := retry(t, p, errTemp, errTemp, errTemp, nil)
	var gaveUp *GaveUpError
	// Waits of 1s and 2s end within the budget; the next, 4s, would not.
	if !errors.As(err, &gaveUp) || gaveUp.Tries != 3 || !errors.Is(err, errTemp) {
		t.Fatalf("Retry = %v, want a give-up after 3 tries wrapping errTemp", err)
	}
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("waited %v, want 1s and 2s", waits)
	}
}

func TestHoldIsOutsideTheBudget(t *testing.T) {
	p := Policy{Clock: fakeclock.New(t0), Timeout: time.Second, Budget: 3 * time.Second, First: time.Second, Max: time.Minute}
	// An hour's hold, then a one-second retry: still within the budget.
	waits, err := retry(t, p, holdErr(time.Hour), errTemp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waits, []time.Duration{time.Hour, time.Second}) {
		t.Fatalf("waited %v, want an hour then a second", waits)
	}
}

func TestRetryEachTryHasItsTimeout(t *testing.T) {
	p := Policy{Clock: fakeclock.New(t0), Timeout: time.Minute, Budget: time.Hour, First: time.Second, Max: time.Minute}
	err := Retry(context.Background(), p, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the try has no deadline")
		}
		return nil
	}, judge, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPause(t *testing.T) {
	clock := fakeclock.New(t0)
	ok := make(chan bool)
	go func() { ok <- Pause(context.Background(), clock, time.Second) }()
	clock.WaitForWaiterAt(t0.Add(time.Second), 5*time.Second)
	clock.Advance(time.Second)
	if !<-ok {
		t.Fatal("Pause reported its ctx ended")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { ok <- Pause(ctx, clock, time.Second) }()
	clock.WaitForWaiterAt(t0.Add(2*time.Second), 5*time.Second)
	cancel()
	if <-ok {
		t.Fatal("Pause reported its ctx alive after it ended")
	}
}
