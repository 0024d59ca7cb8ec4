package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

// resolver answers every name with its addresses, or err.
type resolver struct {
	addrs []netip.Addr
	err   error
}

func (r resolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return r.addrs, r.err
}

var errRefused = errors.New("refused")

func guard(r resolver, allowPrivate bool) *Guard {
	return &Guard{AllowPrivate: allowPrivate, Resolver: r,
		Refuse: func(string, netip.Addr, string, netip.Addr) error { return errRefused }}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	public, private := netip.MustParseAddr("192.0.2.33"), netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name         string
		r            resolver
		allowPrivate bool
		want         error
	}{
		{"public", resolver{addrs: []netip.Addr{public}}, false, nil},
		{"one private address among public ones", resolver{addrs: []netip.Addr{public, private}}, false, errRefused},
		{"private, allowed", resolver{addrs: []netip.Addr{private}}, true, nil},
		{"no address", resolver{}, false, ErrNoAddress},
		{"lookup fails", resolver{err: errors.New("servfail")}, false, ErrNoAddress},
	}
	for _, tt := range tests {
		if err := guard(tt.r, false).Check(t.Context(), "hooks.example.com", tt.allowPrivate); !errors.Is(err, tt.want) {
			t.Errorf("%s: Check = %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := guard(resolver{addrs: []netip.Addr{private}}, true).Check(t.Context(), "hooks.example.com", false); err != nil {
		t.Errorf("a guard that allows private addresses refused one: %v", err)
	}
}

// DialContext refuses a private address before dialing, and dials it when
// allowed.
func TestDialContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	_, port, _ := net.SplitHostPort(addr)

	g := guard(resolver{addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, false)
	if _, err := g.DialContext(t.Context(), "tcp", "hooks.example.com:"+port); !errors.Is(err, errRefused) {
		t.Fatalf("DialContext to loopback = %v, want the refusal", err)
	}
	g.AllowPrivate = true
	_, err = g.DialContext(t.Context(), "tcp", "hooks.example.com:"+port)
	if err == nil || errors.Is(err, errRefused) {
		t.Fatalf("DialContext with private addresses allowed = %v, want a connection error", err)
	}
}
