package lifecycletype

import (
	"fmt"
	"net/netip"
)

// RefusedTargetError says that a webhook target was refused because it is
// not a public address: a defence against server-side request forgery.
// Set lifecycle.Config.AllowPrivateWebhookTargets, or
// lifecycle.CreateSubscriptionParams.AllowPrivateTarget for one subscription, to
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
