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
// Set [Config.AllowPrivateWebhookTargets], or
// [CreateSubscriptionParams.AllowPrivateTarget] for one subscription, to
// deliver to such hosts.
type RefusedTargetError struct {
	// Host is the host name or address of the URL.
	Host string
	// Addr is the refused address Host resolved to.
	Addr netip.Addr
	// Kind is what makes Addr private: "loopback", "private",
	// "link-local", "unspecified", "multicast" or "special-purpose".
	Kind string
	// Embedded is the IPv4 address that Addr, an IPv6 address, carries
	// and was judged by (IPv4-mapped or -compatible, NAT64, 6to4, Teredo,
	// ISATAP); it is the zero Addr when Addr was judged as it is.
	Embedded netip.Addr
}

// literal reports whether e.Host is an address rather than a name.
func (e *RefusedTargetError) literal() bool {
	_, err := netip.ParseAddr(e.Host)
	return err == nil
}

// Error implements error. It names the address a host resolved to: it is
// for the log. Clients are told [RefusedTargetError.Reason].
func (e *RefusedTargetError) Error() string {
	if e.literal() {
		return "webhook target refused: " + e.Reason()
	}
	if e.Embedded.IsValid() {
		return fmt.Sprintf("webhook target refused: host %s resolves to %s, which embeds %s, a %s address", e.Host, e.Addr, e.Embedded, e.Kind)
	}
	return fmt.Sprintf("webhook target refused: host %s resolves to %s, a %s address", e.Host, e.Addr, e.Kind)
}

// Reason says why the target was refused, in a sentence for the client. It
// never names the address a host name resolved to, which would map the
// internal network for whoever asks; an address given as the host is
// named, with its kind and the IPv4 address it embeds.
func (e *RefusedTargetError) Reason() string {
	const tail = "; webhooks are delivered only to public addresses"
	switch {
	case !e.literal():
		return fmt.Sprintf("host %s resolves to a private or reserved address", e.Host) + tail
	case e.Embedded.IsValid():
		return fmt.Sprintf("%s embeds %s, a %s address", e.Host, e.Embedded, e.Kind) + tail
	}
	return fmt.Sprintf("%s is a %s address", e.Host, e.Kind) + tail
}

// specialPurpose are ranges that are not public though netip does not say
// so: carrier-grade NAT (where some clouds put their metadata service),
// the IETF protocol block, benchmarking, the reserved 240/4, and IPv6
// site-local. The IPv6 ranges that carry IPv4 addresses are judged by the
// address they carry (see embeddedIPv4).
var specialPurpose = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fec0::/10"),
}

// The IPv6 prefixes whose addresses carry an IPv4 address at a place the
// prefix fixes.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour      = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo         = netip.MustParsePrefix("2001::/32")      // RFC 4380
)

// judgeAddr returns what makes a an address that webhooks must not reach,
// or "" when it is public. An IPv6 address is judged first as it is, then
// by each IPv4 address it carries (see embeddedIPv4), which is returned
// with the kind when it is the one refused. An address of the local-use
// NAT64 prefix that is in none of RFC 6052's forms is "special-purpose".
func judgeAddr(a netip.Addr) (kind string, embedded netip.Addr) {
	if a.Is4In6() {
		v4 := a.Unmap()
		if kind := blockedKind4(v4); kind != "" {
			return kind, v4
		}
		return "", netip.Addr{}
	}
	if a.Is4() {
		return blockedKind4(a), netip.Addr{}
	}
	if kind := blockedKind6(a); kind != "" {
		return kind, netip.Addr{}
	}
	carried, ok := embeddedIPv4(a)
	if !ok {
		return "special-purpose", netip.Addr{}
	}
	for _, v4 := range carried {
		if kind := blockedKind4(v4); kind != "" {
			return kind, v4
		}
	}
	return "", netip.Addr{}
}

// blockedKind4 judges an IPv4 address.
func blockedKind4(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified() || a.As4()[0] == 0: // 0.0.0.0/8: "this network"
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast"
	}
	return specialKind(a)
}

// blockedKind6 judges an IPv6 address as it is, whatever it carries.
func blockedKind6(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return specialKind(a)
}

// specialKind returns "special-purpose" for an address of specialPurpose.
func specialKind(a netip.Addr) string {
	for _, p := range specialPurpose {
		if p.Contains(a) {
			return "special-purpose"
		}
	}
	return ""
}

