package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/openapi"
	"github.com/quiverhq/quiver/store"
)

// A workspace's OpenAPI documents: each operation a document's source selects is a tool of
// the workspace (see package openapi). Their servers are the importer's choice, so the tools
// reach public addresses only, besides the hosts the operator allows (Config.OpenAPIInternal).

// NewOpenAPISource is an OpenAPI document to import into a workspace.
type NewOpenAPISource struct {
	Name             string
	Document         []byte
	Servers          []string
	Operations       []string
	Credentials      map[string]string
	Timeout          time.Duration
	MaxResponseBytes int64
}

// OpenAPIImport is a stored source with what it makes.
type OpenAPIImport struct {
	Source  *store.OpenAPISource
	Created bool // false: it replaced the source of the same name
	Tools   []*quiver.Tool
	Skipped []openapi.Skipped
}

// maxOpenAPITimeout caps a source's timeout: a call of a workspace's tool holds a slot of the
// server for that long.
const maxOpenAPITimeout = 5 * time.Minute

// ImportOpenAPI reads an OpenAPI document and stores it as a source of the actor's workspace
// (a member's or admin's), replacing the source of the same name; the workspace serves its
// tools from the next call on. A document that cannot be read, a selector that matches
// nothing, or a tool name the workspace already has is refused and nothing is stored.
func (p *Platform) ImportOpenAPI(ctx context.Context, a Actor, in NewOpenAPISource) (*OpenAPIImport, error) {
	if err := a.mayChange("read tools but not import them"); err != nil {
		return nil, err
	}
	switch {
	case len(in.Document) == 0:
		return nil, invalid("document", "give the OpenAPI document (3.0 or 3.1, JSON or YAML) as text")
	case len(in.Document) > store.MaxOpenAPIDocumentBytes:
		return nil, invalid("document", fmt.Sprintf("the document is larger than %d bytes", store.MaxOpenAPIDocumentBytes))
	case in.Timeout < 0 || in.Timeout > maxOpenAPITimeout:
		return nil, invalid("timeout_ms", fmt.Sprintf("a timeout from 0 (the default, %s) to %s", openapi.DefaultTimeout, maxOpenAPITimeout))
	case in.MaxResponseBytes < 0 || in.MaxResponseBytes > store.MaxOpenAPIDocumentBytes:
		return nil, invalid("max_response_bytes", fmt.Sprintf("a cap from 0 (the default, %d) to %d bytes", openapi.DefaultMaxResponseBytes, store.MaxOpenAPIDocumentBytes))
	}
	src := &store.OpenAPISource{WorkspaceID: a.WorkspaceID, Name: in.Name, Document: in.Document, Servers: in.Servers,
		Operations: in.Operations, Credentials: in.Credentials, Timeout: in.Timeout, MaxResponseBytes: in.MaxResponseBytes, CreatedBy: a.UserID}
	if err := store.CheckOpenAPISource(src); err != nil {
		return nil, invalid("name", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error()))
	}
	im, err := openapi.Tools(ctx, p.openAPISource(src))
	if err != nil {
		return nil, &Error{Kind: Invalid, Field: "document", Message: strings.TrimPrefix(err.Error(), "openapi: "), Cause: err}
	}
	if err := p.checkOpenAPINames(ctx, a.WorkspaceID, in.Name, im.Tools); err != nil {
		return nil, err
	}
	created, err := p.cfg.Store.PutOpenAPISource(ctx, src)
	if err != nil {
		return nil, storeError(err, "OpenAPI source "+in.Name, "")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return &OpenAPIImport{Source: src, Created: created, Tools: im.Tools, Skipped: im.Skipped}, nil
}

// checkOpenAPINames refuses tools whose names the workspace serves already, other than those
// of the source being replaced.
func (p *Platform) checkOpenAPINames(ctx context.Context, workspaceID, source string, tools []*quiver.Tool) error {
	reg := p.Workspace(ctx, workspaceID).Registry()
	for _, t := range tools {
		if strings.HasPrefix(t.Name(), source+".") {
			if existing, ok := reg.Lookup(t.Name()); ok && existing.Spec().Imported {
				continue // the source's own tool, about to be replaced
			}
		}
		if _, taken := reg.Lookup(t.Name()); taken {
			return fail(Conflict, "name", fmt.Sprintf("the workspace already has a tool named %s: choose another name for the source", t.Name()))
		}
	}
	return nil
}

// OpenAPISources lists the actor's workspace's sources, by name.
func (p *Platform) OpenAPISources(ctx context.Context, a Actor) ([]*store.OpenAPISource, error) {
	list, err := p.cfg.Store.OpenAPISources(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "OpenAPI sources", "")
	}
	return list, nil
}

// OpenAPISource returns a source of the actor's workspace with the tools it makes now.
func (p *Platform) OpenAPISource(ctx context.Context, a Actor, name string) (*OpenAPIImport, error) {
	src, err := p.cfg.Store.OpenAPISource(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, storeError(err, "OpenAPI source "+name, "name")
	}
	out := &OpenAPIImport{Source: src}
	if im, err := openapi.Tools(ctx, p.openAPISource(src)); err == nil {
		out.Tools, out.Skipped = im.Tools, im.Skipped
	}
	return out, nil
}

// DeleteOpenAPISource removes a source of the actor's workspace, and its tools with it.
func (p *Platform) DeleteOpenAPISource(ctx context.Context, a Actor, name string) error {
	if err := a.mayChange("read tools but not delete them"); err != nil {
		return err
	}
	if err := p.cfg.Store.DeleteOpenAPISource(ctx, a.WorkspaceID, name); err != nil {
		return storeError(err, "OpenAPI source "+name, "name")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return nil
}

// openAPISource is a stored source as package openapi takes it: public addresses only, but
// for the hosts the operator allows.
func (p *Platform) openAPISource(s *store.OpenAPISource) openapi.Source {
	return openapi.Source{Name: s.Name, Document: s.Document, Location: "OpenAPI source " + s.Name, Servers: s.Servers,
		Operations: s.Operations, Credentials: s.Credentials, Timeout: s.Timeout, MaxResponseBytes: s.MaxResponseBytes,
		PublicOnly: true, Internal: p.cfg.OpenAPIInternal}
}

// loadOpenAPITools builds the tools of the workspace's sources, reusing those prev holds for a
// source that did not change. A source whose tools cannot be built, or whose names another
// tool of the workspace has (taken), is left out and named in broken.
func (p *Platform) loadOpenAPITools(ctx context.Context, workspaceID string, taken map[string]bool, prev, built map[string]builtTool) (
	[]*quiver.Tool, error, error) {
	sources, err := p.cfg.Store.OpenAPISources(ctx, workspaceID)
	if err != nil {
		return nil, nil, err
	}
	var tools []*quiver.Tool
	var errs []error
	for _, s := range sources {
		key := "openapi:" + s.Name
		stampText := s.UpdatedAt.UTC().Format(time.RFC3339Nano)
		var made []*quiver.Tool
		if b, ok := prev[key]; ok && b.versionID == stampText {
			built[key] = b
			made = b.tools
		} else {
			im, err := openapi.Tools(ctx, p.openAPISource(s))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			made = im.Tools
			built[key] = builtTool{versionID: stampText, tools: made}
		}
		for _, t := range made {
			if taken[t.Name()] {
				errs = append(errs, fmt.Errorf("OpenAPI source %s: tool %s: the name is another tool's", s.Name, t.Name()))
				continue
			}
			taken[t.Name()] = true
			tools = append(tools, t)
		}
	}
	return tools, errors.Join(errs...), nil
}
