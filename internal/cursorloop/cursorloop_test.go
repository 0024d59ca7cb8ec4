package cursorloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// feed is a Worker over a feed of sequences 1, 2, ...: it delivers the
// even ones (odd ones are not for it), fails those in fail once, and
// schedules each failure's retry retryIn later.
type feed struct {
	clock   *fakeclock.Clock
	retryIn time.Duration

	mu        sync.Mutex
	last      int64         // the last sequence in the feed
	changed   chan struct{} // closed when last moves
	fail      map[int64]bool
	retries   map[int64]time.Time // pending retries and when they are due
	recordErr error               // what Record returns, once

	// Only the loop's goroutine uses these.
	read, due []int64
	outcomes  []outcome
	records   chan record // every successful Record
	reads     chan int64  // the position of every Read
}

type outcome struct {
	seq int64
	ok  bool
}

type record struct {
	pos      int64
	outcomes []outcome
}

func newFeed(clock *fakeclock.Clock) *feed {
	return &feed{clock: clock, retryIn: time.Minute, changed: make(chan struct{}), fail: map[int64]bool{},
		retries: map[int64]time.Time{}, records: make(chan record, 64), reads: make(chan int64, 64)}
}

// add appends sequences through last to the feed.
func (f *feed) add(last int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = last
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *feed) Due(ctx context.Context, now time.Time) (int, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.due = f.due[:0]
	var next time.Time
	for seq, at := range f.retries {
		if !at.After(now) {
			f.due = append(f.due, seq)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return len(f.due), next, nil
}

func (f *feed) Read(ctx context.Context, pos int64) (int, int64, <-chan struct{}, error) {
	select {
	case f.reads <- pos:
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.read = f.read[:0]
	for seq := pos + 1; seq <= f.last; seq++ {
		if seq%2 == 0 {
			f.read = append(f.read, seq)
		}
	}
	return len(f.read), max(pos, f.last), f.changed, nil
}

func (f *feed) Deliver(ctx context.Context) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	failed := false
	for _, seq := range append(f.due, f.read...) {
		ok := !f.fail[seq]
		delete(f.fail, seq)
		failed = failed || !ok
		f.outcomes = append(f.outcomes, outcome{seq, ok})
	}
	return len(f.due) + len(f.read), failed
}

func (f *feed) Record(ctx context.Context, pos int64) (time.Time, *int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.recordErr; err != nil {
		f.recordErr = nil
		return time.Time{}, nil, err
	}
	var retryAt time.Time
	for _, o := range f.outcomes {
		delete(f.retries, o.seq)
		if !o.ok {
			retryAt = f.clock.Now().Add(f.retryIn)
			f.retries[o.seq] = retryAt
		}
	}
	f.records <- record{pos, f.outcomes}
	f.outcomes = nil
	return retryAt, nil, nil
}

var errGone = errors.New("gone")

// run runs the loop over f until the test ends, and returns a channel of
// its failures.
func run(t *testing.T, f *feed, c Config) (failures chan Failure, stop func()) {
	failures = make(chan Failure, 16)
	c.Clock = f.clock
	c.Batch, c.CursorLag = 2, 4
	if c.RecordDelay == 0 {
		c.RecordDelay = time.Hour
	}
	c.CursorDelay, c.RetryWait, c.StopTimeout = 5*time.Second, time.Second, 5*time.Second
	c.Ends = func(err error) bool { return errors.Is(err, errGone) }
	c.Stopped = func(error) {}
	c.Failed = func(step Failure, err error) { failures <- step }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, c, f)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return failures, stop
}

func TestSuccessesAreRecordedByTheBatch(t *testing.T) {
	f := newFeed(fakeclock.New(t0))
	run(t, f, Config{})
	f.add(2) // one delivery: kept unrecorded
	f.add(4) // a second: a batch, recorded with the cursor
	r := testenv.Receive(t, 5*time.Second, f.records, "record")
	if r.pos != 4 || len(r.outcomes) != 2 {
		t.Fatalf("recorded %+v, want two deliveries through 4", r)
	}
}

func TestSuccessesAreRecordedAfterTheDelay(t *testing.T) {
	f := newFeed(fakeclock.New(t0))
	run(t, f, Config{RecordDelay: time.Millisecond})
	f.add(2)
	r := testenv.Receive(t, 5*time.Second, f.records, "record")
	if r.pos != 2 || len(r.outcomes) != 1 {
		t.Fatalf("recorded %+v, want one delivery through 2", r)
	}
}

func TestFailureIsRecordedAtOnceAndRetriedWhenDue(t *testing.T) {
	clock := fakeclock.New(t0)
	f := newFeed(clock)
	f.fail[2] = true
	run(t, f, Config{})
	f.add(2)
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); len(r.outcomes) != 1 || r.outcomes[0].ok {
		t.Fatalf("recorded %+v, want the failure", r)
	}
	if !clock.WaitForWaiterAt(t0.Add(time.Minute), 5*time.Second) {
		t.Fatal("the loop does not wait for the retry")
	}
	clock.Advance(time.Minute)
	r := testenv.Receive(t, 5*time.Second, f.records, "record") // a retry is recorded at once
	if len(r.outcomes) != 1 || r.outcomes[0] != (outcome{2, true}) {
		t.Fatalf("recorded %+v, want the retry's success", r)
	}
}

