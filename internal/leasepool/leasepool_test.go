package leasepool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// item is what the tests lease: a key and a revision.
type item struct {
	key string
	rev int
}

// testWorker is a worker that runs until stopped, or until told to end.
type testWorker struct {
	key string
	ctx context.Context
	end chan struct{}
	rev int
}

// harness drives a Pool: each claim waits for the answer the test sends.
type harness struct {
	t        *testing.T
	clock    *fakeclock.Clock
	pool     *Pool[item, *testWorker]
	answers  chan answer
	started  chan *testWorker
	stopped  chan string
	held     chan *testWorker
	released chan []string
	refuse   map[string]bool
	cancel   context.CancelFunc
	done     chan struct{}
}

// answer is what one claim returns.
type answer struct {
	items []item
	err   error
}

const poll, lease = 10 * time.Second, 30 * time.Second

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:        t,
		clock:    fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		answers:  make(chan answer),
		started:  make(chan *testWorker, 16),
		stopped:  make(chan string, 16),
		held:     make(chan *testWorker, 16),
		released: make(chan []string, 1),
		refuse:   map[string]bool{},
		done:     make(chan struct{}),
	}
	var mu sync.Mutex
	h.pool = New(Config[item, *testWorker]{
		Clock: h.clock, Poll: poll, Lease: lease,
		Claim: func(ctx context.Context, now time.Time) ([]item, error) {
			select {
			case a := <-h.answers:
				return a.items, a.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		Key: func(it *item) string { return it.key },
		Start: func(ctx context.Context, it *item) (*testWorker, bool) {
			mu.Lock()
			defer mu.Unlock()
			if h.refuse[it.key] {
				return nil, false
			}
			return &testWorker{key: it.key, ctx: ctx, end: make(chan struct{}), rev: it.rev}, true
		},
		Run: func(w *testWorker) {
			h.started <- w
			select {
			case <-w.ctx.Done():
			case <-w.end:
			}
			h.stopped <- w.key
		},
		Held: func(w *testWorker, it *item) {
			w.rev = it.rev
			h.held <- w
		},
		Release: func(keys []string) { h.released <- slices.Clone(keys) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.pool.Run(ctx)
	}()
	return h
}

// claim answers the next claim.
func (h *harness) claim(err error, keys ...string) {
	h.t.Helper()
	var items []item
	for _, k := range keys {
		items = append(items, item{key: k, rev: 1})
	}
	select {
	case h.answers <- answer{items, err}:
	case <-time.After(5 * time.Second):
		h.t.Fatal("no claim was made")
	}
}

// none checks that c has no value once the pool waits for its next claim.
func none[V any](t *testing.T, h *harness, c <-chan V, what string) {
	t.Helper()
	h.clock.WaitForWaiterAt(h.clock.Now().Add(poll), 5*time.Second)
	select {
	case v := <-c:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}

func (h *harness) close() []string {
	h.t.Helper()
	h.cancel()
	<-h.done
	return testenv.Receive(h.t, 5*time.Second, h.released, "release")
}

func TestWorkersFollowTheClaims(t *testing.T) {
	h := newHarness(t)
	h.claim(nil, "a", "b")
	got := []string{testenv.Receive(t, 5*time.Second, h.started, "start").key, testenv.Receive(t, 5*time.Second, h.started, "start").key}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("started %v, want a and b", got)
	}
	// The next claim comes after Poll: b is no longer held, c is new and
	// a is told it was read again.
	h.clock.WaitForWaiterAt(h.clock.Now().Add(poll), 5*time.Second)
	h.clock.Advance(poll)
	h.claim(nil, "a", "c")
	if w := testenv.Receive(t, 5*time.Second, h.held, "held"); w.key != "a" {
		t.Fatalf("held %s, want a", w.key)
	}
	if k := testenv.Receive(t, 5*time.Second, h.stopped, "stop"); k != "b" {
		t.Fatalf("stopped %s, want b", k)
	}
	if w := testenv.Receive(t, 5*time.Second, h.started, "start"); w.key != "c" {
		t.Fatalf("started %s, want c", w.key)
	}
	// b's end wakes the pool: it claims again at once.
	h.claim(nil, "a", "c")
	testenv.Receive(t, 5*time.Second, h.held, "held")
	testenv.Receive(t, 5*time.Second, h.held, "held")
	if workers, _ := h.pool.Counts(); workers != 2 {
		t.Fatalf("%d workers, want 2", workers)
	}
	var keys []string
	for _, w := range h.pool.Workers(nil) {
		keys = append(keys, w.key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a", "c"}) {
		t.Fatalf("Workers = %v, want a and c", keys)
	}
	released := h.close()
	slices.Sort(released)
	if !slices.Equal(released, []string{"a", "c"}) {
		t.Fatalf("released %v, want a and c", released)
	}
	if workers, _ := h.pool.Counts(); workers != 0 || len(h.pool.Workers(nil)) != 0 {
		t.Fatalf("%d workers after shutdown, want 0", workers)
	}
}

func TestFailedClaimStopsWorkersOnlyNearTheLeaseEnd(t *testing.T) {
	h := newHarness(t)
	h.claim(nil, "a")
	testenv.Receive(t, 5*time.Second, h.started, "start")
	// A failed claim one poll later: the lease has 20s to run, more than
	// a poll, so the worker goes on.
	h.clock.WaitForWaiterAt(h.clock.Now().Add(poll), 5*time.Second)
	h.clock.Advance(poll)
	h.claim(errors.New("store down"))
	none(t, h, h.stopped, "stop")
	// Another: 10s left, no more than a poll: the worker stops.
	h.clock.Advance(poll)
	h.claim(errors.New("store down"))
	if k := testenv.Receive(t, 5*time.Second, h.stopped, "stop"); k != "a" {
		t.Fatalf("stopped %s, want a", k)
	}
	h.claim(nil, "a") // the end of a wakes the pool
	if w := testenv.Receive(t, 5*time.Second, h.started, "start"); w.key != "a" {
		t.Fatalf("started %s, want a", w.key)
	}
	h.close()
}

func TestStoppedKeyIsNotStartedByAClaimUnderWay(t *testing.T) {
	h := newHarness(t)
	h.claim(nil, "a")
	testenv.Receive(t, 5*time.Second, h.started, "start")
	// A claim begins (woken), the item is deleted and stopped, then the
	// claim, which read it before, returns it.
	h.pool.Wake()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		testenv.Receive(t, 5*time.Second, h.stopped, "stop")
	}()
	h.pool.Stop(context.Background(), "a")
	<-stopped
	if _, deleted := h.pool.Counts(); deleted != 1 {
		t.Fatalf("%d deleted remembered, want 1", deleted)
	}
	h.claim(nil, "a")
	none(t, h, h.started, "start")
	// Claims begun after the deletion forget it. The pool claims again at
	// once, when the stopped worker's end woke it after the claim under
	// way had begun, or else one poll later: answer whichever comes (the
	// clock moved before the pool waits on it would move nothing).
	testenv.WaitFor(t, 5*time.Second, "a claim after the deletion", func() bool {
		if h.clock.PendingAt(h.clock.Now().Add(poll)) {
			h.clock.Advance(poll)
		}
		select {
		case h.answers <- answer{}:
			return true
		default:
			return false
		}
	})
	// The pool may wait for its next claim before this one has forgotten
	// the deletion, so wait for the forgetting itself.
	testenv.WaitFor(t, 5*time.Second, "the deletion forgotten", func() bool {
		workers, deleted := h.pool.Counts()
		return workers == 0 && deleted == 0
	})
	h.close()
}

func TestWorkerThatCannotStartIsTriedAgain(t *testing.T) {
	h := newHarness(t)
	h.refuse["a"] = true
	h.claim(nil, "a")
	none(t, h, h.started, "start")
	h.refuse["a"] = false // the pool waits: no Start runs now
	h.clock.Advance(poll)
	h.claim(nil, "a")
	testenv.Receive(t, 5*time.Second, h.started, "start")
	h.close()
}

func TestWorkerEndingOnItsOwnIsStartedAgain(t *testing.T) {
	h := newHarness(t)
	h.claim(nil, "a")
	w := testenv.Receive(t, 5*time.Second, h.started, "start")
	close(w.end)
	testenv.Receive(t, 5*time.Second, h.stopped, "stop")
	h.claim(nil, "a")
	if w2 := testenv.Receive(t, 5*time.Second, h.started, "start"); w2 == w {
		t.Fatal("the ended worker was not replaced")
	}
	h.close()
}
