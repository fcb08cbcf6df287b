package platform

import (
	"cmp"
	"context"
	"log/slog"
	"sync"

	"github.com/quiverhq/quiver/config"
	"github.com/quiverhq/quiver/mcp"
)

// The remote MCP servers of the fleet's configuration are connected by each node once a door
// that serves their tools says how users authorize Quiver at those that ask (ConnectRemotes):
// quiver apply and a run of a command that calls no tool connect none. Each server is imported
// on its own, so that a new version that changes one server reconnects that one only.

// RemoteAccess is what connecting to the remote MCP servers takes from the door that serves
// their tools.
type RemoteAccess struct {
	// Authorizer takes users through the OAuth authorization of the servers that ask for it.
	Authorizer mcp.Authorizer
	// Tokens keeps the OAuth grants across restarts; nil keeps them in memory.
	Tokens mcp.TokenStore
	// RedirectURL is where users come back from authorizing a server that has no redirect_url
	// of its own; "" leaves such a server unconnected, saying why.
	RedirectURL string
	// OnChange is called when a server's tools change (it connects, it lists them again).
	OnChange func()
	// Logger receives the connections' logs; nil means the platform's.
	Logger *slog.Logger
}

// remoteSet is the remote MCP servers this node has connected.
type remoteSet struct {
	mu      sync.Mutex
	access  *RemoteAccess // nil until ConnectRemotes
	running map[string]*runningRemote
	order   []string // the servers' names in the configuration's order, for Status
}

type runningRemote struct {
	from string // the entry's YAML: the same, the same connection
	im   *mcp.Importer
}

// ConnectRemotes connects to the remote MCP servers of the configuration served now, and to
// those of every later version, with access; it returns once each has had a first connection
// attempt (one that is down is tried again in the background). disconnect closes them all.
func (p *Platform) ConnectRemotes(ctx context.Context, access RemoteAccess) (disconnect func()) {
	rs := &p.fleet.remotes
	rs.mu.Lock()
	rs.access = &access
	rs.mu.Unlock()
	p.syncRemotes(ctx, p.fleet.cur.Load().conf)
	return func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.access = nil
		for name, r := range rs.running {
			r.im.Close()
			delete(rs.running, name)
		}
	}
}

// RemoteStatus reports the state of each remote MCP server connected, in the configuration's
// order.
func (p *Platform) RemoteStatus() []mcp.RemoteStatus {
	rs := &p.fleet.remotes
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []mcp.RemoteStatus
	for _, name := range rs.order {
		if r := rs.running[name]; r != nil {
			out = append(out, r.im.Status()...)
		}
	}
	return out
}

// syncRemotes connects the servers of conf that are new or changed and disconnects those
// that are gone or changed, when ConnectRemotes was called.
func (p *Platform) syncRemotes(ctx context.Context, conf *Configuration) {
	rs := &p.fleet.remotes
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.access == nil {
		return
	}
	var entries []config.MCPServer
	if conf != nil && conf.File != nil {
		entries = conf.File.MCP.Servers
	}
	var servers config.File
	servers.MCP.Servers = entries
	remotes, err := servers.Remotes()
	if err != nil {
		p.logger.ErrorContext(ctx, "platform: the fleet's remote MCP servers", "err", err)
		return
	}
	want := map[string]bool{}
	rs.order = rs.order[:0]
	for i, r := range remotes {
		want[r.Name] = true
		rs.order = append(rs.order, r.Name)
		from, _ := config.Entry(entries[i])
		if cur := rs.running[r.Name]; cur != nil {
			if cur.from == string(from) {
				continue
			}
			cur.im.Close()
			delete(rs.running, r.Name)
		}
		p.connectRemote(ctx, rs, r, string(from))
	}
	for name, r := range rs.running {
		if !want[name] {
			r.im.Close()
			delete(rs.running, name)
		}
	}
}

// connectRemote imports one server's tools (rs.mu held).
func (p *Platform) connectRemote(ctx context.Context, rs *remoteSet, r mcp.Remote, from string) {
	a := rs.access
	logger := cmp.Or(a.Logger, p.logger)
	if r.OAuth != nil && r.OAuth.RedirectURL == "" {
		if a.RedirectURL == "" {
			logger.ErrorContext(ctx, "platform: an MCP server uses OAuth: give its redirect_url, or the server a fixed port or a public URL, "+
				"where users come back from authorizing", "mcp_server", r.Name)
			return
		}
		o := *r.OAuth
		o.RedirectURL = a.RedirectURL
		r.OAuth = &o
	}
	im, err := mcp.Import(ctx, p.fleet.remote, []mcp.Remote{r}, &mcp.ImportOptions{
		Logger: logger, Authorizer: a.Authorizer, Tokens: a.Tokens,
		OnChange: func() {
			p.sharedChanged()
			if a.OnChange != nil {
				a.OnChange()
			}
		},
	})
	if err != nil {
		logger.ErrorContext(ctx, "platform: connecting an MCP server", "mcp_server", r.Name, "err", err)
		return
	}
	if rs.running == nil {
		rs.running = map[string]*runningRemote{}
	}
	rs.running[r.Name] = &runningRemote{from: from, im: im}
}
