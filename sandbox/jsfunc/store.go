package jsfunc

import (
	"context"
	"errors"
	"fmt"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/store"
)

// Save stores def in a workspace: a function named like the tool with def's code as a new
// version, made its default, and the server tool that wraps it, created or, when a tool of
// that name exists, updated to follow the function's default version. The code is checked
// first; TypeScript is stored transpiled. It returns the tool and the version.
func Save(ctx context.Context, st store.Entities, workspaceID, createdBy string, def Definition) (*store.Tool, *store.FunctionVersion, error) {
	if _, err := New(def); err != nil { // the whole definition: code, schemas, variables
		return nil, nil, err
	}
	f, err := newFunction(def)
	if err != nil {
		return nil, nil, err
	}
	code := f.code // JavaScript, TypeScript transpiled
	inDoc, err := storedInput(def.InputSchema, def.Variables, def.MetaFields, def.Annotations)
	if err == nil {
		// Load reads the document back as a schema-tool document: what it could not read
		// (keys beside def.InputSchema's keywords, such as "annotations" of the wrong type) is
		// refused now rather than stored and never served.
		_, err = quiver.ParseSchemaSpec(inDoc)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("jsfunc: tool %q: input schema: %w", def.Name, err)
	}
	outDoc, err := storedOutput(def.OutputSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("jsfunc: tool %q: output schema: %w", def.Name, err)
	}
	in := &store.Schema{WorkspaceID: workspaceID, Content: inDoc}
	out := &store.Schema{WorkspaceID: workspaceID, Content: outDoc}
	if err := st.CreateSchema(ctx, in); err != nil {
		return nil, nil, err
	}
	if err := st.CreateSchema(ctx, out); err != nil {
		return nil, nil, err
	}
	fn, err := functionNamed(ctx, st, workspaceID, def.Name)
	if err != nil {
		return nil, nil, err
	}
	v := &store.FunctionVersion{WorkspaceID: workspaceID, FunctionID: fn.ID, Code: code, InputSchemaID: in.ID, OutputSchemaID: out.ID}
	if err := st.CreateFunctionVersion(ctx, v); err != nil {
		return nil, nil, err
	}
	if _, err := st.SetDefaultVersion(ctx, workspaceID, fn.ID, v.ID); err != nil {
		return nil, nil, err
	}
	examples := make([]store.ToolExample, len(def.Examples))
	for i, e := range def.Examples {
		examples[i] = store.ToolExample{Args: e.Args, Result: e.Result}
	}
	set := func(t *store.Tool) error {
		t.Description, t.Target, t.FunctionID, t.FunctionVersionID = def.Description, store.TargetServer, fn.ID, ""
		t.InputSchemaID, t.OutputSchemaID, t.Examples = in.ID, out.ID, examples
		t.RequiresConfirmation, t.Enabled = def.RequiresConfirmation, !def.Disabled
		return nil
	}
	existing, err := activeTool(ctx, st, workspaceID, def.Name)
	if err != nil {
		return nil, nil, err
	}
	if existing != nil {
		t, err := st.UpdateTool(ctx, workspaceID, existing.ID, createdBy, set)
		return t, v, err
	}
	t := &store.Tool{WorkspaceID: workspaceID, Name: def.Name, CreatedBy: createdBy}
	_ = set(t)
	if err := st.CreateTool(ctx, t); err != nil {
		return nil, nil, err
	}
	return t, v, nil
}

