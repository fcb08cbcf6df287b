package platform

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/schema"
	"github.com/quiverhq/quiver/store"
)

// A workspace's stored tools: server tools run a function of the workspace, client tools are
// run by the client. Every write checks the whole tool as it would be stored and served, so
// that nothing is stored that the workspace could not serve; nothing is written when a check
// fails.

// Optional is an input that may be left out, or given (as an empty value too: "null").
type Optional[T any] struct {
	Set   bool
	Value T
}

// NewTool is a tool to store.
type NewTool struct {
	Name                 string
	Description          string
	Target               store.ToolTarget
	FunctionID           string
	FunctionVersionID    string
	InputSchema          json.RawMessage
	OutputSchema         json.RawMessage // nil: any result
	Examples             []store.ToolExample
	RequiresConfirmation bool
	Enabled              *bool  // nil: enabled
	RuntimeUserID        string // admins only
}

// ToolChange is a change to a stored tool: the fields given, the others as they are.
type ToolChange struct {
	Name                 *string
	Description          Optional[string]
	Target               *store.ToolTarget
	FunctionID           Optional[string]
	FunctionVersionID    Optional[string]
	InputSchema          json.RawMessage
	OutputSchema         json.RawMessage
	Examples             *[]store.ToolExample
	RequiresConfirmation *bool
	Enabled              *bool
	RuntimeUserID        Optional[string] // admins only
}

func (c *ToolChange) apply(t *store.Tool) {
	if c.Name != nil {
		t.Name = *c.Name
	}
	if c.Description.Set {
		t.Description = c.Description.Value
	}
	if c.Target != nil {
		t.Target = *c.Target
	}
	if c.FunctionID.Set {
		t.FunctionID = c.FunctionID.Value
	}
	if c.FunctionVersionID.Set {
		t.FunctionVersionID = c.FunctionVersionID.Value
	}
	if c.Examples != nil {
		t.Examples = *c.Examples
	}
	if c.RequiresConfirmation != nil {
		t.RequiresConfirmation = *c.RequiresConfirmation
	}
	if c.Enabled != nil {
		t.Enabled = *c.Enabled
	}
	if c.RuntimeUserID.Set {
		t.RuntimeUserID = c.RuntimeUserID.Value
	}
}

// ToolQuery selects a page of the workspace's stored tools.
type ToolQuery struct {
	Limit                int // 1 to store.MaxListLimit
	Cursor               string
	FunctionID           string
	Target               store.ToolTarget
	Name                 string
	NamePrefix           bool
	RequiresConfirmation *bool
	Deleted              store.DeletedFilter
	IncludeSystem        bool
	// Agent keeps the tools this agent may call, of those the workspace serves now.
	Agent string
}

// anyOutput is the output schema stored for a tool created without one: any result.
var anyOutput = json.RawMessage("true")

// checkID refuses an id that is not of the kind field takes: a fun_ id given for a tool is a
// mistake worth naming, not a record to look for.
func checkID(field, prefix, id string) error {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if ok && rest != "" && len(id) <= 64 && strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0 {
		return nil
	}
	return invalid(field, "want a "+prefix+"_ id, got "+quoteShort(id))
}

// CheckID refuses an id that is not of the kind field takes ("tol" for a tool's).
func CheckID(field, prefix, id string) error { return checkID(field, prefix, id) }

// Tool returns a stored tool of the actor's workspace (deleted ones included) or a system tool;
// one the actor's entitlements hide is not found (see storedToolsVisible).
func (p *Platform) Tool(ctx context.Context, a Actor, id string) (*store.Tool, error) {
	if err := checkID("id", store.PrefixTool, id); err != nil {
		return nil, err
	}
	t, err := p.cfg.Store.Tool(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, storeError(err, "tool "+id, "")
	}
	if visible := p.storedToolsVisible(ctx, a); visible != nil && !visible(t) {
		return nil, hiddenTool(id)
	}
	return t, nil
}

