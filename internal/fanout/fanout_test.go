package fanout

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

// waitTimeout bounds, in real time, every wait for the Hub.
const waitTimeout = 10 * time.Second

func TestRing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		size     int
		pushed   []int64
		wantSeqs []int64
		wantBase int64
	}{
		{"empty", 4, nil, nil, 10},
		{"partly full", 4, []int64{11, 12}, []int64{11, 12}, 10},
		{"full", 4, []int64{11, 12, 14, 15}, []int64{11, 12, 14, 15}, 10},
		{"wrapped once", 4, []int64{11, 12, 14, 15, 16}, []int64{12, 14, 15, 16}, 11},
		{"wrapped twice", 3, []int64{11, 12, 13, 14, 15, 16, 17}, []int64{15, 16, 17}, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRing[string](tt.size)
			r.base = 10
			for _, seq := range tt.pushed {
				r.push(seq, strconv.FormatInt(seq, 10))
			}
			var got []int64
			for i := range r.n {
				j := r.index(i)
				if r.items[j] != strconv.FormatInt(r.seqs[j], 10) {
					t.Errorf("item %q held with sequence %d", r.items[j], r.seqs[j])
				}
				got = append(got, r.seqs[j])
			}
			if !slices.Equal(got, tt.wantSeqs) || r.base != tt.wantBase {
				t.Errorf("held %v with base %d, want %v with base %d", got, r.base, tt.wantSeqs, tt.wantBase)
			}
			if r.n > 0 && r.seqs[r.last()] != tt.wantSeqs[len(tt.wantSeqs)-1] {
				t.Errorf("last = %d, want %d", r.seqs[r.last()], tt.wantSeqs[len(tt.wantSeqs)-1])
			}
			for _, seq := range []int64{0, 10, 11, 12, 13, 14, 16, 17, 99} {
				want := slices.IndexFunc(got, func(s int64) bool { return s > seq })
				if want < 0 {
					want = len(got)
				}
				if i := r.search(seq); i != want {
					t.Errorf("search(%d) = %d, want %d", seq, i, want)
				}
			}
		})
	}
}

// item is what the tests' hubs hold.
type item struct {
	seq  int64
	kind string
}

// store is an in-memory store of items, numbered from 1.
type store struct {
	mu    sync.Mutex
	items []item
	err   error
	loads []int64 // the after of every load
}

func (s *store) add(kinds ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range kinds {
		s.items = append(s.items, item{int64(len(s.items) + 1), k})
	}
}

func (s *store) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *store) last(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.items)), s.err
}

func (s *store) load(_ context.Context, after int64, limit int) ([]item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads = append(s.loads, after)
	if s.err != nil {
		return nil, s.err
	}
	var out []item
	for _, it := range s.items[min(after, int64(len(s.items))):] {
		if len(out) == limit {
			break
		}
		out = append(out, it)
	}
	return out, nil
}

// newHub returns a Hub of s on clock, closed at the end of the test.
func newHub(t *testing.T, s *store, clock *fakeclock.Clock, mutate ...func(*Config[item])) *Hub[item] {
	t.Helper()
	cfg := Config[item]{
		Size: 4, Page: 2, MaxPerKey: 2, Retry: time.Second,
		After: clock.After, Start: s.last, Load: s.load,
		Seq: func(it *item) int64 { return it.seq },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h := New(cfg)
	t.Cleanup(func() {
		h.Close()
		h.Wait()
	})
	return h
}

// kinds scans h after pos and returns the kinds read.
func kinds(h *Hub[item], pos int64, limit int, keep func(*item) bool) ([]string, int64, <-chan struct{}, bool) {
	return Scan(h, pos, nil, limit, keep, func(it *item) string { return it.kind })
}

func all(*item) bool { return true }

// waitFor waits until h has loaded through seq.
func waitFor(t *testing.T, h *Hub[item], seq int64) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		_, next, changed, _ := kinds(h, seq, 0, all)
		if h.Position() >= seq && next >= seq {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the hub loaded through %d, want %d", h.Position(), seq)
		}
	}
}

