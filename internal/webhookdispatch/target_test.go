package webhookdispatch

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/netguard"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// staticResolver resolves every host name to one address.
type staticResolver netip.Addr

func (r staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.Addr(r)}, nil
}

// Every IPv6 form that carries an IPv4 address is judged by that address,
// when a subscription is created and when a delivery dials: the forms of
// RFC 4291 (IPv4-mapped, IPv4-compatible), RFC 2765 (IPv4-translated),
// RFC 6052 and RFC 8215 (NAT64, the well-known and the local-use prefix),
// RFC 3056 (6to4), RFC 4380 (Teredo, whose client address is XORed) and
// RFC 5214 (ISATAP interface identifiers). The public examples are those
// of the RFCs.
func TestEmbeddedIPv4IsJudged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, addr string
		kind       string // "" for public
		embedded   string // the IPv4 address judged, or ""
	}{
		// Native IPv6 kinds come first: ::1 is not 0.0.0.1.
		{"loopback", "::1", "loopback", ""},
		{"unspecified", "::", "unspecified", ""},
		{"link-local", "fe80::1", "link-local", ""},
		{"unique local", "fd00::1", "private", ""},
		{"site-local", "fec0::1", "special-purpose", ""},
		{"public", "2606:4700:4700::1111", "", ""},

		{"IPv4-mapped loopback", "::ffff:127.0.0.1", "loopback", "127.0.0.1"},
		{"IPv4-mapped private", "::ffff:192.168.1.1", "private", "192.168.1.1"},
		{"IPv4-mapped public", "::ffff:192.0.2.33", "", ""},

		{"IPv4-compatible loopback", "::127.0.0.1", "loopback", "127.0.0.1"},
		{"IPv4-compatible metadata", "::a9fe:a9fe", "link-local", "169.254.169.254"},
		{"IPv4-compatible private", "::10.1.2.3", "private", "10.1.2.3"},
		{"IPv4-compatible this network", "::0.0.0.2", "unspecified", "0.0.0.2"},
		{"IPv4-compatible public", "::192.0.2.33", "", ""},

		{"IPv4-translated private", "::ffff:0:10.0.0.1", "private", "10.0.0.1"},
		{"IPv4-translated public", "::ffff:0:192.0.2.33", "", ""},

		{"NAT64 loopback", "64:ff9b::7f00:1", "loopback", "127.0.0.1"},
		{"NAT64 private", "64:ff9b::a00:1", "private", "10.0.0.1"},
		{"NAT64 metadata", "64:ff9b::169.254.169.254", "link-local", "169.254.169.254"},
		{"NAT64 carrier-grade NAT", "64:ff9b::100.100.100.200", "special-purpose", "100.100.100.200"},
		{"NAT64 public (RFC 6052)", "64:ff9b::192.0.2.33", "", ""},
		{"NAT64 local-use /96 metadata", "64:ff9b:1::a9fe:a9fe", "link-local", "169.254.169.254"},
		{"NAT64 local-use /48 private", "64:ff9b:1:a00:0:100::", "private", "10.0.0.1"},
		{"NAT64 local-use /64 private", "64:ff9b:1:0:a:0:100:0", "private", "10.0.0.1"},
		{"NAT64 local-use /96 public", "64:ff9b:1::c000:221", "", ""},
		{"NAT64 local-use no RFC 6052 form", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "special-purpose", ""},

		{"6to4 loopback", "2002:7f00:1::1", "loopback", "127.0.0.1"},
		{"6to4 metadata", "2002:a9fe:a9fe::1", "link-local", "169.254.169.254"},
		{"6to4 private", "2002:c0a8:101:1::1", "private", "192.168.1.1"},
		{"6to4 public (RFC 3056)", "2002:c000:221::1", "", ""},

		// RFC 4380's example: server 65.54.227.120, client 192.0.2.45
		// (3fff:fdd2 XOR ffff:ffff), port 40000.
		{"Teredo public (RFC 4380)", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "", ""},
		{"Teredo client loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback", "127.0.0.1"},
		{"Teredo client metadata", "2001:0:4136:e378:8000:63bf:5601:5601", "link-local", "169.254.169.254"},
		{"Teredo server private", "2001:0:a00:1:8000:63bf:3fff:fdd2", "private", "10.0.0.1"},

		{"ISATAP private", "2001:db8::5efe:a00:1", "private", "10.0.0.1"},
		{"ISATAP loopback, u bit", "2001:db8::200:5efe:7f00:1", "loopback", "127.0.0.1"},
		{"ISATAP public (RFC 5214)", "2001:db8::200:5efe:c000:221", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tt.addr)
			kind, embedded := netguard.Judge(a)
			wantEmbedded := netip.Addr{}
			if tt.embedded != "" {
				wantEmbedded = netip.MustParseAddr(tt.embedded)
			}
			if kind != tt.kind || embedded != wantEmbedded {
				t.Fatalf("Judge(%s) = %q, %v; want %q, %v", a, kind, embedded, tt.kind, wantEmbedded)
			}
			guard := NewTargetGuard(false, staticResolver(a), slog.New(slog.DiscardHandler))
			refused := func(when string, err error) {
				t.Helper()
				var re *lifecycletype.RefusedTargetError
				switch {
				case tt.kind == "" && err != nil:
					t.Errorf("%s: %v, want the address accepted", when, err)
				case tt.kind != "" && !errors.As(err, &re):
					t.Errorf("%s: error %v, want a *lifecycletype.RefusedTargetError", when, err)
				case tt.kind != "" && (re.Kind != tt.kind || re.Embedded != wantEmbedded):
					t.Errorf("%s: refused as %q embedding %v, want %q embedding %v", when, re.Kind, re.Embedded, tt.kind, wantEmbedded)
				}
			}
			// At creation, as the URL's host and as what a name resolves to.
			refused("Check(literal)", guard.Check(t.Context(), tt.addr, false))
			refused("Check(name)", guard.Check(t.Context(), "hooks.example.com", false))
			// At dial: before connecting, and in the socket's Control.
			refused("Control", guard.Control("tcp6", net.JoinHostPort(tt.addr, "443"), nil))
			if tt.kind != "" {
				conn, err := guard.DialContext(t.Context(), "tcp", "hooks.example.com:443")
				if conn != nil {
					conn.Close()
				}
				refused("DialContext", err)
			}
		})
	}
}

// The reason given to a client names an address literal and the address it
// embeds, and never the address a name resolves to.
func TestRefusedTargetReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host, addr, want string
	}{
		{"::127.0.0.1", "::127.0.0.1", "::127.0.0.1 embeds 127.0.0.1, a loopback address; webhooks are delivered only to public addresses"},
		{"10.0.0.1", "10.0.0.1", "10.0.0.1 is a private address; webhooks are delivered only to public addresses"},
		{"hooks.example.com", "64:ff9b::a00:1", "host hooks.example.com resolves to a private or reserved address; webhooks are delivered only to public addresses"},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		kind, embedded := netguard.Judge(a)
		err := &lifecycletype.RefusedTargetError{Host: tt.host, Addr: a, Kind: kind, Embedded: embedded}
		if got := err.Reason(); got != tt.want {
			t.Errorf("Reason() = %q, want %q", got, tt.want)
		}
		if tt.host == "hooks.example.com" && !strings.Contains(err.Error(), "10.0.0.1") {
			t.Errorf("Error() = %q, want the embedded address named for the log", err.Error())
		}
	}
}
