package connect

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// A provider may name its issuer rather than its endpoints: they are read from the issuer's
// metadata (RFC 8414, or OpenID Connect discovery), through the go-sdk's discovery, which
// tries the well-known URLs in the order MCP's authorization specification gives, checks that
// the metadata names the same issuer (a document of another server is refused) and that it
// offers PKCE. An endpoint the provider sets itself is kept.

// Bounds of discovery.
const (
	// discoveredFor is how long an issuer's endpoints are kept before they are read again.
	discoveredFor = time.Hour
	// failedFor is how long an issuer that could not be read is not asked again: a call
	// that needs it fails at once meanwhile, rather than waiting out the timeout each time.
	failedFor = 30 * time.Second
	// maxIssuers bounds the issuers kept; past it the cache starts again.
	maxIssuers = 1000
)

// Discovery reads and keeps providers' endpoints from their issuers' metadata. The zero value
// is ready; it is safe for concurrent use.
type Discovery struct {
	mu    sync.Mutex
	known map[string]*discovered
}

type discovered struct {
	authorization, token, revocation string
	err                              error
	until                            time.Time
}

// Resolve returns p with the endpoints it leaves out read from its issuer's metadata (p as it
// is when it names no issuer), the requests made by c.
func (d *Discovery) Resolve(ctx context.Context, c *Client, p *Provider, now time.Time) (*Provider, error) {
	if p.Issuer == "" {
		return p, nil
	}
	d.mu.Lock()
	e := d.known[p.Issuer]
	d.mu.Unlock()
	if e == nil || now.After(e.until) {
		e = c.discover(ctx, p, now)
		d.mu.Lock()
		if d.known == nil || len(d.known) >= maxIssuers {
			d.known = map[string]*discovered{}
		}
		d.known[p.Issuer] = e
		d.mu.Unlock()
	}
	if e.err != nil {
		return nil, e.err
	}
	out := *p
	if out.AuthorizationURL == "" {
		out.AuthorizationURL = e.authorization
	}
	if out.TokenURL == "" {
		out.TokenURL = e.token
	}
	if out.RevocationURL == "" {
		out.RevocationURL = e.revocation
	}
	return &out, nil
}

// discover reads p's issuer's metadata, its endpoints checked as a provider's own are.
func (c *Client) discover(ctx context.Context, p *Provider, now time.Time) *discovered {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	fail := func(format string, args ...any) *discovered {
		return &discovered{err: fmt.Errorf("connect: provider %s: the metadata of the issuer %s %s", p.Name, p.Issuer, fmt.Sprintf(format, args...)),
			until: now.Add(failedFor)}
	}
	meta, err := auth.GetAuthServerMetadata(ctx, p.Issuer, c.httpClient())
	switch {
	case err != nil:
		return fail("could not be read: %v", err)
	case meta == nil:
		return fail("is not at any of its well-known URLs")
	}
	for _, u := range []struct{ name, value string }{{"authorization_endpoint", meta.AuthorizationEndpoint},
		{"token_endpoint", meta.TokenEndpoint}, {"revocation_endpoint", meta.RevocationEndpoint}} {
		if u.value == "" && u.name != "revocation_endpoint" {
			return fail("gives no %s", u.name)
		}
		if err := checkEndpoint(u.value, false); err != nil {
			return fail("gives an %s that will not do: %v", u.name, err)
		}
	}
	return &discovered{authorization: meta.AuthorizationEndpoint, token: meta.TokenEndpoint, revocation: meta.RevocationEndpoint,
		until: now.Add(discoveredFor)}
}
