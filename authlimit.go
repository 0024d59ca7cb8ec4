package lifecycle

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the limiter of failed authentications; see Config.
const (
	defaultAuthFailureLimit    = 20
	defaultAuthFailureInterval = 3 * time.Second
	defaultAuthFailureClients  = 10000
)

// maxClientKeyLen bounds the key of a client whose address is not an IP
// address (what a host's Config.ClientAddress returned), so that the
// client table's memory stays bounded too.
const maxClientKeyLen = 64

// authLimitDefaults fills in and checks the fields of c that configure the
// limiter of failed authentications.
func (c *Config) authLimitDefaults() error {
	if c.AuthFailureLimit == 0 {
		c.AuthFailureLimit = defaultAuthFailureLimit
	}
	if c.AuthFailureInterval == 0 {
		c.AuthFailureInterval = defaultAuthFailureInterval
	}
	if c.AuthFailureClients == 0 {
		c.AuthFailureClients = defaultAuthFailureClients
	}
	if c.AuthFailureInterval < 0 || c.AuthFailureClients < 0 {
		return errors.New("lifecycle: Config.AuthFailureInterval and AuthFailureClients must not be negative; leave them zero for the defaults, " +
			"or make AuthFailureLimit negative to disable the limiter of failed authentications")
	}
	if c.ClientAddress == nil {
		c.ClientAddress = remoteAddress
	}
	return nil
}

// remoteAddress is the default Config.ClientAddress: the address of the
// connection.
func remoteAddress(r *http.Request) string { return r.RemoteAddr }

// authLimiter limits the failed authentications of each client, so that a
// client guessing keys or session cookies gets 429 rate_limited, before
// any Store read, instead of costing a read per guess. Each client has a
// bucket of Config.AuthFailureLimit failures that refills by one every
// Config.AuthFailureInterval (the generic cell rate algorithm: one time
// per client, at which all its failures are forgiven). An attempt is
// charged as a failure when it is admitted and the charge given back when
// it succeeds, so that attempts under way at once count as well: at most
// the limit of them is ever let through together. Successes do not refill
// the bucket beyond their own charge: a client sharing its address with a
// guesser cannot reset the guesser's count.
//
// The table of clients holds at most Config.AuthFailureClients entries,
// and a client leaves it once its failures are all forgiven and none of
// its attempts is under way. A client admitted when it is full first drops
// the clients whose failures are all forgiven, then, if that is not a
// sixteenth of the table, enough others, in the map's (random) order, to
// free a sixteenth: the table's memory is bounded and each attempt costs
// constant time on average. A flood of more distinct failing clients than
// the table holds may so forgive a limited client early; it never limits
// a client that did not fail.
//
// A nil *authLimiter limits nothing.
type authLimiter struct {
	clock    Clock
	limit    int
	interval time.Duration
	max      int
	address  func(*http.Request) string

	mu      sync.Mutex
	clients map[string]time.Time // when each client's failures are all forgiven
}

// newAuthLimiter returns the limiter c configures, or nil when
// c.AuthFailureLimit is negative.
func newAuthLimiter(c *Config) *authLimiter {
	if c.AuthFailureLimit < 0 {
		return nil
	}
	return &authLimiter{clock: c.Clock, limit: c.AuthFailureLimit, interval: c.AuthFailureInterval, max: c.AuthFailureClients,
		address: c.ClientAddress, clients: make(map[string]time.Time)}
}

// authTry is one attempt of a client to authenticate, admitted by an
// authLimiter, which charged it as a failure. Call fail when it failed,
// and end when it is over: end gives the charge back unless it failed.
// A nil *authTry (of a nil limiter) does nothing.
type authTry struct {
	l      *authLimiter
	client string
	failed bool
}

// fail says the attempt failed: its charge stays.
func (t *authTry) fail() {
	if t != nil {
		t.failed = true
	}
}

// end ends the attempt, giving its charge back unless it failed.
func (t *authTry) end() {
	if t == nil || t.failed {
		return
	}
	t.l.refund(t.client)
}

// admit admits an attempt of r's client to authenticate, charged as a
// failure until it ends, or returns a *RateLimitError when that client
// has failed too often (attempts under way included).
func (l *authLimiter) admit(r *http.Request) (*authTry, error) {
	if l == nil {
		return nil, nil
	}
	client := clientKey(l.address(r))
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	forgiven, ok := l.clients[client]
	// The client is limited while one more failure would take it past its
	// bucket: while it has limit failures not yet forgiven.
	if wait := forgiven.Sub(now) - time.Duration(l.limit-1)*l.interval; ok && wait > 0 {
		seconds := int((wait + time.Second - 1) / time.Second)
		return nil, &RateLimitError{RetryAfterSeconds: seconds,
			Message: fmt.Sprintf("Too many failed authentications from this client; retry in %d s with a valid key", seconds)}
	}
	if !ok && len(l.clients) >= l.max {
		l.evict(now)
	}
	if forgiven.Before(now) {
		forgiven = now
	}
	l.clients[client] = forgiven.Add(l.interval)
	return &authTry{l: l, client: client}, nil
}

// refund gives back the charge of an attempt of client that did not fail.
func (l *authLimiter) refund(client string) {
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
func (l *authLimiter) evict(now time.Time) {
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

// clientKey returns the key under which the failures of the client at addr
// are counted: its IP address without port; for IPv6, its /64 network,
// which one holder usually has whole (an IPv4 address mapped into IPv6
// counts as the IPv4 address); for anything else, its first 64 bytes.
func clientKey(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if len(host) > maxClientKeyLen {
			host = host[:maxClientKeyLen]
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
