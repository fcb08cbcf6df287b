package openapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// transport is what a source's requests go through: its own Transport, else the default
// one, or, for a PublicOnly source, a transport whose dialer refuses internal addresses.
func transport(src Source) http.RoundTripper {
	if src.Transport != nil || !src.PublicOnly {
		return src.Transport
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A proxy would dial in the source's place, past the check.
	t.Proxy = nil
	plain := &net.Dialer{Timeout: 10 * time.Second}
	guarded := &net.Dialer{Timeout: 10 * time.Second, Control: refuseInternal}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		if slices.Contains(src.Internal, addr) || slices.Contains(src.Internal, host) {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
	return t
}

// refuseInternal is a dialer's Control: it sees the address about to be connected to, after
// the name was resolved.
func refuseInternal(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("address %s: %v", address, err)
	}
	if ip := ap.Addr().Unmap(); !public(ip) {
		return fmt.Errorf("%s is not a public address: refused (an operator may allow the host)", ip)
	}
	return nil
}

// notPublic are the ranges of addresses that are global unicast by the Go standard library's
// reckoning but not public: IPv4's shared (carrier-grade NAT), IETF protocol, benchmarking,
// documentation and reserved ranges; and IPv6 forms that carry an IPv4 address a gateway
// reaches (NAT64, 6to4, Teredo) or were never public (site-local, documentation).
var notPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "240.0.0.0/4", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32", "2001:db8::/32", "fec0::/10"} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// globalIPv6 is where public IPv6 unicast addresses are allocated.
var globalIPv6 = netip.MustParsePrefix("2000::/3")

func public(ip netip.Addr) bool {
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return false
	}
	if ip.Is6() && !globalIPv6.Contains(ip) {
		return false // ::a.b.c.d, fc00::/7 and the rest outside 2000::/3
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