// ListTools returns a page of the workspace's stored tools, oldest first: those the actor's
// entitlements let it see (see listVisibleTools).
func (p *Platform) ListTools(ctx context.Context, a Actor, q ToolQuery) (*store.ToolPage, error) {
	if q.FunctionID != "" {
		if err := checkID("function_id", store.PrefixFunction, q.FunctionID); err != nil {
			return nil, err
		}
	}
	if q.NamePrefix && q.Name == "" {
		return nil, invalid("name", "name_prefix needs a name to be the prefix")
	}
	f := store.ToolFilter{
		WorkspaceID: a.WorkspaceID, IncludeSystem: q.IncludeSystem, FunctionID: q.FunctionID,
		Target: q.Target, Name: q.Name, NamePrefix: q.NamePrefix, RequiresConfirmation: q.RequiresConfirmation,
		Deleted: cmp.Or(q.Deleted, store.DeletedExclude), Limit: q.Limit, Cursor: q.Cursor,
	}
	var err error
	if q.Agent != "" {
		if f.Names, err = p.agentToolNames(ctx, a, q.Agent); err != nil {
			return nil, err
		}
	}
	c, ok, err := f.DecodeCursor()
	if err == nil && ok && checkID("", store.PrefixTool, c.ID) != nil {
		// The store's cursors are not signed: one whose position was edited holds a tool id
		// only by chance.
		err = errors.New("the cursor holds no tool's position")
	}
	if err != nil {
		return nil, invalid("cursor", strings.TrimSuffix(err.Error(), ": "+store.ErrInvalid.Error())+
			": pass the next_cursor of the page before, with the same filters")
	}
	if visible := p.storedToolsVisible(ctx, a); visible != nil {
		return p.listVisibleTools(ctx, f, visible)
	}
	page, err := p.cfg.Store.ListTools(ctx, f)
	if err != nil {
		return nil, storeError(err, "the tool page", "")
	}
	return page, nil
}

// agentToolNames are the names of the tools the agent may call of those the workspace serves
// now (its bound tools, narrowed by its allow and deny lists; globs resolved), for the store's
// Names filter: agents are definitions the platform loads, not stored records.
func (p *Platform) agentToolNames(ctx context.Context, a Actor, name string) ([]string, error) {
	if !p.HasAgents() && p.Jobs() == nil {
		return nil, invalid("agent", "this server runs no agents (quiver serve --agents DIR)")
	}
	ag, err := p.Agent(ctx, name)
	if err != nil {
		return nil, invalid("agent", err.Error())
	}
	names := []string{}
	reg := p.Workspace(ctx, a.WorkspaceID).Registry()
	for _, side := range ag.Prompts() { // both sides of a two-sided agent
		bound := side.Tools
		if bound == nil {
			bound = []string{} // an agent that lists no tools has none
		}
		policy := quiver.Policy{Bound: bound, Allow: side.Allow, Deny: side.Deny}
		for _, t := range policy.Effective(reg) {
			if !slices.Contains(names, t.Name()) {
				names = append(names, t.Name())
			}
		}
	}
	if len(names) > store.MaxFilterNames {
		return nil, invalid("agent", fmt.Sprintf(
			"agent %s may call %d tools, more than the %d an agent filter lists: filter by name instead", name, len(names), store.MaxFilterNames))
	}
	return names, nil
}

// CreateTool stores a tool in the actor's workspace (a member's or admin's; only an admin
// sets the user it runs as), which serves it from the next call on.
func (p *Platform) CreateTool(ctx context.Context, a Actor, in NewTool) (*store.Tool, error) {
	if err := a.mayChange("read tools but not create them"); err != nil {
		return nil, err
	}
	ws := a.WorkspaceID
	t := &store.Tool{
		WorkspaceID: ws, Name: in.Name, Description: in.Description, Target: in.Target,
		FunctionID: in.FunctionID, FunctionVersionID: in.FunctionVersionID, Examples: in.Examples,
		RequiresConfirmation: in.RequiresConfirmation, Enabled: in.Enabled == nil || *in.Enabled,
		CreatedBy: a.UserID, RuntimeUserID: in.RuntimeUserID,
	}
	inDoc, outDoc := in.InputSchema, in.OutputSchema
	if outDoc == nil {
		outDoc = anyOutput
	}
	err := p.checkTool(ctx, p.cfg.Store, a, t, nil, inDoc, outDoc, true)
	if err != nil {
		return nil, err
	}
	// Everything is checked: the writes left can only fail on a race (a name taken
	// meanwhile) or the store, and then leave at most unreferenced schemas, which are
	// immutable and harmless.
	if t.InputSchemaID, err = newSchema(ctx, p.cfg.Store, ws, inDoc); err != nil {
		return nil, err
	}
	if t.OutputSchemaID, err = newSchema(ctx, p.cfg.Store, ws, outDoc); err != nil {
		return nil, err
	}
	if err := p.cfg.Store.CreateTool(ctx, t); err != nil {
		return nil, storeToolError(err, "tool "+t.Name)
	}
	p.ToolsChanged(ctx, ws)
	return t, nil
}

