package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// A server serves many workspaces. Each gets a tenant: a registry of the workspace's stored
// tools (JavaScript functions and client tools, E1) over the server's own (Config.Registry:
// built-in, configured and imported tools, which every workspace shares), and the dispatcher
// and MCP server over that registry. A request reaches the tenant of its key's workspace and
// nothing else, so one workspace never sees or calls another's tools.

// tenantRecheck is how often a tenant asks the store whether its workspace's tools changed
// (Entities.ToolsStamp): the most another process's change to a workspace's tools takes to be
// served here. A change made through this server is served at once (toolsChanged).
const tenantRecheck = time.Second

// tenant is what the server holds for one workspace.
type tenant struct {
	id       string
	registry *quiver.Registry
	disp     *quiver.Dispatcher
	mcp      *mcp.Server
	mcpHTTP  http.Handler

	// checked is when the stamp was last compared (Unix nanoseconds), stale says a change
	// was made here since: either makes the next use look at the store.
	checked atomic.Int64
	stale   atomic.Bool
	loaded  atomic.Bool // the stored tools were loaded once
	mu      sync.Mutex  // one reload at a time
	stamp   string
}

type tenants struct {
	mu sync.Mutex
	m  map[string]*tenant
}

// tenant returns the workspace's tenant, made on first use, with its stored tools as the store
// has them now (give or take tenantRecheck). A store that cannot be read leaves the tools as
// they were loaded last: the failure is logged, and the server's own tools keep being served.
func (s *Server) tenant(ctx context.Context, workspaceID string) *tenant {
	s.tenants.mu.Lock()
	t := s.tenants.m[workspaceID]
	if t == nil {
		t = s.newTenant(workspaceID)
		t.stale.Store(true)
		if s.tenants.m == nil {
			s.tenants.m = map[string]*tenant{}
		}
		s.tenants.m[workspaceID] = t
	}
	s.tenants.mu.Unlock()
	if t.stale.Load() || time.Now().UnixNano()-t.checked.Load() > int64(tenantRecheck) {
		// Once a tenant's tools are loaded, a request does not wait for another's recheck:
		// it is served the tools as they were a moment ago.
		s.refresh(ctx, t, !t.loaded.Load())
	}
	return t
}

// newTenant builds the registry, dispatcher and MCP server of a workspace, without its stored
// tools (refresh loads them).
func (s *Server) newTenant(workspaceID string) *tenant {
	t := &tenant{id: workspaceID, registry: &quiver.Registry{Base: s.cfg.Registry, Logger: s.cfg.Registry.Logger}}
	t.disp = &quiver.Dispatcher{
		Registry: t.registry,
		Policy:   s.cfg.Policy,
		Resolver: s.cfg.Resolver,
		Confirm:  mcp.Confirm(nil),
		// What a tool returns is cut to this before it is answered or stored.
		MaxResultBytes: s.cfg.MaxResultBytes,
		Recorder:       &Recorder{Store: s.cfg.Store, Journal: s.journal},
	}
	if s.cfg.Auth != nil {
		t.disp.Middleware = []quiver.Middleware{callerMayCall}
	}
	if s.cfg.Runner != nil {
		// A call naming _delegate runs its request as a run would: with the server's
		// prompts and models, under this dispatcher's policy.
		t.disp.Delegator = s.cfg.Runner.DoorDelegator(t.disp)
	}
	opts := mcp.ServerOptions{}
	if s.cfg.MCP != nil {
		opts = *s.cfg.MCP
	}
	opts.Session = func(ctx context.Context, info mcp.SessionInfo) (quiver.Scope, error) {
		return s.sessionThread(ctx, workspaceID, info)
	}
	t.mcp = mcp.NewServer(t.disp, &opts)
	if s.cfg.SetupMCP != nil {
		s.cfg.SetupMCP(t.mcp)
	}
	t.mcpHTTP = t.mcp.HTTPHandler(s.mcpOptions)
	return t
}

