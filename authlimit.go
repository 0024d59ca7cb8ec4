package lifecycle

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/authlimit"
)

// Defaults of the limiter of failed authentications; see Config.
const (
	defaultAuthFailureLimit    = 20
	defaultAuthFailureInterval = 3 * time.Second
	defaultAuthFailureClients  = 10000
	defaultAuthUnknownKeyReads = 50
)

// networkFactor is how much more a network (IPv4 /24, IPv6 /48) may fail
// than one client, and how much faster it earns failures back: with the
// defaults, 80 failures, then one each 0.75 s.
const networkFactor = 4

// authLimitDefaults fills in the fields of c that configure the limiter
// of failed authentications.
func (c *Config) authLimitDefaults() {
	if c.AuthFailureLimit == 0 {
		c.AuthFailureLimit = defaultAuthFailureLimit
	}
	if c.AuthFailureInterval == 0 {
		c.AuthFailureInterval = defaultAuthFailureInterval
	}
	if c.AuthFailureClients == 0 {
		c.AuthFailureClients = defaultAuthFailureClients
	}
	if c.AuthUnknownKeyReads == 0 {
		c.AuthUnknownKeyReads = defaultAuthUnknownKeyReads
	}
	if c.ClientAddress == nil {
		c.ClientAddress = remoteAddress
	}
}

// validateAuthLimits checks the fields of c that configure the limiter of
// failed authentications.
func (c *Config) validateAuthLimits() error {
	if c.AuthFailureInterval < 0 || c.AuthFailureClients < 0 || c.AuthUnknownKeyReads < 0 {
		return errors.New("lifecycle: Config.AuthFailureInterval, AuthFailureClients and AuthUnknownKeyReads must not be negative; leave them zero for the defaults, " +
			"or make AuthFailureLimit negative to disable the limiter of failed authentications")
	}
	return nil
}

// remoteAddress is the default Config.ClientAddress: the address of the
// connection.
func remoteAddress(r *http.Request) string { return r.RemoteAddr }

// authLimiter decides whether an attempt to authenticate with
// credentials the Service does not know (an unknown API key, a session
// cookie) may cost a Store read (see package authlimit): a client, or a
// network, that failed too often, and any client once the process-wide
// budget of reads for unknown keys is spent, gets 429 rate_limited instead.
// Its clients are named by Config.ClientAddress. Keys the Service knows
// never reach it (see keyAuthenticator).
//
// A nil *authLimiter limits nothing.
type authLimiter struct {
	limiter *authlimit.Limiter
	address func(*http.Request) string
}

// newAuthLimiter returns the limiter c configures, or nil when
// c.AuthFailureLimit is negative.
func newAuthLimiter(c *Config) *authLimiter {
	if c.AuthFailureLimit < 0 {
		return nil
	}
	return &authLimiter{address: c.ClientAddress, limiter: authlimit.New(authlimit.Config{
		Clock: c.Clock, Limit: c.AuthFailureLimit, Interval: c.AuthFailureInterval,
		NetworkLimit: networkFactor * c.AuthFailureLimit, NetworkInterval: c.AuthFailureInterval / networkFactor,
		Max: c.AuthFailureClients, Reads: c.AuthUnknownKeyReads, ReadInterval: time.Second / time.Duration(c.AuthUnknownKeyReads)})}
}

// admit admits an attempt of r's client to authenticate, which counts
// against its client and network until it ends and is charged as a
// failure if it fails; read says it costs a Store read, taken from the
// process-wide budget. It returns a *RateLimitError when the client or
// its network has failed too often (attempts under way included), or the
// budget is spent. A nil *authlimit.Try (of a nil limiter) does nothing.
func (l *authLimiter) admit(r *http.Request, read bool) (*authlimit.Try, error) {
	if l == nil {
		return nil, nil
	}
	try, wait := l.limiter.Admit(l.address(r), read)
	if try == nil {
		return nil, authRateLimited(wait)
	}
	return try, nil
}

// authRateLimited is the error of an attempt to authenticate refused for
// wait.
func authRateLimited(wait time.Duration) *RateLimitError {
	seconds := max(int((wait+time.Second-1)/time.Second), 1)
	return &RateLimitError{RetryAfterSeconds: seconds,
		Message: fmt.Sprintf("Too many failed authentications from this client or its network, or too many unknown keys at once; "+
			"retry in %d s, or with a valid key, which is never refused for others' failures", seconds)}
}
