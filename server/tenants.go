package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
)

// A server serves many workspaces. Each gets a tenant: the dispatcher and MCP server over the
// workspace's tools, which the platform holds (its stored tools over the server's own). A
// request reaches the tenant of its key's workspace and nothing else, so one workspace never
// sees or calls another's tools.

// tenant is what the server holds for one workspace.
type tenant struct {
	id       string
	ws       *platform.Workspace
	registry *quiver.Registry
	disp     *quiver.Dispatcher
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

// newTenant builds the dispatcher and MCP server of a workspace.
func (s *Server) newTenant(ws *platform.Workspace) *tenant {
	t := &tenant{id: ws.ID(), ws: ws, registry: ws.Registry()}
	t.disp = &quiver.Dispatcher{
		Registry: t.registry,
		Policy:   s.cfg.Policy,
		Resolver: s.p.VariableResolver(),
		Confirm:  mcp.Confirm(nil),
		// What a tool returns is cut to this before it is answered or stored.
		MaxResultBytes: s.cfg.MaxResultBytes,
		Recorder:       &Recorder{Store: s.cfg.Store, Journal: s.journal},
	}
	if s.cfg.Auth != nil {
		t.disp.Middleware = []quiver.Middleware{callerMayCall}
	}
	if s.p.Jobs() != nil {
		// A call naming _delegate runs its request as a run would: with the server's
		// prompts and models, under this dispatcher's policy.
		t.disp.Delegator = s.p.Runner().DoorDelegator(t.disp)
	}
	opts := mcp.ServerOptions{}
	if s.cfg.MCP != nil {
		opts = *s.cfg.MCP
	}
	opts.Prompts = append(slices.Clip(opts.Prompts), catalogPrompts(s.p.Runner().Catalog)...)
	workspaceID := ws.ID()
	opts.ThreadFiles = func(ctx context.Context, threadID, path string) ([]byte, string, error) {
		return s.threadFileResource(ctx, t, threadID, path)
	}
	if opts.MaxResourceBytes == 0 {
		opts.MaxResourceBytes = maxResourceBytes
	}
	opts.Session = func(ctx context.Context, info mcp.SessionInfo) (quiver.Scope, error) {
		return s.sessionThread(ctx, t, info)
	}
	t.mcp = mcp.NewServer(t.disp, &opts)
	if s.cfg.SetupMCP != nil {
		s.cfg.SetupMCP(t.mcp)
	}
	httpOpts := *s.mcpOptions
	t.sessions = &sessionLeases{leases: s.cfg.Store, workspaceID: workspaceID, ttl: s.sessionTTL, limits: s.sessionLimits}
	httpOpts.Sessions = t.sessions
	if j := s.p.Jobs(); j != nil {
		httpOpts.Relay = answersRelay{jobs: j, topic: "mcp-answers:" + workspaceID}
	}
	t.mcpHTTP = t.mcp.HTTPHandler(&httpOpts)
	return t
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
