// Package hostcheck defends Quiver's HTTP doors against DNS rebinding and cross-site requests.
//
// A web page whose name is made to resolve to 127.0.0.1 (DNS rebinding) reaches a local server
// as if it were itself, and sends its own name as Host; a page of another site sends its own
// Origin. A server that answers only to the names it is reached by, and to its own origins,
// gives such pages nothing: a keyless local server (quiver serve --insecure-local) would
// otherwise hand them the whole API.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Policy says which names and origins a server answers to, besides local ones.
type Policy struct {
	// Hosts are host names (without port) accepted in the Host header besides localhost,
	// loopback addresses and the address a request arrived on: the names clients and reverse
	// proxies reach the server by.
	Hosts []string
	// Origins are browser origins (scheme://host[:port]) accepted besides local ones and the
	// server's own (an origin whose host and port are the request's Host).
	Origins []string
}

// HostAllowed reports whether the request's Host names this server: localhost, a loopback
// address, the address the connection arrived on, or one of p.Hosts.
func (p Policy) HostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") || slices.ContainsFunc(p.Hosts, func(a string) bool { return strings.EqualFold(a, host) }) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
		if ta, ok := la.(*net.TCPAddr); ok {
			return ta.IP.Equal(ip)
		}
		if h, _, err := net.SplitHostPort(la.String()); err == nil {
			return net.ParseIP(h).Equal(ip)
		}
	}
	return false
}

// OriginAllowed reports whether a browser's Origin may drive the server: a local origin, one
// of p.Origins, or the server's own (same host and port as the request's Host, which
// HostAllowed has vouched for).
func (p Policy) OriginAllowed(r *http.Request, origin string) bool {
	if slices.Contains(p.Origins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Check returns why r may not be served (a message for a 403), or "" when it may.
func (p Policy) Check(r *http.Request) string {
	if !p.HostAllowed(r) {
		return fmt.Sprintf("invalid Host header %q: this server answers to local addresses and its configured hosts only "+
			"(DNS rebinding protection; quiver serve --allowed-hosts adds the names it is reached by)", clip(r.Host))
	}
	if origin := r.Header.Get("Origin"); origin != "" && !p.OriginAllowed(r, origin) {
		return fmt.Sprintf("origin %q is not allowed (quiver serve --allowed-origins adds one)", clip(origin))
	}
	return ""
}

// Guard serves next only the requests p allows, and answers the others 403 with a plain-text
// reason.
func (p Policy) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := p.Check(r); why != "" {
			http.Error(w, "Forbidden: "+why, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
}
