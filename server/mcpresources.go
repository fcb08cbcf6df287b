package server

import (
	"cmp"
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/quiverhq/quiver/mcp"
	"github.com/quiverhq/quiver/platform"
	"github.com/quiverhq/quiver/store"
)

// threadFileResource reads a thread's file for the MCP resource template of a workspace's
// MCP server (mcp.ThreadFileTemplate), as GET /v1/threads/{id}/files/{path} does: the same
// read (platform.ThreadFile), authorized the same way, the thread being one of the tenant's
// workspace. A thread of another workspace, or a missing thread or file, is
// mcp.ErrResourceNotFound, which says nothing more; a path the file system refuses (or a
// directory) is invalid params.
func (s *Server) threadFileResource(ctx context.Context, t *tenant, threadID, path string) ([]byte, string, error) {
	a := s.actor(ctx)
	a.WorkspaceID = t.id // the tenant is the key's workspace's: never another's
	data, fi, err := s.p.ThreadFile(ctx, a, threadID, path)
	var pe *platform.Error
	switch {
	case err == nil:
		return data, cmp.Or(fi.MimeType, "application/octet-stream"), nil
	case errors.As(err, &pe) && pe.Kind == platform.NotFound:
		return nil, "", mcp.ErrResourceNotFound
	case errors.As(err, &pe) && pe.Kind == platform.Invalid:
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: pe.Error()}
	}
	return nil, "", err
}

// maxResourceBytes is the cap of a file resources/read answers with: the cap of a file in a
// thread's file system, which a file the API serves was held to when it was written.
var maxResourceBytes = store.DefaultFileLimits().MaxFileBytes
