// Package authlimit limits failed authentications, so that a client
// guessing keys or session cookies is refused before anything is looked up
// for it, instead of costing a read per guess.
//
// Failures are counted in two buckets at once: the client's own (its IP
// address; an IPv6 client by its /64) and its network's (the IPv4 /24 or
// IPv6 /48 it is in), so that rotating through the addresses of one
// network buys a guesser little. Each bucket holds a number of failures
// and earns one back every interval (the generic cell rate algorithm: one
// time per bucket, at which all its failures are forgiven). A failure is
// charged when the attempt fails, not when it is admitted; attempts under
// way count against the bucket until they end, so that a client sending
// many guesses at once gets no more through than its bucket holds.
// Successes do not refill a bucket: a client sharing its address with a
// guesser cannot reset the guesser's count.
//
// Beside the buckets of failures, the Limiter keeps a budget of reads for
// the whole process (Config.Reads at once, one earned back every
// Config.ReadInterval): an attempt that will cost a read of the store
// (Admit with read set) takes one from it, whatever its address, so that
// guessers spread over many networks together cost a bounded number of
// reads.
//
// Each table of buckets holds at most Config.Max entries, and a bucket
// leaves it once its failures are all forgiven and none of its attempts
// is under way. A bucket added when the table is full first drops those
// whose failures are all forgiven and that have no attempt under way,
// then, if that is not a sixteenth of the table, enough others, in the
// map's (random) order, to free a sixteenth: the table's memory is bounded
// and each attempt costs constant time on average. A flood of more
// distinct failing clients than the table holds may so forgive a limited
// client early; it never limits a client that did not fail.
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
	// Interval is how long it takes for one failure of a client to be
	// forgiven.
	Interval time.Duration
	// NetworkLimit is how many failures the clients of one network (IPv4
	// /24, IPv6 /48) may have unforgiven at once; zero counts no networks.
	NetworkLimit int
	// NetworkInterval is how long it takes for one failure of a network
	// to be forgiven.
	NetworkInterval time.Duration
	// Max is the most clients, and the most networks, a table holds.
	Max int
	// Reads is the process-wide budget of reads: how many attempts that
	// cost a read may be admitted at once; zero sets no budget.
	Reads int
	// ReadInterval is how long it takes to earn back one read.
	ReadInterval time.Duration
}

// Limiter limits failed authentications and the reads they cost; see the
// package comment.
type Limiter struct {
	clock Clock

	mu           sync.Mutex
	clients      table
	networks     table // empty when no networks are counted
	reads        int
	readInterval time.Duration
	readsTAT     time.Time // when every read of the budget is earned back
}

// New returns the limiter c configures.
func New(c Config) *Limiter {
	return &Limiter{
		clock:        c.Clock,
		clients:      table{limit: c.Limit, interval: c.Interval, max: c.Max, buckets: make(map[string]bucket)},
		networks:     table{limit: c.NetworkLimit, interval: c.NetworkInterval, max: c.Max, buckets: make(map[string]bucket)},
		reads:        c.Reads,
		readInterval: c.ReadInterval,
	}
}

// Try is one attempt of a client to authenticate, admitted by a Limiter;
// it counts against the client's buckets until it ends. Call Fail when it
// failed, and End when it is over: End charges a failure to the client and
// its network if it failed. A nil *Try does nothing.
type Try struct {
	l               *Limiter
	client, network string
	failed, ended   bool
}

// Fail says the attempt failed: End charges it.
func (t *Try) Fail() {
	if t != nil {
		t.failed = true
	}
}

// End ends the attempt, charging a failure if it failed. Calls after the
// first do nothing.
func (t *Try) End() {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	t.l.end(t.client, t.network, t.failed)
}