// embeddedIPv4 returns the IPv4 addresses that packets to the IPv6
// address a reach, in the forms that carry one:
//
//   - IPv4-compatible ::a.b.c.d (RFC 4291, deprecated; some systems still
//     tunnel it) and IPv4-translated ::ffff:0:a.b.c.d (RFC 2765);
//   - NAT64 (RFC 6052): the well-known prefix 64:ff9b::/96, and the
//     local-use prefix 64:ff9b:1::/48 (RFC 8215), inside which the
//     operator's prefix may be a /48, /56, /64 or /96: every one of these
//     readings that RFC 6052 allows (its u octet and suffix zero) is
//     returned, and ok is false when none is;
//   - 6to4 2002:a.b.c.d::/48 (RFC 3056);
//   - Teredo 2001:0::/32 (RFC 4380): the server's address, and the
//     client's, which is stored XORed with ones;
//   - an ISATAP interface identifier ::0:5efe:a.b.c.d or
//     ::200:5efe:a.b.c.d (RFC 5214) under any prefix: the tunnel sends
//     the packets to that IPv4 address.
func embeddedIPv4(a netip.Addr) (carried []netip.Addr, ok bool) {
	b := a.As16()
	v4 := func(i ...int) netip.Addr {
		return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]})
	}
	zero := func(from, to int) bool {
		for _, c := range b[from:to] {
			if c != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case zero(0, 12): // IPv4-compatible; :: and ::1 were judged already
		carried = append(carried, v4(12, 13, 14, 15))
	case zero(0, 8) && b[8] == 0xff && b[9] == 0xff && zero(10, 12): // IPv4-translated
		carried = append(carried, v4(12, 13, 14, 15))
	case nat64WellKnown.Contains(a):
		carried = append(carried, v4(12, 13, 14, 15))
	case nat64LocalUse.Contains(a):
		// RFC 6052 section 2.2: bits 64 to 71 are zero, and so is the
		// suffix after the IPv4 address.
		if b[8] == 0 {
			if zero(11, 16) {
				carried = append(carried, v4(6, 7, 9, 10)) // a /48
			}
			if zero(12, 16) {
				carried = append(carried, v4(7, 9, 10, 11)) // a /56
			}
			if zero(13, 16) {
				carried = append(carried, v4(9, 10, 11, 12)) // a /64
			}
			carried = append(carried, v4(12, 13, 14, 15)) // a /96
		}
		if len(carried) == 0 {
			return nil, false
		}
	case sixToFour.Contains(a):
		carried = append(carried, v4(2, 3, 4, 5))
	case teredo.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		carried = append(carried, v4(4, 5, 6, 7), netip.AddrFrom4(client))
	}
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe { // ISATAP
		carried = append(carried, v4(12, 13, 14, 15))
	}
	return carried, true
}

// targetGuard resolves and dials webhook targets, refusing addresses that
// are not public unless allowed.
type targetGuard struct {
	allowPrivate bool
	resolver     Resolver
	log          *slog.Logger // where refused addresses are named
}

// refuse logs a refused target with its address, and returns the error.
func (g *targetGuard) refuse(host string, a netip.Addr, kind string, embedded netip.Addr) error {
	err := &RefusedTargetError{Host: host, Addr: a, Kind: kind, Embedded: embedded}
	if g.log != nil {
		attrs := []any{"host", host, "addr", a.String(), "kind", kind}
		if embedded.IsValid() {
			attrs = append(attrs, "embedded", embedded.String())
		}
		g.log.Warn("webhook target refused", attrs...)
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
// *RefusedTargetError, unless the guard or this one subscription
// (allowPrivate) allows them. A host that does not resolve is refused too.
func (g *targetGuard) checkHost(ctx context.Context, host string, allowPrivate bool) error {
	if g.allowPrivate || allowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return invalid("url", fmt.Sprintf("host %s does not resolve", host))
	}
	for _, a := range addrs {
		if kind, embedded := judgeAddr(a); kind != "" {
			return g.refuse(host, a, kind, embedded)
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
		if kind, embedded := judgeAddr(a); kind != "" && !g.allowPrivate {
			if firstErr == nil {
				firstErr = g.refuse(host, a, kind, embedded)
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
	if kind, embedded := judgeAddr(ap.Addr()); kind != "" {
		return g.refuse(ap.Addr().String(), ap.Addr(), kind, embedded)
	}
	return nil
}
