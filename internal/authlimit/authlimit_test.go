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

func TestNetworkKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ addr, want string }{
		{"192.0.2.1:1234", "192.0.2.0/24"},
		{"192.0.2.255", "192.0.2.0/24"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1::/48"},
		{"2001:db8:1:ffff::1", "2001:db8:1::/48"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.0/24"},
		{"[fe80::1%eth0]:80", "fe80::/48"},
		{"client-7", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := NetworkKey(tt.addr); got != tt.want {
			t.Errorf("NetworkKey(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// A failure is charged when the attempt fails: attempts that succeed,
// one after the other, never limit a client, however many; attempts that
// fail do, and a success afterwards does not give them back.
func TestChargedOnFailure(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(3, time.Minute, 100)
	for i := range 1000 {
		try, wait := l.Admit("192.0.2.1:1", true)
		if try == nil {
			t.Fatalf("success %d refused for %s", i, wait)
		}
		try.End()
		try.End() // a second End does nothing
	}
	for range 3 {
		if !failFrom(l, "192.0.2.1:1") {
			t.Fatal("a failure refused before the limit")
		}
	}
	if try, _ := l.Admit("192.0.2.1:1", false); try != nil {
		t.Error("admitted after 3 failures")
	}
}

// Rotating through the addresses of one network is limited by the
// network's bucket: with a client limit of 20 and a network limit of 80,
// 200 addresses of one IPv4 /24 (or of one IPv6 /48, each its own /64)
// get 80 failures through, not 4,000; another network is not affected,
// and the network earns back one failure per network interval.
func TestNetworkBucket(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		addr  func(i int) string
		other string
	}{
		{"IPv4 /24", func(i int) string { return fmt.Sprintf("198.51.100.%d:1", i) }, "198.51.101.1:1"},
		{"IPv6 /48", func(i int) string { return fmt.Sprintf("[2001:db8:7:%x::1]:1", i) }, "[2001:db8:8::1]:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
			l := New(Config{Clock: clock, Limit: 20, Interval: 3 * time.Second, NetworkLimit: 80,
				NetworkInterval: 750 * time.Millisecond, Max: 10000})
			admitted := 0
			for i := range 200 {
				for range 20 {
					if failFrom(l, tt.addr(i)) {
						admitted++
					}
				}
			}
			if admitted != 80 {
				t.Errorf("%d guesses admitted from 200 addresses of one network, want 80", admitted)
			}
			if !failFrom(l, tt.other) {
				t.Error("another network refused")
			}
			_, wait := l.Admit(tt.addr(7), false)
			if wait != 750*time.Millisecond {
				t.Errorf("a fresh address of the network waits %s, want 750ms", wait)
			}
			clock.Advance(750 * time.Millisecond)
			if !failFrom(l, tt.addr(8)) {
				t.Error("the failure earned back was refused")
			}
		})
	}
}

// The process-wide budget of reads bounds the attempts that cost a read,
// whatever their addresses: Reads at once, then one per ReadInterval;
// attempts that cost no read are not counted.
func TestReadBudget(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	l := New(Config{Clock: clock, Limit: 20, Interval: 3 * time.Second, NetworkLimit: 80,
		NetworkInterval: 750 * time.Millisecond, Max: 10000, Reads: 50, ReadInterval: 20 * time.Millisecond})
	admitted := 0
	for i := range 1000 {
		try, _ := l.Admit(fmt.Sprintf("10.%d.%d.1:1", i>>8, i&255), true)
		if try != nil {
			admitted++
			try.Fail()
			try.End()
		}
	}
	if admitted != 50 {
		t.Errorf("%d reads admitted from 1,000 networks at once, want 50", admitted)
	}
	if try, wait := l.Admit("10.200.0.1:1", true); try != nil || wait != 20*time.Millisecond {
		t.Errorf("a read past the budget: admitted %v, wait %s; want a wait of 20ms", try != nil, wait)
	}
	if try, _ := l.Admit("10.200.0.1:1", false); try == nil {
		t.Error("an attempt that costs no read was refused for the budget of reads")
	}
	clock.Advance(time.Second)
	admitted = 0
	for i := range 1000 {
		if try, _ := l.Admit(fmt.Sprintf("10.100.%d.%d:1", i>>8, i&255), true); try != nil {
			admitted++
			try.End()
		}
	}
	if admitted != 50 {
		t.Errorf("%d reads admitted a second later, want 50", admitted)
	}
}

// newTestLimiter returns a limiter of limit failures, one earned back per
// interval, for max clients, on a fake clock; it counts no networks and
// sets no budget of reads.
func newTestLimiter(limit int, interval time.Duration, max int) (*Limiter, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	return New(Config{Clock: clock, Limit: limit, Interval: interval, Max: max}), clock
}

// failFrom makes an attempt of the client at addr that fails, and reports
// whether it was admitted.
func failFrom(l *Limiter, addr string) bool {
	try, _ := l.Admit(addr, false)
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
	return len(l.clients.buckets)
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
		try, wait := l.Admit("192.0.2.1:2", false)
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
		try, _ := l.Admit("192.0.2.7:1", false)
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
	if try, wait := l.Admit("192.0.2.7:2", false); try != nil || wait > time.Minute {
		t.Errorf("after 5 failed guesses: admitted %v, wait %s; want limited for at most one interval", try != nil, wait)
	}
	clock.Advance(5 * time.Minute)
	for range 10 {
		try, wait := l.Admit("192.0.2.7:3", false)
		if try == nil {
			t.Fatalf("a successful attempt after the failures were forgiven: refused for %s", wait)
		}
		try.End()
	}
	if n := l.size(); n != 0 {
		t.Errorf("%d clients in the table after attempts that succeeded, want none", n)
	}
}