// UpdateTool changes a stored tool of the actor's workspace; system tools cannot be changed.
func (p *Platform) UpdateTool(ctx context.Context, a Actor, id string, c ToolChange) (*store.Tool, error) {
	if err := a.mayChange("read tools but not change them"); err != nil {
		return nil, err
	}
	if err := checkID("id", store.PrefixTool, id); err != nil {
		return nil, err
	}
	ws := a.WorkspaceID
	before, err := p.cfg.Store.Tool(ctx, ws, id)
	if err != nil {
		return nil, storeError(err, "tool "+id, "")
	}
	switch visible := p.storedToolsVisible(ctx, a); {
	case visible != nil && !visible(before):
		return nil, hiddenTool(id)
	case before.System:
		return nil, &Error{Kind: Forbidden, Message: "tool " + id + " is a system tool: system tools cannot be edited"}
	case before.DeletedAt != nil:
		return nil, &Error{Kind: NotFound, Message: "tool " + id + " is deleted"}
	}
	after := before.Clone()
	c.apply(after)
	// The whole tool as it would be is checked, with its stored schemas where the change
	// gives no new ones: a change of name or description must still make a tool the
	// workspace can serve.
	inDoc, outDoc := []byte(c.InputSchema), []byte(c.OutputSchema)
	if inDoc == nil {
		if inDoc, err = storedSchema(ctx, p.cfg.Store, ws, before.InputSchemaID); err != nil {
			return nil, err
		}
	}
	if outDoc == nil {
		if outDoc, err = storedSchema(ctx, p.cfg.Store, ws, before.OutputSchemaID); err != nil {
			return nil, err
		}
	}
	if err := p.checkTool(ctx, p.cfg.Store, a, after, before, inDoc, outDoc, c.InputSchema != nil); err != nil {
		return nil, err
	}
	inID, outID := before.InputSchemaID, before.OutputSchemaID
	if c.InputSchema != nil {
		if inID, err = newSchema(ctx, p.cfg.Store, ws, c.InputSchema); err != nil {
			return nil, err
		}
	}
	if c.OutputSchema != nil {
		if outID, err = newSchema(ctx, p.cfg.Store, ws, c.OutputSchema); err != nil {
			return nil, err
		}
	}
	t, err := p.cfg.Store.UpdateTool(ctx, ws, id, a.UserID, func(t *store.Tool) error {
		c.apply(t)
		t.InputSchemaID, t.OutputSchemaID = inID, outID
		return nil
	})
	if err != nil {
		return nil, storeToolError(err, "tool "+id)
	}
	p.ToolsChanged(ctx, ws)
	return t, nil
}

// DeleteTool deletes a stored tool of the actor's workspace: kept for its retention tier (the
// workspace's when tier is ""), then purged.
func (p *Platform) DeleteTool(ctx context.Context, a Actor, id string, tier store.RetentionTier) (*store.Tool, error) {
	if err := a.mayChange("read tools but not delete them"); err != nil {
		return nil, err
	}
	if err := checkID("id", store.PrefixTool, id); err != nil {
		return nil, err
	}
	if visible := p.storedToolsVisible(ctx, a); visible != nil {
		before, err := p.cfg.Store.Tool(ctx, a.WorkspaceID, id)
		if err != nil {
			return nil, storeError(err, "tool "+id, "")
		}
		if !visible(before) {
			return nil, hiddenTool(id)
		}
	}
	t, err := p.cfg.Store.DeleteTool(ctx, a.WorkspaceID, id, tier)
	if err != nil {
		return nil, storeError(err, "tool "+id, "")
	}
	p.ToolsChanged(ctx, a.WorkspaceID)
	return t, nil
}

