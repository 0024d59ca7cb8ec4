// Package netguard keeps outbound connections away from addresses that are
// not public: loopback, private, link-local, multicast and special-purpose
// ranges, including IPv4 addresses carried inside IPv6 ones (NAT64, 6to4,
// Teredo, ISATAP and the IPv4-mapped forms). It is the lifecycle's defence
// against server-side request forgery through webhook targets: a target is
// judged when it is registered, and again, by address, when it is dialled.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Resolver looks up the IP addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard resolves and dials hosts, refusing addresses that Judge finds not
// public, unless AllowPrivate is set.
type Guard struct {
	// AllowPrivate lets every address through.
	AllowPrivate bool
	// Resolver looks up host names.
	Resolver Resolver
	// Refuse returns the error of a refused address (and may log it):
	// host as given, the address it resolved to, and Judge's answer.
	Refuse func(host string, addr netip.Addr, kind string, embedded netip.Addr) error
}

// ErrNoAddress is returned by Check for a host that does not resolve.
var ErrNoAddress = errors.New("host does not resolve")

// lookup returns the addresses of host: the host itself when it is an IP
// address.
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := g.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("host %s has no address", host)
	}
	return addrs, nil
}

// Check refuses a host any of whose addresses is not public, with the
// error of Refuse, unless the guard or the caller (allowPrivate) allows
// them. A host that does not resolve within 5 seconds is refused with an
// error matching ErrNoAddress.
func (g *Guard) Check(ctx context.Context, host string, allowPrivate bool) error {
	if g.AllowPrivate || allowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", host, ErrNoAddress, err)
	}
	for _, a := range addrs {
		if kind, embedded := Judge(a); kind != "" {
			return g.Refuse(host, a, kind, embedded)
		}
	}
	return nil
}

// DialContext dials addr ("host:port"), as http.Transport.DialContext
// does. It resolves the host itself and connects only to public
// addresses, and the dialer's Control checks the address of the socket
// once more, so that a DNS answer that changed since the host was checked
// cannot reach a private address.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
	var firstErr error
	refused := false // firstErr is a refusal, which a dial error replaces
	for _, a := range addrs {
		if kind, embedded := Judge(a); kind != "" && !g.AllowPrivate {
			if firstErr == nil {
				firstErr, refused = g.Refuse(host, a, kind, embedded), true
			}
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || refused {
			firstErr, refused = err, false
		}
	}
	return nil, firstErr
}

// Control is a net.Dialer's Control: it refuses to connect a socket to an
// address that is not public.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("target %s: %w", address, err)
	}
	if kind, embedded := Judge(ap.Addr()); kind != "" {
		return g.Refuse(ap.Addr().String(), ap.Addr(), kind, embedded)
	}
	return nil
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

// Judge returns what makes a an address that outbound requests must not reach,
// or "" when it is public. An IPv6 address is judged first as it is, then
// by each IPv4 address it carries (see embeddedIPv4), which is returned
// with the kind when it is the one refused. An address of the local-use
// NAT64 prefix that is in none of RFC 6052's forms is "special-purpose".
func Judge(a netip.Addr) (kind string, embedded netip.Addr) {
	if a.Is4In6() {
		v4 := a.Unmap()
		if kind := blockedKind(v4); kind != "" {
			return kind, v4
		}
		return "", netip.Addr{}
	}
	if a.Is4() {
		return blockedKind(a), netip.Addr{}
	}
	if kind := blockedKind(a); kind != "" {
		return kind, netip.Addr{}
	}
	carried, ok := embeddedIPv4(a)
	if !ok {
		return "special-purpose", netip.Addr{}
	}
	for _, v4 := range carried {
		if kind := blockedKind(v4); kind != "" {
			return kind, v4
		}
	}
	return "", netip.Addr{}
}

// blockedKind judges an address as it is, whatever it carries.
func blockedKind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0: // 0.0.0.0/8: "this network"
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast() || a == broadcast:
		return "multicast"
	}
	return specialKind(a)
}

// broadcast is the IPv4 limited broadcast address.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

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
