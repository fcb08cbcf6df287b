package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// A server serves many workspaces. Each gets a tenant: the MCP server over the workspace's
// dispatcher, which the platform holds with the workspace's tools (its stored tools over the
// shared ones). A request reaches the tenant of its key's workspace and nothing else, so one
// workspace never sees or calls another's tools.

// tenant is what the server holds for one workspace.
type tenant struct {
	id       string
	ws       *platform.Workspace
	registry *quiver.Registry
	disp     *quiver.Dispatcher // the workspace's, as every door's call goes through it
	mcp      *mcp.Server
	mcpHTTP  http.Handler
	sessions *sessionLeases // its MCP sessions
	// generation is the workspace's tool generation its MCP clients were last told of.
	generation atomic.Uint64
}

type tenants struct {
	mu sync.Mutex
	m  map[string]*tenant
}

// tenant returns the workspace's tenant, made on first use, with the workspace's tools as the
// store has them now (give or take a second); its MCP clients are told when they changed.
func (s *Server) tenant(ctx context.Context, workspaceID string) *tenant {
	ws := s.p.Workspace(ctx, workspaceID)
	s.tenants.mu.Lock()
	t := s.tenants.m[workspaceID]
	if t == nil {
		t = s.newTenant(ws)
		if s.tenants.m == nil {
			s.tenants.m = map[string]*tenant{}
		}
		s.tenants.m[workspaceID] = t
	}
	s.tenants.mu.Unlock()
	// Loaded first: a request writes nothing shared unless the tools changed.
	if g := ws.Generation(); t.generation.Load() != g && t.generation.Swap(g) != g {
		t.mcp.ToolsChanged()
	}
	return t
}

// newTenant builds the MCP server of a workspace over its dispatcher.
func (s *Server) newTenant(ws *platform.Workspace) *tenant {
	t := &tenant{id: ws.ID(), ws: ws, registry: ws.Registry(), disp: ws.Dispatcher()}
	t.sessions = &sessionLeases{leases: s.p.Store(), workspaceID: t.id, ttl: s.sessionTTL, limits: s.sessionLimits}
	opts := s.p.MCPOptions(t.id, s.cfg.MCP)
	opts.Session = func(ctx context.Context, info mcp.SessionInfo) (quiver.Scope, error) {
		return s.sessionThread(ctx, t, info)
	}
	t.mcp = mcp.NewServer(t.disp, &opts)
	if s.cfg.SetupMCP != nil {
		s.cfg.SetupMCP(t.mcp)
	}
	httpOpts := *s.mcpOptions
	httpOpts.Sessions = t.sessions
	if j := s.p.Jobs(); j != nil {
		httpOpts.Relay = answersRelay{jobs: j, topic: "mcp-answers:" + t.id}
	}
	t.mcpHTTP = t.mcp.HTTPHandler(&httpOpts)
	return t
}

// sessionThread is the thread an MCP session's calls are recorded on: the platform makes it
// (Platform.SessionThread), and the session's lease keeps it, so that any node continuing the
// session records on the same one. A request of no session (the sessionless protocol) gets
// one of its own.
func (s *Server) sessionThread(ctx context.Context, t *tenant, info mcp.SessionInfo) (quiver.Scope, error) {
	if info.ID == "" {
		return s.p.SessionThread(ctx, t.id, info)
	}
	th, err := t.sessions.sessionThread(context.WithoutCancel(ctx), info.ID, func() (*store.Thread, error) {
		scope, err := s.p.SessionThread(ctx, t.id, info)
		return &store.Thread{ID: scope.ThreadID, UserID: scope.UserID}, err
	})
	if err != nil {
		return quiver.Scope{}, err
	}
	return quiver.Scope{WorkspaceID: t.id, UserID: th.UserID, ThreadID: th.ID}, nil
}

// toolsChanged tells the workspace's MCP clients that its tools changed, once the platform
// has loaded them again: the API calls it after every change to them.
func (s *Server) toolsChanged(ctx context.Context, workspaceID string) {
	s.tenants.mu.Lock()
	t := s.tenants.m[workspaceID]
	s.tenants.mu.Unlock()
	if t != nil {
		s.tenant(ctx, workspaceID)
	}
}

// eachTenant calls fn with every tenant made so far.
func (s *Server) eachTenant(fn func(*tenant)) {
	s.tenants.mu.Lock()
	all := make([]*tenant, 0, len(s.tenants.m))
	for _, t := range s.tenants.m {
		all = append(all, t)
	}
	s.tenants.mu.Unlock()
	for _, t := range all {
		fn(t)
	}
}
