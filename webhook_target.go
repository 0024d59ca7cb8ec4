package lifecycle

import (
	"context"
	"net/netip"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Resolver looks up the IP addresses of a host name. *net.Resolver is one;
// tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// RefusedTargetError is [lifecycletype.RefusedTargetError]: a webhook
// target refused because it is not a public address. Set
// [Config.AllowPrivateWebhookTargets], or
// [CreateSubscriptionParams.AllowPrivateTarget] for one subscription, to
// deliver to such hosts.
type RefusedTargetError = lifecycletype.RefusedTargetError
