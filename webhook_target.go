package lifecycle

import (
	"context"
	"net/netip"
)

// Resolver looks up the IP addresses of a host name. *net.Resolver is one;
// tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}
