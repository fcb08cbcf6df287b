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

// shared is 100.64.0.0/10, carrier-grade NAT's range, internal like the private ones.
var shared = netip.MustParsePrefix("100.64.0.0/10")

func public(ip netip.Addr) bool {
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !shared.Contains(ip) && !ip.IsLoopback() && !ip.IsLinkLocalUnicast()
}
