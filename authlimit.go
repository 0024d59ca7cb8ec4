package lifecycle

import (
	"errors"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/keyauth"
)

// Defaults of the limiter of failed authentications; see Config.
const (
	defaultAuthFailureLimit    = 20
	defaultAuthFailureInterval = 3 * time.Second
	defaultAuthFailureClients  = 10000
	defaultAuthUnknownKeyReads = 50
)

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

// newAuthLimiter returns the limiter of failed authentications c
// configures (defaults filled in), or nil when c.AuthFailureLimit is
// negative.
func newAuthLimiter(c *Config) *keyauth.Limiter {
	return keyauth.NewLimiter(keyauth.LimiterConfig{Clock: c.Clock, Limit: c.AuthFailureLimit, Interval: c.AuthFailureInterval,
		Clients: c.AuthFailureClients, UnknownKeyReads: c.AuthUnknownKeyReads, Address: c.ClientAddress})
}