// storeToolError is the store's refusal of a tool, naming the name for a clash (the only
// conflict a tool write has).
func storeToolError(err error, what string) error {
	if errors.Is(err, store.ErrConflict) {
		return storeError(err, what, "name")
	}
	return storeError(err, what, "")
}

// checkTool checks t, a tool to create (before nil) or the result of a change to before,
// with the schema documents it would have (newInput: the input schema is the request's, not
// the stored one), the way the store and then the workspace will: every refusal names its
// field, and nothing has been written when one comes.
func (p *Platform) checkTool(ctx context.Context, ent store.Entities, a Actor, t, before *store.Tool, inDoc, outDoc []byte, newInput bool) error {
	for _, id := range []struct{ field, prefix, id string }{
		{"function_id", store.PrefixFunction, t.FunctionID},
		{"function_version_id", store.PrefixFunctionVersion, t.FunctionVersionID},
		{"runtime_user_id", store.PrefixUser, t.RuntimeUserID},
	} {
		if id.id != "" {
			if err := checkID(id.field, id.prefix, id.id); err != nil {
				return err
			}
		}
	}
	if before == nil || before.Name != t.Name {
		if err := p.checkToolName(ctx, ent, t); err != nil {
			return err
		}
	}
	if t.FunctionID != "" && (before == nil || before.FunctionID != t.FunctionID) {
		// A function the actor may not see is missing to it, before anything of it is told.
		switch hidden, err := p.functionHidden(ctx, a, t.FunctionID); {
		case err != nil:
			return err
		case hidden:
			return missingFunction(t.FunctionID)
		}
	}
	if err := checkTarget(ctx, ent, t); err != nil {
		return err
	}
	if before == nil && t.RuntimeUserID != "" || before != nil && before.RuntimeUserID != t.RuntimeUserID {
		if err := checkRuntimeUser(ctx, ent, a, t); err != nil {
			return err
		}
	}
	if err := checkContract(ctx, t, inDoc, outDoc, newInput); err != nil {
		return err
	}
	// The store's own rules, on the tool as it will be stored (its schemas are written after
	// this check, so placeholders stand for their ids).
	c := t.Clone()
	c.InputSchemaID, c.OutputSchemaID = cmp.Or(c.InputSchemaID, "sch_new"), cmp.Or(c.OutputSchemaID, "sch_new")
	if err := c.Check(); err != nil {
		return &Error{Kind: Invalid, Message: err.Error()}
	}
	return nil
}

// checkToolName checks a new name: a valid one (quiver.NameRule: any text but hostile input;
// one that does not follow the convention is accepted, and warned about when it is loaded),
// free among the workspace's active tools and the shared ones (a stored tool of the same name
// would shadow one of those).
func (p *Platform) checkToolName(ctx context.Context, ent store.Entities, t *store.Tool) error {
	if err := quiver.CheckName(t.Name); err != nil {
		return invalid("name", err.Error())
	}
	if err := store.CheckName("tool", t.Name); err != nil {
		return invalid("name", err.Error())
	}
	if _, ok := p.Registry().Lookup(t.Name); ok {
		return fail(Conflict, "name", "the server serves a tool named "+quoteShort(t.Name)+" already: choose another name")
	}
	page, err := ent.ListTools(ctx, store.ToolFilter{WorkspaceID: t.WorkspaceID, Name: t.Name, Limit: 1})
	if err != nil {
		return storeError(err, "the tools named "+t.Name, "")
	}
	if len(page.Tools) > 0 && page.Tools[0].ID != t.ID {
		// Not its id: a caller whose entitlements hide that tool learns that the name is
		// taken (a workspace's names are one), and nothing more of it.
		return fail(Conflict, "name", "the workspace has a tool named "+quoteShort(t.Name)+" already: choose another name")
	}
	// An OpenAPI document's tool (an admin's import) is not a member's to take the place of.
	if existing, ok := p.Workspace(ctx, t.WorkspaceID).Registry().Lookup(t.Name); ok && existing.Spec().Imported {
		return fail(Conflict, "name", "an OpenAPI document of the workspace serves a tool named "+quoteShort(t.Name)+" already: choose another name")
	}
	return nil
}

