// Package authlimit limits the failed authentications of each client, so
// that a client guessing keys or session cookies can be refused before
// anything is looked up for it, instead of costing a read per guess.
//
// Each client has a bucket of Config.Limit failures that refills by one
// every Config.Interval (the generic cell rate algorithm: one time per
// client, at which all its failures are forgiven). An attempt is charged
// as a failure when it is admitted and the charge given back when it
// succeeds, so that attempts under way at once count as well: at most the
// limit of them is ever let through together. Successes do not refill the
// bucket beyond their own charge: a client sharing its address with a
// guesser cannot reset the guesser's count.
//
// The table of clients holds at most Config.Max entries, and a client
// leaves it once its failures are all forgiven and none of its attempts is
// under way. A client admitted when it is full first drops the clients
// whose failures are all forgiven, then, if that is not a sixteenth of the
// table, enough others, in the map's (random) order, to free a sixteenth:
// the table's memory is bounded and each attempt costs constant time on
// average. A flood of more distinct failing clients than the table holds
// may so forgive a limited client early; it never limits a client that did
// not fail.
package authlimit

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxKeyLen bounds the key of a client whose address is not an IP address
// (what a host's own notion of a client gave), so that the table's memory
// stays bounded too.
const maxKeyLen = 64

// Clock tells the time the limiter counts by.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// Config configures a Limiter.
type Config struct {
	// Clock tells the time. Required.
	Clock Clock
	// Limit is how many failures a client may have unforgiven at once.
	Limit int
	// Interval is how long it takes for one failure to be forgiven.
	Interval time.Duration
	// Max is the most clients the table holds.
	Max int
}

// Limiter limits the failed authentications of each client; see the
// package comment.
type Limiter struct {
	clock    Clock
	limit    int
	interval time.Duration
	max      int

	mu      sync.Mutex
	clients map[string]time.Time // when each client's failures are all forgiven
}

// New returns the limiter c configures.
func New(c Config) *Limiter {
	return &Limiter{clock: c.Clock, limit: c.Limit, interval: c.Interval, max: c.Max, clients: make(map[string]time.Time)}
}

// Try is one attempt of a client to authenticate, admitted by a Limiter,
// which charged it as a failure. Call Fail when it failed, and End when it
// is over: End gives the charge back unless it failed. A nil *Try does
// nothing.
type Try struct {
	l      *Limiter
	client string
	failed bool
}

// Fail says the attempt failed: its charge stays.
func (t *Try) Fail() {
	if t != nil {
		t.failed = true
	}
}

// End ends the attempt, giving its charge back unless it failed.
func (t *Try) End() {
	if t == nil || t.failed {
		return
	}
	t.l.refund(t.client)
}

// Admit admits an attempt to authenticate of the client at addr (counted
// under [Key](addr)), charged as a failure until it ends. When that client
// has failed too often (attempts under way included) it returns a nil
// *Try and how long the client must wait before one more attempt is
// admitted.
func (l *Limiter) Admit(addr string) (*Try, time.Duration) {
	client := Key(addr)
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	forgiven, ok := l.clients[client]
	// The client is limited while one more failure would take it past its
	// bucket: while it has limit failures not yet forgiven.
	if wait := forgiven.Sub(now) - time.Duration(l.limit-1)*l.interval; ok && wait > 0 {
		return nil, wait
	}
	if !ok && len(l.clients) >= l.max {
		l.evict(now)
	}
	if forgiven.Before(now) {
		forgiven = now
	}
	l.clients[client] = forgiven.Add(l.interval)
	return &Try{l: l, client: client}, 0
}

// refund gives back the charge of an attempt of client that did not fail.
func (l *Limiter) refund(client string) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	forgiven, ok := l.clients[client]
	if !ok {
		return // dropped from a full table meanwhile
	}
	if forgiven = forgiven.Add(-l.interval); forgiven.After(now) {
		l.clients[client] = forgiven
	} else {
		delete(l.clients, client)
	}
}

// evict frees at least a sixteenth of the full table: the clients whose
// failures are all forgiven, then others at random; l.mu is held.
func (l *Limiter) evict(now time.Time) {
	for client, forgiven := range l.clients {
		if !forgiven.After(now) {
			delete(l.clients, client)
		}
	}
	keep := l.max - max(l.max/16, 1)
	for client := range l.clients {
		if len(l.clients) <= keep {
			break
		}
		delete(l.clients, client)
	}
}

// Key returns the key under which the failures of the client at addr are
// counted: its IP address without port; for IPv6, its /64 network, which
// one holder usually has whole (an IPv4 address mapped into IPv6 counts as
// the IPv4 address); for anything else, its first 64 bytes.
func Key(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if len(host) > maxKeyLen {
			host = host[:maxKeyLen]
		}
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		prefix, _ := ip.Prefix(64)
		return prefix.String()
	}
	return ip.String()
}
