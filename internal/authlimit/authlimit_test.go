package authlimit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

func TestKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("h", 100)
	tests := []struct{ addr, want string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"192.0.2.1", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"client-7", "client-7"},
		{long, long[:maxKeyLen]},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Key(tt.addr); got != tt.want {
			t.Errorf("Key(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// newTestLimiter returns a limiter of limit failures, one earned back per
// interval, for max clients, on a fake clock.
func newTestLimiter(limit int, interval time.Duration, max int) (*Limiter, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	return New(Config{Clock: clock, Limit: limit, Interval: interval, Max: max}), clock
}

// failFrom makes an attempt of the client at addr that fails, and reports
// whether it was admitted.
func failFrom(l *Limiter, addr string) bool {
	try, _ := l.Admit(addr)
	if try == nil {
		return false
	}
	try.Fail()
	try.End()
	return true
}

// size returns the number of clients in l's table.
func (l *Limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// The bucket: limit failures at once, then one per interval; a refused
// attempt is told how long until the next is admitted.
func TestBucket(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(3, 10*time.Second, 100)
	fail := func() {
		t.Helper()
		if !failFrom(l, "192.0.2.1:1") {
			t.Fatal("refused before its limit")
		}
	}
	wait := func() time.Duration {
		t.Helper()
		try, wait := l.Admit("192.0.2.1:2")
		if try != nil {
			if wait != 0 {
				t.Errorf("admitted with a wait of %s", wait)
			}
			return 0
		}
		return wait
	}
	for range 3 {
		fail()
	}
	if got := wait(); got != 10*time.Second {
		t.Fatalf("after 3 failures: wait %s, want 10s", got)
	}
	clock.Advance(9500 * time.Millisecond)
	if got := wait(); got != 500*time.Millisecond {
		t.Errorf("9.5 s later: wait %s, want 500ms", got)
	}
	clock.Advance(500 * time.Millisecond)
	fail() // the try earned
	if got := wait(); got != 10*time.Second {
		t.Errorf("after the earned try: wait %s, want 10s", got)
	}
	clock.Advance(25 * time.Second) // two and a half tries earned
	fail()
	fail()
	if got := wait(); got != 5*time.Second {
		t.Errorf("after the two tries earned: wait %s, want 5s", got)
	}
	if failFrom(l, "[::ffff:192.0.2.1]:3") {
		t.Error("the same client under its IPv4-mapped address was admitted")
	}
	if !failFrom(l, "192.0.2.2:1") {
		t.Error("another client was refused")
	}
	var none *Try // of a disabled limiter
	none.Fail()
	none.End()
}

// The table never holds more than its bound, however many clients fail.
func TestTableIsBounded(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(2, time.Minute, 1000)
	for i := range 100000 {
		failFrom(l, fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
		if n := l.size(); n > 1000 {
			t.Fatalf("%d clients in a table of 1000", n)
		}
		if i%1000 == 0 {
			clock.Advance(time.Second)
		}
	}
	// Once the table is full again, the clients whose failures are all
	// forgiven are dropped first.
	clock.Advance(2 * time.Minute)
	fresh := 0
	for n := l.size(); l.size() >= n; fresh++ {
		n = l.size()
		failFrom(l, fmt.Sprintf("198.51.100.%d:1", fresh))
	}
	if n := l.size(); n != fresh {
		t.Errorf("%d clients after the forgiven were dropped, want the %d that failed since", n, fresh)
	}
}

// The table's memory per client, for the documentation of
// lifecycle.Config.AuthFailureClients.
func TestMemory(t *testing.T) {
	l, _ := newTestLimiter(20, time.Hour, 10000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 10000 {
		failFrom(l, fmt.Sprintf("[2001:db8:%x:%x::1]:443", i>>8, i&255))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perClient := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / 10000
	t.Logf("%.0f bytes per client", perClient)
	if perClient > 200 {
		t.Errorf("%.0f bytes per client, want about 150", perClient)
	}
	runtime.KeepAlive(l)
}

// Clients failing at once from many goroutines keep the table bounded
// (and, under -race, show the limiter's locking sound).
func TestConcurrentFailures(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(5, time.Minute, 100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				failFrom(l, fmt.Sprintf("10.0.%d.%d:1", g, i%300))
			}
		})
	}
	wg.Wait()
	if n := l.size(); n > 100 {
		t.Errorf("%d clients in a table of 100", n)
	}
}

// Attempts of one client under way at once count as failures until they
// end: of 100 guesses sent together, only the limit is let through, and
// the client's wait stays within limit intervals. Attempts that succeed
// give their charge back, and a client that never failed leaves the table.
func TestAttemptsUnderWay(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(5, time.Minute, 100)
	var tries []*Try
	refused := 0
	for range 100 {
		try, _ := l.Admit("192.0.2.7:1")
		if try == nil {
			refused++
			continue
		}
		tries = append(tries, try)
	}
	if len(tries) != 5 || refused != 95 {
		t.Fatalf("%d guesses let through at once, %d refused; want 5 and 95", len(tries), refused)
	}
	for _, try := range tries {
		try.Fail()
		try.End()
	}
	if try, wait := l.Admit("192.0.2.7:2"); try != nil || wait > time.Minute {
		t.Errorf("after 5 failed guesses: admitted %v, wait %s; want limited for at most one interval", try != nil, wait)
	}
	clock.Advance(5 * time.Minute)
	for range 10 {
		try, wait := l.Admit("192.0.2.7:3")
		if try == nil {
			t.Fatalf("a successful attempt after the failures were forgiven: refused for %s", wait)
		}
		try.End()
	}
	if n := l.size(); n != 0 {
		t.Errorf("%d clients in the table after attempts that succeeded, want none", n)
	}
}