// Admit admits an attempt to authenticate of the client at addr (counted
// under [Key](addr) and [NetworkKey](addr)); read says that it will cost a
// read, which the process-wide budget must allow. When the client or its
// network has failed too often (attempts under way included), or the
// budget of reads is spent, it returns a nil *Try and how long to wait
// before one more attempt would be admitted.
func (l *Limiter) Admit(addr string, read bool) (*Try, time.Duration) {
	client, network := Key(addr), NetworkKey(addr)
	if l.networks.limit <= 0 {
		network = ""
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := l.clients.wait(client, now)
	if network != "" {
		wait = max(wait, l.networks.wait(network, now))
	}
	var tat time.Time
	if read && l.reads > 0 {
		tat = l.readsTAT
		if tat.Before(now) {
			tat = now
		}
		wait = max(wait, tat.Sub(now)-time.Duration(l.reads-1)*l.readInterval)
	}
	if wait > 0 {
		return nil, wait
	}
	if read && l.reads > 0 {
		l.readsTAT = tat.Add(l.readInterval)
	}
	l.clients.begin(client, now)
	if network != "" {
		l.networks.begin(network, now)
	}
	return &Try{l: l, client: client, network: network}, 0
}

// end ends an attempt of client in network, charging a failure if failed.
func (l *Limiter) end(client, network string, failed bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clients.end(client, failed, now)
	if network != "" {
		l.networks.end(network, failed, now)
	}
}

// table holds the buckets of clients, or of networks, by key.
type table struct {
	limit    int
	interval time.Duration
	max      int
	buckets  map[string]bucket
}

// bucket is the state of one client or network.
type bucket struct {
	forgiven time.Time // when its failures are all forgiven
	pending  int       // its attempts under way
}

// wait returns how long until one more attempt of key would fit in its
// bucket, counting its attempts under way as failures; zero or less when
// it fits now.
func (t *table) wait(key string, now time.Time) time.Duration {
	b, ok := t.buckets[key]
	if !ok {
		return 0
	}
	f := b.forgiven
	if f.Before(now) {
		f = now
	}
	f = f.Add(time.Duration(b.pending) * t.interval)
	// Limited while limit failures (pending ones included) are not yet
	// forgiven.
	return f.Sub(now) - time.Duration(t.limit-1)*t.interval
}

// begin counts an attempt of key under way.
func (t *table) begin(key string, now time.Time) {
	b, ok := t.buckets[key]
	if !ok && len(t.buckets) >= t.max {
		t.evict(now)
	}
	b.pending++
	t.buckets[key] = b
}

// end ends an attempt of key, charging a failure if failed; a bucket with
// nothing left to forgive leaves the table.
func (t *table) end(key string, failed bool, now time.Time) {
	b, ok := t.buckets[key]
	if !ok {
		if !failed {
			return // dropped from a full table meanwhile, and nothing to charge
		}
		if len(t.buckets) >= t.max {
			t.evict(now)
		}
	}
	if b.pending > 0 {
		b.pending--
	}
	if failed {
		if b.forgiven.Before(now) {
			b.forgiven = now
		}
		b.forgiven = b.forgiven.Add(t.interval)
	}
	if b.pending == 0 && !b.forgiven.After(now) {
		delete(t.buckets, key)
		return
	}
	t.buckets[key] = b
}

// evict frees at least a sixteenth of the full table: the buckets with
// nothing to forgive and no attempt under way, then others at random.
func (t *table) evict(now time.Time) {
	for key, b := range t.buckets {
		if b.pending == 0 && !b.forgiven.After(now) {
			delete(t.buckets, key)
		}
	}
	keep := t.max - max(t.max/16, 1)
	for key := range t.buckets {
		if len(t.buckets) <= keep {
			break
		}
		delete(t.buckets, key)
	}
}

// parse returns the IP address of addr (with or without a port), unmapped
// and without zone, and whether it is one.
func parse(addr string) (string, netip.Addr, bool) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host, netip.Addr{}, false
	}
	return host, ip.Unmap().WithZone(""), true
}

// Key returns the key under which the failures of the client at addr are
// counted: its IP address without port; for IPv6, its /64 network, which
// one holder usually has whole (an IPv4 address mapped into IPv6 counts as
// the IPv4 address); for anything else, its first 64 bytes.
func Key(addr string) string {
	host, ip, ok := parse(addr)
	if !ok {
		if len(host) > maxKeyLen {
			host = host[:maxKeyLen]
		}
		return host
	}
	if ip.Is6() {
		prefix, _ := ip.Prefix(64)
		return prefix.String()
	}
	return ip.String()
}

// NetworkKey returns the key under which the failures of the network of
// the client at addr are counted: its IPv4 /24 or IPv6 /48 (an IPv4
// address mapped into IPv6 counts as the IPv4 address); "" for an address
// that is not an IP address, which has no network.
func NetworkKey(addr string) string {
	_, ip, ok := parse(addr)
	if !ok {
		return ""
	}
	bits := 24
	if ip.Is6() {
		bits = 48
	}
	prefix, _ := ip.Prefix(bits)
	return prefix.String()
}