// checkTarget checks what a tool runs: a server tool a function of the workspace with a
// version (the one pinned, or its default), a client tool none.
func checkTarget(ctx context.Context, ent store.Entities, t *store.Tool) error {
	ws := t.WorkspaceID
	switch {
	case t.Target == store.TargetServer && t.FunctionID == "":
		return invalid("function_id", "a server tool runs a function: give its id (fun_...)")
	case t.Target == store.TargetClient && t.FunctionID != "":
		return invalid("function_id", "a client tool runs no function: leave it out (or null)")
	case t.Target == store.TargetClient && t.FunctionVersionID != "":
		return invalid("function_version_id", "a client tool runs no function: leave it out (or null)")
	case t.FunctionID == "":
		return nil
	}
	f, err := ent.Function(ctx, ws, t.FunctionID)
	if errors.Is(err, store.ErrNotFound) || err == nil && f.WorkspaceID != ws {
		return missingFunction(t.FunctionID)
	}
	if err != nil {
		return storeError(err, "function "+t.FunctionID, "")
	}
	if t.FunctionVersionID == "" {
		if f.DefaultVersionID == "" {
			return invalid("function_id", "function "+f.ID+" has no version yet: add one before a tool runs it")
		}
		return nil
	}
	v, err := ent.FunctionVersion(ctx, ws, t.FunctionVersionID)
	if errors.Is(err, store.ErrNotFound) {
		return fail(NotFound, "function_version_id", "no function version "+t.FunctionVersionID+" in this workspace")
	}
	if err != nil {
		return storeError(err, "function version "+t.FunctionVersionID, "")
	}
	if v.FunctionID != t.FunctionID {
		return invalid("function_version_id", "version "+v.ID+" is a version of function "+v.FunctionID+", not of "+t.FunctionID)
	}
	return nil
}

// missingFunction is the refusal of a tool's function_id that names no function the actor has.
func missingFunction(id string) error {
	return fail(NotFound, "function_id", "no function "+id+" in this workspace")
}

// checkRuntimeUser checks a change of the user a tool runs as: an admin's, to a member.
func checkRuntimeUser(ctx context.Context, ent store.Entities, a Actor, t *store.Tool) error {
	if err := a.mayAdminister("create and change tools but not set the user they run as"); err != nil {
		e := err.(*Error)
		e.Detail, e.Field, e.Message = e.Message, "runtime_user_id", "only a workspace admin's key sets the user a tool runs as"
		return e
	}
	if t.RuntimeUserID == "" {
		return nil
	}
	if _, err := ent.Member(ctx, t.WorkspaceID, t.RuntimeUserID); errors.Is(err, store.ErrNotFound) {
		return invalid("runtime_user_id", "user "+t.RuntimeUserID+" is not a member of this workspace")
	} else if err != nil {
		return storeError(err, "member "+t.RuntimeUserID, "")
	}
	return nil
}

// checkContract builds the tool the way a workspace will serve it (loadStoredTools): its
// schema documents, description and examples must make a tool, or it would be stored and
// never served. Each refusal names its field. The schemas are compiled on behalf of the
// request: when it ends, so does their compilation. A new input schema may not hold what a
// stored tool takes elsewhere (see storedDocFields); a stored one is served as it is.
func checkContract(ctx context.Context, t *store.Tool, inDoc, outDoc []byte, newInput bool) error {
	doc, err := inputDoc("input_schema", inDoc, newInput)
	if err != nil {
		return err
	}
	out, err := outputDoc("output_schema", outDoc)
	if err != nil {
		return err
	}
	target := quiver.TargetServer
	if t.Target == store.TargetClient {
		target = quiver.TargetClient
	}
	// The description is checked last: a placeholder lets the schemas be checked first.
	desc := cmp.Or(t.Description, doc.Description)
	spec := quiver.Spec{Name: t.Name, Description: cmp.Or(desc, "-"), Target: target, InputSchema: doc.InputSchema, Variables: doc.Variables}
	full := spec
	full.OutputSchema = out
	for _, e := range t.Examples {
		full.Examples = append(full.Examples, quiver.Example{Args: e.Args, Result: e.Result})
	}
	// The whole tool first, so that a good one (the usual case) compiles its schemas once;
	// only a refusal is narrowed down to its field.
	if _, err := quiver.NewToolContext(ctx, full, nil); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return contractField(ctx, spec, full, err)
	}
	if desc == "" {
		return invalid("description", "a tool needs a description (or its input schema one): it tells the model when to use the tool")
	}
	return nil
}

