package server

import (
	"cmp"
	"context"
	"net"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
)

// The fleet's configuration (see platform's) changes while the server serves: its remote MCP
// servers are connected by the platform, through this server's OAuth callback, and every
// workspace's MCP clients are told when the shared tools change.

// connectFleet connects the remote MCP servers of the fleet's configuration, now and as
// versions change, and tells the MCP clients of every workspace when the shared tools change.
func (s *Server) connectFleet(ctx context.Context, callbacks *mcp.Callbacks) {
	s.p.OnSharedChange(func() { s.eachTenant(func(t *tenant) { t.mcp.ToolsChanged() }) })
	s.disconnect = s.p.ConnectRemotes(ctx, platform.RemoteAccess{
		Authorizer:  cmp.Or[mcp.Authorizer](s.cfg.Authorizer, callbacks),
		Tokens:      s.cfg.OAuthGrants,
		RedirectURL: s.redirectURL(),
		Logger:      s.logger,
	})
}

// redirectURL is where users come back from authorizing a remote MCP server that has no
// redirect_url of its own: the public URL's callback, else the listening address's when its
// port is fixed; "" when there is no such place.
func (s *Server) redirectURL() string {
	base := s.cfg.PublicURL
	if base == "" {
		if _, port, err := net.SplitHostPort(s.cfg.Addr); err != nil || port == "0" {
			return ""
		}
		base = "http://" + s.cfg.Addr
	}
	return base + mcp.OAuthCallbackPath
}

// remoteStatus is the state of every remote MCP server of the configuration the platform
// serves.
func (s *Server) remoteStatus() []mcp.RemoteStatus { return s.p.RemoteStatus() }
