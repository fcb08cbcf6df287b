// Package netguard keeps the server's outbound requests to third parties (the servers of
// imported OpenAPI documents, the authorization servers of users' connections) off the
// networks behind it: a transport whose dialer refuses every address that is not public,
// after the name was resolved, but for the hosts the operator allows.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// Transport is a clone of http.DefaultTransport whose dialer refuses addresses that are not
// public, but for the hosts ("host" or "host:port") in internal. hint says how an operator
// allows a host, for the refusal ("quiver serve --openapi-internal-hosts").
func Transport(internal []string, hint string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A proxy would dial in the source's place, past the check.
	t.Proxy = nil
	plain := &net.Dialer{Timeout: 10 * time.Second}
	guarded := &net.Dialer{Timeout: 10 * time.Second, Control: refuseInternal}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		allowed := slices.Contains(internal, addr) || slices.Contains(internal, host)
		dialer := guarded
		if allowed {
			dialer = plain
		}
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, dialError(addr, err, allowed, hint)
		}
		return conn, nil
	}
	return t
}

// errNotPublic is refuseInternal's refusal.
var errNotPublic = errors.New("not a public address")

// refuseInternal is a dialer's Control: it sees the address about to be connected to, after
// the name was resolved.
func refuseInternal(_, address string, _ syscall.RawConn) error {
	if ap, err := netip.ParseAddrPort(address); err != nil || !Public(ap.Addr().Unmap()) {
		return errNotPublic
	}
	return nil
}

// dialError is why a PublicOnly source's connection to addr (the host and port as the
// document or the source gives them) failed, without what the server's resolver made of the
// name: a net.OpError names the address dialled, a net.DNSError the resolver asked. Past the
// hosts the operator allows, a name that resolves to an internal address and a name that does
// not resolve are the same refusal, so that a document cannot tell which names the server's
// network has.
func dialError(addr string, err error, allowed bool, hint string) error {
	var dnsErr *net.DNSError
	switch {
	case !allowed && (errors.Is(err, errNotPublic) || errors.As(err, &dnsErr)):
		return fmt.Errorf("the server %s is not allowed: it is not a public address, or its name does not resolve "+
			"(an operator may allow the host with %s)", addr, hint)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("connecting to the server %s: its name does not resolve (%s)", addr, dnsErr.Err)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		// What failed past the address (connection refused, a timeout), which names none;
		// wrapped, so that a timeout stays one.
		return fmt.Errorf("connecting to the server %s: %w", addr, opErr.Err)
	}
	return fmt.Errorf("connecting to the server %s: %w", addr, err)
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

// Public reports whether ip is a public address: one a request to a third party may reach.
func Public(ip netip.Addr) bool {
	return globalUnicast(ip) && !slices.ContainsFunc(notPublic, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// globalUnicast reports whether ip is a global unicast address that is not private, loopback
// or link-local; an IPv6 one in 2000::/3 (not ::a.b.c.d, fc00::/7 and the rest outside it).
func globalUnicast(ip netip.Addr) bool {
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
		return false
	}
	return !ip.Is6() || globalIPv6.Contains(ip)
}