// contractField is the refusal of a tool that NewTool refused, naming the field at fault: the
// input schema on its own, then with the output schema, else the examples.
func contractField(ctx context.Context, spec, full quiver.Spec, err error) error {
	if _, inErr := quiver.NewToolContext(ctx, spec, nil); inErr != nil {
		return invalid("input_schema", inErr.Error())
	}
	spec.OutputSchema = full.OutputSchema
	if _, outErr := quiver.NewToolContext(ctx, spec, nil); outErr != nil {
		return invalid("output_schema", outErr.Error())
	}
	return invalid("examples", err.Error())
}

// inputDoc reads an input schema document, a schema-tool document (quiver.ParseSchemaSpec: the
// one reader of it, so that it means here what it means in a registry file). A new one (fresh)
// is refused if it holds what a stored tool takes elsewhere.
func inputDoc(field string, doc []byte, fresh bool) (quiver.Spec, error) {
	spec, err := quiver.ParseSchemaSpec(doc)
	if err != nil {
		return quiver.Spec{}, invalid(field, err.Error())
	}
	if fresh {
		if err := storedDocFields(field, spec); err != nil {
			return quiver.Spec{}, err
		}
	}
	return spec, nil
}

// storedDocFields refuses the schema-tool document's fields that a stored tool (or function
// version) takes elsewhere or cannot honour, rather than dropping them unseen: _activity binds
// a registry's schema-only tool to code, while a stored tool runs its function's code or its
// client; _output is the result schema, which the request gives as output_schema (one place,
// so that a change of either cannot leave two that disagree). Documents stored before this
// check are served as they are: their _activity and _output are not read.
func storedDocFields(field string, spec quiver.Spec) error {
	if spec.Activity != "" {
		return invalid(field, fmt.Sprintf("_activity (%q) binds a schema-only tool of a registry to an activity; "+
			"a stored tool runs its function's code (target server) or its client (target client): remove _activity", spec.Activity))
	}
	if spec.OutputSchema != nil {
		return invalid(field, "properties._output declares the result schema, which a stored tool takes as output_schema: move it there")
	}
	return nil
}

// outputDoc reads an output schema document: a JSON Schema object, or true (or {}) for any
// result, which is no schema.
func outputDoc(field string, doc []byte) (*schema.Schema, error) {
	switch strings.TrimSpace(string(doc)) {
	case "true", "{}":
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, invalid(field, "want a JSON Schema object, or true for any result")
	}
	var sc schema.Schema
	if err := json.Unmarshal(doc, &sc); err != nil {
		return nil, invalid(field, err.Error())
	}
	return &sc, nil
}

// storedSchema is the content of a schema a tool refers to.
func storedSchema(ctx context.Context, ent store.Entities, ws, id string) ([]byte, error) {
	sc, err := ent.Schema(ctx, ws, id)
	if err != nil {
		return nil, storeError(err, "schema "+id, "")
	}
	return sc.Content, nil
}

// newSchema stores a schema document in the workspace and returns its id.
func newSchema(ctx context.Context, ent store.Entities, ws string, doc json.RawMessage) (string, error) {
	sc := &store.Schema{WorkspaceID: ws, Content: doc}
	if err := ent.CreateSchema(ctx, sc); err != nil {
		return "", storeError(err, "a schema", "")
	}
	return sc.ID, nil
}
