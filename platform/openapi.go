package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	// MaxOperations raises the most operations the document may select from
	// openapi.MaxOperations (when zero) up to openapi.MaxDocumentOperations.
	MaxOperations int
	// Strict makes an answer that does not match the document's schema of it a failed call
	// (off: passed through with a warning).
	Strict bool
}

// OpenAPIImport is a stored source with what it makes.
type OpenAPIImport struct {
	Source  *store.OpenAPISource
	Created bool // false: it replaced the source of the same name
	Tools   []*quiver.Tool
	Skipped []openapi.Skipped
}

// OpenAPIDocumentTooLarge refuses a document over the cap of what a workspace imports: a door
// whose own limit on a request's size a larger document passes says it too.
var OpenAPIDocumentTooLarge = fmt.Sprintf("the document is larger than %d bytes (%d MiB), the most a workspace imports: "+
	"import a smaller document (a part of a large API's)", store.MaxOpenAPIDocumentBytes, store.MaxOpenAPIDocumentBytes>>20)

// maxOpenAPITimeout caps a source's timeout: a call of a workspace's tool holds a slot of the
// server for that long.
const maxOpenAPITimeout = 5 * time.Minute

// maxOpenAPIValues bounds the values of a workspace's document (see openapi.MaxDocumentValues):
// what reading one costs grows with them, up to about 1.6 kB each (310 MB at the heap's peak
// for 200,000 empty schemas, docs/PERFORMANCE.md). 200,000 admits the documents of real APIs
// that fit in store.MaxOpenAPIDocumentBytes: a real document holds about 140,000 values in
// 2.6 MB of compact JSON, 5.4 MB of indented JSON or 4.8 MB of YAML.
const maxOpenAPIValues = 200_000

// maxImportsAtOnce is how many OpenAPI documents the process reads at once, one a workspace:
// an import holds the memory of its document (up to 370 MB at the heap's peak for the worst a
// workspace may import, docs/PERFORMANCE.md) until it ends. Another is refused at once rather
// than queued: a request waiting for its turn would hold its body, megabytes, all the while.
const maxImportsAtOnce = 2

// importSlots are the imports under way in the process, by workspace.
type importSlots struct {
	mu      sync.Mutex
	running map[string]bool
}

// take holds a slot for an import into the workspace until release, or refuses it.
func (s *importSlots) take(workspaceID string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.running[workspaceID]:
		return nil, &Error{Kind: Unavailable, Message: "the workspace is importing another OpenAPI document: try again when it is done"}
	case len(s.running) >= maxImportsAtOnce:
		return nil, &Error{Kind: Unavailable, Message: fmt.Sprintf("the server is reading %d OpenAPI documents, the most it reads at once: try again shortly", maxImportsAtOnce)}
	}
	if s.running == nil {
		s.running = map[string]bool{}
	}
	s.running[workspaceID] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, workspaceID)
	}, nil
}

// ImportOpenAPI reads an OpenAPI document and stores it as a source of the actor's workspace
// (an admin's: a source names the servers its tools send the workspace's credentials to),
// replacing the source of the same name; the workspace serves its tools from the next call
// on. Its settings are the admin's with it: raising the cap of operations (MaxOperations: a
// document of more costs the workspace's server more to read and serve) and Strict. A
// document that cannot be read, a selector that matches nothing, or a tool name the
// workspace already has (a shared tool's, a stored tool's, another source's) is refused and
// nothing is stored.
func (p *Platform) ImportOpenAPI(ctx context.Context, a Actor, in NewOpenAPISource) (*OpenAPIImport, error) {
	if err := a.mayAdminister("import OpenAPI documents: an admin does, since a document names the servers its tools send credentials to"); err != nil {
		return nil, err
	}
	switch {
	case len(in.Document) == 0:
		return nil, invalid("document", "give the OpenAPI document (3.0 or 3.1, JSON or YAML) as text")
	case len(in.Document) > store.MaxOpenAPIDocumentBytes:
		return nil, invalid("document", OpenAPIDocumentTooLarge)
	case in.Timeout < 0 || in.Timeout > maxOpenAPITimeout:
		return nil, invalid("timeout_ms", fmt.Sprintf("a timeout from 0 (the default, %s) to %s", openapi.DefaultTimeout, maxOpenAPITimeout))
	case in.MaxResponseBytes < 0 || in.MaxResponseBytes > store.MaxOpenAPIDocumentBytes:
		return nil, invalid("max_response_bytes", fmt.Sprintf("a cap from 0 (the default, %d) to %d bytes", openapi.DefaultMaxResponseBytes, store.MaxOpenAPIDocumentBytes))
	case in.MaxOperations < 0 || in.MaxOperations > openapi.MaxDocumentOperations:
		return nil, invalid("max_operations", fmt.Sprintf("a cap from 0 (the default, %d operations) to %d", openapi.MaxOperations, openapi.MaxDocumentOperations))
	}
	src := &store.OpenAPISource{WorkspaceID: a.WorkspaceID, Name: in.Name, Document: in.Document, Servers: in.Servers,
		Operations: in.Operations, Credentials: in.Credentials, Timeout: in.Timeout, MaxResponseBytes: in.MaxResponseBytes,
		MaxOperations: in.MaxOperations, Strict: in.Strict, CreatedBy: a.UserID}
	if err := store.CheckOpenAPISource(src); err != nil {
		return nil, invalid("name", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error()))
	}
	// Held until the import ends: the tools it makes are held until then too.
	release, err := p.imports.take(a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer release()
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
	// The reload that follows takes the tools made here rather than making them again.
	p.Workspace(ctx, a.WorkspaceID).offer(in.Name, builtTool{versionID: sourceVersion(src), tools: im.Tools, skipped: im.Skipped})
	p.ToolsChanged(ctx, a.WorkspaceID)
	return &OpenAPIImport{Source: src, Created: created, Tools: im.Tools, Skipped: im.Skipped}, nil
}

