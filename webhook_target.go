package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Resolver looks up the IP addresses of a host name. *net.Resolver is one;
// tests give their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// RefusedTargetError says that a webhook target was refused because it is
// not a public address: a defence against server-side request forgery.
// Set [Config.AllowPrivateWebhookTargets] to deliver to such hosts.
type RefusedTargetError struct {
	// Host is the host name or address of the URL.
	Host string
	// Addr is the refused address Host resolved to.
	Addr netip.Addr
	// Kind is what makes Addr private: "loopback", "private",
	// "link-local", "unspecified", "multicast" or "special-purpose".
	Kind string
}

// Error implements error. It names the address a host resolved to: it is
// for the log. Clients are told [RefusedTargetError.Reason].
func (e *RefusedTargetError) Error() string {
	if e.Host == e.Addr.String() {
		return "webhook target refused: " + e.Reason()
	}
	return fmt.Sprintf("webhook target refused: host %s resolves to %s, a %s address", e.Host, e.Addr, e.Kind)
}

// Reason says why the target was refused, in a sentence for the client. It
// never names the address a host name resolved to, which would map the
// internal network for whoever asks; an address given as the host is
// named, with its kind.
func (e *RefusedTargetError) Reason() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is a %s address; webhooks are delivered only to public addresses", e.Addr, e.Kind)
	}
	return fmt.Sprintf("host %s resolves to a private or reserved address; webhooks are delivered only to public addresses", e.Host)
}

// specialPurpose are ranges that are not public though netip does not say
// so: carrier-grade NAT (where some clouds put their metadata service),
// the IETF protocol block, benchmarking, the reserved 240/4, NAT64 and
// 6to4 (which embed IPv4 addresses), and IPv6 site-local.
var specialPurpose = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// blockedKind returns what makes a an address that webhooks must not
// reach, or "" when it is public.
func blockedKind(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified() || (a.Is4() && a.As4()[0] == 0): // 0.0.0.0/8: "this network"
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast"
	}
	for _, p := range specialPurpose {
		if p.Contains(a) {
			return "special-purpose"
		}
	}
	return ""
}

// targetGuard resolves and dials webhook targets, refusing addresses that
// are not public unless allowed.
type targetGuard struct {
	allowPrivate bool
	resolver     Resolver
	log          *slog.Logger // where refused addresses are named
}

// refuse logs a refused target with its address, and returns the error.
func (g *targetGuard) refuse(host string, a netip.Addr, kind string) error {
	err := &RefusedTargetError{Host: host, Addr: a, Kind: kind}
	if g.log != nil {
		g.log.Warn("webhook target refused", "host", host, "addr", a.String(), "kind", kind)
	}
	return err
}

// lookup returns the addresses of host: the host itself when it is an IP
// address.
func (g *targetGuard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("host %s has no address", host)
	}
	return addrs, nil
}

// checkHost refuses a host any of whose addresses is not public, with a
// *RefusedTargetError. A host that does not resolve is refused too.
func (g *targetGuard) checkHost(ctx context.Context, host string) error {
	if g.allowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return invalid("url", fmt.Sprintf("host %s does not resolve", host))
	}
	for _, a := range addrs {
		if kind := blockedKind(a); kind != "" {
			return g.refuse(host, a, kind)
		}
	}
	return nil
}

// dialContext dials addr ("host:port") for the webhook client. It resolves
// the host itself and connects only to public addresses, and the dialer's
// Control checks the address of the socket once more, so that a DNS answer
// that changed since the subscription was created cannot reach a private
// address.
func (g *targetGuard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	var firstErr error
	for _, a := range addrs {
		if kind := blockedKind(a); kind != "" && !g.allowPrivate {
			if firstErr == nil {
				firstErr = g.refuse(host, a, kind)
			}
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || errors.As(firstErr, new(*RefusedTargetError)) {
			firstErr = err
		}
	}
	return nil, firstErr
}

// control refuses to connect a socket to an address that is not public.
func (g *targetGuard) control(network, address string, _ syscall.RawConn) error {
	if g.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook target %s: %w", address, err)
	}
	if kind := blockedKind(ap.Addr()); kind != "" {
		return g.refuse(ap.Addr().String(), ap.Addr(), kind)
	}
	return nil
}
