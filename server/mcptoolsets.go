package server

import (
	"context"
	"net/http"

	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/platform/entitle"
)

// A toolset of the workspace's entitlements is served at its own MCP address, /mcp/{toolset}:
// the same MCP server as /mcp, each request's actor carrying the toolset (platform.Actor's
// Toolset), so that its tools/list offers and its tools/call allows the toolset's tools alone,
// and of them only those the caller may call anyway. A team points its MCP client at
// /mcp/support and sees support's tools. The address is no second server: sessions, their
// caps and owners, list_changed and the OAuth metadata are /mcp's. A session continued at
// another address is answered as that address serves: the same key reaches /mcp anyway, and a
// key that must see no more than a toolset is bound to it (POST /v1/keys, toolsets).

// toolsetKey is the context key of the toolset address a request came through.
type toolsetKey struct{}

// withToolset returns ctx carrying the toolset whose address the request came through.
func withToolset(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, toolsetKey{}, name)
}

// toolsetFrom is the toolset whose address the request came through; "" for /mcp and /v1.
func toolsetFrom(ctx context.Context) string {
	name, _ := ctx.Value(toolsetKey{}).(string)
	return name
}

// toolsetMCP serves /mcp/{toolset}: the workspace's MCP server for the request's key, limited
// to the toolset, or 404 (a problem, as /v1 answers) when the workspace defines no toolset of
// that name; a name that is not a toolset's name is one it does not define.
func (s *Server) toolsetMCP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("toolset")
	ctx := r.Context()
	ws := s.workspaceID(ctx)
	if entitle.CheckToolsetName(name) != nil || !s.p.HasToolset(ctx, ws, name) {
		writeProblem(w, http.StatusNotFound, CodeNotFound,
			"this workspace defines no toolset of that name: GET /v1/toolsets lists those it does, each served at /mcp/{name}")
		return
	}
	ctx = withToolset(ctx, name)
	ctx = platform.WithActor(ctx, s.actor(ctx))
	s.tenant(ctx, ws).mcpHTTP.ServeHTTP(w, r.WithContext(ctx))
}