// checkOpenAPINames refuses tools whose names the workspace serves already: a shared tool's
// (whose place an imported tool would take in the workspace), a stored tool's or another
// source's. The names of the source being replaced are its own.
func (p *Platform) checkOpenAPINames(ctx context.Context, workspaceID, source string, tools []*quiver.Tool) error {
	w := p.Workspace(ctx, workspaceID)
	own := w.sourceTools(source)
	reg := w.Registry()
	for _, t := range tools {
		if _, shared := reg.Base.Lookup(t.Name()); shared {
			return fail(Conflict, "name", fmt.Sprintf("the server has a tool named %s: choose another name for the source", t.Name()))
		}
		// Served under that name by the source itself, not by a stored tool that took it.
		if existing, taken := reg.Lookup(t.Name()); taken && existing != own[t.Name()] {
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
	// The tools as the workspace serves them, not built again: a document's conversion is
	// the import's cost, not every reader's.
	out := &OpenAPIImport{Source: src}
	b, _ := p.Workspace(ctx, a.WorkspaceID).source(name)
	if b.versionID == sourceVersion(src) {
		out.Tools, out.Skipped = b.tools, b.skipped
	}
	return out, nil
}

// DeleteOpenAPISource removes a source of the actor's workspace, and its tools with it.
func (p *Platform) DeleteOpenAPISource(ctx context.Context, a Actor, name string) error {
	if err := a.mayAdminister("delete OpenAPI documents: an admin does"); err != nil {
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
		MaxOperations: s.MaxOperations, Strict: s.Strict,
		PublicOnly: true, Internal: p.cfg.OpenAPIInternal, MaxValues: maxOpenAPIValues}
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
		key := sourceKey(s.Name)
		version := sourceVersion(s)
		var made []*quiver.Tool
		if b, ok := prev[key]; ok && b.versionID == version {
			built[key] = b
			made = b.tools
		} else {
			im, err := openapi.Tools(ctx, p.openAPISource(s))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			made = im.Tools
			built[key] = builtTool{versionID: version, tools: made, skipped: im.Skipped}
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

// sourceKey is where a source's tools are kept among a workspace's built tools (whose other
// keys are tool ids).
func sourceKey(name string) string { return "openapi:" + name }

// sourceVersion identifies what a source's tools are built from: its document and options,
// hashed (its UpdatedAt alone would not do: two imports may share a timestamp).
func sourceVersion(s *store.OpenAPISource) string {
	h := sha256.New()
	// Empty and absent are the same options (an API client's [] and the store's nothing).
	var servers, operations []string
	var credentials map[string]string
	if len(s.Servers) > 0 {
		servers = s.Servers
	}
	if len(s.Operations) > 0 {
		operations = s.Operations
	}
	if len(s.Credentials) > 0 {
		credentials = s.Credentials
	}
	opts, _ := json.Marshal([]any{servers, operations, credentials, s.Timeout, s.MaxResponseBytes, s.MaxOperations, s.Strict})
	h.Write(opts)
	h.Write([]byte{0})
	h.Write(s.Document)
	return hex.EncodeToString(h.Sum(nil))
}

// sourceTools are the tools a source of the workspace made at its last load, by name.
func (w *Workspace) sourceTools(name string) map[string]*quiver.Tool {
	b, _ := w.source(name)
	out := make(map[string]*quiver.Tool, len(b.tools))
	for _, t := range b.tools {
		out[t.Name()] = t
	}
	return out
}

// source returns what the last load (or an import since) built of a source.
func (w *Workspace) source(name string) (builtTool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.built[sourceKey(name)]
	return b, ok
}

// offer keeps what an import built of a source, for the next load to take when the stored
// source is the same.
func (w *Workspace) offer(name string, b builtTool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.built == nil {
		w.built = map[string]builtTool{}
	}
	w.built[sourceKey(name)] = b
}