// functionNamed returns the workspace's function of that name, creating it when there is none.
func functionNamed(ctx context.Context, st store.Entities, workspaceID, name string) (*store.Function, error) {
	fns, err := st.Functions(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, f := range fns {
		if f.Name == name {
			return f, nil
		}
	}
	f := &store.Function{WorkspaceID: workspaceID, Name: name}
	return f, st.CreateFunction(ctx, f)
}

func activeTool(ctx context.Context, st store.Entities, workspaceID, name string) (*store.Tool, error) {
	page, err := st.ListTools(ctx, store.ToolFilter{WorkspaceID: workspaceID, Name: name, Limit: 1})
	if err != nil || len(page.Tools) == 0 {
		return nil, err
	}
	return page.Tools[0], nil
}

// Load builds the tool a stored server tool runs: the code of its pinned version or its
// function's default one, the tool's schemas (the contract the model sees), examples and
// flags, with limits l for each call. The variables are those the version's input schema
// declares (see quiver.ParseSchemaSpec), since they are what its code reads; the tool's when
// the version has no schema of its own. The meta-fields are those the tool's input schema
// enables, and the annotations those it declares.
func Load(ctx context.Context, st store.Entities, workspaceID string, t *store.Tool, l Limits) (*quiver.Tool, error) {
	if t.Target != store.TargetServer {
		return nil, fmt.Errorf("jsfunc: tool %q runs in the client, not in the sandbox", t.Name)
	}
	v, err := st.ResolveToolVersion(ctx, workspaceID, t.ID)
	if err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: its function version: %w", t.Name, err)
	}
	inDoc, err := st.Schema(ctx, workspaceID, t.InputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: input schema %s: %w", t.Name, t.InputSchemaID, err)
	}
	// A document's _activity is not read: the tool runs the version's code. The API refuses
	// one when a tool is stored; a record written before is still served.
	doc, err := quiver.ParseSchemaSpec(inDoc.Content)
	if err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: input schema %s: %w", t.Name, t.InputSchemaID, err)
	}
	vars := doc.Variables
	if v.InputSchemaID != "" && v.InputSchemaID != t.InputSchemaID {
		// The variables are the code's needs: the version's own schema document says which.
		vdoc, err := st.Schema(ctx, workspaceID, v.InputSchemaID)
		if err != nil {
			return nil, fmt.Errorf("jsfunc: tool %q: the input schema %s of version %d: %w", t.Name, v.InputSchemaID, v.Version, err)
		}
		parsed, err := quiver.ParseSchemaSpec(vdoc.Content)
		if err != nil {
			return nil, fmt.Errorf("jsfunc: tool %q: the input schema %s of version %d: %w", t.Name, v.InputSchemaID, v.Version, err)
		}
		vars = parsed.Variables
	}
	outDoc, err := st.Schema(ctx, workspaceID, t.OutputSchemaID)
	if err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: output schema %s: %w", t.Name, t.OutputSchemaID, err)
	}
	out, err := outputSchema(outDoc.Content)
	if err != nil {
		return nil, fmt.Errorf("jsfunc: tool %q: output schema %s: %w", t.Name, t.OutputSchemaID, err)
	}
	desc := t.Description
	if desc == "" {
		desc = doc.Description
	}
	examples := make([]quiver.Example, len(t.Examples))
	for i, e := range t.Examples {
		examples[i] = quiver.Example{Args: e.Args, Result: e.Result}
	}
	return NewContext(ctx, Definition{
		Name: t.Name, Description: desc, Code: v.Code,
		InputSchema: doc.InputSchema, OutputSchema: out, Variables: vars, Examples: examples,
		RequiresConfirmation: t.RequiresConfirmation, Disabled: !t.Enabled, Limits: l, MetaFields: doc.MetaFields,
		Annotations: doc.Annotations, Source: quiver.SourceStored,
	})
}

// LoadWorkspace builds every active server tool of the workspace. A tool that cannot be built
// does not keep the others out: the error names each one that failed.
func LoadWorkspace(ctx context.Context, st store.Entities, workspaceID string, l Limits) ([]*quiver.Tool, error) {
	var tools []*quiver.Tool
	var errs []error
	f := store.ToolFilter{WorkspaceID: workspaceID, Target: store.TargetServer, Limit: store.MaxListLimit}
	for {
		page, err := st.ListTools(ctx, f)
		if err != nil {
			return tools, errors.Join(append(errs, err)...)
		}
		for _, t := range page.Tools {
			tool, err := Load(ctx, st, workspaceID, t, l)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			tools = append(tools, tool)
		}
		if page.NextCursor == "" {
			return tools, errors.Join(errs...)
		}
		f.Cursor = page.NextCursor
	}
}
