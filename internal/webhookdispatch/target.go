package webhookdispatch

import (
	"log/slog"
	"net/netip"

	"github.com/tasklifecycle/lifecycle/internal/netguard"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// NewTargetGuard returns the guard of webhook targets: it refuses
// addresses that are not public, unless allowPrivate, with a
// *lifecycletype.RefusedTargetError that log names.
func NewTargetGuard(allowPrivate bool, resolver netguard.Resolver, log *slog.Logger) *netguard.Guard {
	return &netguard.Guard{AllowPrivate: allowPrivate, Resolver: resolver,
		Refuse: func(host string, a netip.Addr, kind string, embedded netip.Addr) error {
			attrs := []any{"host", host, "addr", a.String(), "kind", kind}
			if embedded.IsValid() {
				attrs = append(attrs, "embedded", embedded.String())
			}
			log.Warn("webhook target refused", attrs...)
			return &lifecycletype.RefusedTargetError{Host: host, Addr: a, Kind: kind, Embedded: embedded}
		}}
}