func TestScan(t *testing.T) {
	t.Parallel()
	h := newHub(t, &store{}, fakeclock.New(time.Unix(0, 0)))
	h.tail, h.ring.base = 10, 10
	for seq := int64(11); seq <= 16; seq++ { // 11 and 12 fall out
		kind := "updated"
		if seq%2 == 0 {
			kind = "shipped"
		}
		h.ring.push(seq, item{seq, kind + strconv.FormatInt(seq, 10)})
	}
	h.tail = 16
	shipped := func(it *item) bool { return it.seq%2 == 0 }
	none := func(*item) bool { return false }
	tests := []struct {
		name  string
		pos   int64
		keep  func(*item) bool
		limit int
		kinds []string
		next  int64
		ok    bool
	}{
		{"behind the ring", 11, all, 10, nil, 11, false},
		{"at the ring's base", 12, all, 10, []string{"updated13", "shipped14", "updated15", "shipped16"}, 16, true},
		{"in the ring", 14, all, 10, []string{"updated15", "shipped16"}, 16, true},
		{"caught up", 16, all, 10, nil, 16, true},
		{"ahead of the hub", 20, all, 10, nil, 20, true},
		{"limited", 12, all, 2, []string{"updated13", "shipped14"}, 14, true},
		{"kept", 12, shipped, 10, []string{"shipped14", "shipped16"}, 16, true},
		{"kept and limited", 12, shipped, 1, []string{"shipped14"}, 15, true},
		{"none kept", 12, none, 10, nil, 16, true},
	}
	for _, tt := range tests {
		got, next, changed, ok := kinds(h, tt.pos, tt.limit, tt.keep)
		if !slices.Equal(got, tt.kinds) || next != tt.next || ok != tt.ok || (ok && changed == nil) {
			t.Errorf("%s: Scan(%d) = %v, %d, %v; want %v, %d, %v", tt.name, tt.pos, got, next, ok, tt.kinds, tt.next, tt.ok)
		}
	}
}

