package lifecycle

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
)

func TestClientKey(t *testing.T) {
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
		{long, long[:maxClientKeyLen]},
		{"", ""},
	}
	for _, tt := range tests {
		if got := clientKey(tt.addr); got != tt.want {
			t.Errorf("clientKey(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// newTestLimiter returns a limiter of limit failures, one earned back per
// interval, for max clients, on a fake clock, whose clients are named by
// their RemoteAddr.
func newTestLimiter(limit int, interval time.Duration, max int) (*authLimiter, *fakeclock.Clock) {
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	cfg := Config{Clock: clock, AuthFailureLimit: limit, AuthFailureInterval: interval, AuthFailureClients: max}
	cfg.authLimitDefaults()
	return newAuthLimiter(&cfg), clock
}

// from returns a request of the client at addr.
func from(addr string) *http.Request { return &http.Request{RemoteAddr: addr} }

// failFrom makes an attempt of the client at addr that fails, and reports
// whether it was admitted.
func failFrom(l *authLimiter, addr string) bool {
	try, err := l.admit(from(addr))
	if err != nil {
		return false
	}
	try.fail()
	try.end()
	return true
}

// size returns the number of clients in l's table.
func (l *authLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// The bucket: limit failures at once, then one per interval; Retry-After
// rounds the wait up to whole seconds.
func TestAuthLimiterBucket(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(3, 10*time.Second, 100)
	fail := func() {
		t.Helper()
		if !failFrom(l, "192.0.2.1:1") {
			t.Fatal("refused before its limit")
		}
	}
	retry := func() int {
		t.Helper()
		_, err := l.admit(from("192.0.2.1:2"))
		if err == nil {
			return 0
		}
		return err.(*RateLimitError).RetryAfterSeconds
	}
	for range 3 {
		fail()
	}
	if got := retry(); got != 10 {
		t.Fatalf("after 3 failures: retry after %d s, want 10", got)
	}
	clock.Advance(9500 * time.Millisecond)
	if got := retry(); got != 1 {
		t.Errorf("9.5 s later: retry after %d s, want 1", got)
	}
	clock.Advance(500 * time.Millisecond)
	fail() // the try earned
	if got := retry(); got != 10 {
		t.Errorf("after the earned try: retry after %d s, want 10", got)
	}
	clock.Advance(25 * time.Second) // two and a half tries earned
	fail()
	fail()
	if got := retry(); got != 5 {
		t.Errorf("after the two tries earned: retry after %d s, want 5", got)
	}
	var nilLimiter *authLimiter // disabled
	try, err := nilLimiter.admit(from("x"))
	if err != nil {
		t.Error(err)
	}
	try.fail()
	try.end()
}

// The table never holds more than its bound, however many clients fail.
func TestAuthLimiterTableIsBounded(t *testing.T) {
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
// Config.AuthFailureClients.
func TestAuthLimiterMemory(t *testing.T) {
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
func TestAuthLimiterConcurrentFailures(t *testing.T) {
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
func TestAuthLimiterAttemptsUnderWay(t *testing.T) {
	t.Parallel()
	l, clock := newTestLimiter(5, time.Minute, 100)
	var tries []*authTry
	refused := 0
	for range 100 {
		try, err := l.admit(from("192.0.2.7:1"))
		if err != nil {
			refused++
			continue
		}
		tries = append(tries, try)
	}
	if len(tries) != 5 || refused != 95 {
		t.Fatalf("%d guesses let through at once, %d refused; want 5 and 95", len(tries), refused)
	}
	for _, try := range tries {
		try.fail()
		try.end()
	}
	_, err := l.admit(from("192.0.2.7:2"))
	if rl, ok := err.(*RateLimitError); !ok || rl.RetryAfterSeconds > 60 {
		t.Errorf("after 5 failed guesses: %v; want limited for at most one interval", err)
	}
	clock.Advance(5 * time.Minute)
	for range 10 {
		try, err := l.admit(from("192.0.2.7:3"))
		if err != nil {
			t.Fatalf("a successful attempt after the failures were forgiven: %v", err)
		}
		try.end()
	}
	if n := l.size(); n != 0 {
		t.Errorf("%d clients in the table after attempts that succeeded, want none", n)
	}
}
