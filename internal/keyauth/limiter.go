package keyauth

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/authlimit"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// networkFactor is how much more a network (IPv4 /24, IPv6 /48) may fail
// than one client, and how much faster it earns failures back: with the
// Service's defaults, 80 failures, then one each 0.75 s.
const networkFactor = 4

// LimiterConfig configures a Limiter; the Service fills it from its
// Config.AuthFailure* fields, defaults filled in.
type LimiterConfig struct {
	// Clock tells the time. Required.
	Clock lifecycletype.Clock
	// Limit is how many failures a client may have unforgiven at once;
	// negative disables the limiter (NewLimiter returns nil).
	Limit int
	// Interval is how long it takes for one failure of a client to be
	// forgiven.
	Interval time.Duration
	// Clients is the most clients, and the most networks, counted at once.
	Clients int
	// UnknownKeyReads is the process-wide budget of Store reads for
	// unknown keys, at once and per second. Positive.
	UnknownKeyReads int
	// Address names the client of a request. Required.
	Address func(*http.Request) string
}

// Limiter decides whether an attempt to authenticate with credentials
// the process does not know (an unknown API key, a session cookie) may
// cost a Store read (see package authlimit): a client, or a network, that
// failed too often, and any client once the process-wide budget of reads
// for unknown keys is spent, gets 429 rate_limited instead. Keys that
// [Keys] knows never reach it.
//
// A nil *Limiter limits nothing.
type Limiter struct {
	limiter *authlimit.Limiter
	address func(*http.Request) string
}

// NewLimiter returns the limiter c configures, or nil when c.Limit is
// negative.
func NewLimiter(c LimiterConfig) *Limiter {
	if c.Limit < 0 {
		return nil
	}
	return &Limiter{address: c.Address, limiter: authlimit.New(authlimit.Config{
		Clock: c.Clock, Limit: c.Limit, Interval: c.Interval,
		NetworkLimit: networkFactor * c.Limit, NetworkInterval: c.Interval / networkFactor,
		Max: c.Clients, Reads: c.UnknownKeyReads, ReadInterval: time.Second / time.Duration(c.UnknownKeyReads)})}
}

// Admit admits an attempt of r's client to authenticate, which counts
// against its client and network until it ends and is charged as a
// failure if it fails; read says it costs a Store read, taken from the
// process-wide budget. It returns a *RateLimitError when the client or
// its network has failed too often (attempts under way included), or the
// budget is spent. A nil *authlimit.Try (of a nil limiter) does nothing.
func (l *Limiter) Admit(r *http.Request, read bool) (*authlimit.Try, error) {
	if l == nil {
		return nil, nil
	}
	try, wait := l.limiter.Admit(l.address(r), read)
	if try == nil {
		return nil, rateLimited(wait)
	}
	return try, nil
}

// rateLimited is the error of an attempt to authenticate refused for
// wait.
func rateLimited(wait time.Duration) *lifecycletype.RateLimitError {
	seconds := max(int((wait+time.Second-1)/time.Second), 1)
	return &lifecycletype.RateLimitError{RetryAfterSeconds: seconds,
		Message: fmt.Sprintf("Too many failed authentications from this client or its network, or too many unknown keys at once; "+
			"retry in %d s, or with a valid key, which is never refused for others' failures", seconds)}
}