// TestHubLoadsWhenWoken starts at the newest stored item, loads in pages
// when woken and wakes the readers waiting on the changed channel.
func TestHubLoadsWhenWoken(t *testing.T) {
	t.Parallel()
	s := &store{}
	s.add("a", "b")
	h := newHub(t, s, fakeclock.New(time.Unix(0, 0)))
	if err := h.Acquire(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	defer h.Release("k")
	got, next, changed, ok := kinds(h, 2, 10, all)
	if len(got) != 0 || next != 2 || !ok {
		t.Fatalf("at the start Scan(2) = %v, %d, %v; want nothing, 2, true", got, next, ok)
	}
	s.add("c", "d", "e") // more than a page
	h.Wake()
	select {
	case <-changed:
	case <-time.After(waitTimeout):
		t.Fatal("the readers were not woken")
	}
	waitFor(t, h, 5)
	if got, next, _, ok := kinds(h, 2, 10, all); !slices.Equal(got, []string{"c", "d", "e"}) || next != 5 || !ok {
		t.Errorf("Scan(2) = %v, %d, %v; want [c d e], 5, true", got, next, ok)
	}
	if got, _, _, ok := kinds(h, 1, 10, all); got != nil || ok {
		t.Errorf("Scan(1), before where loading started, = %v, %v; want nothing, false", got, ok)
	}
}

// TestHubRetriesByItsClock fails loads until healed: the Hub reports the
// failure, retries when its clock says so and loses no item.
func TestHubRetriesByItsClock(t *testing.T) {
	t.Parallel()
	s := &store{}
	clock := fakeclock.New(time.Unix(0, 0))
	failed := make(chan int64, 10)
	h := newHub(t, s, clock, func(c *Config[item]) {
		c.Failed = func(after int64, err error) { failed <- after }
	})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.fail(errors.New("disk on fire"))
	s.add("a")
	h.Wake()
	select {
	case after := <-failed:
		if after != 0 {
			t.Errorf("failure reported after %d, want 0", after)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the failure was not reported")
	}
	if !clock.WaitForWaiters(1, waitTimeout) {
		t.Fatal("the hub did not schedule a retry")
	}
	s.fail(nil)
	clock.Advance(time.Second)
	waitFor(t, h, 1)
}

// TestHubPolls loads every poll interval without being woken.
func TestHubPolls(t *testing.T) {
	t.Parallel()
	s := &store{}
	clock := fakeclock.New(time.Unix(0, 0))
	h := newHub(t, s, clock, func(c *Config[item]) { c.Poll = time.Minute })
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !clock.WaitForWaiters(1, waitTimeout) {
		t.Fatal("the hub never armed its poll")
	}
	s.add("a")
	clock.Advance(time.Minute)
	waitFor(t, h, 1)
}

// TestHubAcquire counts readers per key, starts the Hub once, and refuses
// readers after Close; Wait returns once every reader is released.
func TestHubAcquire(t *testing.T) {
	t.Parallel()
	s := &store{}
	starts := 0
	h := newHub(t, s, fakeclock.New(time.Unix(0, 0)), func(c *Config[item]) {
		c.Start = func(ctx context.Context) (int64, error) { starts++; return s.last(ctx) }
	})
	ctx := t.Context()
	for i, want := range []error{nil, nil, ErrLimit} {
		if err := h.Acquire(ctx, "a"); !errors.Is(err, want) {
			t.Errorf("Acquire %d of a = %v, want %v", i+1, err, want)
		}
	}
	if err := h.Acquire(ctx, "b"); err != nil {
		t.Errorf("Acquire of b = %v", err)
	}
	h.Release("a")
	if err := h.Acquire(ctx, "a"); err != nil {
		t.Errorf("Acquire of a after a Release = %v", err)
	}
	if starts != 1 {
		t.Errorf("started %d times, want once", starts)
	}
	h.Close()
	if err := h.Acquire(ctx, "c"); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := h.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	if h.Context().Err() == nil {
		t.Error("the Hub's context is not cancelled after Close")
	}
	waited := make(chan struct{})
	go func() {
		h.Wait()
		close(waited)
	}()
	for _, k := range []string{"a", "a", "b"} {
		select {
		case <-waited:
			t.Fatal("Wait returned while readers were registered")
		default:
		}
		h.Release(k)
	}
	select {
	case <-waited:
	case <-time.After(waitTimeout):
		t.Fatal("Wait did not return once every reader was released")
	}
}

// TestHubStartFails returns the error of Config.Start and starts nothing.
func TestHubStartFails(t *testing.T) {
	t.Parallel()
	s := &store{}
	boom := errors.New("no bounds")
	s.fail(boom)
	h := newHub(t, s, fakeclock.New(time.Unix(0, 0)))
	if err := h.Acquire(t.Context(), "a"); !errors.Is(err, boom) {
		t.Fatalf("Acquire = %v, want %v", err, boom)
	}
	s.fail(nil)
	if err := h.Acquire(t.Context(), "a"); err != nil {
		t.Fatalf("Acquire once healed = %v", err)
	}
	h.Release("a")
}

// TestOnChange: a function registered after a position is called once
// items it keeps arrive after it, unless unregistered; items it does not
// keep move its position on; one registered behind items it keeps is not
// registered; Close calls those left.
func TestOnChange(t *testing.T) {
	t.Parallel()
	s := &store{}
	h := newHub(t, s, fakeclock.New(time.Unix(0, 0)))
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	called := make(chan string, 4)
	shipped := func(it *item) bool { return it.kind == "shipped" }
	stopKept, ok := h.OnChange(0, shipped, func() { called <- "kept" })
	if !ok {
		t.Fatal("OnChange at the tail refused")
	}
	stop, ok := h.OnChange(0, all, func() { called <- "stopped" })
	if !ok {
		t.Fatal("OnChange at the tail refused")
	}
	if pos := stop(); pos != 0 {
		t.Fatalf("unregistered at %d, want 0", pos)
	}
	s.add("updated", "updated")
	h.Wake()
	waitFor(t, h, 2)
	select {
	case got := <-called:
		t.Fatalf("called %q for items it does not keep", got)
	default:
	}
	if h.Waiting() != 1 {
		t.Fatalf("%d waiting, want 1", h.Waiting())
	}
	s.add("shipped")
	h.Wake()
	waitFor(t, h, 3)
	select {
	case got := <-called:
		if got != "kept" {
			t.Fatalf("called %q, want kept", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the registered function was not called")
	}
	if pos := stopKept(); pos != 2 {
		t.Fatalf("woken at %d, want 2: past the items it does not keep", pos)
	}
	if _, ok := h.OnChange(2, shipped, func() { called <- "late" }); ok {
		t.Fatal("OnChange behind an item it keeps accepted")
	}
	if _, ok := h.OnChange(2, func(*item) bool { return false }, func() { called <- "closed" }); !ok {
		t.Fatal("OnChange behind no item it keeps refused")
	}
	h.Close()
	select {
	case got := <-called:
		if got != "closed" {
			t.Fatalf("called %q, want closed", got)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close did not call the waiter")
	}
	if _, ok := h.OnChange(3, all, func() {}); ok {
		t.Fatal("OnChange on a closed hub accepted")
	}
}
