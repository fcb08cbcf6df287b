package platform

import (
	"context"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/store"
)

// FunctionTool is a function tool stored by SaveFunctionTool: the tool, and the version of its
// function it runs.
type FunctionTool struct {
	Tool    *store.Tool
	Version *store.FunctionVersion
	Created bool // false: the workspace's tool of that name now runs the new version
}

// SaveFunctionTool stores a JavaScript (or TypeScript) tool in the actor's workspace in one
// step, as an API client would in three: the function named like the tool (made the first
// time), a new version of its code made its default, and the tool, created, or changed to run
// it when the workspace has one of that name already (adding a tool again adds a version).
// Each step is the platform's own operation, with its rules; a new tool's name is checked
// first, as CreateTool checks it, so that a name the workspace may not take leaves nothing
// written.
func (p *Platform) SaveFunctionTool(ctx context.Context, a Actor, def jsfunc.Definition) (*FunctionTool, error) {
	existing, err := p.toolToSave(ctx, a, def.Name)
	if err != nil {
		return nil, err
	}
	if err := quiver.CheckMetaFields(def.MetaFields); err != nil {
		return nil, invalid("meta_fields", err.Error())
	}
	doc, err := jsfunc.Documents(def)
	if err != nil {
		return nil, invalid("code", strings.TrimPrefix(err.Error(), "jsfunc: "))
	}
	t := functionTool(a, def)
	// The tool's contract (schemas, variables, examples, description) is checked before the
	// function and its version are written: a refused tool leaves nothing behind.
	if err := checkContract(ctx, t, doc.Input, doc.Output, true); err != nil {
		return nil, err
	}
	fn, v, err := p.newDefaultVersion(ctx, a, existing, def.Name, doc)
	if err != nil {
		return nil, err
	}
	if existing == nil {
		t, err := p.CreateTool(ctx, a, NewTool{Name: t.Name, Description: t.Description, Target: t.Target, FunctionID: fn.ID,
			InputSchema: doc.Input, OutputSchema: doc.Output, Examples: t.Examples, RequiresConfirmation: t.RequiresConfirmation, Enabled: &t.Enabled})
		if err != nil {
			return nil, err
		}
		return &FunctionTool{Tool: t, Version: v, Created: true}, nil
	}
	t, err = p.UpdateTool(ctx, a, existing.ID, ToolChange{Description: Optional[string]{true, t.Description}, Target: &t.Target,
		FunctionID: Optional[string]{true, fn.ID}, FunctionVersionID: Optional[string]{Set: true}, InputSchema: doc.Input, OutputSchema: doc.Output,
		Examples: &t.Examples, RequiresConfirmation: &t.RequiresConfirmation, Enabled: &t.Enabled})
	if err != nil {
		return nil, err
	}
	return &FunctionTool{Tool: t, Version: v}, nil
}

// toolToSave is the workspace's tool that saving a tool called name changes (nil: a new tool
// is created), once the actor may and the name is one the workspace may take.
func (p *Platform) toolToSave(ctx context.Context, a Actor, name string) (*store.Tool, error) {
	if err := a.mayChange("read tools but not create them"); err != nil {
		return nil, err
	}
	if err := quiver.CheckName(name); err != nil {
		return nil, invalid("name", err.Error()) // and an empty name would select every tool below
	}
	existing, err := p.activeTool(ctx, a.WorkspaceID, name)
	switch {
	case err != nil:
		return nil, err
	case existing == nil:
		return nil, p.checkToolName(ctx, p.cfg.Store, &store.Tool{WorkspaceID: a.WorkspaceID, Name: name})
	case existing.System:
		return nil, &Error{Kind: Forbidden, Field: "name", Message: "tool " + existing.ID + " is a system tool: system tools cannot be edited"}
	}
	if visible := p.storedToolsVisible(ctx, a); visible != nil && !visible(existing) {
		// A tool the actor may not see is not its to change, nor is its function: the name is
		// taken, as CreateTool would say, and nothing more of the tool is told.
		return nil, fail(Conflict, "name", "the workspace has a tool named "+quoteShort(name)+" already: choose another name")
	}
	return existing, nil
}

// newDefaultVersion adds the version of doc's code to the function the saved tool runs (see
// toolFunction) and makes it the function's default.
func (p *Platform) newDefaultVersion(ctx context.Context, a Actor, existing *store.Tool, name string, doc jsfunc.Stored) (*store.Function, *store.FunctionVersion, error) {
	fn, err := p.toolFunction(ctx, a, existing, name)
	if err != nil {
		return nil, nil, err
	}
	v, err := p.CreateFunctionVersion(ctx, a, fn.ID, NewVersion{Code: doc.Code, InputSchema: doc.Input, OutputSchema: doc.Output})
	if err != nil {
		return nil, nil, err
	}
	if fn.DefaultVersionID != "" { // the first version is made the default as it is stored
		if _, err := p.SetDefaultVersion(ctx, a, fn.ID, v.ID); err != nil {
			return nil, nil, err
		}
	}
	return fn, v, nil
}

// functionTool is the tool record def makes in the actor's workspace, before its function and
// schemas are stored.
func functionTool(a Actor, def jsfunc.Definition) *store.Tool {
	examples := make([]store.ToolExample, len(def.Examples))
	for i, e := range def.Examples {
		examples[i] = store.ToolExample{Args: e.Args, Result: e.Result}
	}
	return &store.Tool{WorkspaceID: a.WorkspaceID, Name: def.Name, Description: def.Description, Target: store.TargetServer,
		Examples: examples, RequiresConfirmation: def.RequiresConfirmation, Enabled: !def.Disabled, CreatedBy: a.UserID}
}

// activeTool is the workspace's tool called name that is not deleted, nil when there is none.
func (p *Platform) activeTool(ctx context.Context, workspaceID, name string) (*store.Tool, error) {
	page, err := p.cfg.Store.ListTools(ctx, store.ToolFilter{WorkspaceID: workspaceID, Name: name, Limit: 1})
	if err != nil {
		return nil, storeError(err, "the tools named "+quoteShort(name), "")
	}
	if len(page.Tools) == 0 {
		return nil, nil
	}
	return page.Tools[0], nil
}

// toolFunction is the function a saved tool runs: the one the existing tool runs, else the
// workspace's function called name, made when there is none.
func (p *Platform) toolFunction(ctx context.Context, a Actor, existing *store.Tool, name string) (*store.Function, error) {
	if existing != nil && existing.FunctionID != "" {
		return p.Function(ctx, a, existing.FunctionID)
	}
	fns, err := p.Functions(ctx, a)
	if err != nil {
		return nil, err
	}
	for _, f := range fns {
		if f.Name == name && f.WorkspaceID == a.WorkspaceID {
			return f, nil
		}
	}
	return p.CreateFunction(ctx, a, name)
}
