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
)

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

// authLimiter limits the failed authentications of each client (see
// package authlimit), so that a client guessing keys or session cookies
// gets 429 rate_limited, before any Store read, instead of costing a read
// per guess; its clients are named by Config.ClientAddress.
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
		Clock: c.Clock, Limit: c.AuthFailureLimit, Interval: c.AuthFailureInterval, Max: c.AuthFailureClients})}
}

// admit admits an attempt of r's client to authenticate, charged as a
// failure until it ends, or returns a *RateLimitError when that client
// has failed too often (attempts under way included). A nil
// *authlimit.Try (of a nil limiter) does nothing.
func (l *authLimiter) admit(r *http.Request) (*authlimit.Try, error) {
	if l == nil {
		return nil, nil
	}
	try, wait := l.limiter.Admit(l.address(r))
	if try == nil {
		seconds := int((wait + time.Second - 1) / time.Second)
		return nil, &RateLimitError{RetryAfterSeconds: seconds,
			Message: fmt.Sprintf("Too many failed authentications from this client; retry in %d s with a valid key", seconds)}
	}
	return try, nil
}