func TestCursorPastItemsNotDeliveredIsStoredNowAndThen(t *testing.T) {
	clock := fakeclock.New(t0)
	f := newFeed(clock)
	f.last = 0
	run(t, f, Config{Cursor: 2})
	f.mu.Lock()
	f.last = 3 // only odd: nothing to deliver
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	// One past: under the lag, stored after CursorDelay.
	if !clock.WaitForWaiterAt(t0.Add(5*time.Second), 5*time.Second) {
		t.Fatal("the loop does not wait to store the cursor")
	}
	select {
	case r := <-f.records:
		t.Fatalf("recorded %+v before the delay", r)
	default:
	}
	clock.Advance(5 * time.Second)
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); r.pos != 3 || len(r.outcomes) != 0 {
		t.Fatalf("recorded %+v, want the cursor at 3 alone", r)
	}
}

func TestPokeRecordsAndStartingPokedRecordsFirst(t *testing.T) {
	f := newFeed(fakeclock.New(t0))
	poke := make(chan struct{}, 1)
	run(t, f, Config{Poked: true, Poke: poke})
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); r.pos != 0 {
		t.Fatalf("recorded %+v, want the cursor as it started", r)
	}
	poke <- struct{}{}
	testenv.Receive(t, 5*time.Second, f.records, "record after a poke")
}

func TestFailedRecordIsRetriedAfterTheWait(t *testing.T) {
	clock := fakeclock.New(t0)
	f := newFeed(clock)
	f.fail[2] = true
	f.recordErr = errors.New("store down")
	failures, _ := run(t, f, Config{})
	f.add(2)
	if step := testenv.Receive(t, 5*time.Second, failures, "failure"); step != Round {
		t.Fatalf("failure at step %d, want Round", step)
	}
	clock.WaitForWaiterAt(t0.Add(time.Second), 5*time.Second)
	clock.Advance(time.Second)
	// The failure's outcome is recorded before anything else is read.
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); len(r.outcomes) != 1 || r.outcomes[0].ok {
		t.Fatalf("recorded %+v, want the failure", r)
	}
}

func TestEndingErrorStopsTheLoop(t *testing.T) {
	f := newFeed(fakeclock.New(t0))
	f.fail[2] = true
	f.recordErr = errGone
	stopped := make(chan error, 1)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Clock: f.clock, Batch: 2, CursorLag: 4, RecordDelay: time.Hour, CursorDelay: time.Second,
			RetryWait: time.Second, StopTimeout: time.Second,
			Ends:    func(err error) bool { return errors.Is(err, errGone) },
			Stopped: func(reason error) { stopped <- reason },
			Failed:  func(step Failure, err error) { t.Errorf("failure at step %d: %v", step, err) },
		}, f)
	}()
	f.add(2)
	if err := testenv.Receive(t, 5*time.Second, stopped, "stop"); !errors.Is(err, errGone) {
		t.Fatalf("stopped by %v, want errGone", err)
	}
	<-done
	// The last record, as it stopped, kept the outcome.
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); len(r.outcomes) != 1 {
		t.Fatalf("recorded %+v as it stopped, want the failure", r)
	}
}

func TestStopRecordsWhatWasDelivered(t *testing.T) {
	f := newFeed(fakeclock.New(t0))
	_, stop := run(t, f, Config{})
	f.add(2)
	// Delivered, unrecorded (the batch is 2, the delay an hour): the
	// loop reads on from 2, then waits for the feed.
	for testenv.Receive(t, 5*time.Second, f.reads, "read") != 2 {
	}
	stop()
	if r := testenv.Receive(t, 5*time.Second, f.records, "record"); r.pos != 2 || len(r.outcomes) != 1 {
		t.Fatalf("recorded %+v as it stopped, want the delivery through 2", r)
	}
}