// refresh loads the workspace's stored tools again when the store's stamp says they changed
// (or a change was made here), and tells the workspace's MCP clients. When wait is false and
// another request is refreshing the tenant, it returns at once.
func (s *Server) refresh(ctx context.Context, t *tenant, wait bool) {
	if wait {
		t.mu.Lock()
	} else if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	if !t.stale.Load() && time.Now().UnixNano()-t.checked.Load() <= int64(tenantRecheck) {
		return // another request refreshed it while this one waited
	}
	ent, ok := s.cfg.Store.(store.Entities)
	if !ok {
		t.stale.Store(false)
		t.loaded.Store(true)
		t.checked.Store(time.Now().UnixNano())
		return
	}
	// A request that is cancelled must not leave the tenant half-checked for the others.
	ctx = context.WithoutCancel(ctx)
	wasStale := t.stale.Swap(false)
	stamp, err := ent.ToolsStamp(ctx, t.id)
	if err != nil {
		t.stale.Store(wasStale)
		s.logger.ErrorContext(ctx, "server: checking a workspace's stored tools", "workspace", t.id, "err", err)
		t.checked.Store(time.Now().UnixNano()) // ask again after tenantRecheck, not on every request
		return
	}
	t.checked.Store(time.Now().UnixNano())
	if stamp == t.stamp && !wasStale {
		return
	}
	tools, err := loadStoredTools(ctx, ent, t.id, s.cfg.FunctionLimits)
	if err != nil {
		// The tools that load are served; the log names the ones that do not.
		s.logger.WarnContext(ctx, "server: some stored tools are not served", "workspace", t.id, "err", err)
	}
	if err := t.registry.Replace(tools...); err != nil {
		s.logger.ErrorContext(ctx, "server: serving a workspace's stored tools", "workspace", t.id, "err", err)
		t.stale.Store(true)
		return
	}
	t.stamp = stamp
	t.loaded.Store(true)
	t.mcp.ToolsChanged()
}

// toolsChanged makes the workspace's next request load its stored tools again: the API calls
// it after every change to them.
func (s *Server) toolsChanged(ctx context.Context, workspaceID string) {
	s.tenants.mu.Lock()
	t := s.tenants.m[workspaceID]
	s.tenants.mu.Unlock()
	if t != nil {
		t.stale.Store(true)
		s.refresh(ctx, t, true) // the writer's next request sees its change
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

// WorkspaceRegistry returns the tools a workspace may call: its stored tools over the server's
// own. An agent runner gives it to runs (agent.Runner.Registries), so that a run on a
// workspace's thread calls that workspace's tools.
func (s *Server) WorkspaceRegistry(ctx context.Context, workspaceID string) (*quiver.Registry, error) {
	return s.tenant(ctx, workspaceID).registry, nil
}

// loadStoredTools builds the workspace's active stored tools: server tools run their function
// version in the sandbox, client tools are offered with their schemas and run by the client.
// A tool that cannot be built does not keep the others out: the error names each one.
func loadStoredTools(ctx context.Context, ent store.Entities, workspaceID string, l jsfunc.Limits) ([]*quiver.Tool, error) {
	var tools []*quiver.Tool
	var errs []error
	f := store.ToolFilter{WorkspaceID: workspaceID, Limit: store.MaxListLimit}
	for {
		page, err := ent.ListTools(ctx, f)
		if err != nil {
			return tools, errors.Join(append(errs, err)...)
		}
		for _, st := range page.Tools {
			var t *quiver.Tool
			if st.Target == store.TargetClient {
				t, err = clientTool(ctx, ent, workspaceID, st)
			} else {
				t, err = jsfunc.Load(ctx, ent, workspaceID, st, l)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			tools = append(tools, t)
		}
		if page.NextCursor == "" {
			return tools, errors.Join(errs...)
		}
		f.Cursor = page.NextCursor
	}
}

// clientTool builds a stored client tool (target client): its schemas and flags, and no code,
// since the client runs it (X7): an agent's run pauses on its calls until the client posts
// the result.
func clientTool(ctx context.Context, ent store.Entities, workspaceID string, st *store.Tool) (*quiver.Tool, error) {
	in, err := ent.Schema(ctx, workspaceID, st.InputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: input schema %s: %w", st.Name, st.InputSchemaID, err)
	}
	out, err := ent.Schema(ctx, workspaceID, st.OutputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: output schema %s: %w", st.Name, st.OutputSchemaID, err)
	}
	doc, err := jsfunc.ParseSchemaDoc(in.Content)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: input schema %s: %w", st.Name, st.InputSchemaID, err)
	}
	var output *schema.Schema
	if c := strings.TrimSpace(string(out.Content)); c != "true" && c != "{}" {
		output = &schema.Schema{}
		if err := json.Unmarshal(out.Content, output); err != nil {
			return nil, fmt.Errorf("client tool %q: output schema %s: %w", st.Name, st.OutputSchemaID, err)
		}
	}
	examples := make([]quiver.Example, len(st.Examples))
	for i, e := range st.Examples {
		examples[i] = quiver.Example{Args: e.Args, Result: e.Result}
	}
	spec := quiver.Spec{Name: st.Name, Description: cmp.Or(st.Description, doc.Description), Target: quiver.TargetClient,
		InputSchema: doc.Input, OutputSchema: output,
		Examples: examples, RequiresConfirmation: st.RequiresConfirmation, Disabled: !st.Enabled}
	t, err := quiver.NewTool(spec, nil)
	if err != nil {
		return nil, fmt.Errorf("client tool %q: %w", st.Name, err)
	}
	return t, nil
}
