package platform

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/sandbox/jsfunc"
	"github.com/quiverhq/quiver/store"
)

// A workspace's functions: named JavaScript code with numbered versions, one of them the
// default, which the tools that pin no version run.

// NewVersion is a version of a function's code, with the schemas of what it takes and returns.
type NewVersion struct {
	Code         string
	InputSchema  json.RawMessage // nil: none
	OutputSchema json.RawMessage // nil: none
}

// Functions lists the workspace's functions, oldest first: those the actor's entitlements let
// it see (see functionsvisible.go).
func (p *Platform) Functions(ctx context.Context, a Actor) ([]*store.Function, error) {
	fs, err := p.cfg.Store.Functions(ctx, a.WorkspaceID)
	if err != nil {
		return nil, storeError(err, "the functions", "")
	}
	return p.visibleFunctions(ctx, a, fs)
}

// Function returns a function of the workspace, or a system function; one the actor's
// entitlements hide is not found.
func (p *Platform) Function(ctx context.Context, a Actor, id string) (*store.Function, error) {
	if err := checkID("id", store.PrefixFunction, id); err != nil {
		return nil, err
	}
	f, err := p.cfg.Store.Function(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "function "+id, "")
	}
	if err := p.checkFunctionVisible(ctx, a, id); err != nil {
		return nil, err
	}
	return f, nil
}

// CreateFunction creates a function, without versions yet.
func (p *Platform) CreateFunction(ctx context.Context, a Actor, name string) (*store.Function, error) {
	if err := a.mayChange("read functions but not create them"); err != nil {
		return nil, err
	}
	f := &store.Function{WorkspaceID: a.WorkspaceID, Name: name}
	if err := f.Check(); err != nil {
		return nil, invalid("name", err.Error())
	}
	if err := p.cfg.Store.CreateFunction(ctx, f); err != nil {
		return nil, storeError(err, "function "+f.Name, "name")
	}
	return f, nil
}

// FunctionVersions lists a function's versions, version 1 first; those of a function the
// actor's entitlements hide are not found.
func (p *Platform) FunctionVersions(ctx context.Context, a Actor, id string) ([]*store.FunctionVersion, error) {
	if err := checkID("id", store.PrefixFunction, id); err != nil {
		return nil, err
	}
	if err := p.checkFunctionVisible(ctx, a, id); err != nil {
		return nil, err
	}
	vs, err := p.cfg.Store.FunctionVersions(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "function "+id, "")
	}
	return vs, nil
}

// CreateFunctionVersion adds a version of a function's code, checked first: the code must
// parse and the schemas be ones a tool can have. The first version becomes the default.
func (p *Platform) CreateFunctionVersion(ctx context.Context, a Actor, id string, in NewVersion) (*store.FunctionVersion, error) {
	if err := a.mayChange("read functions but not change them"); err != nil {
		return nil, err
	}
	ent, f, err := p.ownFunction(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, f.Name, in); err != nil {
		return nil, err
	}
	ws := a.WorkspaceID
	v := &store.FunctionVersion{WorkspaceID: ws, FunctionID: f.ID, Code: in.Code}
	if in.InputSchema != nil {
		if v.InputSchemaID, err = newSchema(ctx, ent, ws, in.InputSchema); err != nil {
			return nil, err
		}
	}
	if in.OutputSchema != nil {
		if v.OutputSchemaID, err = newSchema(ctx, ent, ws, in.OutputSchema); err != nil {
			return nil, err
		}
	}
	if err := ent.CreateFunctionVersion(ctx, v); err != nil {
		return nil, storeError(err, "a version of function "+f.ID, "")
	}
	p.ToolsChanged(ctx, ws) // the first version is the default, which tools then run
	return v, nil
}

// SetDefaultVersion makes a version the function's default: the tools that pin no version
// run it from their next call.
func (p *Platform) SetDefaultVersion(ctx context.Context, a Actor, id, versionID string) (*store.Function, error) {
	if err := a.mayChange("read functions but not change them"); err != nil {
		return nil, err
	}
	if err := checkID("version_id", store.PrefixFunctionVersion, versionID); err != nil {
		return nil, err
	}
	ent, _, err := p.ownFunction(ctx, a, id)
	if err != nil {
		return nil, err
	}
	f, err := ent.SetDefaultVersion(ctx, a.WorkspaceID, id, versionID)
	if err != nil {
		return nil, storeError(err, "version "+versionID+" of function "+id, "version_id")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return f, nil
}

// ownFunction is a function of the workspace that the actor may change: another workspace's
// is not found, as is one the actor's entitlements hide; a system function is forbidden.
func (p *Platform) ownFunction(ctx context.Context, a Actor, id string) (store.Entities, *store.Function, error) {
	if err := checkID("id", store.PrefixFunction, id); err != nil {
		return nil, nil, err
	}
	f, err := p.cfg.Store.Function(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, nil, storeError(err, "function "+id, "")
	}
	if err := p.checkFunctionVisible(ctx, a, id); err != nil {
		return nil, nil, err
	}
	if f.WorkspaceID != a.WorkspaceID {
		return nil, nil, &Error{Kind: Forbidden, Message: "function " + id + " is a system function: it cannot be changed"}
	}
	return p.cfg.Store, f, nil
}

// checkVersion checks a version before it is stored: the code must parse (the interpreter's
// message names the place), and the schemas be ones a tool can have, compiled on behalf of the
// request (they stop when it ends).
func checkVersion(ctx context.Context, name string, in NewVersion) error {
	// The description is the tool's business; a function's check only needs one to pass.
	if _, err := jsfunc.New(jsfunc.Definition{Name: name, Description: "function " + name, Code: in.Code}); err != nil {
		return invalid("code", strings.TrimPrefix(err.Error(), "jsfunc: "))
	}
	spec := quiver.Spec{Name: name, Description: "function " + name}
	if in.InputSchema != nil {
		doc, err := inputDoc("input_schema", in.InputSchema, true)
		if err != nil {
			return err
		}
		spec.InputSchema, spec.Variables = doc.InputSchema, doc.Variables
		if _, err := quiver.NewToolContext(ctx, spec, nil); err != nil {
			return schemaRefusal(ctx, "input_schema", err)
		}
	}
	if in.OutputSchema != nil {
		out, err := outputDoc("output_schema", in.OutputSchema)
		if err != nil {
			return err
		}
		spec.OutputSchema = out
		if _, err := quiver.NewToolContext(ctx, spec, nil); err != nil {
			return schemaRefusal(ctx, "output_schema", err)
		}
	}
	return nil
}

// schemaRefusal is the refusal of a field whose schema did not compile, or the request's own
// end when that is what stopped the compilation.
func schemaRefusal(ctx context.Context, field string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return invalid(field, err.Error())
}
